// Package export sends profiles to a remote store over gRPC: OTLP/profiles
// export requests (Parca, an OpenTelemetry collector, or any OTLP-profiles
// receiver) and Parca's ProfileStoreService Arrow writes (ExportArrowV2:
// WriteArrow payloads; ExportArrowV1: Write exchanges, the sample record,
// the server's request for stacktrace ids, the locations record, then a
// drain to EOF). All three share one connection, so they share its TLS,
// auth, headers, retry and metrics. It is transport only; encoding is
// encoder/otlp's and encoder/arrow's job.
//
// Config mirrors parca-agent's --remote-store-* flags so manifests carry
// over. Dial builds the connection (TLS 1.3 minimum unless Insecure, mTLS,
// bearer token, extra metadata headers, message size limits, a byte-counting
// stats handler); callers dial only when Config.Address is set. The
// connection can be shared, for example with the debuginfo uploader.
//
// # Delivery
//
// Exporter.Export sends one request synchronously. It retries retryable
// failures (Retryable: Unavailable, ResourceExhausted, Aborted,
// DeadlineExceeded, Canceled, OutOfRange, DataLoss) with exponential backoff
// and jitter, honouring a server's RetryInfo delay, until the request
// succeeds, fails permanently, or Config.RPCTimeout (or the caller's
// context) runs out. A nil error means the receiver accepted the request, so
// the caller may acknowledge the data in it; a partial success (profiles the
// receiver rejected as invalid) is counted and logged but returns nil,
// because resending would be rejected again.
//
// Exporter.Submit puts a request on a bounded queue served by one worker
// goroutine, in order, and calls the completion callback with Export's
// result. When the queue is full Submit drops the request and returns
// ErrQueueFull (counted, logged); the callback is not called for a request
// Submit refused. Close stops accepting, drains the queue within the
// context's deadline, then cancels what is left, whose callbacks get the
// context's error.
//
// # Compression
//
// Config.Compression is "gzip" or "none", for OTLP only: the Arrow paths
// compress inside their IPC payload (v2: LZ4_FRAME). gzip runs at level 1 once
// RegisterGzipLevel1 has been called: level 1 runs at 192 MB/s against
// level 6's 108 MB/s for 6.6% of the ratio, and the CPU is spent on a node
// being profiled. grpc-go keeps one process-wide gzip compressor, so the
// level is set once at start-up by an explicit call from main, never as a
// side effect of dialing. "none" suits a collector on loopback.
//
// # Concurrency
//
// An Exporter is safe for concurrent use. Metrics go to the Registerer given
// to New and Dial (nil disables them).
package export
