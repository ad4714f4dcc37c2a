// Package obitest stands in, in tests, for the OpenTelemetry eBPF
// Instrumentation (OBI) side of trace-profile correlation: it mounts a
// private BPF filesystem, creates the tracer's span map (traces_ctx_v1)
// with the tracer's own declaration of it (sampler.SpanMapSpec), pins it
// where the tracer looks for it, and writes the span a thread runs, keyed
// as OBI keys it (tgid<<32 | tid).
//
// It needs root (mount, bpf); Linux only. Everything it creates is removed
// by the test's cleanup.
package obitest
