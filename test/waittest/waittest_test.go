package waittest

import (
	"fmt"
	"runtime"
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

// fakeT records a failure and ends the goroutine, as t.Fatalf does.
type fakeT struct {
	testing.TB
	failed chan string
}

func (f *fakeT) Helper()                     {}
func (f *fakeT) Deadline() (time.Time, bool) { return time.Time{}, false }
func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed <- fmt.Sprintf(format, args...)
	runtime.Goexit()
}

type gone struct{ why string }

func (g gone) Gone() (string, bool) { return g.why, g.why != "" }

// run runs p.For with a fake test and returns its failure ("" if none).
func run(p Poll, cond func() bool) string {
	f := &fakeT{failed: make(chan string, 1)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.For(f, "the thing", cond)
	}()
	<-done
	select {
	case msg := <-f.failed:
		return msg
	default:
		return ""
	}
}

func TestPoll(t *testing.T) {
	tests := []struct {
		name string
		p    Poll
		cond func() bool
		want string // in the failure; "" for none
	}{
		{name: "holds", p: Poll{Watch: []Watched{gone{}}}, cond: func() bool { return true }},
		{name: "watched is gone", p: Poll{Watch: []Watched{gone{}, gone{"the child exited (exit status 1)"}}, Report: func() string { return "; logs" }},
			cond: func() bool { return false }, want: "the child exited (exit status 1) while the test waited for the thing; logs"},
		{name: "bound", p: Poll{Within: 20 * time.Millisecond, Every: time.Millisecond},
			cond: func() bool { return false }, want: "gave up waiting for the thing after 20ms"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := run(tt.p, tt.cond); got != tt.want {
				t.Errorf("failure %q, want %q", got, tt.want)
			}
		})
	}
}
