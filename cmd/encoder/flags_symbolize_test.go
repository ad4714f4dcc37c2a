package main

import (
	"log/slog"
	"testing"

	"github.com/tandem-profiler/tandem/encoder/output"
	"github.com/tandem-profiler/tandem/encoder/symbolize"
)

// TestSymbolizePolicy: which outputs get native frames named in the
// encoder, and whether a symbolizer is started at all.
func TestSymbolizePolicy(t *testing.T) {
	formats := []string{output.FormatOTLP, output.FormatPprof, output.FormatArrowV2, output.FormatArrowV1}
	for _, tc := range []struct {
		mode string
		want []bool // per format above
	}{
		{symbolizeAuto, []bool{true, true, false, false}},
		{symbolizeOn, []bool{true, true, true, true}},
		{symbolizeOff, []bool{false, false, false, false}},
	} {
		s := symbolizeFlags{mode: tc.mode, cfg: symbolize.DefaultConfig()}
		for i, f := range formats {
			spec, _ := output.Lookup(f)
			if got := s.forFormat(spec); got != tc.want[i] {
				t.Errorf("--symbolize-native=%s, %s output: named %v, want %v", tc.mode, f, got, tc.want[i])
			}
			sym, err := s.newSymbolizer([]output.Config{{Name: "x", Format: f}}, slog.New(slog.DiscardHandler), nil)
			if err != nil {
				t.Fatal(err)
			}
			if (sym != nil) != tc.want[i] {
				t.Errorf("--symbolize-native=%s, only a %s output: symbolizer started %v", tc.mode, f, sym != nil)
			}
			if sym != nil {
				sym.Close()
			}
		}
	}
}
