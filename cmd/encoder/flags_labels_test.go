package main

import (
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/tandem-profiler/tandem/encoder/labels"
	"github.com/tandem-profiler/tandem/encoder/output"
	"github.com/tandem-profiler/tandem/internal/cli"
)

func TestLabelFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		check   func(t *testing.T, cfg labels.Config)
		wantErr []string
	}{
		{
			name: "defaults",
			check: func(t *testing.T, cfg labels.Config) {
				if cfg.CacheTTL != 10*time.Minute || cfg.ExternalLabels != nil || cfg.RelabelConfigs != nil ||
					cfg.DisableCPULabel || cfg.DisableThreadIDLabel || cfg.DisableThreadCommLabel {
					t.Errorf("defaults: %+v", cfg)
				}
			},
		},
		{
			name: "every flag",
			args: []string{
				"--metadata-external-labels=region=eu; cluster = c1",
				"--metadata-external-labels", "tenant=t;region=us",
				"--metadata-disable-cpu-label", "--metadata-disable-thread-id-label", "--metadata-disable-thread-comm-label",
				"--config-path", "../../encoder/labels/testdata/good.yaml",
				"--profiling-label-ttl", "1m",
			},
			check: func(t *testing.T, cfg labels.Config) {
				want := map[string]string{"region": "us", "cluster": "c1", "tenant": "t"}
				if !maps.Equal(cfg.ExternalLabels, want) {
					t.Errorf("external labels %v, want %v", cfg.ExternalLabels, want)
				}
				if !cfg.DisableCPULabel || !cfg.DisableThreadIDLabel || !cfg.DisableThreadCommLabel {
					t.Errorf("disable flags not set: %+v", cfg)
				}
				if len(cfg.RelabelConfigs) != 4 || cfg.CacheTTL != time.Minute {
					t.Errorf("%d relabel configs, TTL %v; want 4, 1m", len(cfg.RelabelConfigs), cfg.CacheTTL)
				}
				if _, err := labels.New(cfg, nil); err != nil {
					t.Errorf("labels.New: %v", err)
				}
			},
		},
		{
			name:    "bad external label",
			args:    []string{"--metadata-external-labels=region"},
			wantErr: []string{`--metadata-external-labels: "region" is not key=value`},
		},
		{
			name:    "empty external label value",
			args:    []string{"--metadata-external-labels=region="},
			wantErr: []string{`"region=" is not key=value`},
		},
		{
			name:    "bad config file and TTL, both reported",
			args:    []string{"--config-path=../../encoder/labels/testdata/unknown_top_key.yaml", "--profiling-label-ttl=0s"},
			wantErr: []string{"--config-path:", `unknown key "node"`, "--profiling-label-ttl=0s: must be positive"},
		},
		{
			name:    "missing config file",
			args:    []string{"--config-path=/nonexistent/parca-agent.yaml"},
			wantErr: []string{"--config-path: read config file", "/nonexistent/parca-agent.yaml"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f labelFlags
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			f.register(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			cfg, err := f.config()
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("config() = %+v, want an error", cfg)
				}
				var ue cli.UsageError
				if !errors.As(err, &ue) {
					t.Errorf("error %v is not a usage error", err)
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, cfg)
		})
	}
}

// TestConfigFileNotYAML: a --config-path file the YAML parser cannot read
// is reported once, with its line, as not YAML: not as a problem of a key
// (relabel_configs, outputs) the file may not even have.
func TestConfigFileNotYAML(t *testing.T) {
	for _, body := range []string{
		"relabel_configs:\n  - source_labels: [a\n    target_label: b\n",
		"outputs:\n  - name: x\n    format: [pprof\n",
	} {
		_, err := parseOutput(t, "--config-path", writeConfig(t, body), "--output-dir", t.TempDir())
		var ue cli.UsageError
		if err == nil || !errors.As(err, &ue) {
			t.Fatalf("%q: error %v, want a usage error", body, err)
		}
		msg := err.Error()
		if strings.Count(msg, "not valid YAML: line ") != 1 || strings.Contains(msg, "relabel_configs") || strings.Contains(msg, "outputs:") {
			t.Errorf("%q: error %q, want one 'not valid YAML' with its line and no key", body, msg)
		}
	}
}

// TestOutputDirBesideRemoteStore: --output-dir given with
// --remote-store-address writes the files as well (it was ignored without
// a word); left at its default, only the remote store is written.
func TestOutputDirBesideRemoteStore(t *testing.T) {
	dir := t.TempDir()
	o, err := parseOutput(t, "--remote-store-address", "localhost:1", "--output-dir", dir)
	if err != nil {
		t.Fatal(err)
	}
	outs := o.outputs()
	if len(outs) != 2 || outs[0].Name != defaultOutput || outs[0].Remote.Address != "localhost:1" ||
		outs[1].Name != filesOutput || outs[1].Format != output.FormatPprof || outs[1].Dir != dir {
		t.Fatalf("outputs %+v, want the remote store and pprof files in %s", outs, dir)
	}
	o, err = parseOutput(t, "--remote-store-address", "localhost:1")
	if err != nil {
		t.Fatal(err)
	}
	if outs := o.outputs(); len(outs) != 1 {
		t.Errorf("%d outputs with only --remote-store-address, want 1", len(outs))
	}
}
