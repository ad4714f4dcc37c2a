// Package grpcretry is Tandem's one retry classification: which failed
// attempts (gRPC status codes, or errors marked Transient) may succeed if
// made again, and how long a server asked the client to wait. The export
// loop and the debuginfo uploader both decide with it; the waits are
// internal/retry's.
package grpcretry
