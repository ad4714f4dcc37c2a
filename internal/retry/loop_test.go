package retry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/tandem-profiler/tandem/internal/retry"
	"github.com/tandem-profiler/tandem/test/waittest"
)

var errAsksMinute = errors.New("asks for a minute")

func askedDelay(err error) time.Duration {
	if errors.Is(err, errAsksMinute) {
		return time.Minute
	}
	return 0
}

// TestRetrierHonoursRequestedDelay: a failure that asks for a longer wait
// than the backoff's gets it; one that asks for nothing, or a shorter one,
// waits the backoff's.
func TestRetrierHonoursRequestedDelay(t *testing.T) {
	p := retry.Policy{Initial: time.Second, Max: 4 * time.Second}
	r := p.Retrier(askedDelay)
	for i, tc := range []struct {
		err  error
		want time.Duration
	}{
		{errors.New("plain"), time.Second},
		{errAsksMinute, time.Minute},
		{errors.New("plain"), 4 * time.Second},
	} {
		if got := r.Next(tc.err); got != tc.want {
			t.Errorf("wait %d after %v = %v, want %v", i, tc.err, got, tc.want)
		}
	}
	r.Reset()
	if got := p.Retrier(nil).Next(errAsksMinute); got != time.Second {
		t.Errorf("without a delay function: %v, want the backoff's 1s", got)
	}
}

// TestDo: Do retries what retryable allows, up to maxAttempts, waiting on
// the policy's clock (a requested delay included), and stops at once at a
// permanent error.
func TestDo(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	p := retry.Policy{Initial: time.Second, Max: time.Second, Clock: clk}
	permanent := errors.New("permanent")
	retryable := func(err error) bool { return !errors.Is(err, permanent) }

	calls := 0
	done := make(chan error, 1)
	go func() {
		done <- retry.Do(context.Background(), p.Retrier(askedDelay), 3, retryable, func(context.Context) error {
			calls++
			return errAsksMinute
		})
	}()
	waittest.For(t, "the first wait", clk.HasWaiters)
	clk.Step(59 * time.Second)
	select {
	case err := <-done:
		t.Fatalf("Do returned %v before the requested minute", err)
	default:
	}
	clk.Step(time.Second)
	waittest.For(t, "the second wait", clk.HasWaiters)
	clk.Step(time.Minute)
	if err := <-done; !errors.Is(err, errAsksMinute) || calls != 3 {
		t.Errorf("Do = %v after %d calls, want the last error after 3", err, calls)
	}

	calls = 0
	err := retry.Do(context.Background(), p.Retrier(nil), 0, retryable, func(context.Context) error {
		calls++
		return permanent
	})
	if !errors.Is(err, permanent) || calls != 1 {
		t.Errorf("a permanent error: %v after %d calls, want it after 1", err, calls)
	}
}

func TestTransient(t *testing.T) {
	base := errors.New("directory not writable")
	err := retry.Transient(base)
	if !retry.IsTransient(err) || !errors.Is(err, base) {
		t.Errorf("Transient(%v): transient %v, wraps the error %v", base, retry.IsTransient(err), errors.Is(err, base))
	}
	if retry.IsTransient(base) {
		t.Error("an unmarked error is transient")
	}
}
