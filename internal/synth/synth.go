// Package synth generates a deterministic, realistic synthetic sampler
// stream: the Hello, ExecutableNotice and Batch messages a sampler on a busy
// Kubernetes node would send, for tests, benchmarks and
// `tandem-encoder synth`.
//
// The default stream matches the shape of the reference corpus described in
// docs/benchmarks/method.md (Corpus): about 33 frames per sample (7.3 kernel, 14.9 native, 3.3
// Python, 7.4 Go), 231 processes with 659 threads in 88 containers and on
// the host, 83 user-space mappings (10 of them Go binaries) plus vmlinux and
// 8 kernel modules, 2,404 distinct stacks with Zipf-like popularity (top
// stack ~10.8% of samples, top ten ~33%), timestamps spread over 5 s on 64
// CPUs, about 5% off-CPU samples and a few uprobe samples.
//
// Frames look like the sampler's: kernel frames carry kallsyms names and
// offsets inside vmlinux or a module; native frames carry only a file
// virtual address inside their mapping (libc.so.6, libpython3.11.so.1.0,
// libssl.so.3, ... with GNU build ids and FileIDs); CPython frames carry a
// function, file and line and no mapping; Go frames are symbolized (function,
// file, line) inside a Go binary with a Go build id, except for three
// programs whose Go frames are left native, as from a sampler run without
// --symbolize-go. Stacks are leaf first, kernel frames first.
//
// The same Config always produces the same stream, byte for byte: the
// generator uses its own PRNG, never reads the clock and never iterates a
// map.
package synth

import (
	"errors"
	"fmt"
	"math/bits"
	"time"

	"github.com/tandem-profiler/tandem/schema"
)

// Defaults, matching the reference corpus.
const (
	DefaultSamples        = 20000
	DefaultBatchSize      = 500
	DefaultDuration       = 5 * time.Second
	DefaultCPUs           = 64
	DefaultStacks         = 2404
	DefaultOffCPUFraction = 0.05
	DefaultProbeFraction  = 0.002
	DefaultNodeName       = "ip-10-0-37-142.eu-west-1.compute.internal"
	// SamplingFrequencyHz is what the Hello announces.
	SamplingFrequencyHz = 97
	// SamplerVersion is the Hello's sampler version; it is fixed, so that
	// a stream does not depend on the build that generated it.
	SamplerVersion = "tandem-synth/1"
)

// UnknownOrigin is the origin of the samples Config.UnknownOriginFraction
// asks for: one schema does not define.
const UnknownOrigin = schema.Origin(9)

// DefaultStart is the timestamp of the first sample unless Config.Start is
// set (a fixed instant, so that streams are reproducible).
var DefaultStart = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// Config describes a synthetic stream. Zero fields take their defaults,
// except OffCPUFraction and ProbeFraction, where zero means none: start from
// DefaultConfig to get the reference shape.
type Config struct {
	Samples        int           // samples in the stream (default 20,000)
	Seed           int64         // everything is derived from it
	BatchSize      int           // samples per batch (default 500)
	Duration       time.Duration // span of the timestamps (default 5 s)
	CPUs           int           // CPU numbers used (default 64)
	Stacks         int           // distinct stacks to draw from (default 2,404)
	OffCPUFraction float64       // share of off-CPU samples (DefaultConfig: 0.05)
	ProbeFraction  float64       // share of uprobe samples (DefaultConfig: 0.002)
	// UnknownOriginFraction is the share of samples carrying UnknownOrigin,
	// an origin no encoder knows (as from a newer sampler), for tests of
	// what an encoder does with one. DefaultConfig has none.
	UnknownOriginFraction float64
	// LabelFraction is the share of the samples of a program with a
	// custom label (api-gateway's http.route) that carry one whatever
	// their stack, for tests that need labels in a short stream. Zero
	// (DefaultConfig) leaves labels to the request-handling stacks alone.
	LabelFraction float64
	Start         time.Time // first timestamp (default DefaultStart)
	NodeName      string    // Hello.NodeName (default DefaultNodeName)
}

// DefaultConfig returns the configuration of the reference-shaped corpus.
func DefaultConfig() Config {
	return Config{
		Samples:        DefaultSamples,
		Seed:           1,
		BatchSize:      DefaultBatchSize,
		Duration:       DefaultDuration,
		CPUs:           DefaultCPUs,
		Stacks:         DefaultStacks,
		OffCPUFraction: DefaultOffCPUFraction,
		ProbeFraction:  DefaultProbeFraction,
		Start:          DefaultStart,
		NodeName:       DefaultNodeName,
	}
}

// SmallConfig returns a small stream with every origin, including
// UnknownOrigin, and labelled samples, for correctness tests: 3,000
// samples from 180 stacks in batches of 250 on 8 CPUs.
func SmallConfig() Config {
	c := DefaultConfig()
	c.Seed = 7
	c.Samples = 3000
	c.BatchSize = 250
	c.CPUs = 8
	c.Stacks = 180
	c.OffCPUFraction = 0.15
	c.ProbeFraction = 0.05
	c.UnknownOriginFraction = 0.02
	c.LabelFraction = 0.5
	return c
}

func (c Config) withDefaults() Config {
	if c.Samples == 0 {
		c.Samples = DefaultSamples
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.Duration == 0 {
		c.Duration = DefaultDuration
	}
	if c.CPUs == 0 {
		c.CPUs = DefaultCPUs
	}
	if c.Stacks == 0 {
		c.Stacks = DefaultStacks
	}
	if c.Start.IsZero() {
		c.Start = DefaultStart
	}
	if c.NodeName == "" {
		c.NodeName = DefaultNodeName
	}
	return c
}

// Validate reports whether the configuration (after defaults) is usable.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.Samples < 0 {
		errs = append(errs, fmt.Errorf("samples must be positive, got %d", c.Samples))
	}
	if c.BatchSize < 0 || c.BatchSize > 1<<20 {
		errs = append(errs, fmt.Errorf("batch size must be in [1, %d], got %d", 1<<20, c.BatchSize))
	}
	if c.Duration < 0 {
		errs = append(errs, fmt.Errorf("duration must be positive, got %v", c.Duration))
	}
	if c.CPUs < 0 || c.CPUs > 1<<16 {
		errs = append(errs, fmt.Errorf("cpus must be in [1, %d], got %d", 1<<16, c.CPUs))
	}
	if c.Stacks < 0 || c.Stacks > 1<<20 {
		errs = append(errs, fmt.Errorf("stacks must be in [1, %d], got %d", 1<<20, c.Stacks))
	}
	if !(c.OffCPUFraction >= 0 && c.OffCPUFraction < 1) {
		errs = append(errs, fmt.Errorf("off-CPU fraction must be in [0, 1), got %v", c.OffCPUFraction))
	}
	if !(c.ProbeFraction >= 0 && c.ProbeFraction < 1) {
		errs = append(errs, fmt.Errorf("probe fraction must be in [0, 1), got %v", c.ProbeFraction))
	}
	if !(c.UnknownOriginFraction >= 0 && c.UnknownOriginFraction < 1) {
		errs = append(errs, fmt.Errorf("unknown-origin fraction must be in [0, 1), got %v", c.UnknownOriginFraction))
	}
	if !(c.LabelFraction >= 0 && c.LabelFraction <= 1) {
		errs = append(errs, fmt.Errorf("label fraction must be in [0, 1], got %v", c.LabelFraction))
	}
	if c.OffCPUFraction+c.ProbeFraction >= 1 {
		errs = append(errs, fmt.Errorf("off-CPU and probe fractions must leave room for CPU samples"))
	}
	if d := c.Start.UnixNano(); d <= 0 || d > (1<<63-1)-int64(c.Duration) {
		errs = append(errs, fmt.Errorf("start %v out of range", c.Start))
	}
	return errors.Join(errs...)
}

// Kind is the type of a generated message. The values equal the ipc frame
// types that carry each message.
type Kind uint8

const (
	KindHello      Kind = 1 // Message.Hello
	KindBatch      Kind = 2 // Message.Batch
	KindExecutable Kind = 3 // Message.Executable
)

func (k Kind) String() string {
	switch k {
	case KindHello:
		return "hello"
	case KindBatch:
		return "batch"
	case KindExecutable:
		return "executable"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Message is one generated message; the field named by Kind is set.
type Message struct {
	Kind       Kind
	Hello      *schema.Hello
	Batch      *schema.Batch
	Executable *schema.ExecutableNotice
}

// Generate produces a stream and hands each message to emit, in stream
// order: one Hello, then batches with sequence numbers 1..n. An
// ExecutableNotice (without descriptor) for every user-space mapping precedes
// the first batch that references it.
//
// The messages are reused: a Message's pointers are valid only until emit
// returns. Copy what you keep (Collect does). An error from emit stops
// generation and is returned.
func Generate(cfg Config, emit func(Message) error) error {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	u := buildUniverse(cfg)
	hello := u.hello()
	if err := emit(Message{Kind: KindHello, Hello: &hello}); err != nil {
		return err
	}
	g := newBatcher(u)
	n := uint64(cfg.Samples)
	for i := uint64(0); i < n; i++ {
		g.add(i)
		if g.b.Samples() == cfg.BatchSize || i == n-1 {
			if err := g.flush(emit); err != nil {
				return err
			}
		}
	}
	return nil
}

// Collect generates a stream and returns deep copies of all its messages.
func Collect(cfg Config) ([]Message, error) {
	var out []Message
	err := Generate(cfg, func(m Message) error {
		switch m.Kind {
		case KindHello:
			h := *m.Hello
			h.Tracers = append([]string(nil), h.Tracers...)
			out = append(out, Message{Kind: KindHello, Hello: &h})
		case KindExecutable:
			e := *m.Executable
			out = append(out, Message{Kind: KindExecutable, Executable: &e})
		case KindBatch:
			out = append(out, Message{Kind: KindBatch, Batch: CloneBatch(m.Batch)})
		}
		return nil
	})
	return out, err
}

// Split returns the hello and the batches of a collected stream, in order
// (the executable notices are left out).
func Split(msgs []Message) (*schema.Hello, []*schema.Batch) {
	var hello *schema.Hello
	var batches []*schema.Batch
	for _, m := range msgs {
		switch m.Kind {
		case KindHello:
			hello = m.Hello
		case KindBatch:
			batches = append(batches, m.Batch)
		}
	}
	return hello, batches
}

// CloneBatch returns a deep copy of b.
func CloneBatch(b *schema.Batch) *schema.Batch {
	c := &schema.Batch{
		Sequence:    b.Sequence,
		Strings:     append([]string(nil), b.Strings...),
		Mappings:    append([]schema.Mapping(nil), b.Mappings...),
		Frames:      append([]schema.Frame(nil), b.Frames...),
		StackFrames: append([]uint32(nil), b.StackFrames...),
		StackEnds:   append([]uint32(nil), b.StackEnds...),
		Processes:   append([]schema.Process(nil), b.Processes...),
		Samples:     append([]schema.Sample(nil), b.Samples...),
	}
	for i := range c.Processes {
		if c.Processes[i].EnvVars != nil {
			c.Processes[i].EnvVars = append([]schema.KeyValue(nil), c.Processes[i].EnvVars...)
		}
	}
	for i := range c.Samples {
		if c.Samples[i].Labels != nil {
			c.Samples[i].Labels = append([]schema.KeyValue(nil), c.Samples[i].Labels...)
		}
	}
	return c
}

func (u *universe) hello() schema.Hello {
	h := schema.Hello{
		MajorVersion:        schema.MajorVersion,
		MinorVersion:        schema.MinorVersion,
		SamplerVersion:      SamplerVersion,
		NodeName:            u.cfg.NodeName,
		KernelRelease:       u.kernelRelease,
		BootID:              u.bootID,
		SamplingFrequencyHz: SamplingFrequencyHz,
		Tracers:             []string{"native", "kernel", "python", "go"},
		SessionID:           u.session,
		StartTimeUnixNano:   u.cfg.Start.UnixNano(),
	}
	if u.cfg.OffCPUFraction > 0 {
		// The sampler's off-CPU probability (1%), scaled to 2^32-1.
		h.OffCPUThreshold = (1<<32 - 1) / 100
	}
	return h
}

// batcher turns samples into batches through a schema.BatchBuilder,
// remembering per batch which universe objects it already added.
type batcher struct {
	u     *universe
	b     *schema.BatchBuilder
	perm  permutation
	seq   uint64
	epoch uint32
	seed  uint64

	mapEpoch, frameEpoch, stackEpoch, procEpoch, threadEpoch []uint32
	mapIdx, frameIdx, stackIdx, procIdx, threadName          []uint32
	labelEpoch                                               [][]uint32
	labelIdx                                                 [][][]schema.KeyValue
	wheelOff                                                 []uint64

	announced []bool
	pending   []schema.ExecutableNotice
	scratch   []uint32
	kvArena   []schema.KeyValue
	curPID    uint32

	startNs, durNs uint64
}

func newBatcher(u *universe) *batcher {
	g := &batcher{
		u:           u,
		b:           schema.NewBatchBuilder(),
		perm:        newPermutation(uint64(u.cfg.Samples), hash64(uint64(u.cfg.Seed), 5)),
		epoch:       1,
		seed:        uint64(u.cfg.Seed),
		mapEpoch:    make([]uint32, len(u.mappings)),
		mapIdx:      make([]uint32, len(u.mappings)),
		frameEpoch:  make([]uint32, len(u.frames)),
		frameIdx:    make([]uint32, len(u.frames)),
		stackEpoch:  make([]uint32, len(u.stacks)),
		stackIdx:    make([]uint32, len(u.stacks)),
		procEpoch:   make([]uint32, len(u.procs)),
		procIdx:     make([]uint32, len(u.procs)),
		threadEpoch: make([]uint32, len(u.threads)),
		threadName:  make([]uint32, len(u.threads)),
		labelEpoch:  make([][]uint32, len(u.progs)),
		labelIdx:    make([][][]schema.KeyValue, len(u.progs)),
		wheelOff:    make([]uint64, len(u.progs)),
		announced:   make([]bool, len(u.mappings)),
		startNs:     uint64(u.cfg.Start.UnixNano()),
		durNs:       uint64(u.cfg.Duration),
	}
	for i, p := range u.progs {
		g.labelEpoch[i] = make([]uint32, len(p.def.labels))
		g.labelIdx[i] = make([][]schema.KeyValue, len(p.def.labels))
		if len(p.wheel) > 0 {
			g.wheelOff[i] = hash64(g.seed, 6, uint64(i)) % uint64(len(p.wheel))
		}
	}
	return g
}

func (g *batcher) add(i uint64) {
	u := g.u
	n := uint64(u.cfg.Samples)
	j := g.perm.at(i)
	k := u.stackOf(j)
	st := &u.stacks[k]
	p := u.progs[st.prog]
	// The r-th sample of a program goes to the next thread on its wheel, so
	// that every thread shows up once the program has enough samples.
	r := u.progOff[k] + (j - u.first[k])
	ti := p.wheel[(r*p.step+g.wheelOff[st.prog])%uint64(len(p.wheel))]
	t := &u.threads[ti]
	g.curPID = u.procs[t.proc].pid

	h := hash64(g.seed, 7, i)
	// Timestamp: slot i of n over the duration, jittered within the slot.
	hi, lo := bits.Mul64(i, g.durNs)
	slot, _ := bits.Div64(hi, lo, n)
	ts := g.startNs + slot + (h>>8)%max(g.durNs/n, 1)

	cpu := uint32(0)
	switch {
	case t.cpu >= 0:
		cpu = uint32(t.cpu)
	case h&0xf < 13:
		// Threads mostly stay on a CPU for a while (8 epochs per stream).
		cpu = uint32(hash64(g.seed, 8, uint64(t.tid), i*8/n) % uint64(u.cfg.CPUs))
	default:
		cpu = uint32(hash64(g.seed, 9, i) % uint64(u.cfg.CPUs))
	}

	var value int64 = 1
	if st.origin == schema.OriginOffCPU {
		// Log-uniform between 20 us and ~650 ms.
		e := (h >> 16) % 15
		base := uint64(20000) << e
		value = int64(base + (h>>24)%base)
	}

	s := schema.Sample{
		TimestampUnixNano: int64(ts),
		Origin:            st.origin,
		Value:             value,
		Process:           g.process(t.proc),
		TID:               t.tid,
		CPU:               cpu,
		ThreadName:        g.thread(ti),
		Stack:             g.stack(k),
	}
	// The knobs for tests draw from hashes of their own, so that without
	// them every sample stays as it is.
	label := st.label
	if f := u.cfg.LabelFraction; f > 0 && label < 0 && len(p.def.labels) > 0 {
		if x := hash64(g.seed, 11, i); float64(x>>11)/(1<<53) < f {
			label = int(x % uint64(len(p.def.labels)))
		}
	}
	if label >= 0 {
		s.Labels = g.label(st.prog, label)
	}
	if f := u.cfg.UnknownOriginFraction; f > 0 {
		if x := hash64(g.seed, 10, i); float64(x>>11)/(1<<53) < f {
			s.Origin, s.Value = UnknownOrigin, int64(1+x%5)
		}
	}
	g.b.AddSample(s)
}

func (g *batcher) flush(emit func(Message) error) error {
	for i := range g.pending {
		if err := emit(Message{Kind: KindExecutable, Executable: &g.pending[i]}); err != nil {
			return err
		}
	}
	g.pending = g.pending[:0]
	g.seq++
	bt := g.b.Batch()
	bt.Sequence = g.seq
	if err := emit(Message{Kind: KindBatch, Batch: bt}); err != nil {
		return err
	}
	g.b.Reset()
	g.kvArena = g.kvArena[:0]
	g.epoch++
	return nil
}

func (g *batcher) kvs(pairs ...string) []schema.KeyValue {
	start := len(g.kvArena)
	for i := 0; i+1 < len(pairs); i += 2 {
		g.kvArena = append(g.kvArena, schema.KeyValue{Key: g.b.String(pairs[i]), Value: g.b.String(pairs[i+1])})
	}
	return g.kvArena[start:len(g.kvArena):len(g.kvArena)]
}

func (g *batcher) process(pi int32) uint32 {
	if g.procEpoch[pi] == g.epoch {
		return g.procIdx[pi]
	}
	pr := &g.u.procs[pi]
	p := schema.Process{
		PID:            pr.pid,
		Comm:           g.b.String(pr.comm),
		ExecutablePath: g.b.String(pr.exe),
		ContainerID:    g.b.String(pr.container),
		SystemdUnit:    g.b.String(pr.unit),
		ServiceName:    g.b.String(pr.service),
	}
	if len(pr.env) > 0 {
		start := len(g.kvArena)
		for _, kv := range pr.env {
			g.kvArena = append(g.kvArena, schema.KeyValue{Key: g.b.String(kv[0]), Value: g.b.String(kv[1])})
		}
		p.EnvVars = g.kvArena[start:len(g.kvArena):len(g.kvArena)]
	}
	g.procEpoch[pi] = g.epoch
	g.procIdx[pi] = g.b.Process(p)
	return g.procIdx[pi]
}

func (g *batcher) thread(ti int32) uint32 {
	if g.threadEpoch[ti] != g.epoch {
		g.threadEpoch[ti] = g.epoch
		g.threadName[ti] = g.b.String(g.u.threads[ti].name)
	}
	return g.threadName[ti]
}

func (g *batcher) label(pi, v int) []schema.KeyValue {
	if g.labelEpoch[pi][v] != g.epoch {
		d := g.u.progs[pi].def
		g.labelEpoch[pi][v] = g.epoch
		g.labelIdx[pi][v] = g.kvs(d.labelKey, d.labels[v])
	}
	return g.labelIdx[pi][v]
}

func (g *batcher) stack(k int) uint32 {
	if g.stackEpoch[k] == g.epoch {
		return g.stackIdx[k]
	}
	g.scratch = g.scratch[:0]
	for _, f := range g.u.stacks[k].frames {
		g.scratch = append(g.scratch, g.frame(f))
	}
	g.stackEpoch[k] = g.epoch
	g.stackIdx[k] = g.b.Stack(g.scratch)
	return g.stackIdx[k]
}

func (g *batcher) frame(fi int32) uint32 {
	if g.frameEpoch[fi] == g.epoch {
		return g.frameIdx[fi]
	}
	f := &g.u.frames[fi]
	sf := schema.Frame{
		Kind:           f.kind,
		AddressOrLine:  f.addr,
		FunctionName:   g.b.String(f.fn),
		SourceFile:     g.b.String(f.file),
		SourceLine:     f.line,
		FunctionOffset: f.funcOff,
	}
	if f.mapping >= 0 {
		sf.Mapping = g.mapping(f.mapping)
	}
	g.frameEpoch[fi] = g.epoch
	g.frameIdx[fi] = g.b.Frame(sf)
	return g.frameIdx[fi]
}

func (g *batcher) mapping(mi int32) uint32 {
	if g.mapEpoch[mi] == g.epoch {
		return g.mapIdx[mi]
	}
	m := &g.u.mappings[mi]
	g.mapEpoch[mi] = g.epoch
	g.mapIdx[mi] = g.b.Mapping(schema.Mapping{
		FileName:   g.b.String(m.fileName),
		Path:       g.b.String(m.path),
		GNUBuildID: g.b.String(m.gnuID),
		GoBuildID:  g.b.String(m.goID),
		FileID:     m.fileID,
		Start:      m.start,
		End:        m.end,
		FileOffset: m.off,
	})
	if !g.announced[mi] && !m.kernel {
		g.announced[mi] = true
		g.pending = append(g.pending, schema.ExecutableNotice{
			FileID:            m.fileID,
			FileName:          m.fileName,
			Path:              m.path,
			GNUBuildID:        m.gnuID,
			GoBuildID:         m.goID,
			DebuglinkFileName: m.debuglink,
			PID:               g.curPID,
			IsVDSO:            m.vdso,
		})
	}
	return g.mapIdx[mi]
}
