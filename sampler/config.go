package sampler

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Defaults of Config. The command line takes its defaults from here.
const (
	DefaultSamplesPerSecond       = 19
	DefaultTracers                = "all"
	DefaultProbabilisticInterval  = time.Minute
	DefaultProbabilisticThreshold = 100 // always on
	DefaultQueueBytes             = 8 << 20
	DefaultBatchMaxSamples        = 4096
	DefaultBatchMaxBytes          = 4 << 20
	DefaultFlushInterval          = time.Second
	DefaultMonitorInterval        = 5 * time.Second
	DefaultTracePollInterval      = 250 * time.Millisecond
	DefaultPIDCleanupInterval     = 5 * time.Minute
	DefaultExecutableUnloadDelay  = 5 * time.Minute
	DefaultProcessSweepInterval   = 30 * time.Second
	DefaultExecutableRate         = 20  // per second
	DefaultExecutableBurst        = 200 // start-up sees many new executables at once
	DefaultExecutableMaxTotal     = 50000
	DefaultExecutableParkLimit    = 256
	DefaultShutdownTimeout        = 5 * time.Second
	// DefaultBPFFSRoot is where the BPF filesystem is mounted on most
	// hosts, and the profiler's default.
	DefaultBPFFSRoot = "/sys/fs/bpf/"
)

// Limits checked by Validate.
const (
	maxSamplesPerSecond    = 1000
	maxProbabilisticThresh = 100
	maxMapScaleFactor      = 8
	maxVerifierLogLevel    = 2
	minQueueBytes          = 64 << 10
	// maxBatchMaxBytes stays well below ipc.MaxFrameSize (16 MiB): the
	// estimate is not exact.
	maxBatchMaxBytes = 8 << 20
)

// Config holds the sampler's knobs. It is plain data: printable, comparable
// after copying, validated by Validate. Use DefaultConfig and change fields.
type Config struct {
	_ struct{} // keyed literals only

	// NodeName goes into the Hello.
	NodeName string
	// SamplesPerSecond is the per-CPU perf sampling frequency.
	SamplesPerSecond int
	// Tracers is the interpreter tracer list in the profiler's syntax
	// ("all" or a comma-separated list of perl, php, python, hotspot, ruby,
	// v8, dotnet, go, labels, beam). The go tracer is governed by
	// SymbolizeGo alone: "all" drops it unless SymbolizeGo is set, and naming
	// it explicitly without SymbolizeGo is a configuration error.
	Tracers string
	// SymbolizeGo enables the profiler's go tracer: Go frames arrive
	// symbolized (function, file, line) from gopclntab. Off, Go frames
	// travel as native frames with their build ids, for symbolization in
	// another process.
	SymbolizeGo bool
	// OffCPUThreshold is the off-CPU sampling probability in [0, 1]; 0
	// disables off-CPU profiling. It needs kprobes.
	OffCPUThreshold float64
	// ProbabilisticInterval and ProbabilisticThreshold (0..100) switch
	// sampling on for a random share of intervals; 100 means always on.
	ProbabilisticInterval  time.Duration
	ProbabilisticThreshold uint
	// IncludeEnvVars lists environment variables copied from
	// /proc/PID/environ into the process labels.
	IncludeEnvVars []string
	// KeepEncoderSamples keeps the traces of the connected encoder's
	// process (the Sink's PeerPID), left out by default.
	KeepEncoderSamples bool
	// SendErrorFrames keeps frames of failed unwinds (error bit set).
	SendErrorFrames bool
	// BPFVerifierLogLevel (0..2) of the eBPF verifier output on load errors.
	BPFVerifierLogLevel uint32
	// MapScaleFactor (0..8) grows the tracer's pid-page and stack-delta maps
	// by 2^n.
	MapScaleFactor int

	// QueueBytes bounds the queue between the tracer's reporter callback and
	// the batching goroutine; the oldest entries are dropped beyond it.
	QueueBytes int
	// BatchMaxSamples and BatchMaxBytes (an estimate of the encoded size)
	// flush a batch early; FlushInterval flushes it at the latest.
	BatchMaxSamples int
	BatchMaxBytes   int
	FlushInterval   time.Duration

	// Tracer intervals (the profiler's Intervals interface).
	MonitorInterval       time.Duration
	TracePollInterval     time.Duration
	PIDCleanupInterval    time.Duration
	ExecutableUnloadDelay time.Duration
	// ProcessSweepInterval is how often cached process labels are checked
	// against /proc and dropped for processes that are gone.
	ProcessSweepInterval time.Duration

	// SendExecutables passes executables (with an open descriptor) to the
	// Sink. ExecutableRate (per second) and ExecutableBurst form a token
	// bucket; ExecutableMaxTotal bounds the count over the sampler's life.
	SendExecutables    bool
	ExecutableRate     float64
	ExecutableBurst    int
	ExecutableMaxTotal int
	// ExecutableParkLimit bounds the executables kept open while the sink
	// is not connected (the tracer reports each file once, so one reported
	// before the encoder connects would otherwise be lost); past it they
	// are closed and counted.
	ExecutableParkLimit int

	// ShutdownTimeout bounds stopping the tracer and flushing the queue.
	ShutdownTimeout time.Duration

	// OBIProcessCtx shares the tracer's span map with the OpenTelemetry
	// eBPF Instrumentation (OBI), as the profiler's option of the same
	// name: the tracer uses the map pinned at
	// BPFFSRoot/otel/traces_ctx_v1, or creates and pins it there, and
	// OBI writes the span each instrumented thread is running into it.
	// Samples of those threads then carry the trace and span id. Off, the
	// map is private (one entry) and only Elastic APM agents' ids arrive.
	OBIProcessCtx bool
	// BPFFSRoot is the BPF filesystem the span map is pinned in (the
	// profiler's BPFFSRoot). It must be a mounted bpf filesystem when
	// OBIProcessCtx is on, the same one OBI pins into.
	BPFFSRoot string
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		SamplesPerSecond:       DefaultSamplesPerSecond,
		Tracers:                DefaultTracers,
		ProbabilisticInterval:  DefaultProbabilisticInterval,
		ProbabilisticThreshold: DefaultProbabilisticThreshold,
		QueueBytes:             DefaultQueueBytes,
		BatchMaxSamples:        DefaultBatchMaxSamples,
		BatchMaxBytes:          DefaultBatchMaxBytes,
		FlushInterval:          DefaultFlushInterval,
		MonitorInterval:        DefaultMonitorInterval,
		TracePollInterval:      DefaultTracePollInterval,
		PIDCleanupInterval:     DefaultPIDCleanupInterval,
		ExecutableUnloadDelay:  DefaultExecutableUnloadDelay,
		ProcessSweepInterval:   DefaultProcessSweepInterval,
		SendExecutables:        true,
		ExecutableRate:         DefaultExecutableRate,
		ExecutableBurst:        DefaultExecutableBurst,
		ExecutableMaxTotal:     DefaultExecutableMaxTotal,
		ExecutableParkLimit:    DefaultExecutableParkLimit,
		ShutdownTimeout:        DefaultShutdownTimeout,
		BPFFSRoot:              DefaultBPFFSRoot,
	}
}

// knownTracers are the names the profiler's tracer list accepts.
var knownTracers = []string{"perl", "php", "python", "hotspot", "ruby", "v8", "dotnet", "luajit", "go", "labels", "beam"}

// KnownTracers returns the tracer names a tracer list may hold, besides
// "all", in the order help texts list them.
func KnownTracers() []string { return slices.Clone(knownTracers) }

// ListedTracers returns the tracer names a tracer list may hold without
// another flag, besides "all", in the order help texts list them:
// KnownTracers without go, which --symbolize-go adds. The sampler's
// --tracers help and the Helm chart's check of sampler.tracers (generated
// by make reference) list these.
func ListedTracers() []string {
	return slices.DeleteFunc(KnownTracers(), func(n string) bool { return n == "go" })
}

// TracerNames returns the effective tracer list (what is loaded and what
// the Hello announces): Tracers expanded, with go present exactly when
// SymbolizeGo is set. It assumes a valid Config.
func (c *Config) TracerNames() []string {
	var names []string
	for _, n := range splitList(c.Tracers) {
		if n == "all" {
			names = append(names, knownTracers...)
			continue
		}
		names = append(names, n)
	}
	names = slices.DeleteFunc(names, func(n string) bool { return n == "go" || n == "native" })
	if c.SymbolizeGo {
		names = append(names, "go")
	}
	slices.Sort(names)
	return slices.Compact(names)
}

func splitList(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.ToLower(strings.TrimSpace(f)); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// Validate reports every problem of the configuration, joined.
func (c *Config) Validate() error {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Err: fmt.Errorf(format, args...)})
	}

	if c.SamplesPerSecond < 1 || c.SamplesPerSecond > maxSamplesPerSecond {
		add("SamplesPerSecond", "sampling frequency %d Hz out of range [1, %d]", c.SamplesPerSecond, maxSamplesPerSecond)
	}
	names := splitList(c.Tracers)
	for _, n := range names {
		switch {
		case n == "all" || n == "native":
		case n == "go" && !c.SymbolizeGo:
			add("Tracers", "tracer list names go but Go symbolization is off: enable it (--symbolize-go) or drop go from the list")
		case !slices.Contains(knownTracers, n):
			add("Tracers", "unknown tracer %q (known: all, %s)", n, strings.Join(knownTracers, ", "))
		}
	}
	if c.OffCPUThreshold < 0 || c.OffCPUThreshold > 1 || c.OffCPUThreshold != c.OffCPUThreshold {
		add("OffCPUThreshold", "off-CPU threshold %v out of range [0, 1]", c.OffCPUThreshold)
	}
	if c.ProbabilisticThreshold > maxProbabilisticThresh {
		add("ProbabilisticThreshold", "probabilistic threshold %d out of range [0, %d]", c.ProbabilisticThreshold, maxProbabilisticThresh)
	}
	if c.ProbabilisticThreshold < maxProbabilisticThresh && c.ProbabilisticInterval <= 0 {
		add("ProbabilisticInterval", "probabilistic interval %v must be positive when the threshold is below %d", c.ProbabilisticInterval, maxProbabilisticThresh)
	}
	for _, e := range c.IncludeEnvVars {
		if e == "" || strings.ContainsAny(e, "=\x00") {
			add("IncludeEnvVars", "environment variable name %q is not valid", e)
		}
	}
	if c.BPFVerifierLogLevel > maxVerifierLogLevel {
		add("BPFVerifierLogLevel", "BPF verifier log level %d out of range [0, %d]", c.BPFVerifierLogLevel, maxVerifierLogLevel)
	}
	if c.MapScaleFactor < 0 || c.MapScaleFactor > maxMapScaleFactor {
		add("MapScaleFactor", "map scale factor %d out of range [0, %d]", c.MapScaleFactor, maxMapScaleFactor)
	}
	if c.QueueBytes < minQueueBytes {
		add("QueueBytes", "queue size %d bytes below the minimum %d", c.QueueBytes, minQueueBytes)
	}
	if c.BatchMaxSamples < 1 {
		add("BatchMaxSamples", "batch size %d samples must be positive", c.BatchMaxSamples)
	}
	if c.BatchMaxBytes < 1 || c.BatchMaxBytes > maxBatchMaxBytes {
		add("BatchMaxBytes", "batch size %d bytes out of range [1, %d]", c.BatchMaxBytes, maxBatchMaxBytes)
	}
	for _, d := range []struct {
		field, name string
		v           time.Duration
	}{
		{"FlushInterval", "flush interval", c.FlushInterval},
		{"MonitorInterval", "monitor interval", c.MonitorInterval},
		{"TracePollInterval", "trace poll interval", c.TracePollInterval},
		{"PIDCleanupInterval", "PID cleanup interval", c.PIDCleanupInterval},
		{"ExecutableUnloadDelay", "executable unload delay", c.ExecutableUnloadDelay},
		{"ProcessSweepInterval", "process sweep interval", c.ProcessSweepInterval},
		{"ShutdownTimeout", "shutdown timeout", c.ShutdownTimeout},
	} {
		if d.v <= 0 {
			add(d.field, "%s %v must be positive", d.name, d.v)
		}
	}
	if c.OBIProcessCtx && !filepath.IsAbs(c.BPFFSRoot) {
		add("BPFFSRoot", "BPF filesystem root %q must be an absolute path (the bpf mount OBI pins its maps in, usually /sys/fs/bpf)", c.BPFFSRoot)
	}
	if c.SendExecutables {
		if c.ExecutableRate <= 0 || c.ExecutableRate != c.ExecutableRate {
			add("ExecutableRate", "executable rate %v per second must be positive", c.ExecutableRate)
		}
		if c.ExecutableBurst < 1 {
			add("ExecutableBurst", "executable burst %d must be positive", c.ExecutableBurst)
		}
		if c.ExecutableMaxTotal < 0 {
			add("ExecutableMaxTotal", "executable total %d must not be negative", c.ExecutableMaxTotal)
		}
		if c.ExecutableParkLimit < 0 {
			add("ExecutableParkLimit", "executable park limit %d must not be negative", c.ExecutableParkLimit)
		}
	}
	return errors.Join(errs...)
}

// FieldError is one problem Validate found, with the Config field it is
// about (so that a command line can name its flag).
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }
