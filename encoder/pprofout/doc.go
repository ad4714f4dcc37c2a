// Package pprofout writes flushes as pprof profiles: Profile converts an
// encoder.Flush into a github.com/google/pprof/profile.Profile, and Sink
// writes one gzipped profile per flush to
// <dir>/<prefix>-<UTC timestamp>.pb.gz, atomically (a temporary file in the
// same directory, synced, then renamed), readable by `go tool pprof`.
//
// A profile has one sample type per sample type present in the flush, named
// as every Tandem format names them (encoder.SampleTypeOf: samples/count for
// CPU, wallclock/nanoseconds for off-CPU, events/count,
// unknown_origin_<n>/count); each sample carries the aggregated value of its
// own type and 0 for the others. The period is the CPU sampling period when
// CPU samples are present. pprof has no per-sample timestamps: the profile's
// time and duration are the flush interval.
//
// Labels: pid, tid and cpu as numeric labels (unit "id", so that a value
// of 0 survives pprof's decoder); comm, thread_name and every process label
// the encoder holds (encoder.Flush.ProcessLabels: executable, container_id,
// systemd_unit, service_name, node, env_<NAME>, a known pod's namespace,
// pod, container and container_image, and whatever identity is added
// there) as string labels; Go pprof labels as string labels under
// their own keys. Native frames are a location with a mapping (the
// executable's full path when the stream or its executable notice gave
// it, else its base name; build id: the executable key, schema.KeyOf, as
// uploaded to Parca) and an address; symbolized frames (kernel, Go, interpreted) add a
// line naming their function and file. Function names are written as
// resolved; only names that look mangled get a system name, so pprof
// demangles those and shows every other name (Python's <module>, say)
// unchanged.
//
// Profile is pure. A Sink is safe for concurrent use.
package pprofout
