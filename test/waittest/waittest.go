package waittest

import (
	"testing"
	"time"
)

const (
	// Bound is the longest For waits.
	Bound = time.Minute
	// margin is left before the test binary's deadline (-timeout), so
	// that a wait that gives up is reported as a failure of its test
	// rather than the binary being killed.
	margin = 5 * time.Second
	poll   = 5 * time.Millisecond
)

// For polls cond every few milliseconds until it holds. It fails t, naming
// what it waited for, after Bound or shortly before the test binary's
// deadline, whichever comes first.
func For(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Bound)
	if d, ok := t.Deadline(); ok && d.Add(-margin).Before(deadline) {
		deadline = d.Add(-margin)
	}
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(poll)
	}
}
