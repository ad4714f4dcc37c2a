package proctest

import (
	"bytes"
	"strings"
	"sync"
)

// Output collects what a process writes (pass it as its stdout and
// stderr) and may be read while the process is still writing.
type Output struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

// String returns everything written so far.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// Tail returns the last n lines written so far.
func (o *Output) Tail(n int) string { return Tail(o.String(), n) }

// Tail returns the last n lines of s.
func Tail(s string, n int) string {
	parts := strings.Split(s, "\n")
	if len(parts) > n {
		parts = parts[len(parts)-n:]
	}
	return strings.Join(parts, "\n")
}
