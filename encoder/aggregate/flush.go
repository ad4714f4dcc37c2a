package aggregate

import (
	"path"
	"strconv"

	"github.com/tandem-profiler/tandem/schema"
)

// Mapping is an executable mapping. String fields are ids into
// Flush.Strings (0 = absent). Start, End and FileOffset are file virtual
// addresses, as the sampler reports them.
type Mapping struct {
	FileName   uint32
	Path       uint32
	GNUBuildID uint32
	GoBuildID  uint32
	FileID     schema.FileID
	Start      uint64
	End        uint64
	FileOffset uint64
}

// Function is a symbolized function: a name and the file defining it, as
// ids into Flush.Strings. The zero Function (id 0) means "none".
type Function struct {
	Name uint32
	File uint32
}

// Location is one distinct stack frame.
type Location struct {
	// Address is the frame's AddressOrLine: a file virtual address for
	// native and kernel frames, the tracer's bytecode index or 0 for
	// interpreted frames, the error code for error frames.
	Address uint64
	// Mapping is an id into Flush.Mappings; 0 = no mapping.
	Mapping uint32
	// Function is an id into Flush.Functions; 0 = not symbolized. When set,
	// Line and Column give the source position (0 = unknown).
	Function uint32
	Line     uint32
	Column   uint32
	Kind     schema.FrameKind
	// Error is the unwinder's error bit; Kind unknown + Error is the abort
	// marker.
	Error bool
}

// FrameType returns the profile.frame.type name of the location: the frame
// kind's name, or "abort-marker" for the unwinder's abort marker (the names
// the upstream tracer uses).
func (l *Location) FrameType() string {
	if l.Error && l.Kind == schema.FrameUnknown {
		return "abort-marker"
	}
	return l.Kind.String()
}

// KeyValue is a pair of ids into Flush.Strings.
type KeyValue struct{ Key, Value uint32 }

// Resource describes one process. String fields are ids into Flush.Strings
// (0 = absent).
type Resource struct {
	PID            uint32
	Comm           uint32
	ExecutablePath uint32
	ContainerID    uint32
	SystemdUnit    uint32
	ServiceName    uint32 // the APM service name the sampler found, if any
	NodeName       uint32 // the session's Hello.NodeName
	EnvVars        uint32 // label set id (Flush.LabelSet)
}

// Sample is one aggregated sample: every observation in the interval that
// shares its key.
type Sample struct {
	Stack    uint32 // stack id (Flush.Stack); 0 = empty stack
	Resource uint32 // index into Flush.Resources
	Origin   schema.Origin
	// FrequencyHz is the session's sampling frequency (Hello); it gives the
	// CPU sampling period. 0 = unknown.
	FrequencyHz uint32
	TID         uint32
	CPU         uint32
	ThreadName  uint32 // string id
	Labels      uint32 // label set id of the sample's Go pprof labels
	// Link is the index of the trace span the thread was running in
	// Flush.Links; 0 = none. Samples of different links are different
	// samples.
	Link uint32
	// Timestamps (Unix nanoseconds) and Values hold one entry per
	// observation, in arrival order; they have the same length.
	Timestamps []int64
	Values     []int64
}

// Total returns the sum of the sample's values.
func (s *Sample) Total() int64 {
	var t int64
	for _, v := range s.Values {
		t += v
	}
	return t
}

// AllOnes reports whether every value is 1, the usual case for counted
// origins (CPU samples, probes), where encoders may omit the values.
func (s *Sample) AllOnes() bool {
	for _, v := range s.Values {
		if v != 1 {
			return false
		}
	}
	return true
}

// Flush is an immutable snapshot of one flush interval. The dictionary
// tables are shared with the Aggregator (and with other Flushes of the same
// Generation) and hold every entry of the dictionary, used in this interval
// or not; encoders emit what Samples reference. Callers must not modify
// anything reachable from a Flush.
type Flush struct {
	// StartUnixNano and EndUnixNano bound the interval; they are widened
	// where needed so that every sample timestamp lies within
	// [StartUnixNano, EndUnixNano].
	StartUnixNano int64
	EndUnixNano   int64
	// Generation names the dictionary the ids refer to. Ids of two
	// Flushes with the same Generation are interchangeable.
	Generation uint64

	Strings   []string
	Mappings  []Mapping
	Functions []Function
	Locations []Location
	// StackLocations holds the location ids of all stacks, concatenated,
	// leaf first; stack i is StackLocations[StackEnds[i-1]:StackEnds[i]]
	// (see Stack).
	StackLocations []uint32
	StackEnds      []uint32
	// LabelKVs and LabelEnds store label sets like stacks (see LabelSet).
	LabelKVs  []KeyValue
	LabelEnds []uint32
	Resources []Resource
	// NativeLineTable and NativeLineEnds store the native lines of each
	// location like stacks (see NativeLines); empty without a Symbolizer.
	NativeLineTable []Line
	NativeLineEnds  []uint32

	Samples []Sample
	// Links are the interval's distinct trace links (trace id, span id) in
	// the order samples first named them; Links[0] is the zero "no link"
	// (Sample.Link 0). At most Config.MaxLinksPerFlush besides it;
	// DroppedLinks counts the samples that lost their link to that bound.
	Links        []schema.TraceLink
	DroppedLinks int
	// Events is the number of observations (the sum of len(Timestamps)).
	Events int

	owner *Aggregator // for Release
	// workloads are the Kubernetes workloads of the flush's container ids
	// (string ids), resolved once when the flush was taken (Workload).
	workloads map[uint32]*Workload
	ts        []int64 // backing arrays of Samples' Timestamps and Values
	vals      []int64
}

// Stack returns the location ids of stack i, leaf first.
func (f *Flush) Stack(i uint32) []uint32 {
	start := uint32(0)
	if i > 0 {
		start = f.StackEnds[i-1]
	}
	return f.StackLocations[start:f.StackEnds[i]:f.StackEnds[i]]
}

// NumStacks returns the number of stacks in the dictionary.
func (f *Flush) NumStacks() int { return len(f.StackEnds) }

// LabelSet returns the key/value pairs of label set i.
func (f *Flush) LabelSet(i uint32) []KeyValue {
	start := uint32(0)
	if i > 0 {
		start = f.LabelEnds[i-1]
	}
	return f.LabelKVs[start:f.LabelEnds[i]:f.LabelEnds[i]]
}

// String returns string i.
func (f *Flush) String(i uint32) string { return f.Strings[i] }

// Empty reports whether the interval holds no samples.
func (f *Flush) Empty() bool { return len(f.Samples) == 0 }

// ServiceName returns the service.name of a resource: the APM service name
// when the sampler found one; else, in a Kubernetes pod, the Workload's
// ServiceName (app.kubernetes.io/name, workload, container); else the
// process's comm, else the basename of its executable, else
// "unknown_service:pid-<pid>". It is never empty and never a hash.
func (f *Flush) ServiceName(r *Resource) string {
	if r.ServiceName == 0 {
		if w := f.Workload(r); w != nil && w.ServiceName != "" {
			return w.ServiceName
		}
	}
	return ServiceName(f.Strings[r.ServiceName], f.Strings[r.Comm], f.Strings[r.ExecutablePath], r.PID)
}

// ServiceName implements the service.name fallback of Flush.ServiceName on
// plain values.
func ServiceName(apmServiceName, comm, executablePath string, pid uint32) string {
	switch {
	case apmServiceName != "":
		return apmServiceName
	case comm != "":
		return comm
	}
	if executablePath != "" {
		if base := path.Base(executablePath); base != "/" && base != "." {
			return base
		}
	}
	return "unknown_service:pid-" + strconv.FormatUint(uint64(pid), 10)
}

// ExecutableName returns the basename of a resource's executable path, or
// "" when the path is unknown.
func (f *Flush) ExecutableName(r *Resource) string {
	p := f.Strings[r.ExecutablePath]
	if p == "" {
		return ""
	}
	base := path.Base(p)
	if base == "/" || base == "." {
		return ""
	}
	return base
}

// ExecutableKey returns the key a mapping's executable is named by in
// profiles and symbol uploads (schema.KeyOf).
func (f *Flush) ExecutableKey(m *Mapping) schema.ExecutableKey {
	return schema.KeyOf(f.Strings[m.GNUBuildID], m.FileID)
}
