package pprofout_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
	"github.com/tandem-profiler/tandem/encoder/internal/flushtest"
	"github.com/tandem-profiler/tandem/encoder/internal/testcorpus"
	"github.com/tandem-profiler/tandem/encoder/pprofout"
)

// TestProfileNativeLines: native frames named by the aggregator's
// Symbolizer come out as locations with one line per (inlined) function,
// innermost first, as pprof orders them.
func TestProfileNativeLines(t *testing.T) {
	c := testcorpus.Generate(testcorpus.Small())
	cfg := aggregate.DefaultConfig()
	cfg.Symbolizer = testcorpus.NewSymbolizer()
	p := pprofout.Profile(flushtest.Flush(t, flushtest.NewAggregator(t, cfg), c))
	if err := p.CheckValid(); err != nil {
		t.Fatal(err)
	}
	native := 0
	for _, l := range p.Location {
		if l.Mapping == nil {
			continue
		}
		if len(l.Line) == 0 {
			t.Errorf("native location %#x in %s not named", l.Address, l.Mapping.File)
			continue
		}
		if !strings.HasPrefix(l.Line[len(l.Line)-1].Function.Name, "fn_") {
			continue // named by the sampler (Go, interpreters)
		}
		var got []string
		for _, ln := range l.Line {
			got = append(got, ln.Function.Name)
		}
		if want := testcorpus.SymbolNames(l.Address); !slices.Equal(got, want) {
			t.Errorf("location %#x: %v, want %v", l.Address, got, want)
		}
		native++
	}
	if native == 0 {
		t.Fatal("no native location carries the symbolizer's names")
	}
}
