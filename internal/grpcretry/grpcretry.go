package grpcretry

import (
	"errors"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Retryable reports whether a failed attempt may succeed if made again: the
// receiver was unreachable, overloaded, or ran out of time, or the error
// was marked with Transient. Everything else (invalid data,
// authentication, unimplemented, other errors) is permanent.
func Retryable(err error) bool {
	if errors.Is(err, errTransient) {
		return true
	}
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

var errTransient = errors.New("transient")

// Transient marks err as retryable (for outputs that are not gRPC, such as
// a directory that may become writable).
func Transient(err error) error { return transientError{err} }

type transientError struct{ error }

func (e transientError) Unwrap() []error { return []error{e.error, errTransient} }

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
