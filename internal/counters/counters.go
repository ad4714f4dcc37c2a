package counters

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Counter is a cumulative count. The zero value is ready to use.
type Counter struct{ n atomic.Uint64 }

// Add adds v.
func (c *Counter) Add(v uint64) { c.n.Add(v) }

// Inc adds 1.
func (c *Counter) Inc() { c.n.Add(1) }

// Load returns the count.
func (c *Counter) Load() uint64 { return c.n.Load() }

// Gauge is a value that goes up and down. The zero value is ready to use
// and reads 0.
type Gauge struct{ bits atomic.Uint64 }

// Set sets the gauge to v.
func (g *Gauge) Set(v float64) { g.bits.Store(math.Float64bits(v)) }

// Load returns the gauge's value.
func (g *Gauge) Load() float64 { return math.Float64frombits(g.bits.Load()) }

// Label is one name/value pair of a series.
type Label struct{ Name, Value string }

// Sample is one series' value in a snapshot.
type Sample struct {
	Name    string
	Labels  []Label // sorted by name
	Help    string
	Counter bool // a cumulative counter; otherwise a gauge
	Value   float64
}

// Set names counters and gauges for Snapshot. The zero value is ready to
// use; a nil *Set accepts registrations and keeps nothing, so that code
// can take an optional *Set.
type Set struct {
	mu     sync.Mutex
	series []series
	keys   map[string]bool
}

type series struct {
	name, help string
	labels     []Label
	counter    *Counter
	gauge      *Gauge
}

// Counter returns a new Counter registered as name with labels.
func (s *Set) Counter(name, help string, labels ...Label) (*Counter, error) {
	c := new(Counter)
	return c, s.add(series{name: name, help: help, labels: labels, counter: c})
}

// Gauge returns a new Gauge registered as name with labels.
func (s *Set) Gauge(name, help string, labels ...Label) (*Gauge, error) {
	g := new(Gauge)
	return g, s.add(series{name: name, help: help, labels: labels, gauge: g})
}

// AddCounter registers an existing Counter, for a value kept by a type
// that also reads it itself.
func (s *Set) AddCounter(c *Counter, name, help string, labels ...Label) error {
	return s.add(series{name: name, help: help, labels: labels, counter: c})
}

// AddGauge registers an existing Gauge.
func (s *Set) AddGauge(g *Gauge, name, help string, labels ...Label) error {
	return s.add(series{name: name, help: help, labels: labels, gauge: g})
}

func (s *Set) add(sr series) error {
	if s == nil {
		return nil
	}
	if err := validName(sr.name); err != nil {
		return fmt.Errorf("register metric: %w", err)
	}
	sr.labels = slices.Clone(sr.labels)
	slices.SortFunc(sr.labels, func(a, b Label) int { return strings.Compare(a.Name, b.Name) })
	var key strings.Builder
	key.WriteString(sr.name)
	for i, l := range sr.labels {
		if err := validName(l.Name); err != nil {
			return fmt.Errorf("register metric %s: label: %w", sr.name, err)
		}
		if i > 0 && sr.labels[i-1].Name == l.Name {
			return fmt.Errorf("register metric %s: label %q given twice", sr.name, l.Name)
		}
		fmt.Fprintf(&key, "\x00%s\x00%s", l.Name, l.Value)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.keys[key.String()] {
		return fmt.Errorf("register metric %s %v: already registered", sr.name, sr.labels)
	}
	if s.keys == nil {
		s.keys = make(map[string]bool)
	}
	s.keys[key.String()] = true
	s.series = append(s.series, sr)
	return nil
}

// validName accepts what Prometheus accepts as a metric or label name
// ([a-zA-Z_][a-zA-Z0-9_]*; colons are for recording rules), since the
// encoder exports these names.
func validName(n string) error {
	if n == "" {
		return errors.New("empty name")
	}
	for i, r := range n {
		if r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9' {
			continue
		}
		return fmt.Errorf("name %q: character %q at %d (want [a-zA-Z_][a-zA-Z0-9_]*)", n, r, i)
	}
	return nil
}

// Snapshot returns every registered series' current value, sorted by name
// then labels. A nil Set returns nil.
func (s *Set) Snapshot() []Sample {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	out := make([]Sample, 0, len(s.series))
	for _, sr := range s.series {
		smp := Sample{Name: sr.name, Labels: sr.labels, Help: sr.help}
		if sr.counter != nil {
			smp.Counter, smp.Value = true, float64(sr.counter.Load())
		} else {
			smp.Value = sr.gauge.Load()
		}
		out = append(out, smp)
	}
	s.mu.Unlock()
	slices.SortStableFunc(out, func(a, b Sample) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return slices.CompareFunc(a.Labels, b.Labels, func(x, y Label) int {
			if c := strings.Compare(x.Name, y.Name); c != 0 {
				return c
			}
			return strings.Compare(x.Value, y.Value)
		})
	})
	return out
}
