package main

import (
	"log/slog"
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// logMetrics logs the non-zero counters and gauges of reg on one line:
// the sampler has no port to scrape.
func logMetrics(logger *slog.Logger, reg prometheus.Gatherer, msg string) {
	mfs, err := reg.Gather()
	if err != nil {
		logger.Warn("gather metrics", "err", err)
		return
	}
	var attrs []any
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			v, ok := value(mf.GetType(), m)
			if !ok || v == 0 {
				continue
			}
			attrs = append(attrs, slog.Float64(metricKey(mf.GetName(), m.GetLabel()), v))
		}
	}
	sort.Slice(attrs, func(i, j int) bool { return attrs[i].(slog.Attr).Key < attrs[j].(slog.Attr).Key })
	logger.Info(msg, attrs...)
}

func value(t dto.MetricType, m *dto.Metric) (float64, bool) {
	switch t {
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue(), true
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue(), true
	case dto.MetricType_HISTOGRAM:
		return float64(m.GetHistogram().GetSampleCount()), true
	}
	return 0, false
}

func metricKey(name string, labels []*dto.LabelPair) string {
	name = strings.TrimPrefix(name, "tandem_")
	if len(labels) == 0 {
		return name
	}
	var b strings.Builder
	b.WriteString(name)
	for _, l := range labels {
		b.WriteString(".")
		b.WriteString(l.GetValue())
	}
	return b.String()
}
