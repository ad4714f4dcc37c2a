// Command tandem-encoder is Tandem's unprivileged half. It receives the
// sampler's stream on a Unix socket (serve) or reads recorded dumps
// (replay), aggregates samples for each --profiling-duration, and exports
// them through encoder/pipeline to one output or several at once (the outputs
// of --config-path): OTLP/profiles over gRPC, Parca's Arrow v2 (WriteArrow)
// or v1 (Write) records to a Parca server, gzipped pprof files (the default
// when no remote store is set). replay exits 3 when any sample was lost. It
// uploads the executables the sampler passes over to a Parca
// DebuginfoService (debuginfo), and names their native frames itself for the
// OTLP and pprof outputs (--symbolize-native, encoder/symbolize; a replay
// reads the executables by path where their file ids still match). It also
// writes deterministic synthetic streams (synth) for tests and benchmarks,
// and serves pprof's web UI on loopback for pprof files, directories of them
// and dumps (view: the github.com/google/pprof driver as a library, so a
// node needs no Go toolchain to look at a profile; a build with -tags
// noview, as the container image's, leaves view out: html/template disables
// the linker's dead-code elimination of methods). With --otlp-logging its
// own logs also go to the remote store over OTLP/logs (encoder/selflog);
// without it no log SDK is built.
//
// It needs no privileges and no capabilities.
package main
