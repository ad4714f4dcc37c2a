// Package arrow encodes an encoder.Flush as the Arrow records Parca's
// ProfileStoreService takes from parca-agent (docs/parca-protocols.md §3),
// with github.com/apache/arrow-go/v18 builders and a caller-supplied
// memory.Allocator. It is pure: no I/O, no clock, no goroutines; transport
// is encoder/export's job.
//
//   - V2Encoder: the self-contained v2 sample record for WriteArrow (schema
//     metadata parca_write_schema_version=v2, 13 columns: labels struct of
//     REE<Int32, Dictionary<Uint32, Utf8>>, the stack inline as
//     ListView<Dictionary<Uint32, Struct location>>, stacktrace_id as
//     arrow.uuid, REE<Int32, Utf8> scalars, Timestamp(ns, UTC)), LZ4_FRAME
//     IPC body compression.
//   - V1Encoder: the v1 sample record (labels.<name> columns, REE of
//     Dictionary<Uint32, Binary>) for the first message of the Write stream,
//     and the locations record answering the server's list of stacktrace
//     ids; no IPC compression.
//
// One row per observation (the Flush keeps each event's timestamp and
// value). Frames follow the reference's per-frame-type conventions (§3.6):
// native frames carry the mapping's base name and executable key
// (schema.KeyOf, the key symbols are uploaded under) and no lines, for the
// server to symbolize, unless the encoder named them (--symbolize-native=on:
// the output's Transform sets Location.Function, the outermost function,
// and Line), when they carry that one line;
// kernel frames map to [kernel.kallsyms]; interpreted frames carry their
// function and file (UNREPORTED/UNKNOWN when missing); the unwinder's
// abort marker is agent-internal-error-frame.
//
// Stacktrace ids are Tandem's own: the first 128 bits of SHA-256 over the
// full content of every frame (kind, error bit, address, mapping with its
// build ids and file id, function, file, line, column), cached per
// dictionary Generation; never a tracer hash, which merges different
// interpreted stacks.
//
// Sample types come from encoder.SampleTypeOf (off-CPU is
// wallclock/nanoseconds in every format); the producer column (Parca's
// profile name) is parca_agent by default, temporality delta, duration
// 1e9 ns, as parca-agent writes them. v1 gives off-CPU the CPU sampling
// period, v2 gives it 0, as parca-agent does.
//
// Labels come from a Labeler, called once per aggregated sample:
// encoder/labels' Labeler, parca-agent's label pipeline, which is also the
// default when none is given (parca-agent's default set: node, comm, cpu,
// thread_id, thread_name, custom labels). A sample the Labeler drops is not
// encoded.
//
// Trace links (encoder.Flush.Links) are left out, on purpose, in both
// versions: parca-agent, on the same tracer, drops the trace and span ids
// the tracer reports, and Parca's Arrow schema has no place for them but a
// label. A label would be a labels.<name> column whose dictionary gets a
// new entry for nearly every sample (a span lasts milliseconds) and, on the
// server, a new series per span. The samples themselves are all written:
// two samples that differ only in their link are two rows with the same
// labels, which Parca sums. OTLP (link table) and pprof files (trace_id,
// span_id labels) carry the links.
//
// A flush whose record would exceed Config.MaxMessageBytes is split into
// several records (halving the set of samples until each fits).
//
// Encoders are not safe for concurrent use. Every Arrow buffer is released
// before Encode returns; Close releases the builders, after which a checked
// allocator is back to zero bytes. With a nil allocator an encoder keeps its
// own pool (at most 64 MiB of free buffers), so a steady workload reuses the
// same buffers flush after flush instead of leaving them to the garbage
// collector.
package arrow
