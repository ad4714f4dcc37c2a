package retry_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/tandem-profiler/tandem/internal/retry"
	"github.com/tandem-profiler/tandem/test/waittest"
)

func TestBackoffDoublesToMaxWithinJitter(t *testing.T) {
	p := retry.Policy{Initial: time.Second, Max: 30 * time.Second, Jitter: 0.2}
	b := p.Retrier(nil)
	nominal := []time.Duration{1, 2, 4, 8, 16, 30, 30, 30}
	for round := 0; round < 2; round++ {
		for i, n := range nominal {
			n *= time.Second
			got := b.Next(nil)
			lo, hi := time.Duration(float64(n)*0.8), time.Duration(float64(n)*1.2)+1
			if got < lo || got > hi {
				t.Fatalf("round %d wait %d = %v, want %v..%v", round, i, got, lo, hi)
			}
		}
		b.Reset()
	}
	exact := retry.Policy{Initial: time.Second, Max: 3 * time.Second}.Retrier(nil)
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 3 * time.Second} {
		if got := exact.Next(nil); got != want {
			t.Errorf("no jitter: wait %d = %v, want %v", i, got, want)
		}
	}
}

func TestPolicyValidate(t *testing.T) {
	tests := []struct {
		p    retry.Policy
		want string // "" for valid
	}{
		{retry.Policy{Initial: time.Second, Max: time.Second, Jitter: 0.2}, ""},
		{retry.Policy{Initial: 0, Max: time.Second}, "must be positive"},
		{retry.Policy{Initial: 2 * time.Second, Max: time.Second}, "below the initial"},
		{retry.Policy{Initial: time.Second, Max: time.Second, Jitter: 1}, "jitter"},
		{retry.Policy{Initial: time.Second, Max: time.Second, Jitter: -0.1}, "jitter"},
	}
	for _, tt := range tests {
		err := tt.p.Validate("retry backoff")
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%+v: %v", tt.p, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "retry backoff")):
			t.Errorf("%+v: error %v, want one naming retry backoff and %q", tt.p, err, tt.want)
		}
	}
}

// TestSleepFollowsTheClock: Sleep returns when the fake clock passes the
// wait, not before, and at once when its context ends.
func TestSleepFollowsTheClock(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	done := make(chan error, 1)
	go func() { done <- retry.Sleep(context.Background(), clk, 5*time.Second) }()
	waittest.For(t, "Sleep waiting on the clock", clk.HasWaiters)
	clk.Step(4 * time.Second)
	select {
	case err := <-done:
		t.Fatalf("Sleep returned %v after 4 s of 5", err)
	default:
	}
	clk.Step(time.Second)
	if err := <-done; err != nil {
		t.Fatalf("Sleep = %v", err)
	}

	ctx, cancel := context.WithCancelCause(context.Background())
	stop := errors.New("stopped")
	cancel(stop)
	if err := retry.Sleep(ctx, clk, time.Hour); !errors.Is(err, stop) {
		t.Errorf("Sleep with an ended context = %v, want its cause", err)
	}
}
