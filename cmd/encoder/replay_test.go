package main

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/tandem-profiler/tandem/internal/cli"
	"github.com/tandem-profiler/tandem/internal/synth"
	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/schema"
	"github.com/tandem-profiler/tandem/test/otlptest"
	"github.com/tandem-profiler/tandem/test/parcatest"
	"github.com/tandem-profiler/tandem/test/waittest"
)

// TestReplayExitCodes: replay exits 3 (exitLost) when any sample was lost,
// whatever the failure, and 0 when everything was delivered.
func TestReplayExitCodes(t *testing.T) {
	dump, _ := writeSynthDump(t, 1000)
	plaintext := otlptest.StartReceiver(t)
	rejecting := otlptest.StartReceiver(t)
	rejecting.Reject(func(otlptest.Call) error { return status.Error(codes.InvalidArgument, "no") })
	web := httptest.NewServer(http.NotFoundHandler())
	defer web.Close()
	ok := otlptest.StartReceiver(t)
	// Refuses the first request as a restarting server does, then takes
	// every request and never answers (until the test ends).
	hanging := otlptest.StartReceiver(t)
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	hanging.Reject(func(c otlptest.Call) error {
		if c.N == 1 {
			return status.Error(codes.Unavailable, "restarting")
		}
		<-hang
		return nil
	})
	remote := func(addr string, extra ...string) []string {
		return append([]string{"--remote-store-address", addr, "--debuginfo-upload-disable", "--give-up-after", "300ms"}, extra...)
	}
	tests := []struct {
		name string
		args []string
		code int // 0: success
	}{
		{"delivered", remote(ok.Addr(), "--remote-store-insecure"), 0},
		{"store unreachable", remote(otlptest.FreeAddr(t), "--remote-store-insecure"), exitLost},
		{"TLS against a plaintext server", remote(plaintext.Addr()), exitLost},
		{"not a gRPC server", remote(strings.TrimPrefix(web.URL, "http://"), "--remote-store-insecure"), exitLost},
		{"store rejects", remote(rejecting.Addr(), "--remote-store-insecure"), exitLost},
		// Given up at the give-up time, not in an attempt that hangs for
		// the 30 s RPC timeout, past the bound on closing (exit 1).
		{"store fails, then never answers", remote(hanging.Addr(), "--remote-store-insecure"), exitLost},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := run(t, append(append([]string{"replay"}, tt.args...), dump)...)
			if tt.code == 0 {
				if err != nil {
					t.Fatalf("replay = %v, want success", err)
				}
				return
			}
			if cli.Status(err) != tt.code {
				t.Fatalf("replay = %v, want exit status %d", err, tt.code)
			}
		})
	}
}

// TestReplayNeverTwice replays a synthetic dump, with its probes, to a
// receiver that does not take probe profiles, answering in each of the
// ways real receivers do: no sample is stored twice, the receiver holds
// every sample that is not a probe where it stores valid profiles, and
// replay exits 3 (samples lost or unconfirmed).
func TestReplayNeverTwice(t *testing.T) {
	dump, totals := writeSynthDump(t, 2000)
	for _, b := range otlptest.Behaviours {
		t.Run(b.String(), func(t *testing.T) {
			recv := otlptest.StartReceiver(t)
			recv.SetBehaviour(b)
			recv.RefuseProfiles(otlptest.RefuseType("events"))
			err := run(t, "replay", "--remote-store-address", recv.Addr(), "--remote-store-insecure", "--debuginfo-upload-disable", dump)
			if cli.Status(err) != exitLost {
				t.Fatalf("replay = %v, want exit status %d", err, exitLost)
			}
			if n := recv.Duplicates(); n != 0 {
				t.Errorf("%d samples stored twice", n)
			}
			stored, probes := recv.Observations(t), int(totals[schema.OriginProbe])
			want := 0
			if b != otlptest.AllOrNothing {
				want = 2000 - probes
			}
			if probes == 0 || stored != want {
				t.Errorf("the receiver holds %d samples, want %d (%d probes refused)", stored, want, probes)
			}
		})
	}
}

// TestReplayOutputDirUnwritable: a directory that cannot be created fails
// replay at once, naming it.
func TestReplayOutputDirUnwritable(t *testing.T) {
	dump, _ := writeSynthDump(t, 100)
	file := filepath.Join(t.TempDir(), "not-a-dir")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	err := run(t, "replay", "--output-dir", filepath.Join(file, "profiles"), dump)
	if err == nil || !strings.Contains(err.Error(), "not-a-dir") {
		t.Fatalf("replay = %v, want an error naming the directory", err)
	}
}

// writeConfig writes a --config-path file.
func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tandem.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// everyOutputConfig writes an outputs file with one output of each kind:
// OTLP to otlpAddr, Arrow v2 to parcaAddr, pprof files in dir.
func everyOutputConfig(t *testing.T, otlpAddr, parcaAddr, dir string) string {
	t.Helper()
	return writeConfig(t, fmt.Sprintf(`outputs:
  - name: collector
    format: otlp
    address: %s
    insecure: true
  - name: parca
    format: arrow-v2
    address: %s
    insecure: true
  - name: local
    format: pprof
    dir: %s
`, otlpAddr, parcaAddr, dir))
}

// TestReplayFanOut replays one dump to three outputs of an outputs file:
// each gets every sample.
func TestReplayFanOut(t *testing.T) {
	dump, stream := synthStream(t, 3000)
	recv := otlptest.StartReceiver(t)
	parca := parcatest.StartServer(t)
	dir := t.TempDir()
	cfg := everyOutputConfig(t, recv.Addr(), parca.Addr(), dir)
	if err := run(t, "replay", "--config-path", cfg, "--debuginfo-upload-disable", "--profiling-duration", "1s", dump); err != nil {
		t.Fatalf("replay: %v (parca: %v)", err, parca.Errors())
	}
	produced := 0
	var cpu int64
	for _, b := range stream.Batches {
		produced += len(b.Samples)
		for _, s := range b.Samples {
			if s.Origin == schema.OriginCPUSampling {
				cpu += s.Value
			}
		}
	}
	if got := recv.Observations(t); got != produced {
		t.Errorf("collector got %d samples of %d", got, produced)
	}
	if diff := parcatest.Diff(parcatest.Expected(stream, "v2", nil), parca.Rows(), 5); diff != nil {
		t.Errorf("parca rows differ from the stream:\n%s", strings.Join(diff, "\n"))
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.pb.gz"))
	if len(files) < 2 {
		t.Errorf("%d pprof files, want one per 1 s window", len(files))
	}
}

// TestReplayOneOutputDown: with one of two outputs down, the other gets
// everything and replay exits 3.
func TestReplayOneOutputDown(t *testing.T) {
	dump, _ := writeSynthDump(t, 1000)
	recv := otlptest.StartReceiver(t)
	cfg := writeConfig(t, fmt.Sprintf(`outputs:
  - name: up
    format: otlp
    address: %s
    insecure: true
  - name: down
    format: otlp
    address: %s
    insecure: true
`, recv.Addr(), otlptest.FreeAddr(t)))
	err := run(t, "replay", "--config-path", cfg, "--debuginfo-upload-disable", "--give-up-after", "300ms", dump)
	if cli.Status(err) != exitLost {
		t.Fatalf("replay = %v, want exit status %d", err, exitLost)
	}
	if got := recv.Observations(t); got != 1000 {
		t.Errorf("the output that was up got %d samples of 1000", got)
	}
}

func TestOutputsFileFlags(t *testing.T) {
	cfg := writeConfig(t, "outputs:\n  - name: local\n    format: pprof\n    dir: /tmp/x\n")
	bad := writeConfig(t, "outputs:\n  - name: local\n    format: pprof\n    dri: /tmp/x\n")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"with --remote-store-address", []string{"--config-path", cfg, "--remote-store-address", "x:1"}, "replace the default output --remote-store-address"},
		{"with --output-dir", []string{"--config-path", cfg, "--output-dir", "/tmp/y"}, "--output-dir"},
		{"with a default output's TLS flag", []string{"--config-path", cfg, "--remote-store-ca-file", "/ca.pem"}, "--remote-store-ca-file"},
		{"unknown key", []string{"--config-path", bad}, `line 4: unknown key "dri"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseOutput(t, tt.args...)
			var ue cli.UsageError
			if err == nil || !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want a usage error mentioning %q", err, tt.want)
			}
		})
	}
	if _, err := parseOutput(t, "--config-path", cfg); err != nil {
		t.Fatalf("outputs file alone: %v", err)
	}
}

// TestReplayStreamTime: every flush window, the last one too, is cut by
// the samples' own time, so a dump replayed long after it was recorded
// exports profiles that claim the time it covers.
func TestReplayStreamTime(t *testing.T) {
	dump, _ := writeSynthDump(t, 2000)
	recv := otlptest.StartReceiver(t)
	if err := run(t, "replay", "--remote-store-address", recv.Addr(), "--remote-store-insecure", "--profiling-duration", "2s", dump); err != nil {
		t.Fatal(err)
	}
	cfg := synth.DefaultConfig()
	start, end := cfg.Start.UnixNano(), cfg.Start.Add(cfg.Duration).UnixNano()
	n := 0
	for _, req := range recv.Requests() {
		rps := req.ResourceProfiles()
		for i := 0; i < rps.Len(); i++ {
			sps := rps.At(i).ScopeProfiles()
			for j := 0; j < sps.Len(); j++ {
				ps := sps.At(j).Profiles()
				for k := 0; k < ps.Len(); k++ {
					p := ps.At(k)
					from, to := int64(p.Time()), int64(p.Time())+int64(p.DurationNano())
					// Windows are cut between batches, so one may run a batch
					// (1.25 s here) past its 2 s.
					if from < start || to > end || to-from > int64(2*time.Second+1250*time.Millisecond) {
						t.Fatalf("profile covers [%v, %v], the dump [%v, %v] in 2 s windows",
							time.Unix(0, from).UTC(), time.Unix(0, to).UTC(), time.Unix(0, start).UTC(), time.Unix(0, end).UTC())
					}
					n++
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no profiles")
	}
}

// TestReplayTimestampsNow: --timestamps now moves every sample by one
// offset so that the dump's last sample is the time replay ran; the
// default keeps the recorded times.
func TestReplayTimestampsNow(t *testing.T) {
	dump, _ := writeSynthDump(t, 2000)
	stamps := func(extra ...string) []uint64 {
		t.Helper()
		recv := otlptest.StartReceiver(t)
		args := append([]string{"replay", "--remote-store-address", recv.Addr(), "--remote-store-insecure", "--debuginfo-upload-disable", dump}, extra...)
		if err := run(t, args...); err != nil {
			t.Fatal(err)
		}
		var ts []uint64
		for _, s := range recv.Samples(t) {
			ts = append(ts, s.Timestamps...)
		}
		slices.Sort(ts)
		return ts
	}
	original := stamps()
	before := time.Now()
	moved := stamps("--timestamps", "now")
	after := time.Now()
	if len(original) != 2000 || len(moved) != len(original) {
		t.Fatalf("%d and %d samples, want 2000", len(original), len(moved))
	}
	cfg := synth.DefaultConfig()
	if first := time.Unix(0, int64(original[0])); first.Before(cfg.Start) || first.After(cfg.Start.Add(cfg.Duration)) {
		t.Errorf("by default the first sample is at %v, want the dump's time from %v", first.UTC(), cfg.Start.UTC())
	}
	if last := time.Unix(0, int64(moved[len(moved)-1])); last.Before(before) || last.After(after) {
		t.Errorf("--timestamps now: last sample at %v, want the replay's time, between %v and %v", last.UTC(), before.UTC(), after.UTC())
	}
	shift := moved[0] - original[0]
	for i := range moved {
		if moved[i]-original[i] != shift {
			t.Fatalf("sample %d moved by %d ns, the first by %d: relative times not kept", i, moved[i]-original[i], shift)
		}
	}
}

// TestReplayTimestampsNowCorruptDump: a dump that cannot be read to its
// end replays with --timestamps now as it does without: the samples
// before the damage are delivered, the error names the dump, and the last
// of those samples is moved to now (the end is found where the replay
// stops, not refused for the whole dump).
func TestReplayTimestampsNowCorruptDump(t *testing.T) {
	dump, _ := writeSynthDump(t, 2000)
	data, err := os.ReadFile(dump)
	if err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(t.TempDir(), "truncated.dump")
	if err := os.WriteFile(truncated, data[:len(data)/2], 0o600); err != nil {
		t.Fatal(err)
	}
	replayed := func(extra ...string) ([]uint64, error) {
		t.Helper()
		recv := otlptest.StartReceiver(t)
		args := append([]string{"replay", "--remote-store-address", recv.Addr(), "--remote-store-insecure", "--debuginfo-upload-disable", truncated}, extra...)
		err := run(t, args...)
		var ts []uint64
		for _, s := range recv.Samples(t) {
			ts = append(ts, s.Timestamps...)
		}
		slices.Sort(ts)
		return ts, err
	}
	original, origErr := replayed()
	before := time.Now()
	moved, movedErr := replayed("--timestamps", "now")
	after := time.Now()
	if origErr == nil || movedErr == nil || !strings.Contains(movedErr.Error(), truncated) {
		t.Fatalf("replay of a truncated dump: %v, with --timestamps now %v; want both to name the dump", origErr, movedErr)
	}
	if len(original) == 0 || len(moved) != len(original) {
		t.Fatalf("%d samples delivered with --timestamps now, %d without; want the same, more than 0", len(moved), len(original))
	}
	if last := time.Unix(0, int64(moved[len(moved)-1])); last.Before(before) || last.After(after) {
		t.Errorf("--timestamps now: last sample at %v, want the replay's time, between %v and %v", last.UTC(), before.UTC(), after.UTC())
	}
}

// TestLineGuard: a unit test of replay's terminal writer, not a test that
// waits on logs. Any line written while a progress line is on screen
// erases it first, so the two never share a line; the bytes asserted are
// the writer's output for two arbitrary lines.
func TestLineGuard(t *testing.T) {
	var buf strings.Builder
	g := &lineGuard{w: &buf}
	g.progress("replay a.dump:  10.0%")
	g.progress("replay a.dump:  20.0%")
	fmt.Fprintln(g, "first line")
	g.progress("replay a.dump:  30.0%")
	g.done()
	fmt.Fprintln(g, "second line")
	want := eraseLine + "replay a.dump:  10.0%" + eraseLine + "replay a.dump:  20.0%" + eraseLine + "first line\n" +
		eraseLine + "replay a.dump:  30.0%\n" + "second line\n"
	if buf.String() != want {
		t.Errorf("terminal got %q, want %q", buf.String(), want)
	}
}

// TestServeStoreDownThenBack drives serve over a real socket with the real
// sampler-side client while the store is unreachable: nothing is
// acknowledged during the outage, and once the store is back it gets every
// sample and the sampler every acknowledgement. The outage is three failed
// attempts, counted on the retry policy's fake clock (no sleeping).
func TestServeStoreDownThenBack(t *testing.T) {
	addr := otlptest.FreeAddr(t)
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	var recv *otlptest.Receiver
	started := make(chan struct{})
	onServeClient = func(c *ipc.Client) {
		go func() {
			defer close(started)
			for failed := 1; ; failed++ {
				waittest.For(t, "the exporter to wait after a failed attempt", clk.HasWaiters)
				if failed == 3 {
					break
				}
				clk.Step(2 * time.Second) // past the retry policy's max (1 s, +20%): the next attempt
			}
			if a := c.Stats().AckedSeq; a != 0 {
				t.Errorf("sequence %d acknowledged while the store was down", a)
			}
			recv = otlptest.StartReceiverAt(t, addr)
			// From now on every wait is over at once.
			stepping := make(chan struct{})
			t.Cleanup(func() { close(stepping) })
			go func() {
				for {
					select {
					case <-stepping:
						return
					case <-time.After(time.Millisecond):
						if clk.HasWaiters() {
							clk.Step(2 * time.Second)
						}
					}
				}
			}()
		}()
	}
	defer func() { onServeClient = nil }()
	msgs := serveSynth(t, 2000, func(o *outputFlags) {
		o.def.Remote.Address = addr
		o.def.Queue.Retry.Max, o.def.Queue.Retry.Clock = time.Second, clk
		o.debuginfo.disable = true
	}, func() string { return "store down then back" })
	<-started
	produced := 0
	for _, m := range msgs {
		if m.Kind == synth.KindBatch {
			produced += len(m.Batch.Samples)
		}
	}
	if got := recv.Observations(t); got != produced {
		t.Fatalf("the store got %d samples of %d", got, produced)
	}
}
