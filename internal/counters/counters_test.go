package counters

import (
	"strings"
	"sync"
	"testing"
)

func TestSnapshot(t *testing.T) {
	var s Set
	c, err := s.Counter("tandem_b_total", "b", Label{"type", "x"}, Label{"kind", "y"})
	if err != nil {
		t.Fatal(err)
	}
	g, err := s.Gauge("tandem_a", "a")
	if err != nil {
		t.Fatal(err)
	}
	var own Counter
	if err := s.AddCounter(&own, "tandem_b_total", "b", Label{"type", "w"}); err != nil {
		t.Fatal(err)
	}
	c.Add(3)
	c.Inc()
	own.Inc()
	g.Set(-1.5)
	got := s.Snapshot()
	want := []Sample{
		{Name: "tandem_a", Help: "a", Value: -1.5},
		{Name: "tandem_b_total", Help: "b", Counter: true, Value: 4, Labels: []Label{{"kind", "y"}, {"type", "x"}}},
		{Name: "tandem_b_total", Help: "b", Counter: true, Value: 1, Labels: []Label{{"type", "w"}}},
	}
	if len(got) != len(want) {
		t.Fatalf("snapshot %+v, want %+v", got, want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Name != w.Name || g.Help != w.Help || g.Counter != w.Counter || g.Value != w.Value || len(g.Labels) != len(w.Labels) {
			t.Errorf("sample %d = %+v, want %+v", i, g, w)
			continue
		}
		for j := range w.Labels {
			if g.Labels[j] != w.Labels[j] {
				t.Errorf("sample %d label %d = %v, want %v", i, j, g.Labels[j], w.Labels[j])
			}
		}
	}
}

func TestRegistrationErrors(t *testing.T) {
	var s Set
	if _, err := s.Counter("tandem_x_total", "x", Label{"a", "1"}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		labels []Label
		want   string
	}{
		{"tandem_x_total", []Label{{"a", "1"}}, "already registered"},
		{"", nil, "empty name"},
		{"tandem-x", nil, `character '-' at 6`},
		{"9x", nil, `character '9' at 0`},
		{"tandem_y", []Label{{"a", "1"}, {"a", "2"}}, `label "a" given twice`},
		{"tandem_y", []Label{{"a.b", "1"}}, `character '.'`},
	} {
		_, err := s.Gauge(tc.name, "h", tc.labels...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Gauge(%q, %v) error %v, want one containing %q", tc.name, tc.labels, err, tc.want)
		}
	}
	if n := len(s.Snapshot()); n != 1 {
		t.Errorf("failed registrations left %d series, want 1", n)
	}
}

func TestNilSet(t *testing.T) {
	var s *Set
	c, err := s.Counter("tandem_x_total", "x")
	if err != nil || c == nil {
		t.Fatalf("nil set: %v, %v", c, err)
	}
	c.Inc()
	if c.Load() != 1 || s.Snapshot() != nil {
		t.Error("nil set should keep working counters and snapshot nothing")
	}
}

func TestConcurrentUpdates(t *testing.T) {
	var s Set
	c, _ := s.Counter("tandem_x_total", "x")
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				c.Inc()
				s.Snapshot()
			}
		})
	}
	wg.Wait()
	if c.Load() != 8000 {
		t.Errorf("count %d, want 8000", c.Load())
	}
}
