package sampler

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"time"

	"go.opentelemetry.io/ebpf-profiler/tracer"
)

// tracerLoadAttempts bounds the loads of the tracer when its start-up
// probe fails (isStartupProbeRace).
const tracerLoadAttempts = 5

// tracerLoadPause is the pause between two loads: other threads of the
// process are less likely to be in a syscall at the same moment again.
const tracerLoadPause = 100 * time.Millisecond

// isStartupProbeRace reports whether err is the tracer's start-up probe
// failing: NewTracer finds the kernel's task and stack layout by attaching
// a program to the raw sys_enter tracepoint and reading the current task
// in its own next syscall. The program runs for every syscall of every
// thread of the process while attached, and two threads entering
// syscalls at once share its one result slot: the second then reads at
// the first's stack pointer plus its own task's address (out of range,
// -ERANGE) and overwrites the result. Emulated CPUs and PREEMPT_RT widen
// that window; a new load usually passes. Upstream's error is unexported
// and wrapped with %v, so its text is what can be matched.
func isStartupProbeRace(err error) bool {
	if err == nil {
		return false
	}
	s := err.Error()
	return strings.Contains(s, "failed to determine system configs") &&
		strings.Contains(s, "system analysis helper failed")
}

// loadTracer calls load (NewTracer) until it succeeds, fails otherwise
// than in its start-up probe, or the probe failed tracerLoadAttempts
// times; each retry is logged and counted.
func loadTracer(ctx context.Context, load func() (*tracer.Tracer, error), logger *slog.Logger, m *samplerMetrics) (*tracer.Tracer, error) {
	for attempt := 1; ; attempt++ {
		trc, err := load()
		if err == nil {
			return trc, nil
		}
		if !isStartupProbeRace(err) {
			return nil, fmt.Errorf("load eBPF tracer: %w", err)
		}
		if attempt == tracerLoadAttempts {
			return nil, fmt.Errorf("load eBPF tracer: the tracer's start-up probe (a sys_enter program reading the kernel's task layout) failed %d times in a row: %w", attempt, err)
		}
		m.tracerLoadRetries.Inc()
		logger.Warn("the eBPF tracer's start-up probe failed (other threads of the sampler were in syscalls at the same moment); loading the tracer again",
			"attempt", attempt, "attempts", tracerLoadAttempts, "reason", err.Error())
		// The failed load closed its program and link but left its probe
		// maps to the garbage collector's cleanups: collect them now.
		runtime.GC()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("load eBPF tracer: stopped after the start-up probe failed: %w", err)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("load eBPF tracer: stopped after the start-up probe failed: %w", err)
		case <-time.After(tracerLoadPause):
		}
	}
}
