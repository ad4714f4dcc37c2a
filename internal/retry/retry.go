package retry

import (
	"context"
	"errors"
	"fmt"
	"time"

	cbackoff "github.com/cenkalti/backoff/v5"
	"k8s.io/utils/clock"
)

// Clock is the time a Policy waits on: clock.RealClock{} in the product,
// k8s.io/utils/clock/testing's FakeClock in tests.
type Clock = clock.WithDelayedExecution

// Policy is how a loop waits between attempts: Initial before the first
// retry, doubling up to Max, each wait jittered by ±Jitter of itself.
type Policy struct {
	Initial, Max time.Duration
	// Jitter is a fraction in [0, 1): 0.2 makes each wait 80% to 120% of
	// the nominal one.
	Jitter float64
	// Clock times the waits; nil is the real clock.
	Clock Clock
}

// Validate reports every problem with the policy; what names it in the
// messages ("retry backoff", "reconnect backoff").
func (p Policy) Validate(what string) error {
	var errs []error
	if p.Initial <= 0 || p.Max <= 0 {
		errs = append(errs, fmt.Errorf("%s %v..%v: must be positive", what, p.Initial, p.Max))
	} else if p.Max < p.Initial {
		errs = append(errs, fmt.Errorf("%s: the max %v is below the initial %v", what, p.Max, p.Initial))
	}
	if p.Jitter < 0 || p.Jitter >= 1 || p.Jitter != p.Jitter {
		errs = append(errs, fmt.Errorf("%s jitter %v: must be in [0, 1)", what, p.Jitter))
	}
	return errors.Join(errs...)
}

// Clk returns the policy's clock: Clock, or the real one.
func (p Policy) Clk() Clock {
	if p.Clock == nil {
		return clock.RealClock{}
	}
	return p.Clock
}

// backoff is one loop's sequence of waits, a Retrier's.
type backoff struct {
	eb cbackoff.ExponentialBackOff
}

// start returns the waits of a new loop, starting at Initial.
func (p Policy) start() *backoff {
	b := &backoff{eb: cbackoff.ExponentialBackOff{
		InitialInterval:     p.Initial,
		RandomizationFactor: p.Jitter,
		Multiplier:          2,
		MaxInterval:         p.Max,
	}}
	b.eb.Reset()
	return b
}

// Next returns the wait before the next attempt and doubles the one after.
func (b *backoff) Next() time.Duration { return b.eb.NextBackOff() }

// Reset starts the sequence again at Initial (after a success).
func (b *backoff) Reset() { b.eb.Reset() }

// Sleep waits d on clk, or until ctx ends (returning its cause).
func Sleep(ctx context.Context, clk clock.Clock, d time.Duration) error {
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
