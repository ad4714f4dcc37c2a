// Package sampler runs the OpenTelemetry eBPF profiler
// (go.opentelemetry.io/ebpf-profiler) through its public API and turns every
// trace it reports into Tandem's format-neutral stream (package schema).
//
// It is the only package of Tandem that imports the profiler. Nothing of the
// profiler's types leaves it: traces become schema batches, executables
// become schema.ExecutableNotice values with an open file descriptor.
//
// # Data flow and guarantees
//
// The tracer calls the reporter synchronously from its trace-handling
// goroutine, so the reporter only captures the trace (its interned frame
// handles are immutable) into a queue bounded in bytes and returns. When the
// queue is full the oldest entries are dropped and counted. A single batching
// goroutine classifies queued traces into a batch, flushes it every
// Config.BatchMaxSamples samples or every Config.FlushInterval, and hands it
// to the Sink with a sequence number. Since protocol 1.4 strings, mappings,
// frames and stacks go into a dictionary that lasts for a generation
// (dictionary.go): each batch's new entries travel once, as one chunk
// (Sink.SendDictionary) before it, the batch itself (layout 2) carries its
// processes and samples and names the chunks it needs, and the sink writes
// them on every connection and in every dump. A generation is capped (8 MiB
// of chunks, 2^20 entries in a table); at the cap the next starts empty. Drops (this queue, and the
// batches the sink lost from its resend buffer) are reported in-band as
// schema.LossReport frames that share the batch sequence space; the sink
// never drops a loss report, and while one is unacknowledged new losses
// fold into the next, so an encoder that stops reading costs one report.
//
// Executables the tracer reports are opened at once (the process may exit)
// and passed to the Sink with their descriptor, under a token-bucket rate and
// a lifetime count bound, so the descriptor channel cannot become a general
// file reader. A descriptor that cannot be handed over is closed and counted,
// never leaked.
//
// Process labels that root can read cheaply (comm, executable, container id,
// systemd unit, requested environment variables, APM service name) are cached
// per PID in the batching goroutine and dropped when the process is gone.
//
// # Lifecycle and errors
//
// New checks the configuration only. Sampler.Run checks the host (bpf
// syscall, kernel version, lockdown, capabilities, memlock, tracefs,
// kprobes when off-CPU is requested; a missing BTF is logged, the tracer
// then finds kernel offsets by binary analysis), loads the tracer, and runs until its context is
// cancelled or the tracer reports an unrecoverable error; on the way out it
// stops the tracer and flushes everything still queued to the Sink. Run may
// be called once. A host problem stops Run at the first failing check, with
// an error that names the fix; the common causes wrap a sentinel of
// errors.go for errors.Is (ErrNoBPF, ErrKernelTooOld, ErrLockedDown,
// ErrMemlock, ErrNoKprobes, and ErrMissingCapabilities through a *CapabilityError that
// lists every missing capability). On other operating systems Run returns an
// error wrapping ErrNotSupported.
//
// The Sampler's exported methods are safe for concurrent use.
package sampler
