package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tandem-profiler/tandem/internal/cli"
	"github.com/tandem-profiler/tandem/internal/synth"
	"github.com/tandem-profiler/tandem/schema"
	"github.com/tandem-profiler/tandem/test/otlptest"
	"github.com/tandem-profiler/tandem/test/parcatest"
)

// synthStream writes a synthetic dump and returns it with its messages.
func synthStream(t *testing.T, samples int) (string, parcatest.Stream) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "synth.dump")
	cfg := synth.DefaultConfig()
	cfg.Samples = samples
	if _, err := writeSynth(cfg, path); err != nil {
		t.Fatal(err)
	}
	msgs, err := synth.Collect(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hello, batches := synth.Split(msgs)
	return path, parcatest.Stream{Hello: *hello, Batches: batches}
}

func TestReplayToParca(t *testing.T) {
	dump, stream := synthStream(t, 4000)
	ext := map[string]string{"region": "eu"}
	tests := []struct {
		name    string
		flags   []string
		version string
	}{
		{"arrow-v2", []string{"--remote-store-format", "arrow-v2"}, "v2"},
		{"arrow-v1", []string{"--remote-store-format", "arrow-v1"}, "v1"},
		{"deprecated bool false", []string{"--remote-store-use-v2-schema=false"}, "v1"},
		{"deprecated alias true", []string{"--use-v2-schema"}, "v2"},
		{"split", []string{"--remote-store-format", "arrow-v2", "--remote-store-grpc-max-call-send-msg-size", "65536"}, "v2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := parcatest.StartServer(t)
			args := append([]string{"replay", "--remote-store-address", srv.Addr(), "--remote-store-insecure",
				"--debuginfo-upload-disable", "--metadata-external-labels", "region=eu", "--profiling-duration", "1s"}, tt.flags...)
			if err := run(t, append(args, dump)...); err != nil {
				t.Fatalf("%v (server: %v)", err, srv.Errors())
			}
			want := parcatest.Expected(stream, tt.version, ext)
			got := srv.Rows()
			if diff := parcatest.Diff(want, got, 5); diff != nil {
				t.Fatalf("server rows differ from the stream:\n%s", strings.Join(diff, "\n"))
			}
			calls := srv.WriteArrowCalls() + srv.WriteCalls()
			if (tt.version == "v2") != (srv.WriteArrowCalls() > 0) || calls < 4 {
				t.Errorf("%d WriteArrow and %d Write calls", srv.WriteArrowCalls(), srv.WriteCalls())
			}
			if tt.name == "split" && srv.WriteArrowCalls() < 10 {
				t.Errorf("%d WriteArrow calls under a 64 KiB limit, want the flushes split", srv.WriteArrowCalls())
			}
		})
	}
}

func TestParcaFlags(t *testing.T) {
	dump, _ := synthStream(t, 10)
	tests := []struct {
		name string
		args []string
		want string // "" = valid
	}{
		{"v2 bool agrees", []string{"--remote-store-format", "arrow-v2", "--remote-store-use-v2-schema"}, ""},
		{"v1 bool agrees", []string{"--remote-store-format", "arrow-v1", "--use-v2-schema=false"}, ""},
		{"bool contradicts format", []string{"--remote-store-format", "arrow-v2", "--remote-store-use-v2-schema=false"},
			"--remote-store-use-v2-schema=false means --remote-store-format=arrow-v1, but --remote-store-format=arrow-v2 was given"},
		{"bool contradicts otlp", []string{"--remote-store-format", "otlp", "--use-v2-schema"}, "but --remote-store-format=otlp was given"},
		{"bools disagree", []string{"--remote-store-use-v2-schema=true", "--use-v2-schema=false"}, "contradicts --remote-store-use-v2-schema=true"},
		{"unknown format", []string{"--remote-store-format", "arrow-v3"}, `format "arrow-v3"`},
		{"zero send size", []string{"--remote-store-format", "arrow-v2", "--remote-store-grpc-max-call-send-msg-size", "0"}, "max call message sizes"},
		{"bad external label", []string{"--remote-store-format", "arrow-v2", "--metadata-external-labels", "novalue"}, "--metadata-external-labels"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// No address: a valid command line replays the dump into pprof files.
			args := append([]string{"replay", "--output-dir", t.TempDir()}, tt.args...)
			err := run(t, append(args, dump)...)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("error %v, want none", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tt.want)
			}
			var ue cli.UsageError
			if !errors.As(err, &ue) {
				t.Errorf("%v is not a usage error (exit status 2)", err)
			}
		})
	}
}

// TestServeAcksAfterArrowExport runs serve with an Arrow format (queued
// exports, acknowledged from the export callback) against the in-process
// Parca server: every sample arrives and every sequence is acknowledged.
func TestServeAcksAfterArrowExport(t *testing.T) {
	for _, format := range []string{"arrow-v2", "arrow-v1"} {
		t.Run(format, func(t *testing.T) {
			srv := parcatest.StartServer(t)
			msgs := serveSynth(t, 2000, func(o *outputFlags) {
				o.def.Remote.Address = srv.Addr()
				o.def.Format = format
				o.debuginfo.disable = true // the test server has no DebuginfoService
			}, func() string { return fmt.Sprintf("(server errors %v)", srv.Errors()) })
			hello, batches := synth.Split(msgs)
			stream := parcatest.Stream{Hello: *hello, Batches: batches}
			version := "v2"
			if format == "arrow-v1" {
				version = "v1"
			}
			if diff := parcatest.Diff(parcatest.Expected(stream, version, nil), srv.Rows(), 5); diff != nil {
				t.Fatalf("server rows differ from the stream:\n%s", strings.Join(diff, "\n"))
			}
		})
	}
}

// TestReplayOTLPSplit: an OTLP flush over --remote-store-grpc-max-call-send-msg-size
// goes as several requests instead of failing.
func TestReplayOTLPSplit(t *testing.T) {
	dump, totals := writeSynthDump(t, 4000)
	recv := otlptest.StartReceiver(t)
	err := run(t, "replay", "--remote-store-address", recv.Addr(), "--remote-store-insecure", "--debuginfo-upload-disable",
		"--remote-store-compression", "none", "--profiling-duration", "5s",
		"--remote-store-grpc-max-call-send-msg-size", "65536", dump)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, s := range recv.Samples(t) {
		got[s.SampleType] += s.Total()
	}
	if got["samples"] != totals[schema.OriginCPUSampling] || got["off_cpu"] != totals[schema.OriginOffCPU] {
		t.Fatalf("exported totals %v, want cpu %d off-CPU %d", got, totals[schema.OriginCPUSampling], totals[schema.OriginOffCPU])
	}
	if n := len(recv.Requests()); n < 4 {
		t.Errorf("%d requests under a 64 KiB limit, want the flush split", n)
	}
}
