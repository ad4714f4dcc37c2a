package main

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/tandem-profiler/tandem/debuginfo"
	"github.com/tandem-profiler/tandem/encoder/output"
	"github.com/tandem-profiler/tandem/internal/cli"
	"github.com/tandem-profiler/tandem/schema"
)

// parseOutput parses args as serve's and replay's output flags.
func parseOutput(t *testing.T, args ...string) (*outputFlags, error) {
	t.Helper()
	var o outputFlags
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.register(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return &o, o.validate()
}

func TestDebuginfoFlags(t *testing.T) {
	const remote, symbols = "otlp.example:4317", "parca.example:7070"
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr []string // substrings of the error; none: valid
		target  string   // where symbols go ("" = upload off)
	}{
		{"pprof files: upload implicitly off", nil, nil, ""},
		{"pprof files and a debuginfo address", []string{"--debuginfo-address", symbols}, nil, symbols},
		// Native frames are named in the encoder: nothing to upload, and
		// no flag needed to say so.
		{"OTLP without a debuginfo flag: upload off", []string{"--remote-store-address", remote}, nil, ""},
		{"bad --symbolize-native", []string{"--symbolize-native", "yes"}, []string{`--symbolize-native="yes": must be auto, on or off`}, ""},
		{"tiny symbolizer cache", []string{"--symbolizer-cache-bytes", "10"}, []string{"--symbolizer-*", "at least 16 KiB"}, ""},
		{"held executables: none", []string{"--max-held-executables", "0"}, []string{"--max-held-executables=0: must be at least 1"}, ""},
		{"held executable bytes: tiny", []string{"--max-held-executable-bytes", "1000"}, []string{"--max-held-executable-bytes=1000: must be at least 1 MiB"}, ""},
		{"held executables: old name", []string{"--symbolizer-max-files", "0"}, []string{"--max-held-executables=0"}, ""},
		{"links per flush out of range", []string{"--max-links-per-flush", "70000"}, []string{"--max-links-per-flush=70000: must be 0 to 65535"}, ""},
		{"links off", []string{"--max-links-per-flush", "0"}, nil, ""},
		{"symbolizer bounds ignored when off", []string{"--symbolize-native", "off", "--symbolizer-cache-bytes", "10"}, nil, ""},
		{"OTLP, upload disabled", []string{"--remote-store-address", remote, "--debuginfo-upload-disable"}, nil, ""},
		{"OTLP with a debuginfo address", []string{"--remote-store-address", remote, "--debuginfo-address", symbols}, nil, symbols},
		{"disable wins over an address", []string{"--remote-store-address", remote, "--debuginfo-address", symbols, "--debuginfo-upload-disable"}, nil, ""},
		{"bad queue size", []string{"--debuginfo-address", symbols, "--debuginfo-upload-queue-size", "0"},
			[]string{"--debuginfo-upload-queue-size=0: must be at least 1"}, ""},
		{"bad parallelism", []string{"--debuginfo-address", symbols, "--debuginfo-upload-max-parallel", "0"},
			[]string{"--debuginfo-upload-max-parallel=0"}, ""},
		{"strip without scratch space", []string{"--debuginfo-address", symbols, "--debuginfo-temp-dir", ""},
			[]string{"--debuginfo-temp-dir is empty"}, ""},
		{"no strip, no scratch space", []string{"--debuginfo-address", symbols, "--debuginfo-temp-dir", "", "--debuginfo-strip=false"}, nil, symbols},
		{"bad timeout", []string{"--debuginfo-address", symbols, "--debuginfo-upload-timeout", "0s"},
			[]string{"--debuginfo-upload-timeout=0s"}, ""},
		{"bad settings ignored when disabled", []string{"--debuginfo-upload-disable", "--debuginfo-upload-queue-size", "0"}, nil, ""},
		{"bad settings ignored when implicitly off", []string{"--debuginfo-upload-queue-size", "0"}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseOutput(t, tc.args...)
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if got, _ := o.debuginfo.target(o.symbolOutput()); got != tc.target {
					t.Fatalf("symbols go to %q, want %q", got, tc.target)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			if !cli.IsUsage(err) {
				t.Errorf("%T is not a usage error (exit status 2)", err)
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

// TestDebuginfoTargetArrow: with a Parca remote store (the arrow formats),
// symbols go to the same host unless --debuginfo-address says otherwise;
// an OTLP receiver never gets them by default.
func TestDebuginfoTargetArrow(t *testing.T) {
	for _, tc := range []struct {
		format, remote, address, want string
		off                           bool
	}{
		{"arrow-v2", "parca:7070", "", "parca:7070", false},
		{"arrow-v1", "parca:7070", "symbols:7070", "symbols:7070", false},
		{"arrow-v2", "", "", "", true},
		{output.FormatOTLP, "collector:4317", "", "", true},
	} {
		d := debuginfoFlags{address: tc.address, upload: debuginfo.DefaultConfig()}
		cfg := output.DefaultConfig("x", tc.format)
		cfg.Remote.Address = tc.remote
		got, off := d.target(cfg)
		if got != tc.want || (off != "") != tc.off {
			t.Errorf("%s to %q with --debuginfo-address=%q: symbols to %q (off: %q), want %q", tc.format, tc.remote, tc.address, got, off, tc.want)
		}
		err := d.validate(cfg)
		if err != nil {
			t.Errorf("%s to %q: validate = %v", tc.format, tc.remote, err)
		}
	}
}

// TestExecutablesUploadOff: with upload off, descriptors are closed at
// once and notices without one (dumps) are counted for replay's report.
func TestExecutablesUploadOff(t *testing.T) {
	o, err := parseOutput(t, "--debuginfo-upload-disable")
	if err != nil {
		t.Fatal(err)
	}
	e, err := newExecutables(o, nil, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	e.Submit(&schema.ExecutableNotice{Path: os.Args[0]}, f)
	if err := f.Close(); err == nil {
		t.Error("descriptor left open with upload off")
	}
	e.Submit(&schema.ExecutableNotice{}, nil)
	e.Submit(&schema.ExecutableNotice{}, nil)
	if got := e.WithoutDescriptor(); got != 2 {
		t.Errorf("%d notices without descriptor, want 2", got)
	}
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}
