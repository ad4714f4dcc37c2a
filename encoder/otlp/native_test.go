package otlp_test

import (
	"strings"
	"testing"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
	"github.com/tandem-profiler/tandem/encoder/internal/flushtest"
	"github.com/tandem-profiler/tandem/encoder/internal/testcorpus"
	flat "github.com/tandem-profiler/tandem/test/otlptest"
)

// TestEncodeNativeLines: native frames named by the aggregator's
// Symbolizer come out as locations with one line per (inlined) function,
// innermost first.
func TestEncodeNativeLines(t *testing.T) {
	c := testcorpus.Generate(testcorpus.Small())
	cfg := aggregate.DefaultConfig()
	cfg.Symbolizer = testcorpus.NewSymbolizer()
	a, err := aggregate.NewAggregator(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := newEncoder(t)
	for range 2 { // the second request reuses the encoder's tables
		req := e.Encode(flushtest.Flush(t, a, c))
		samples, err := flat.Flatten(req.Profiles())
		if err != nil {
			t.Fatal(err)
		}
		native := 0
		for _, s := range samples {
			for _, fr := range s.Frames {
				if fr.Type != "native" || fr.MappingFile == "" {
					continue
				}
				native++
				if want := strings.Join(testcorpus.SymbolNames(fr.Address), ";"); fr.Functions != want {
					t.Fatalf("native frame %#x: functions %q, want %q", fr.Address, fr.Functions, want)
				}
			}
		}
		if native == 0 {
			t.Fatal("no native frames")
		}
		e.Release(req)
	}
}
