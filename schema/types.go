package schema

// Protocol versions. MajorVersion changes only when a reader of the previous
// major cannot safely ignore what changed; MinorVersion counts additive
// revisions.
//
//	1.0 (2026-11-30): first version.
//	1.1 (2026-11-30): SamplerStats (frame type 7), the sampler's own
//	    metrics, best effort. A 1.0 reader skips the frame.
//	1.2 (2026-11-30): packed batches (Batch.layout 1): the string table,
//	    frames, stacks, processes and samples travel as fixed-size
//	    little-endian records in Data fields, so decoding runs tight loops
//	    instead of an accessor call per field. A 1.2 reader still reads
//	    the list layout of 1.0 and 1.1. A 1.0 or 1.1 reader rejects every
//	    1.2 batch as malformed (its list string table is empty, and string
//	    0 must exist), so it fails loudly and never misreads one; see
//	    docs/ipc-format.md for why this is a minor and not a major bump.
//	1.3 (2026-12-01): a CRC-32C after every frame header (ipc.FlagChecksum),
//	    checked before the payload is decoded. A 1.3 reader still reads
//	    1.0-1.2 streams and dumps (no checksums); a 1.0-1.2 reader rejects
//	    the flag at the first frame, loudly.
//	1.4 (2026-12-01): per-connection dictionaries. DictionaryChunk frames
//	    (ipc.FrameDictionary, type 8) extend the connection's strings,
//	    mappings, frames and stacks; batch layout 2 carries only processes
//	    and samples and refers to the dictionary by id. A 1.4 reader still
//	    reads 1.0-1.3; a 1.3 reader skips the chunks as unknown frames and
//	    rejects layout 2 by number, loudly.
//	1.5 (2026-12-02): trace links (Batch.packedLinks): the trace id and
//	    span id the tracer found for a sample, one record per linked
//	    sample, none for the others. A 1.5 reader still reads 1.0-1.4; a
//	    1.4 reader ignores the field: it keeps the samples and loses only
//	    their links.
const (
	MajorVersion uint16 = 1
	MinorVersion uint16 = 5
)

// Hello is the first message of every connection and dump.
type Hello struct {
	MajorVersion        uint16
	MinorVersion        uint16
	SamplerVersion      string
	NodeName            string
	KernelRelease       string
	BootID              string
	SamplingFrequencyHz uint32
	Tracers             []string
	SessionID           [16]byte
	StartTimeUnixNano   int64
	// OffCPUThreshold is the off-CPU sampling probability scaled to
	// [0, 2^32-1]; 0 means off-CPU profiling is disabled.
	OffCPUThreshold uint32
}

// Origin says what produced a sample and what its value means. Values equal
// the upstream tracer's libpf.Origin.
type Origin uint16

const (
	OriginUnknown     Origin = 0
	OriginCPUSampling Origin = 1 // value: count
	OriginOffCPU      Origin = 2 // value: nanoseconds off CPU
	OriginProbe       Origin = 3 // value: count
)

// String returns a stable lower-case name for the origin.
func (o Origin) String() string {
	switch o {
	case OriginCPUSampling:
		return "cpu"
	case OriginOffCPU:
		return "off_cpu"
	case OriginProbe:
		return "probe"
	default:
		return "unknown"
	}
}

// FrameKind is the unwinder that produced a frame. Values equal the upstream
// libpf.FrameType with the error bit cleared.
type FrameKind uint8

const (
	FrameUnknown FrameKind = 0
	FrameCPython FrameKind = 1
	FramePHP     FrameKind = 2
	FrameNative  FrameKind = 3
	FrameKernel  FrameKind = 4
	FrameHotSpot FrameKind = 5
	FrameRuby    FrameKind = 6
	FramePerl    FrameKind = 7
	FrameV8      FrameKind = 8
	FramePHPJIT  FrameKind = 9
	FrameDotnet  FrameKind = 10
	FrameGo      FrameKind = 11
	FrameBEAM    FrameKind = 12
	FrameLuaJIT  FrameKind = 13
)

// String returns the OpenTelemetry semantic-convention name of the frame
// type (profile.frame.type), the same names the upstream tracer uses.
func (k FrameKind) String() string {
	switch k {
	case FrameCPython:
		return "cpython"
	case FramePHP, FramePHPJIT:
		return "php"
	case FrameNative:
		return "native"
	case FrameKernel:
		return "kernel"
	case FrameHotSpot:
		return "jvm"
	case FrameRuby:
		return "ruby"
	case FramePerl:
		return "perl"
	case FrameV8:
		return "v8js"
	case FrameDotnet:
		return "dotnet"
	case FrameGo:
		return "go"
	case FrameBEAM:
		return "beam"
	case FrameLuaJIT:
		return "luajit"
	default:
		return "unknown"
	}
}

// FileID is the tracer's 128-bit executable identity (htlhash).
type FileID struct{ Hi, Lo uint64 }

// IsZero reports whether the id is unset.
func (f FileID) IsZero() bool { return f.Hi == 0 && f.Lo == 0 }

// Hex renders the id as 32 lower-case hex digits, high word first: the
// upstream tracer's process.executable.build_id.htlhash, and the key
// parca-agent uploads symbols under when an executable has no GNU build id.
// Profiles and symbol uploads must agree on it.
func (f FileID) Hex() string {
	const digits = "0123456789abcdef"
	var b [32]byte
	for i := range 16 {
		b[15-i] = digits[(f.Hi>>(4*i))&0xf]
		b[31-i] = digits[(f.Lo>>(4*i))&0xf]
	}
	return string(b[:])
}

// Mapping is an executable mapping. String fields are indices into
// Batch.Strings (0 = absent).
type Mapping struct {
	FileName   uint32
	Path       uint32
	GNUBuildID uint32
	GoBuildID  uint32
	FileID     FileID
	Start      uint64
	End        uint64
	FileOffset uint64
}

// Frame is one stack entry. String fields are indices into Batch.Strings.
type Frame struct {
	Kind           FrameKind
	Error          bool
	AddressOrLine  uint64
	Mapping        uint32 // 1-based index into Batch.Mappings; 0 = none
	FunctionName   uint32
	SourceFile     uint32
	SourceLine     uint32
	SourceColumn   uint32
	FunctionOffset uint32
}

// KeyValue is a pair of string indices.
type KeyValue struct{ Key, Value uint32 }

// Process holds a process's labels. String fields are indices into
// Batch.Strings.
type Process struct {
	PID            uint32
	Comm           uint32
	ExecutablePath uint32
	ContainerID    uint32
	SystemdUnit    uint32
	ServiceName    uint32
	EnvVars        []KeyValue
}

// Sample is one observation of a thread's stack.
type Sample struct {
	TimestampUnixNano int64
	Origin            Origin
	Value             int64
	Process           uint32 // index into Batch.Processes
	TID               uint32
	CPU               uint32
	ThreadName        uint32 // string index
	Stack             uint32 // index into the stacks (see Batch.Stack)
	// Link is the 1-based index of the sample's trace link in
	// Batch.Links; 0 means the tracer found no span for it.
	Link   uint32
	Labels []KeyValue
}

// TraceLink names the trace span that was running on a sample's thread,
// as the tracer reported it: from an OpenTelemetry eBPF Instrumentation
// (OBI) span map or an Elastic APM agent. The ids are in W3C byte order
// (the order a traceparent header spells them in hex); neither is all
// zero.
type TraceLink struct {
	TraceID [16]byte
	SpanID  [8]byte
}

// IsValid reports whether both ids are set: the tracer leaves them zero
// when it found no span, and a link with a zero id names nothing.
func (l TraceLink) IsValid() bool {
	return l.TraceID != [16]byte{} && l.SpanID != [8]byte{}
}

// Batch is a group of samples with the tables they reference.
// Strings[0] is always "".
//
// In layouts 0 and 1 the tables are the batch's own. In layout 2 (protocol
// 1.4) they belong to the connection's dictionary: Dictionary is then
// non-nil, Generation is the dictionary generation the batch refers to,
// and Strings, Mappings, Frames, StackFrames and StackEnds are that
// dictionary's tables as they were at decode time (shared and read-only:
// never append to or write them). Processes and Samples are always the
// batch's own.
//
// Strings of a decoded batch never alias the payload or the Batch: they
// stay valid forever, also after the next DecodeBatch into the same Batch.
// They are slices of one string allocated per batch (per chunk for a
// dictionary), so keeping any of them keeps that batch's whole string table
// in memory: strings.Clone what is kept across batches.
type Batch struct {
	Sequence    uint64
	Strings     []string
	Mappings    []Mapping
	Frames      []Frame
	StackFrames []uint32 // frame indices of all stacks, concatenated, leaf first
	StackEnds   []uint32 // stack i = StackFrames[StackEnds[i-1]:StackEnds[i]]
	Processes   []Process
	Samples     []Sample
	// Links are the samples' trace links (Sample.Link, 1-based). A
	// decoded batch has one per linked sample, in sample order.
	Links []TraceLink

	// Layout 2 only (nil and 0 otherwise): the dictionary the tables
	// above are taken from, and the generation the batch names.
	Dictionary *Dictionary
	Generation uint64
}

// NumStacks returns the number of stacks in the batch.
func (b *Batch) NumStacks() int { return len(b.StackEnds) }

// Stack returns the frame indices of stack i, leaf first. The slice aliases
// the batch.
func (b *Batch) Stack(i uint32) []uint32 {
	start := uint32(0)
	if i > 0 {
		start = b.StackEnds[i-1]
	}
	return b.StackFrames[start:b.StackEnds[i]]
}

// String returns string i of the table, or "" when out of range.
func (b *Batch) String(i uint32) string {
	if int(i) < len(b.Strings) {
		return b.Strings[i]
	}
	return ""
}

// Reset empties the batch, keeping its allocations for reuse. The tables
// of a layout-2 batch are its dictionary's, so they are dropped, never
// reused: the next decode must not write into the dictionary.
func (b *Batch) Reset() {
	b.Sequence = 0
	if b.Dictionary != nil {
		b.Strings, b.Mappings, b.Frames, b.StackFrames, b.StackEnds = nil, nil, nil, nil, nil
		b.Dictionary = nil
	} else {
		b.Strings = b.Strings[:0]
		b.Mappings = b.Mappings[:0]
		b.Frames = b.Frames[:0]
		b.StackFrames = b.StackFrames[:0]
		b.StackEnds = b.StackEnds[:0]
	}
	b.Generation = 0
	b.Processes = b.Processes[:0]
	b.Samples = b.Samples[:0]
	b.Links = b.Links[:0]
}

// ExecutableNotice announces an executable for symbol upload. On a socket a
// file descriptor may travel with it (HasDescriptor).
type ExecutableNotice struct {
	FileID            FileID
	FileName          string
	Path              string
	GNUBuildID        string
	GoBuildID         string
	DebuglinkFileName string
	PID               uint32
	HasDescriptor     bool
	IsVDSO            bool
}

// LossStage says where data was dropped.
type LossStage uint16

const (
	LossUnknown         LossStage = 0
	LossSamplerQueue    LossStage = 1
	LossResendBuffer    LossStage = 2
	LossExecutableQueue LossStage = 3
	LossClassification  LossStage = 4
	LossEncoder         LossStage = 5
)

// String returns a stable metric-label name for the stage.
func (s LossStage) String() string {
	switch s {
	case LossSamplerQueue:
		return "sampler_queue"
	case LossResendBuffer:
		return "resend_buffer"
	case LossExecutableQueue:
		return "executable_queue"
	case LossClassification:
		return "classification"
	case LossEncoder:
		return "encoder"
	default:
		return "unknown"
	}
}

// Loss counts what one stage dropped.
type Loss struct {
	Stage       LossStage
	Reason      string
	Samples     uint64
	Bytes       uint64
	Descriptors uint64
}

// LossReport tells the encoder what was dropped since the previous report.
// It shares the batch sequence space.
type LossReport struct {
	Sequence uint64
	Losses   []Loss
}

// Goodbye ends a clean session.
type Goodbye struct {
	Reason       string
	LastSequence uint64
}

// SamplerStats is a snapshot of the sampler's own metrics, sent best effort
// (not sequenced, not acknowledged) so that the encoder can export them.
type SamplerStats struct {
	TimeUnixNano int64
	Metrics      []SamplerMetric
}

// SamplerMetric is one metric of the sampler's Prometheus registry.
type SamplerMetric struct {
	Name    string
	Labels  []MetricLabel // sorted by name
	Value   float64
	Counter bool // cumulative; false for a gauge
}

// MetricLabel is one label of a SamplerMetric.
type MetricLabel struct {
	Name, Value string
}
