package grpcretry_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/tandem-profiler/tandem/internal/grpcretry"
)

func TestRetryable(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{status.Error(codes.Unavailable, "down"), true},
		{status.Error(codes.ResourceExhausted, "slow down"), true},
		{status.Error(codes.Aborted, ""), true},
		{status.Error(codes.DeadlineExceeded, ""), true},
		{status.Error(codes.Canceled, ""), true},
		{status.Error(codes.OutOfRange, ""), true},
		{status.Error(codes.DataLoss, ""), true},
		{fmt.Errorf("wrapped: %w", status.Error(codes.Unavailable, "")), true},
		{status.Error(codes.InvalidArgument, "bad"), false},
		{status.Error(codes.Unauthenticated, ""), false},
		{status.Error(codes.PermissionDenied, ""), false},
		{status.Error(codes.Unimplemented, ""), false},
		{status.Error(codes.Internal, ""), false},
		{status.Error(codes.FailedPrecondition, ""), false},
		{status.Error(codes.NotFound, ""), false},
		{status.Error(codes.Unknown, ""), false},
		{errors.New("not a status"), false},
		{nil, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.err), func(t *testing.T) {
			if got := grpcretry.Retryable(tt.err); got != tt.want {
				t.Errorf("Retryable(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

func TestServerDelay(t *testing.T) {
	s, err := status.New(codes.ResourceExhausted, "slow down").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(3 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if d := grpcretry.ServerDelay(fmt.Errorf("export: %w", s.Err())); d != 3*time.Second {
		t.Errorf("ServerDelay = %v, want the RetryInfo's 3s", d)
	}
	if d := grpcretry.ServerDelay(status.Error(codes.Unavailable, "")); d != 0 {
		t.Errorf("ServerDelay without RetryInfo = %v, want 0", d)
	}
}
