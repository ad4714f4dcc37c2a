package aggregate

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tandem-profiler/tandem/encoder/internal/testcorpus"
	"github.com/tandem-profiler/tandem/schema"
)

func newSymbolizingAggregator(t testing.TB, s Symbolizer) *Aggregator {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Symbolizer = s
	a, err := NewAggregator(cfg, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestNativeLines(t *testing.T) {
	c := testcorpus.Generate(testcorpus.Small())
	sym := testcorpus.NewSymbolizer()
	a := newSymbolizingAggregator(t, sym)
	now := time.Unix(1_700_000_000, 0)
	var f *Flush
	for i := range 3 { // the same locations, three intervals: resolved once
		addAll(t, a, c)
		f = a.Flush(now.Add(time.Duration(i) * time.Second))
		checkFlush(t, f, c) // symbolizing changes nothing else
		if i < 2 {
			a.Release(f)
		}
	}
	native := 0
	for id := 1; id < len(f.Locations); id++ {
		l := &f.Locations[id]
		lines := f.NativeLines(uint32(id))
		m := &f.Mappings[l.Mapping]
		if l.Kind != schema.FrameNative || l.Function != 0 || l.Mapping == 0 || m.FileID.IsZero() {
			if len(lines) != 0 {
				t.Errorf("location %d (%v, function %d) got native lines %v", id, l.Kind, l.Function, lines)
			}
			continue
		}
		native++
		want := testcorpus.SymbolNames(l.Address)
		if len(lines) != len(want) {
			t.Fatalf("location %d: %d lines, want %v", id, len(lines), want)
		}
		for i, ln := range lines {
			if got := f.Strings[f.Functions[ln.Function].Name]; got != want[i] {
				t.Errorf("location %d line %d: %q, want %q", id, i, got, want[i])
			}
		}
		if n := sym.Calls[[3]uint64{m.FileID.Hi, m.FileID.Lo, l.Address}]; n != 1 {
			t.Errorf("location %d resolved %d times over three flushes, want once", id, n)
		}
	}
	if native == 0 {
		t.Fatal("the corpus has no native frames")
	}
	if len(sym.Calls) != native {
		t.Errorf("%d addresses resolved for %d native locations", len(sym.Calls), native)
	}
}

// BenchmarkAccumulateSymbolized is BenchmarkAccumulate's steady state with
// a Symbolizer: every location is known, so nothing is resolved and the
// per-sample cost must equal the unsymbolized one.
func BenchmarkAccumulateSymbolized(b *testing.B) {
	c, err := testcorpus.ForBenchmark()
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		sym  Symbolizer
	}{{"off", nil}, {"on", testcorpus.NewSymbolizer()}} {
		b.Run(tc.name, func(b *testing.B) {
			a := newSymbolizingAggregator(b, tc.sym)
			now := time.Unix(1_700_000_000, 0)
			addAll(b, a, c)
			a.Release(a.Flush(now))
			b.ReportAllocs()
			for b.Loop() {
				steadyStep(b, a, c, now)
			}
			reportPerSample(b, c.Samples())
		})
	}
}

// steadyStep is one steady-state interval: what callgrind counts
// (--toggle-collect=github.com/tandem-profiler/tandem/encoder.steadyStep).
//
//go:noinline
func steadyStep(tb testing.TB, a *Aggregator, c *testcorpus.Corpus, now time.Time) {
	addAll(tb, a, c)
	a.Release(a.Flush(now))
}
