package waittest

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestForWaitsForTheCondition(t *testing.T) {
	var done atomic.Bool
	go func() {
		time.Sleep(20 * time.Millisecond)
		done.Store(true)
	}()
	calls := 0
	For(t, "the goroutine", func() bool { calls++; return done.Load() })
	if !done.Load() || calls < 2 {
		t.Fatalf("For returned after %d calls, done %v", calls, done.Load())
	}
}
