package sampler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tandem-profiler/tandem/internal/counters"
	"github.com/tandem-profiler/tandem/schema"
	"github.com/tandem-profiler/tandem/test/privtest"
)

// Privileged tests load the real tracer. They need root with CAP_BPF,
// CAP_PERFMON, CAP_SYS_PTRACE and CAP_CHECKPOINT_RESTORE/CAP_SYS_ADMIN. They
// skip, saying why, when that is missing, except under CI=true, where a
// missing privilege is a failure: CI runs as root on a machine where eBPF
// works.

func requirePrivileged(t *testing.T) {
	t.Helper()
	privtest.RequireRoot(t)
	if err := probeBPFSyscall(); err != nil {
		privtest.SkipOrFail(t, "BPF unavailable: %v", err)
	}
}

// hostProblem turns a host error from Run into a skip (or a CI failure).
func hostProblem(t *testing.T, err error) {
	t.Helper()
	for _, sentinel := range []error{ErrMissingCapabilities, ErrNoBPF, ErrKernelTooOld, ErrMemlock} {
		if errors.Is(err, sentinel) {
			privtest.SkipOrFail(t, "host cannot run the tracer: %v", err)
		}
	}
}

func testLogger() *slog.Logger {
	level := slog.LevelWarn
	if testing.Verbose() {
		level = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}

// metricValue sums the series named name in set.
func metricValue(t *testing.T, set *counters.Set, name string) float64 {
	t.Helper()
	var v float64
	for _, smp := range set.Snapshot() {
		if smp.Name == name {
			v += smp.Value
		}
	}
	return v
}

// describeFrame renders a frame for the test log.
func describeFrame(b *schema.Batch, f schema.Frame) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s %#x", f.Kind, f.AddressOrLine)
	if f.Error {
		sb.WriteString(" error")
	}
	if f.Mapping != 0 {
		m := b.Mappings[f.Mapping-1]
		fmt.Fprintf(&sb, " file=%s", b.String(m.FileName))
		if id := b.String(m.GNUBuildID); id != "" {
			fmt.Fprintf(&sb, " gnu=%.12s", id)
		}
		if id := b.String(m.GoBuildID); id != "" {
			fmt.Fprintf(&sb, " go=%.12s", id)
		}
	}
	if fn := b.String(f.FunctionName); fn != "" {
		fmt.Fprintf(&sb, " fn=%s", fn)
	}
	if src := b.String(f.SourceFile); src != "" {
		fmt.Fprintf(&sb, " src=%s:%d", src, f.SourceLine)
	}
	return sb.String()
}

func TestPrivilegedSamplesBusyChild(t *testing.T) {
	requirePrivileged(t)

	child := exec.Command("sha256sum", "/dev/zero")
	if err := child.Start(); err != nil {
		t.Fatalf("start busy child: %v", err)
	}
	t.Cleanup(func() {
		_ = child.Process.Kill()
		_ = child.Wait()
	})
	childPID := uint32(child.Process.Pid)

	type childStats struct {
		samples, nonEmpty int
		ownFrames         bool // a frame in sha256sum's own mapping
		comm, exe         string
		logged            int
	}
	var cs childStats
	firstBatch := make(chan struct{})
	sink := &recordingSink{acceptExecs: true, stats: SinkStats{Connected: true}}
	sink.onBatch = func(b *schema.Batch) { // under sink.mu
		if len(sink.batches) == 1 {
			close(firstBatch)
		}
		for _, s := range b.Samples {
			p := b.Processes[s.Process]
			if p.PID != childPID {
				continue
			}
			cs.samples++
			cs.comm, cs.exe = b.String(p.Comm), b.String(p.ExecutablePath)
			stack := b.Stack(s.Stack)
			if len(stack) == 0 {
				continue
			}
			cs.nonEmpty++
			for _, fi := range stack {
				f := b.Frames[fi]
				if f.Mapping != 0 && b.String(b.Mappings[f.Mapping-1].FileName) == "sha256sum" {
					cs.ownFrames = true
				}
			}
			if cs.logged < 2 {
				cs.logged++
				lines := []string{fmt.Sprintf("sample pid=%d tid=%d cpu=%d comm=%s thread=%s origin=%s frames=%d",
					p.PID, s.TID, s.CPU, b.String(p.Comm), b.String(s.ThreadName), s.Origin, len(stack))}
				for i, fi := range stack {
					lines = append(lines, fmt.Sprintf("  #%d %s", i, describeFrame(b, b.Frames[fi])))
				}
				t.Log(strings.Join(lines, "\n"))
			}
		}
	}

	cfg := DefaultConfig()
	cfg.NodeName = "privileged-test"
	cfg.FlushInterval = 500 * time.Millisecond
	reg := new(counters.Set)
	s, err := New(cfg, sink, testLogger(), reg)
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	start := time.Now()
	go func() { errc <- s.Run(ctx) }()

	const sampleFor = 5 * time.Second
	select {
	case err := <-errc:
		hostProblem(t, err)
		t.Fatalf("Run returned before sampling: %v", err)
	case <-firstBatch:
	case <-time.After(60 * time.Second):
		t.Fatal("no batch within 60 s")
	}
	loadTime := metricValue(t, reg, "tandem_sampler_tracer_load_seconds")
	sampling := time.Now()
	time.Sleep(sampleFor)
	cancel()
	stopAt := time.Now()
	if err := <-errc; err != nil {
		t.Fatalf("Run: %v", err)
	}
	stopTime := time.Since(stopAt)
	elapsed := stopAt.Sub(sampling)
	defer sink.closeFiles(t)

	if err := sink.err(); err != nil {
		t.Fatalf("sink: %v", err)
	}
	traces := metricValue(t, reg, "tandem_sampler_reporter_traces_total")
	t.Logf("tracer load %.2fs, first batch after %v, %v sampling: %.0f traces (%.1f/s), child samples %d (%d with stacks), stop took %v, %d batches, %d executables",
		loadTime, sampling.Sub(start).Round(time.Millisecond), elapsed.Round(time.Millisecond),
		traces, traces/elapsed.Seconds(), cs.samples, cs.nonEmpty, stopTime.Round(time.Millisecond),
		len(sink.batches), len(sink.notices))

	if cs.nonEmpty < 10 {
		t.Errorf("child pid %d: %d samples with non-empty stacks in %v at %d Hz, want >= 10", childPID, cs.nonEmpty, elapsed, cfg.SamplesPerSecond)
	}
	if !cs.ownFrames {
		t.Errorf("child pid %d: no frame in the sha256sum mapping", childPID)
	}
	if cs.comm != "sha256sum" {
		t.Errorf("child comm = %q, want sha256sum (trailing newline trimmed)", cs.comm)
	}
	if !strings.HasSuffix(cs.exe, "/sha256sum") {
		t.Errorf("child executable = %q, want .../sha256sum", cs.exe)
	}
	// Sequences are 1, 2, 3, ... without gaps.
	for i, seq := range sink.seqs {
		if seq != uint64(i+1) {
			t.Fatalf("sequence #%d = %d, want %d", i, seq, i+1)
		}
	}
	if got := s.LastSequence(); got != uint64(len(sink.seqs)) {
		t.Errorf("LastSequence = %d, want %d", got, len(sink.seqs))
	}
	if stopTime > cfg.ShutdownTimeout {
		t.Errorf("stop took %v, more than the shutdown timeout %v", stopTime, cfg.ShutdownTimeout)
	}
}
