package main

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/tandem-profiler/tandem/encoder/output"
)

// TestOutputFlagsFromSettings fails when an output's setting gets a flag
// written here instead of a flag tag on its field (output.Settings): every
// --remote-store-* flag and --output-dir is a setting's, with its help and
// default, except the few that are not one output's.
func TestOutputFlagsFromSettings(t *testing.T) {
	var o outputFlags
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.register(fs)
	notOutputs := map[string]bool{
		"remote-store-compression-level": true, // the process's one gzip compressor
		flagUseV2:                        true, // deprecated aliases of --remote-store-format
	}
	settings := map[string]output.Setting{}
	for _, s := range output.Settings() {
		if s.Flag != "" {
			settings[s.Flag] = s
		}
	}
	fs.VisitAll(func(f *pflag.Flag) {
		if !strings.HasPrefix(f.Name, "remote-store-") && !strings.HasPrefix(f.Name, "output-dir") || notOutputs[f.Name] {
			return
		}
		s, ok := settings[f.Name]
		switch {
		case !ok:
			t.Errorf("--%s: registered by hand; tag its field in output.Config (or export.Config, export.QueueConfig) with flag:%q", f.Name, f.Name)
		case f.Usage != s.Help:
			t.Errorf("--%s: help %q, want the setting's %q", f.Name, f.Usage, s.Help)
		case s.Type != "map" && f.Name != "output-dir" && f.Name != "remote-store-format" && f.DefValue != s.Default:
			t.Errorf("--%s: default %q, want the setting's %q", f.Name, f.DefValue, s.Default)
		}
		delete(settings, f.Name)
	})
	for name := range settings {
		t.Errorf("setting --%s has no flag", name)
	}
}

// TestOutputDirMaxBytes: --output-dir-max-bytes bounds the pprof files of
// the output --output-dir defines: the default output, or the files
// output beside a remote store.
func TestOutputDirMaxBytes(t *testing.T) {
	for _, tc := range []struct {
		args []string
		name string
	}{
		{[]string{"--output-dir", "/x", "--output-dir-max-bytes", "1000"}, defaultOutput},
		{[]string{"--remote-store-address", "c:4317", "--output-dir", "/x", "--output-dir-max-bytes", "1000"}, filesOutput},
	} {
		var o outputFlags
		fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
		o.register(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		o.fs = fs
		var found bool
		for _, c := range o.outputConfigs() {
			if c.Format == output.FormatPprof {
				found = true
				if c.Name != tc.name || c.Dir != "/x" || c.MaxBytes != 1000 {
					t.Errorf("%q: pprof output %s dir %s max bytes %d, want %s /x 1000", tc.args, c.Name, c.Dir, c.MaxBytes, tc.name)
				}
			}
		}
		if !found {
			t.Errorf("%q: no pprof output", tc.args)
		}
	}
}
