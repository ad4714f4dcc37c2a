// Package encoder aggregates the sampler's stream into flush intervals.
//
// An Aggregator consumes decoded batches (*schema.Batch) together with the
// Hello of the session that sent them, and collects their samples until
// Flush. Flush returns a *Flush: an immutable, format-neutral snapshot that
// the format encoders turn into wire formats (encoder/otlp for
// OTLP/profiles, encoder/pprofout for pprof files, encoder/arrow for Parca's Arrow
// records). Delivery lives apart, in encoder/pipeline, encoder/output and encoder/export.
//
// # Dictionaries
//
// The Aggregator owns long-lived dictionaries of strings, mappings,
// functions, locations, stacks, label sets and resources (processes), keyed
// by content and never by a tracer hash. Batch-local tables are translated to
// dictionary ids once per batch; stacks and processes the dictionaries
// already hold are found through caches whose guesses are verified by
// comparing content, so a known frame costs a comparison rather than map
// lookups. A layout-2 batch (protocol 1.4) refers to its connection's
// dictionary instead, whose ids keep their meaning from batch to batch:
// the Aggregator translates each id once and keeps the translation
// (streamdict.go), so a known stack costs one array load. Per sample, what
// remains is one lookup of its aggregation key
// (in an open-addressing table of the interval's rows) and one append (its
// timestamp and value).
// Ids are stable for a dictionary Generation. At most once per flush,
// entries no sample has used for Config.DictionaryTTL flushes are pruned by
// rebuilding the dictionaries, which starts a new Generation; a Flush keeps
// the tables it was cut from, so pruning never changes a snapshot.
//
// With Config.Symbolizer set, each native location the sampler left
// unnamed is resolved once, at the first Flush after it entered the
// dictionary (again, once, after a rebuild), and Flush.NativeLines gives its
// lines; the OTLP and pprof encoders write them, the Arrow ones leave native
// frames to the server. Nothing is resolved per sample. A location whose
// executable the Symbolizer did not have yet is resolved again at the
// first Flush after NoteExecutable hears of that executable (late.go,
// bounded); a Flush already taken keeps its lines.
//
// # Processes
//
// A Resource is one process's identity. ProcessFields describes each of
// its fields once: where its value comes from and the names it is written
// under (OpenTelemetry attribute, pprof label, Parca label, __meta_* label
// for relabelling). The resource ids, compaction, encoder/labels and
// encoder/otlp read that table; the fast path that recognizes a known
// process names the fields one by one, for speed, and a test fails when it
// misses one (TestFastPathSeesEveryField).
// With Config.Workloads set, the Kubernetes workload of each container the
// interval saw is looked up once, when the Flush is taken (Flush.Workload):
// every encoding of a flush, an export retry's included, says the same.
//
// Index 0 conventions of the Flush tables: Strings[0] is "", Mappings[0] is
// the zero "no mapping" entry, Functions[0] is the zero "no function" entry,
// Locations[0] is a zero entry no sample references, stack 0 is the empty
// stack and label set 0 is the empty set. Resources have no sentinel.
//
// # Samples
//
// Samples aggregate by (stack, resource, origin, sampling frequency, thread
// id, thread name, CPU, label set, trace link). Trace links (the trace and
// span id the sampler found for a sample, protocol 1.5) get a per-flush
// table, Flush.Links, bounded by Config.MaxLinksPerFlush: past it a sample
// keeps everything but its link, counted. Each aggregated Sample keeps one
// timestamp and one value per observation, in arrival order, so encoders can
// emit per-event timestamps.
//
// # Acknowledgements
//
// A Flush does not decide what is acknowledged to the samplers, nor say
// which sessions its batches came from: the sequences to acknowledge come
// from the ingest tracker's cut taken under the same lock as the flush, and encoder/pipeline's
// Pipeline acknowledges them once every output is done with this flush and
// every earlier one (so a later success never acknowledges an earlier
// failure).
//
// # Concurrency and lifecycle
//
// Aggregator methods are safe for concurrent use; Add and Flush serialize
// on one mutex. A Flush is immutable and safe for concurrent readers. Passing
// it to Aggregator.Release when every reader is done lets the Aggregator
// reuse its sample memory; Release is optional, and a released Flush must
// not be used again. Errors from Add wrap ErrInvalidBatch.
package aggregate
