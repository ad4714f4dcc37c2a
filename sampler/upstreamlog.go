package sampler

import (
	"context"
	"log/slog"
	"regexp"

	"github.com/tandem-profiler/tandem/internal/counters"
)

// benignUpstreamLogs are the upstream profiler's log messages known to be
// harmless: they are logged at DEBUG, whatever level upstream gives them,
// and counted per name in tandem_sampler_tracer_benign_logs_total. Any
// other message keeps its level.
var benignUpstreamLogs = []struct {
	name string // the label value
	re   *regexp.Regexp
	// why it is harmless (documentation only)
	why string
}{
	{
		name: "unload_interpreter_gone",
		re:   regexp.MustCompile(`^Failed to unload interpreter for PID \d+: .*key does not exist$`),
		why: "a process that mapped an interpreter exited, or unmapped it, after its entry in the " +
			"interpreter's eBPF map was removed: there is nothing left to unload (logged at ERROR " +
			"11 times in two minutes of a Python workload)",
	},
}

// upstreamHandler is the slog.Handler the upstream profiler logs through:
// it routes benignUpstreamLogs to DEBUG, counted, and passes the rest on.
type upstreamHandler struct {
	next   slog.Handler
	counts []*counters.Counter // by index in benignUpstreamLogs
}

// newUpstreamHandler wraps next, counting in counts (one per entry of
// benignUpstreamLogs, see registerBenignUpstreamLogs).
func newUpstreamHandler(next slog.Handler, counts []*counters.Counter) *upstreamHandler {
	return &upstreamHandler{next: next, counts: counts}
}

// registerBenignUpstreamLogs registers one counter per entry of
// benignUpstreamLogs in set, in the table's order.
func registerBenignUpstreamLogs(set *counters.Set) ([]*counters.Counter, error) {
	counts := make([]*counters.Counter, len(benignUpstreamLogs))
	for i, b := range benignUpstreamLogs {
		c, err := set.Counter("tandem_sampler_tracer_benign_logs_total",
			"Messages of the upstream profiler known to be harmless, logged at DEBUG instead of their level, by message.",
			counters.Label{Name: "message", Value: b.name})
		if err != nil {
			return nil, err
		}
		counts[i] = c
	}
	return counts, nil
}

// Enabled is next's: a benign message arrives at its upstream level.
func (h *upstreamHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h *upstreamHandler) Handle(ctx context.Context, r slog.Record) error {
	for i, b := range benignUpstreamLogs {
		if !b.re.MatchString(r.Message) {
			continue
		}
		h.counts[i].Inc()
		if !h.next.Enabled(ctx, slog.LevelDebug) {
			return nil
		}
		r = r.Clone()
		r.Level = slog.LevelDebug
		r.AddAttrs(slog.String("benign", b.name))
		return h.next.Handle(ctx, r)
	}
	return h.next.Handle(ctx, r)
}

func (h *upstreamHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &upstreamHandler{next: h.next.WithAttrs(attrs), counts: h.counts}
}

func (h *upstreamHandler) WithGroup(name string) slog.Handler {
	return &upstreamHandler{next: h.next.WithGroup(name), counts: h.counts}
}
