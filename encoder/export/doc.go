// Package export delivers encoded flushes: the transport to a remote store
// over gRPC (Client: single attempts at OTLP/profiles Export, Parca's
// WriteArrow, and Parca's Write exchange, the sample record, the server's
// request for stacktrace ids, the locations record, then a drain to EOF) and
// the delivery policy every output shares (Exporter: queue, retry, timeout
// and metrics as layers over one Request type, the model being the
// OpenTelemetry Collector's exporterhelper). Encoding is encoder/otlp's,
// encoder/arrow's and encoder/pprofout's job; encoder/output puts the two
// together.
//
// Config is the connection alone and mirrors parca-agent's
// --remote-store-* connection flags so manifests carry over; what is sent
// (the format) is encoder/output's, how it is queued and retried is
// QueueConfig. Dial builds the connection (TLS 1.3 minimum unless Insecure, mTLS,
// bearer token, extra metadata headers, message size limits, a byte-counting
// stats handler); callers dial only when Config.Address is set. The
// connection can be shared, for example with the debuginfo uploader.
//
// # Delivery
//
// A Request is a flush as parts (one RPC or file each), sent in order; the
// Exporter makes attempts at each part under QueueConfig.RPCTimeout and
// retries retryable failures (Retryable: Unavailable, ResourceExhausted,
// Aborted, DeadlineExceeded, Canceled, OutOfRange, DataLoss, or errors marked
// Transient: internal/grpcretry, the one classification) with
// internal/retry's backoff (1 s doubling to 30 s, ±20% jitter, on an
// injectable clock), honouring a server's RetryInfo delay. GiveUpAfter is a
// deadline from the start of the output's first failed attempt: no wait or
// retry runs past it. A part is retried until it
// succeeds, fails permanently (ReasonRejected), the output has been failing
// for GiveUpAfter when that is set (ReasonUnavailable), its flush is pushed
// out of the queue (ReasonQueueFull), or the Exporter closes
// (ReasonShutdown). A part the receiver answered in part (the Request's
// Outcome) is never resent: samples it refused count as rejected, samples
// it may have stored before refusing the request count as unconfirmed
// (ReasonUnconfirmed), and the rest as delivered, so no sample reaches a
// receiver twice. The Result says, in samples, what was
// delivered and what was lost why; nothing else is counted, so a full queue
// is counted once.
//
// Submit queues a Request and never blocks: past QueueSize flushes or
// QueueBytes bytes held (queued or in flight), the oldest is given up, the
// one in flight included, though only between attempts: an attempt the
// receiver may already have taken never counts lost. With Backpressure
// (replay) it waits for room instead. Close stops accepting, drains the
// queue within the context's deadline, then gives up what is left.
//
// The first failed attempt of a streak is logged at once with its cause and
// a Hint (plaintext server while TLS is on, not a gRPC server, connection
// refused, DNS, certificate, authentication); later ones at most once a
// minute; the recovery once. Failing reports the streak for readiness.
//
// # Compression
//
// Config.Compression is "gzip" or "none", for OTLP only: the Arrow paths
// compress inside their IPC payload (v2: LZ4_FRAME). gzip runs at level 1
// once RegisterGzip has been called, unless SetGzipLevel chose another: level
// 1 is the cheapest, and the CPU is spent on a node being profiled; level 5
// makes OTLP requests about 12% smaller for 2.4-2.7 times the compression
// instructions (docs/benchmarks/encoding.md). grpc-go keeps one process-wide gzip
// compressor, so the compressor is registered once at start-up by an
// explicit call from main, never as a side effect of dialing, and the level
// is one per process. "none" suits a collector on loopback. zstd is not
// offered: receivers other than the collector do not register it, and at the
// CPU of gzip level 5 it compresses less (docs/benchmarks/encoding.md).
//
// # Concurrency
//
// Client and Exporter are safe for concurrent use. An Exporter calls a
// Request only from its worker goroutine. Metrics go to the Registerer given
// to New (labelled output=<name>) and Dial (nil disables them).
package export
