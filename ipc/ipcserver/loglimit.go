package ipcserver

import (
	"sync"
	"time"
)

// logInterval is the shortest time between two log lines of one kind that
// a peer can trigger at will (rejected connections, lost descriptors).
const logInterval = 5 * time.Second

// logLimiter runs a logging function at most once per logInterval and
// tells it how many calls were suppressed since the last one.
type logLimiter struct {
	mu         sync.Mutex
	last       time.Time
	suppressed uint64
}

func (l *logLimiter) do(f func(suppressed uint64)) {
	l.mu.Lock()
	now := time.Now()
	if !l.last.IsZero() && now.Sub(l.last) < logInterval {
		l.suppressed++
		l.mu.Unlock()
		return
	}
	n := l.suppressed
	l.suppressed, l.last = 0, now
	l.mu.Unlock()
	f(n)
}
