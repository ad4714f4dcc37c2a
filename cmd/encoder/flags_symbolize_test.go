package main

import (
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"

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

// TestDebuginfoDirectoriesFlag: the debug directories default to
// /usr/lib/debug, the flag replaces them (empty: no search), and a relative
// directory is refused with the flag's name.
func TestDebuginfoDirectoriesFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
		err  string
	}{
		{args: nil, want: []string{"/usr/lib/debug"}},
		{args: []string{"--debuginfo-directories=/usr/lib/debug,/opt/debug"}, want: []string{"/usr/lib/debug", "/opt/debug"}},
		{args: []string{"--debuginfo-directories="}, want: []string{}},
		{args: []string{"--debuginfo-directories=debug"}, err: "must be an absolute path"},
	} {
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		var s symbolizeFlags
		s.register(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		err := s.validate()
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: got %v, want an error about %q", tc.args, err, tc.err)
			}
			continue
		}
		if err != nil || !slices.Equal(s.cfg.DebugDirs, tc.want) {
			t.Errorf("%v: got %q (%v), want %q", tc.args, s.cfg.DebugDirs, err, tc.want)
		}
	}
}
