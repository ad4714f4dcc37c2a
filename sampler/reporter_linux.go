package sampler

import (
	"unsafe"

	"go.opentelemetry.io/ebpf-profiler/libpf"
	"go.opentelemetry.io/ebpf-profiler/reporter"
	"go.opentelemetry.io/ebpf-profiler/reporter/samples"

	"github.com/tandem-profiler/tandem/schema"
)

// traceEntry is a trace as captured in the tracer's callback. The frames
// are interned handles (immutable and comparable) and the label maps are
// never written after the tracer hands them over (CustomLabels is built per
// trace, EnvVars per process sync), so capturing them is a faithful
// snapshot; the batching goroutine classifies them later.
type traceEntry struct {
	frames     libpf.Frames
	labels     map[libpf.String]libpf.String
	env        map[libpf.String]libpf.String
	apmService string
	timestamp  int64
	value      int64
	comm       libpf.String // thread name
	procName   libpf.String // /proc/PID/comm, with the tracer's trailing newline
	exe        libpf.String
	container  libpf.String
	pid, tid   uint32
	cpu        uint32
	origin     libpf.Origin
	link       schema.TraceLink // zero: the tracer found no span
}

// entryOverhead is what one queued entry costs besides its frames and
// labels.
const entryOverhead = int(unsafe.Sizeof(traceEntry{})) + 2*int(unsafe.Sizeof(0))

// entrySize estimates the memory a queued entry holds: the entry, its frame
// handles (8 bytes each) and its label map.
func entrySize(t *libpf.Trace) int {
	return entryOverhead + 8*len(t.Frames) + 48*len(t.CustomLabels)
}

// traceReporter implements reporter.TraceReporter and
// reporter.ExecutableReporter for the tracer. Both callbacks run on the
// tracer's goroutines and only capture and enqueue.
type traceReporter struct {
	queue *dropQueue[traceEntry]
	m     *samplerMetrics
	exec  *executableSender // nil: executables are not sent
	// ownPID is the sampler's process: its off-CPU traces are left out
	// (counted). Handling any trace makes the sampler's goroutines park
	// and wake (futex, epoll_pwait, nanosleep), each of which is an
	// off-CPU event of its own; at a high --off-cpu-threshold that loop
	// made the sampler the largest off-CPU "workload" on a Debian 6.1
	// VM (59-72% of all off-CPU samples, test/vm), with the
	// encoder's work to match. Its on-CPU samples stay.
	ownPID uint32
}

var (
	_ reporter.TraceReporter      = (*traceReporter)(nil)
	_ reporter.ExecutableReporter = (*traceReporter)(nil)
)

// ReportTraceEvent captures the trace and enqueues it; it never blocks
// beyond a short mutex hold and never fails.
func (r *traceReporter) ReportTraceEvent(t *libpf.Trace, meta *samples.TraceEventMeta) error {
	if t == nil || meta == nil {
		return nil
	}
	r.m.traces.Inc()
	if schema.Origin(meta.Origin) == schema.OriginOffCPU && r.ownPID != 0 && uint32(meta.PID) == r.ownPID {
		r.m.ownOffCPU.Inc()
		return nil
	}
	e := traceEntry{
		frames:     t.Frames,
		labels:     t.CustomLabels,
		env:        meta.EnvVars,
		apmService: meta.APMServiceName,
		timestamp:  int64(meta.Timestamp),
		value:      meta.Value,
		comm:       meta.Comm,
		procName:   meta.ProcessName,
		exe:        meta.ExecutablePath,
		container:  meta.ContainerID,
		pid:        uint32(meta.PID),
		tid:        uint32(meta.TID),
		cpu:        meta.CPU,
		origin:     meta.Origin,
		link:       schema.TraceLink{TraceID: meta.TraceID, SpanID: meta.SpanID},
	}
	r.queue.Push(e, entrySize(t))
	return nil
}

// ReportExecutable hands the executable to the executable sender.
func (r *traceReporter) ReportExecutable(md *reporter.ExecutableMetadata) {
	if r.exec == nil || md == nil {
		return
	}
	r.exec.report(md)
}
