// Package output is the encoder's delivery seam: the Outputs, one per
// backend (OTLP/profiles, Parca Arrow v2 or v1, pprof files), each with its
// own queue, retries and metrics, to which encoder/pipeline hands every
// flush, and their configuration (Config, Settings, the outputs file).
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
// whether its backend takes symbol uploads and its constructor.
// Validation, Open, the outputs file and the encoder's flags read it;
// adding a format is adding a row (and its Format).
//
// # Settings
//
// Config's field tags describe each setting once: its key in an outputs
// entry, its flag, the transport it applies to, its help. Settings lists
// them; the outputs file (decoded strictly), the command's flags and the
// configuration reference are derived from it.
//
// # Concurrency and lifecycle
//
// An Output's Submit is called from one goroutine at a time (the
// pipeline's flush); its Exporter sends on its own worker. Close drains
// the output, bounded by its context.
package output
