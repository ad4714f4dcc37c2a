package retry

import (
	"context"
	"errors"
	"time"
)

// Retrier is one retry loop's waits: the policy's backoff, lengthened to
// what a failed attempt asks for (a server's requested delay, gRPC's
// RetryInfo). Every loop that retries waits through one, so a server's
// request is honoured everywhere it can be made. Not safe for concurrent
// use: each loop owns its own.
type Retrier struct {
	backoff *backoff
	clk     Clock
	delay   func(error) time.Duration
}

// Retrier starts a loop's waits. delay returns the least wait a failed
// attempt asks for (0: none), as grpcretry.ServerDelay does; nil for a
// loop whose peer cannot ask (a Unix socket).
func (p Policy) Retrier(delay func(error) time.Duration) *Retrier {
	return &Retrier{backoff: p.start(), clk: p.Clk(), delay: delay}
}

// Next returns the wait after an attempt that failed with err: the
// backoff's next wait, or the delay err asks for when that is longer.
func (r *Retrier) Next(err error) time.Duration {
	d := r.backoff.Next()
	if r.delay != nil && err != nil {
		d = max(d, r.delay(err))
	}
	return d
}

// Wait waits Next(err) on the policy's clock, or until ctx ends
// (returning its cause).
func (r *Retrier) Wait(ctx context.Context, err error) error {
	return Sleep(ctx, r.clk, r.Next(err))
}

// Reset starts the waits again at the policy's Initial (after a success).
func (r *Retrier) Reset() { r.backoff.Reset() }

// Clock is the clock the waits are measured on.
func (r *Retrier) Clock() Clock { return r.clk }

// Do calls attempt until it succeeds, fails with an error retryable
// refuses, maxAttempts attempts were made (0: no bound) or ctx ends while
// waiting, and returns the last attempt's error. It waits through r
// between attempts.
func Do(ctx context.Context, r *Retrier, maxAttempts int, retryable func(error) bool, attempt func(context.Context) error) error {
	for n := 1; ; n++ {
		err := attempt(ctx)
		if err == nil || (maxAttempts > 0 && n >= maxAttempts) || !retryable(err) {
			return err
		}
		if r.Wait(ctx, err) != nil {
			return err
		}
	}
}

var errTransient = errors.New("transient")

// Transient marks err as worth retrying whatever its kind: a failure that
// is not an RPC's (a directory that may become writable) but may pass.
func Transient(err error) error { return transientError{err} }

// IsTransient reports whether err was marked with Transient.
func IsTransient(err error) bool { return errors.Is(err, errTransient) }

type transientError struct{ error }

func (e transientError) Unwrap() []error { return []error{e.error, errTransient} }
