package sampler

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"go.opentelemetry.io/ebpf-profiler/tracer"

	"github.com/tandem-profiler/tandem/internal/counters"
)

// errProbeRace is NewTracer's error when the start-up probe lost the race,
// as the tracer wraps it (seen on Debian 12's 6.1 and 6.12-rt in qemu).
var errProbeRace = errors.New("failed to load eBPF code: failed to set RODATA variables: " +
	"failed to determine system configs: system analysis helper failed at 0x20: numerical result out of range (helper err=-34)")

func TestIsStartupProbeRace(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errProbeRace, true},
		{errors.New("failed to load eBPF code: failed to set RODATA variables: failed to determine system configs: system analysis helper failed at 0xffffffff81000000: helper err=7"), true},
		// The probe not running at all (no syscall tracepoints) is not a race.
		{errors.New("failed to load eBPF code: failed to set RODATA variables: failed to determine system configs: system analysis request was not handled for pid 12 at 0x20"), false},
		{errors.New("failed to load eBPF code: load program: permission denied"), false},
		{errors.New("failed to read kernel symbols: open /proc/kallsyms: no such file or directory"), false},
	} {
		if got := isStartupProbeRace(tc.err); got != tc.want {
			t.Errorf("isStartupProbeRace(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestLoadTracerRetries(t *testing.T) {
	other := errors.New("failed to load eBPF code: load program: permission denied")
	ok := new(tracer.Tracer)
	for _, tc := range []struct {
		name      string
		results   []error // one per attempt; nil succeeds
		wantCalls int
		wantErr   []string // substrings of the error; none: success
	}{
		{name: "first load", results: []error{nil}, wantCalls: 1},
		{name: "probe race then success", results: []error{errProbeRace, errProbeRace, nil}, wantCalls: 3},
		{name: "other error is not retried", results: []error{other}, wantCalls: 1,
			wantErr: []string{"load eBPF tracer: ", "permission denied"}},
		{name: "probe race every time", results: []error{errProbeRace, errProbeRace, errProbeRace, errProbeRace, errProbeRace, nil}, wantCalls: tracerLoadAttempts,
			wantErr: []string{"the tracer's start-up probe", "failed 5 times in a row", "numerical result out of range (helper err=-34)"}},
		{name: "race then other error", results: []error{errProbeRace, other}, wantCalls: 2,
			wantErr: []string{"permission denied"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := new(counters.Set)
			m, err := newSamplerMetrics(set)
			if err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			logger := slog.New(slog.NewTextHandler(&logs, nil))
			calls := 0
			load := func() (*tracer.Tracer, error) {
				err := tc.results[calls]
				calls++
				if err != nil {
					return nil, err
				}
				return ok, nil
			}
			trc, err := loadTracer(context.Background(), load, logger, m)
			if calls != tc.wantCalls {
				t.Errorf("%d loads, want %d", calls, tc.wantCalls)
			}
			retries := calls - 1
			if got := m.tracerLoadRetries.Load(); got != uint64(retries) {
				t.Errorf("tandem_sampler_tracer_load_retries_total = %d, want %d", got, retries)
			}
			if warns := strings.Count(logs.String(), "level=WARN"); warns != retries {
				t.Errorf("%d warnings, want one per retry (%d):\n%s", warns, retries, logs.String())
			}
			for i := 1; i <= retries; i++ {
				line := strings.Split(logs.String(), "\n")[i-1]
				for _, want := range []string{"start-up probe failed", "attempt=" + string(rune('0'+i)), "attempts=5", "numerical result out of range"} {
					if !strings.Contains(line, want) {
						t.Errorf("warning %d lacks %q: %s", i, want, line)
					}
				}
			}
			if len(tc.wantErr) == 0 {
				if err != nil || trc != ok {
					t.Fatalf("loadTracer = %v, %v; want the tracer", trc, err)
				}
				return
			}
			if err == nil || trc != nil {
				t.Fatalf("loadTracer = %v, %v; want an error", trc, err)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
		})
	}
}

func TestLoadTracerStopsWhenCancelled(t *testing.T) {
	m, err := newSamplerMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	load := func() (*tracer.Tracer, error) {
		calls++
		cancel()
		return nil, errProbeRace
	}
	if _, err := loadTracer(ctx, load, slog.New(slog.DiscardHandler), m); err == nil || !strings.Contains(err.Error(), "stopped") {
		t.Errorf("loadTracer after cancel: %v, want stopped", err)
	}
	if calls != 1 {
		t.Errorf("%d loads after cancel, want 1", calls)
	}
}
