package grpcretry

import (
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Retryable reports whether a failed gRPC call may succeed if made again:
// the receiver was unreachable, overloaded, or ran out of time. Everything
// else (invalid data, authentication, unimplemented, errors that are not a
// gRPC status) is permanent.
func Retryable(err error) bool {
	s, ok := status.FromError(err)
	if !ok {
		return false
	}
	switch s.Code() {
	case codes.Unavailable, codes.ResourceExhausted, codes.Aborted, codes.DeadlineExceeded,
		codes.Canceled, codes.OutOfRange, codes.DataLoss:
		return true
	}
	return false
}

// ServerDelay returns the delay a server asked for in a RetryInfo detail,
// or 0.
func ServerDelay(err error) time.Duration {
	s, ok := status.FromError(err)
	if !ok {
		return 0
	}
	for _, d := range s.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay() != nil {
			return ri.GetRetryDelay().AsDuration()
		}
	}
	return 0
}
