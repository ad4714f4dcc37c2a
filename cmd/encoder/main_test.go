package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"

	"github.com/tandem-profiler/tandem/encoder/export"
	"github.com/tandem-profiler/tandem/internal/cli"
	"github.com/tandem-profiler/tandem/internal/synth"
	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/schema"
	"github.com/tandem-profiler/tandem/test/otlptest"
	"github.com/tandem-profiler/tandem/test/streamtest"
)

func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(asEncoderEnv); ok {
		// A child the test started to run the command line as the binary
		// would, under another identity or capability set.
		os.Args = append([]string{"tandem-encoder"}, strings.Fields(args)...)
		main()
		os.Exit(0)
	}
	export.RegisterGzip()                    // as main does
	routeClientGoLogs(slog.New(clientGoLog)) // as serve's start-up does, before any informer runs
	os.Exit(m.Run())
}

// unconfined adds --confine=false after serve or replay in a command line:
// the commands run in the test process, and confining it would confine
// the tests. The end-to-end tests run the binary confined.
func unconfined(args []string) []string {
	for i, a := range args {
		if a == "serve" || a == "replay" {
			return slices.Concat(args[:i+1], []string{"--confine=false"}, args[i+1:])
		}
	}
	return args
}

// run executes the command line in-process and returns its error.
func run(t *testing.T, args ...string) error {
	t.Helper()
	cmd := newRootCommand()
	cmd.SetArgs(unconfined(args))
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	return cmd.ExecuteContext(context.Background())
}

func TestBadFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown format", []string{"replay", "--remote-store-format", "arrow-v3", "x.dump"}, `format "arrow-v3"`},
		{"bad compression", []string{"replay", "--remote-store-compression", "zstd", "x.dump"}, `compression "zstd"`},
		{"gzip level 0", []string{"replay", "--remote-store-address", "localhost:1", "--remote-store-compression-level", "0", "x.dump"}, "--remote-store-compression-level=0: want 1 (fastest) to 9 (smallest); --remote-store-compression=none for no compression"},
		{"gzip level 10", []string{"replay", "--remote-store-address", "localhost:1", "--remote-store-compression-level", "10", "x.dump"}, "--remote-store-compression-level=10: want 1"},
		{"gzip level without gzip", []string{"replay", "--remote-store-address", "localhost:1", "--remote-store-compression", "none", "--remote-store-compression-level", "5", "x.dump"}, "--remote-store-compression-level=5 has no effect: no output sends gzip-compressed OTLP"},
		{"gzip level with pprof files", []string{"replay", "--remote-store-compression-level", "5", "x.dump"}, "--remote-store-compression-level=5 has no effect"},
		{"short duration", []string{"replay", "--profiling-duration", "10ms", "x.dump"}, "--profiling-duration=10ms: must be at least 1s"},
		{"bad header", []string{"replay", "--remote-store-grpc-headers", "novalue", "x.dump"}, `"novalue" is not key=value`},
		{"cert without key", []string{"replay", "--remote-store-client-cert", "c.pem", "x.dump"}, "client certificate and client key must be given together"},
		{"no output", []string{"replay", "--output-dir", "", "x.dump"}, "flushes would go nowhere"},
		{"synth without out", []string{"synth", "--samples", "10"}, "--out is required"},
		{"synth zero samples", []string{"synth", "--samples", "0", "--out", "x"}, "--samples=0"},
		{"synth bad start", []string{"synth", "--out", "x", "--start", "yesterday"}, `--start="yesterday": want an RFC 3339 time`},
		{"replay bad timestamps", []string{"replay", "--timestamps", "later", "x.dump"}, `--timestamps="later": want original or now`},
		{"bad log level", []string{"--log-level", "loud", "replay", "x.dump"}, `--log-level="loud"`},
		{"unknown flag", []string{"serve", "--no-such-flag"}, "unknown flag"},
		{"IPv6 listen address unbracketed", []string{"serve", "--http-address", "fd00::1:7071"}, "--http-address: \"fd00::1:7071\": an IPv6 address goes in brackets, then the port: [fd00::1]:7071"},
		{"listen address without port", []string{"serve", "--http-address", "0.0.0.0"}, `--http-address: "0.0.0.0" has no port`},
		{"remote store without port", []string{"replay", "--remote-store-address", "collector", "x.dump"}, `remote store address "collector" has no port: want host:PORT, e.g. collector:4317`},
		{"replay no args", []string{"replay"}, "replay needs at least one DUMP"},
		{"view no args", []string{"view"}, "view needs at least one PATH"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(t, tt.args...)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tt.want)
			}
			if got := cli.Status(err); got != cli.ExitUsage {
				t.Errorf("exit status %d, want %d (bad usage)", got, cli.ExitUsage)
			}
		})
	}
}

func TestSynthIsDeterministic(t *testing.T) {
	dir := t.TempDir()
	a, b, c := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "c")
	for _, p := range []struct {
		path, seed string
	}{{a, "7"}, {b, "7"}, {c, "8"}} {
		if err := run(t, "synth", "--samples", "3000", "--seed", p.seed, "--start", "2026-12-01T12:00:00Z", "--out", p.path); err != nil {
			t.Fatal(err)
		}
	}
	da, _ := os.ReadFile(a)
	db, _ := os.ReadFile(b)
	dc, _ := os.ReadFile(c)
	if len(da) == 0 || !bytes.Equal(da, db) {
		t.Fatal("the same seed gave different dumps")
	}
	if bytes.Equal(da, dc) {
		t.Fatal("different seeds gave the same dump")
	}
}

// TestSynthEndsNow: without --start, synth's stream ends when it is
// written, so backends refusing old samples take it; --start fixes it.
func TestSynthEndsNow(t *testing.T) {
	dir := t.TempDir()
	now, fixed := filepath.Join(dir, "now"), filepath.Join(dir, "fixed")
	before := time.Now()
	if err := run(t, "synth", "--samples", "1000", "--out", now); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	if err := run(t, "synth", "--samples", "1000", "--start", "2020-01-02T03:04:05Z", "--duration", "2s", "--out", fixed); err != nil {
		t.Fatal(err)
	}
	end, err := dumpsEnd(context.Background(), []string{now})
	if err != nil {
		t.Fatal(err)
	}
	// The samples span --duration (5 s) up to the moment synth ran.
	if lo := before.Add(-synth.DefaultDuration); end < lo.UnixNano() || end > after.UnixNano() {
		t.Errorf("last sample at %v, want between %v and %v", time.Unix(0, end).UTC(), lo.UTC(), after.UTC())
	}
	end, err = dumpsEnd(context.Background(), []string{fixed})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	if got := time.Unix(0, end); got.Before(start) || got.After(start.Add(2*time.Second)) {
		t.Errorf("--start 2020-01-02T03:04:05Z --duration 2s: last sample at %v", got.UTC())
	}
}

// writeSynthDump writes a synthetic dump and returns its path and the total
// value per origin it holds.
func writeSynthDump(t *testing.T, samples int) (string, map[schema.Origin]int64) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "synth.dump")
	cfg := synth.DefaultConfig()
	cfg.Samples = samples
	if _, err := writeSynth(cfg, path); err != nil {
		t.Fatal(err)
	}
	totals := map[schema.Origin]int64{}
	err := synth.Generate(cfg, func(m synth.Message) error {
		if m.Kind == synth.KindBatch {
			for _, s := range m.Batch.Samples {
				totals[s.Origin] += s.Value
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return path, totals
}

func TestReplayToOTLPReceiver(t *testing.T) {
	dump, totals := writeSynthDump(t, 5000)
	for _, compression := range []string{"gzip", "none"} {
		t.Run(compression, func(t *testing.T) {
			recv := otlptest.StartReceiver(t)
			// No --debuginfo-upload-disable: replay never needs it.
			err := run(t, "replay", "--remote-store-address", recv.Addr(), "--remote-store-insecure",
				"--remote-store-compression", compression, "--profiling-duration", "1s", dump)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int64{}
			for _, s := range recv.Samples(t) {
				if len(s.Frames) == 0 {
					t.Fatal("sample with an empty stack")
				}
				got[s.SampleType] += s.Total()
			}
			if got["samples"] != totals[schema.OriginCPUSampling] || got["off_cpu"] != totals[schema.OriginOffCPU] || got["events"] != totals[schema.OriginProbe] {
				t.Fatalf("exported totals %v, want cpu %d off_cpu %d probe %d", got,
					totals[schema.OriginCPUSampling], totals[schema.OriginOffCPU], totals[schema.OriginProbe])
			}
			if n := len(recv.Requests()); n < 2 {
				t.Errorf("%d requests for a 5 s stream cut every 1 s, want several", n)
			}
		})
	}
}

// TestReplayGzipLevel replays one dump at gzip levels 1 and 5 into real
// OTLP/profiles receivers: both arrive gzip-encoded and decode to the same
// samples, and level 5's requests are smaller.
func TestReplayGzipLevel(t *testing.T) {
	dump, _ := writeSynthDump(t, 5000)
	t.Cleanup(func() { _ = export.SetGzipLevel(export.DefaultGzipLevel) })
	type result struct {
		compressed, uncompressed int
		samples                  []otlptest.Sample
	}
	results := map[string]result{}
	for _, level := range []string{"1", "5"} {
		ws := &otlptest.WireStats{}
		recv := otlptest.StartReceiver(t, grpc.StatsHandler(ws))
		err := run(t, "replay", "--remote-store-address", recv.Addr(), "--remote-store-insecure",
			"--remote-store-compression-level", level, "--profiling-duration", "1s", dump)
		if err != nil {
			t.Fatal(err)
		}
		encodings := ws.Encodings()
		if len(encodings) < 2 {
			t.Fatalf("level %s: %d requests, want several", level, len(encodings))
		}
		for _, enc := range encodings {
			if enc != "gzip" {
				t.Fatalf("level %s: grpc-encoding %q, want gzip", level, enc)
			}
		}
		_, compressed, uncompressed := ws.Bytes()
		results[level] = result{compressed, uncompressed, recv.Samples(t)}
	}
	one, five := results["1"], results["5"]
	if len(one.samples) == 0 || !reflect.DeepEqual(one.samples, five.samples) {
		t.Fatalf("levels 1 and 5 delivered different samples (%d and %d)", len(one.samples), len(five.samples))
	}
	if one.uncompressed != five.uncompressed {
		t.Errorf("uncompressed bytes %d at level 1, %d at level 5: the requests differ", one.uncompressed, five.uncompressed)
	}
	t.Logf("compressed bytes: level 1 %d, level 5 %d", one.compressed, five.compressed)
	// docs/benchmarks/encoding.md: about 12% smaller on 20,000-sample flushes.
	if ratio := float64(five.compressed) / float64(one.compressed); ratio > 0.95 {
		t.Errorf("level 5 sent %d compressed bytes, level 1 %d (%.3f×): want level 5 at least 5%% smaller",
			five.compressed, one.compressed, ratio)
	}
}

func TestReplayToPprofFiles(t *testing.T) {
	dump, totals := writeSynthDump(t, 4000)
	out := t.TempDir()
	if err := run(t, "replay", "--output-dir", out, "--profiling-duration", "2s", dump); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(out, "*.pb.gz"))
	if len(files) < 2 {
		t.Fatalf("%d pprof files, want one per 2 s window of a 5 s stream", len(files))
	}
	var cpu int64
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		p, err := profile.ParseData(data)
		if err != nil {
			t.Fatalf("%s does not parse as pprof: %v", f, err)
		}
		idx := -1
		for i, st := range p.SampleType {
			if st.Type == "samples" {
				idx = i
			}
		}
		if idx < 0 {
			continue
		}
		for _, s := range p.Sample {
			cpu += s.Value[idx]
		}
	}
	if cpu != totals[schema.OriginCPUSampling] {
		t.Fatalf("pprof files hold %d CPU samples, the dump %d", cpu, totals[schema.OriginCPUSampling])
	}
}

func TestReplayCorruptDump(t *testing.T) {
	dump, _ := writeSynthDump(t, 1000)
	data, err := os.ReadFile(dump)
	if err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(t.TempDir(), "truncated.dump")
	if err := os.WriteFile(truncated, data[:len(data)-100], 0o600); err != nil {
		t.Fatal(err)
	}
	err = run(t, "replay", "--output-dir", t.TempDir(), truncated)
	if err == nil || !strings.Contains(err.Error(), "byte") || !errors.Is(err, ipc.ErrCorrupt) && !strings.Contains(err.Error(), "truncated") {
		t.Fatalf("replay of a truncated dump: %v; want an error naming the byte offset", err)
	}

	// One flipped byte in a batch's payload (protocol 1.2 replayed it into
	// wrong numbers) fails the frame's checksum: replay names the frame.
	d, err := ipc.OpenDump(dump)
	if err != nil {
		t.Fatal(err)
	}
	var batches []int64 // start of each batch frame and of the frame after it
	for {
		at := d.Offset()
		f, err := d.Next()
		if n := len(batches); n%2 == 1 {
			batches = append(batches, at)
		}
		if err != nil {
			break
		}
		if f.Type == ipc.FrameBatch {
			batches = append(batches, at)
		}
	}
	d.Close()
	if len(batches) < 4 {
		t.Fatalf("dump has %d batches, want 2 or more", len(batches)/2)
	}
	for _, tt := range []struct{ pos, at int64 }{
		{batches[0] + ipc.FrameOverhead + 100, batches[0]}, // inside the first batch's payload
		{batches[1] - 1, batches[0]},                       // its last byte
		{batches[2] + ipc.FrameOverhead + 7, batches[2]},   // early in the second batch
	} {
		pos, at := tt.pos, tt.at
		flipped := bytes.Clone(data)
		flipped[pos] ^= 0x04
		path := filepath.Join(t.TempDir(), "flipped.dump")
		if err := os.WriteFile(path, flipped, 0o600); err != nil {
			t.Fatal(err)
		}
		err := run(t, "replay", "--output-dir", t.TempDir(), path)
		if !errors.Is(err, ipc.ErrChecksum) || !strings.Contains(err.Error(), fmt.Sprintf("dump corrupt at byte %d:", at)) {
			t.Fatalf("replay with byte %d flipped: %v; want a checksum error naming byte %d", pos, err, at)
		}
	}
}

// servedRun is serve running on a goroutine, as the encoder under test.
type servedRun struct {
	done chan struct{} // closed when serve has returned
	err  error
}

func startServe(ctx context.Context, f *serveFlags) *servedRun {
	s := &servedRun{done: make(chan struct{})}
	go func() {
		defer close(s.done)
		s.err = serve(ctx, f, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	}()
	return s
}

// wait waits for serve to return and returns its error.
func (s *servedRun) wait() error {
	<-s.done
	return s.err
}

// String says how serve ended, for a failure message; empty while it runs.
func (s *servedRun) String() string {
	select {
	case <-s.done:
		return fmt.Sprintf("(serve returned %v) ", s.err)
	default:
		return ""
	}
}

// serveSynth runs serve with output flags set by configure, streams a
// synthetic session of n samples to it through the real ipc client over a
// real socket, waits until every batch is acknowledged (describe adds
// context to a timeout) and serve has stopped, and returns what was sent.
// newTestClient is a sampler-side client of the encoder serving on sock as
// uid, retrying quickly.
func newTestClient(t *testing.T, sock string, uid uint32) *ipc.Client {
	t.Helper()
	cfg := ipc.DefaultClientConfig()
	cfg.Path = sock
	cfg.PeerUIDs = []uint32{uid}
	cfg.MinBackoff = 10 * time.Millisecond
	client, err := ipc.NewClient(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// onServeClient, when set by a test, sees serveSynth's sampler-side client
// before it runs.
var onServeClient func(*ipc.Client)

func serveSynth(t *testing.T, n int, configure func(o *outputFlags), describe func() string) []synth.Message {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s.sock")
	uid := uint(os.Getuid())
	f := &serveFlags{socket: sock, allowedUIDs: []uint{uid}}
	f.out.register(pflag.NewFlagSet("test", pflag.ContinueOnError))
	f.out.confine = false // serve runs in the test process
	f.out.def.Remote.Insecure = true
	f.out.profilingDuration = time.Second
	configure(&f.out)
	if err := f.out.validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := startServe(ctx, f)

	client := newTestClient(t, sock, uint32(uid))
	if onServeClient != nil {
		onServeClient(client)
	}
	cfg := synth.DefaultConfig()
	cfg.Samples = n
	msgs, hello, batches := streamtest.Session(t, cfg)
	sampler := streamtest.Start(t, client, hello)
	sampler.WaitAcked(t, sampler.Send(t, batches...), 30*time.Second, served.done, func() string { return served.String() + describe() })
	sampler.Stop()
	cancel()
	if err := served.wait(); err != nil {
		t.Fatalf("serve: %v", err)
	}
	return msgs
}

// TestServeAcksAfterExport drives serve through a real socket with the
// real ipc client: batches reach the receiver once and are acknowledged.
func TestServeAcksAfterExport(t *testing.T) {
	recv := otlptest.StartReceiver(t)
	msgs := serveSynth(t, 2000, func(o *outputFlags) {
		o.def.Remote.Address = recv.Addr()
		o.debuginfo.disable = true // the OTLP test receiver has no DebuginfoService
	}, func() string { return "" })
	var total int64
	for _, m := range msgs {
		if m.Kind == synth.KindBatch {
			for _, s := range m.Batch.Samples {
				if s.Origin == schema.OriginCPUSampling {
					total += s.Value
				}
			}
		}
	}
	var got int64
	for _, s := range recv.Samples(t) {
		if s.SampleType == "samples" {
			got += s.Total()
		}
	}
	if got != total {
		t.Fatalf("receiver got %d CPU samples, sent %d", got, total)
	}
}
