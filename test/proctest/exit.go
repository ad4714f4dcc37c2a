package proctest

import (
	"context"
	"errors"
)

// ErrExited is the cause of a context from WithExit cancelled because the
// process exited.
var ErrExited = errors.New("the process under test exited")

// WithExit returns a copy of parent that is cancelled, with cause
// ErrExited, as soon as exited is closed (pass the channel closed when the
// process or its execute function returns). A test waiting with it for
// something from the process (a connection, a frame) stops waiting when
// the process is gone instead of running out its timeout.
func WithExit(parent context.Context, exited <-chan struct{}) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	go func() {
		select {
		case <-exited:
			cancel(ErrExited)
		case <-ctx.Done():
		}
	}()
	return ctx, func() { cancel(context.Canceled) }
}
