package sampler

import (
	"sync"
	"time"
)

// admission is the bound on executables handed to the sink: a token bucket
// (rate per second, burst) and a lifetime total. Safe for concurrent use.
type admission struct {
	mu       sync.Mutex
	rate     float64
	burst    float64
	tokens   float64
	last     time.Time
	maxTotal int // 0: no executable is ever admitted
	total    int
	now      func() time.Time
}

type admitResult int

const (
	admitted admitResult = iota
	rejectedRate
	rejectedTotal
)

func newAdmission(rate float64, burst, maxTotal int, now func() time.Time) *admission {
	return &admission{
		rate:     rate,
		burst:    float64(burst),
		tokens:   float64(burst),
		last:     now(),
		maxTotal: maxTotal,
		now:      now,
	}
}

// take admits one executable or says why not. A rejected attempt costs
// nothing.
func (a *admission) take() admitResult {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.total >= a.maxTotal {
		return rejectedTotal
	}
	now := a.now()
	if dt := now.Sub(a.last).Seconds(); dt > 0 {
		a.tokens = min(a.burst, a.tokens+dt*a.rate)
	}
	a.last = now
	if a.tokens < 1 {
		return rejectedRate
	}
	a.tokens--
	a.total++
	return admitted
}
