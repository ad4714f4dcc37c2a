package main

import (
	"log/slog"
	"strings"

	"github.com/tandem-profiler/tandem/internal/counters"
)

// logMetrics logs the non-zero counters and gauges of set on one line:
// the sampler has no port to scrape.
func logMetrics(logger *slog.Logger, set *counters.Set, msg string) {
	var attrs []any
	for _, s := range set.Snapshot() { // sorted by name and labels
		if s.Value == 0 {
			continue
		}
		attrs = append(attrs, slog.Float64(metricKey(s.Name, s.Labels), s.Value))
	}
	logger.Info(msg, attrs...)
}

func metricKey(name string, labels []counters.Label) string {
	name = strings.TrimPrefix(name, "tandem_")
	if len(labels) == 0 {
		return name
	}
	var b strings.Builder
	b.WriteString(name)
	for _, l := range labels {
		b.WriteString(".")
		b.WriteString(l.Value)
	}
	return b.String()
}
