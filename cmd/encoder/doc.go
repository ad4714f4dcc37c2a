// Command tandem-encoder is Tandem's unprivileged half. It receives the
// sampler's stream on a Unix socket (serve) or reads recorded dumps (replay),
// aggregates samples for each --profiling-duration, and exports them as
// OTLP/profiles over gRPC or writes them as gzipped pprof files. It also
// writes deterministic synthetic streams (synth) for tests and benchmarks.
// With --otlp-logging its own logs also go to the remote store over
// OTLP/logs (encoder/selflog); without it no log SDK is built.
//
// It needs no privileges and no capabilities.
package main
