// Package otlp encodes an encoder.Flush as an OTLP/profiles export request
// (pdata pprofile v0.153.0, opentelemetry-proto v1.10.0 on the wire). It is
// pure: no I/O, no clock, no goroutines. Transport is encoder/export's job.
//
// # Shape of a request
//
// One request per flush, with one request-global ProfilesDictionary holding
// only what the flush's samples reference. Every table starts with the
// zero-valued entry the specification (and Parca's validation) requires:
// string 0 is "", mapping 0 is the "no mapping" sentinel (a location's
// mapping_index has no presence flag, so 0 must mean none), and function,
// location, link, attribute and stack 0 are zero values.
//
// The link table is the flush's (encoder.Flush.Links): after the zero link,
// each distinct trace id and span id pair once, in the order the flush's
// samples first named them, and a linked sample's link_index names its own
// (0: no span was running). Samples of different spans are different
// samples; none is dropped for its link.
//
// Dictionary and sample order is chosen for size after gzip (the order
// itself is described at Encoder.Encode) and is deterministic for a given
// Flush; what a receiver resolves does not depend on it
// (TestDecodedUnchanged).
//
// One ResourceProfiles per process, with one ScopeProfiles (Config.ScopeName
// and ScopeVersion), holding one Profile per sample type: a Profile carries a
// single sample_type, so samples are partitioned by (sample type, unit,
// period type, period). Sample types come from SampleTypeOf:
//
//	CPU sampling  samples/count        period cpu/nanoseconds = 1e9/Hz
//	off-CPU       off_cpu/nanoseconds  period samples/count 0
//	probe         events/count         period events/count 1
//	other origin  unknown_origin_<n>/count, period the same, 1, so nothing is dropped
//
// Off-CPU is named off_cpu here, as the OpenTelemetry eBPF profiler names
// it: Pyroscope takes per-timestamp values for off_cpu only. The Arrow
// formats and pprof files keep Parca's wallclock (encoder.SampleTypeOf).
// Every profile has a name for receivers that name profiles by their type:
// Pyroscope names a profile other than CPU samples and off-CPU time after
// its period type, which it reads only when the period is not 0, so a
// type without a natural period counts one event per sample (period 1 of
// the sample type itself). A profile without a name is refused by receivers
// that name profiles by it. OTLP has no aggregation-temporality field: every
// profile is a delta over [time_unix_nano, time_unix_nano + duration_nano],
// the flush interval, which contains every sample timestamp.
//
// Samples carry one timestamp per observation. Values are omitted when the
// unit is count and every value is 1 (consumers then count timestamps);
// otherwise there is one value per timestamp.
//
// # Attributes
//
// Resource (per process):
//
//	service.name                          APM service name, else (in a Kubernetes
//	                                      pod) app.kubernetes.io/name, the
//	                                      workload's name or the container's name,
//	                                      else comm, else the executable's basename, else
//	                                      "unknown_service:pid-<pid>" (never empty,
//	                                      never a hash; see encoder.ServiceName)
//	process.pid                           int
//	process.executable.name               basename of the executable path
//	process.executable.path
//	container.id                          when the process runs in a container
//	host.name                             the sampler's node name (Hello)
//	systemd.unit                          Tandem-defined (no semantic convention)
//	process.environment_variable.<NAME>   each requested environment variable
//	k8s.namespace.name, k8s.pod.name,     in a Kubernetes pod (encoder/kube):
//	k8s.pod.uid, k8s.container.name,      the pod, its container, and its
//	k8s.node.name, k8s.replicaset.name,   workload as far as it applies
//	k8s.deployment.name, k8s.statefulset.name, k8s.daemonset.name,
//	k8s.job.name, k8s.cronjob.name,
//	container.image.name, container.image.tags (string array),
//	k8s.pod.label.<key> (only when asked for)
//
// Sample: thread.id (int), thread.name, cpu.logical_number (int), and
// process.context.label.<key> for each Go pprof label (as the upstream
// tracer names them). Location: profile.frame.type (cpython, native,
// kernel, go, ..., abort-marker). Mapping: process.executable.build_id.gnu,
// process.executable.build_id.go and process.executable.build_id.htlhash
// (the tracer's file id, 32 hex digits); with Config.FileIDAsGNUBuildID,
// executables without a GNU build id carry the file id in .gnu too: .gnu
// holds the executable key (schema.KeyOf) their symbols were uploaded
// under (Parca reads no other).
//
// Frames: native frames have an address and a mapping; symbolized frames
// (kernel, Go, interpreted) add a Line naming a Function (name and file) with
// the line and column the tracer resolved. Interpreted frames have no
// mapping.
//
// # Reuse
//
// An Encoder keeps scratch state and, when the caller hands requests back
// with Release, reuses their pdata objects: the next Encode overwrites them
// in place, so a steady workload encodes with almost no allocation. A
// request must not be used after Release. Encode must not be called
// concurrently with itself; Release may be called from any goroutine.
package otlp
