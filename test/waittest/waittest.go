package waittest

import (
	"testing"
	"time"
)

const (
	// Bound is the longest For waits, and a Poll without Within.
	Bound = time.Minute
	// margin is left before the test binary's deadline (-timeout), so
	// that a wait that gives up is reported as a failure of its test
	// rather than the binary being killed.
	margin = 5 * time.Second
	poll   = 5 * time.Millisecond
)

// Watched is something that must stay up while a test waits (a child
// process, a container).
type Watched interface {
	// Gone reports whether it has exited and, if so, why: its exit
	// status and last output, for the failure report.
	Gone() (why string, gone bool)
}

// Poll is how one wait polls. The zero Poll is For's: every few
// milliseconds for at most Bound, watching nothing.
type Poll struct {
	// Within bounds the wait (0: Bound). It is cut to end shortly before
	// the test binary's deadline.
	Within time.Duration
	// Every is the time between two calls of the condition (0: 5 ms);
	// lengthen it when the condition costs (an HTTP request, a podman
	// call) or the process measured shares the CPU.
	Every time.Duration
	// Watch fails the wait as soon as one of these is gone.
	Watch []Watched
	// Report, if set, adds detail (logs) to a failure.
	Report func() string
}

// For polls cond until it holds. It fails t, naming what it waited for,
// once p.Within has passed (or shortly before the test binary's
// deadline), or as soon as something p watches is gone.
func (p Poll) For(t testing.TB, what string, cond func() bool) {
	t.Helper()
	within, every := p.Within, p.Every
	if within <= 0 {
		within = Bound
	}
	if every <= 0 {
		every = poll
	}
	deadline := time.Now().Add(within)
	// *testing.T has a deadline; a benchmark's *testing.B has none.
	if dt, ok := t.(interface{ Deadline() (time.Time, bool) }); ok {
		if d, ok := dt.Deadline(); ok && d.Add(-margin).Before(deadline) {
			deadline = d.Add(-margin)
		}
	}
	report := func() string {
		if p.Report == nil {
			return ""
		}
		return p.Report()
	}
	for {
		for _, w := range p.Watch {
			if why, gone := w.Gone(); gone {
				t.Fatalf("%s while the test waited for %s%s", why, what, report())
			}
		}
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s after %v%s", what, within, report())
		}
		time.Sleep(every)
	}
}

// For polls cond every few milliseconds until it holds. It fails t, naming
// what it waited for, after Bound or shortly before the test binary's
// deadline, whichever comes first.
func For(t testing.TB, what string, cond func() bool) {
	t.Helper()
	Poll{}.For(t, what, cond)
}
