package proctest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

func TestOutputConcurrentWritesAndTail(t *testing.T) {
	var o Output
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				fmt.Fprintf(&o, "writer %d line %d\n", w, i)
				_ = o.String()
			}
		}()
	}
	wg.Wait()
	if got := strings.Count(o.String(), "\n"); got != 400 {
		t.Errorf("%d lines, want 400", got)
	}
	// The output ends with a newline: the last "line" is empty.
	if got := o.Tail(3); strings.Count(got, "\n") != 2 || !strings.HasSuffix(got, "\n") {
		t.Errorf("Tail(3) = %q, want the last two lines and the empty one after them", got)
	}
}

func TestTail(t *testing.T) {
	tests := []struct {
		s    string
		n    int
		want string
	}{
		{"a\nb\nc", 2, "b\nc"},
		{"a\nb\nc", 5, "a\nb\nc"},
		{"", 3, ""},
		{"a\nb\n", 1, ""},
	}
	for _, tt := range tests {
		if got := Tail(tt.s, tt.n); got != tt.want {
			t.Errorf("Tail(%q, %d) = %q, want %q", tt.s, tt.n, got, tt.want)
		}
	}
}

func TestWithExit(t *testing.T) {
	exited := make(chan struct{})
	ctx, cancel := WithExit(context.Background(), exited)
	defer cancel()
	select {
	case <-ctx.Done():
		t.Fatal("cancelled before the process exited")
	default:
	}
	close(exited)
	<-ctx.Done()
	if !errors.Is(context.Cause(ctx), ErrExited) {
		t.Errorf("cause %v, want ErrExited", context.Cause(ctx))
	}

	ctx2, cancel2 := WithExit(context.Background(), make(chan struct{}))
	cancel2()
	<-ctx2.Done()
	if errors.Is(context.Cause(ctx2), ErrExited) {
		t.Error("a cancelled wait reports an exit")
	}
}
