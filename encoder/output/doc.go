// Package output is the encoder's delivery seam: the Pipeline that turns
// the samplers' stream into flushes and hands each flush to every Output,
// and the Outputs themselves, one per backend (OTLP/profiles, Parca Arrow
// v2 or v1, pprof files), each with its own queue, retries and metrics.
//
// # Outputs
//
// An Output is a Format (flush in, export.Request out), an optional
// Transform (a per-output rewrite of the flush before it is encoded, such as
// symbolizing native frames) and an export.Exporter (queue, retry, timeout
// and metrics over the one export.Request type). One Aggregator feeds every
// output; each encodes on the flush goroutine and sends on its own worker,
// so a slow or dead backend holds up nobody else while its queue has room.
// Past its bounds it gives up its oldest flush, except under
// export.QueueConfig.Backpressure (replay), where a full queue makes the
// flush wait, and with it every output. Config describes one output as
// plain data; Open builds it.
//
// # Formats
//
// Formats is the one table of what differs by format: its name, whether it
// is remote, its transport, whether it wants natively symbolized frames,
// whether its backend takes symbol uploads, its keys in an outputs file and
// its constructor. Validation, Open, the outputs file and the encoder's
// flags read it; adding a format is adding a row (and its Format).
//
// # Acknowledgement
//
// A sampler sequence is acknowledged only once every output has delivered,
// or given up and counted, every flush holding data up to it: flushes form
// a line, and the acknowledgement moves past a flush when the last output is
// done with it and every earlier flush is done too. A later success never
// acknowledges an earlier failure. A failed flush is retried (export's one
// retry policy) until it is delivered, refused permanently, or pushed out of
// its output's queue by the byte and count bounds (export.QueueConfig);
// then its samples are counted in tandem_encoder_lost_samples_total by
// output and reason, and the acknowledgement moves on, so a dead backend
// never holds the sampler forever. For every output, the samples produced
// equal the samples delivered plus the samples counted lost (Summary).
// Flushes given up at shutdown (ReasonShutdown) stop acknowledgement: the
// sampler keeps them and resends them to the next encoder.
//
// # Concurrency and lifecycle
//
// A Pipeline is safe for concurrent use: the tracker serializes the Sink
// calls, and Flush may run beside them. Close drains every output, bounded by
// its context, and closes the outputs; the Pipeline must not be used after.
package output
