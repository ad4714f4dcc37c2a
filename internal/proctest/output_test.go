package proctest

import (
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
