// Package pprofout writes flushes as pprof profiles: Profile converts an
// encoder.Flush into a github.com/google/pprof/profile.Profile, and Sink
// writes one gzipped profile per flush to
// <dir>/<prefix>-<UTC timestamp>.pb.gz, atomically (a temporary file in the
// same directory, synced, then renamed), readable by `go tool pprof`.
//
// A profile has one sample type per sample type present in the flush, named
// as every Tandem format names them (encoder.SampleTypeOf: samples/count for
// CPU, wallclock/nanoseconds for off-CPU, events/count, unknown_origin_<n>/count); each
// sample carries the aggregated value of its own type and 0 for the others.
// The period is the CPU sampling period when CPU samples are present.
// pprof has no per-sample timestamps: the profile's time and duration are
// the flush interval.
//
// Labels: pid, tid and cpu as numeric labels; comm and thread_name as
// string labels; Go pprof labels as string labels under their own keys.
// Native frames are a location with a mapping (file path, build id: GNU,
// else Go, else the tracer's file id) and an address; symbolized frames
// (kernel, Go, interpreted) add a line naming their function and file.
//
// Profile is pure. A Sink is safe for concurrent use.
package pprofout
