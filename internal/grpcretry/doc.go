// Package grpcretry classifies gRPC failures for retry loops: which status
// codes may succeed if the call is made again (Retryable), and how long a
// server asked the client to wait (ServerDelay, for retry.Retrier). It
// knows gRPC only; errors of other kinds are marked with retry.Transient.
// The export loop and the debuginfo uploader both decide with it; the
// waits are internal/retry's.
package grpcretry
