package main

import (
	"context"
	"log/slog"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/schema"
)

// defaultStatsInterval is how often the sampler sends its metrics in-band.
const defaultStatsInterval = 15 * time.Second

// samplerStats reads the counters and gauges of reg (histograms stay in
// the log) into a SamplerStats message.
func samplerStats(reg prometheus.Gatherer, now time.Time) (*schema.SamplerStats, error) {
	mfs, err := reg.Gather()
	if err != nil {
		return nil, err
	}
	st := &schema.SamplerStats{TimeUnixNano: now.UnixNano()}
	for _, mf := range mfs {
		counter := mf.GetType() == dto.MetricType_COUNTER
		if !counter && mf.GetType() != dto.MetricType_GAUGE {
			continue
		}
		for _, m := range mf.GetMetric() {
			v, _ := value(mf.GetType(), m)
			sm := schema.SamplerMetric{Name: mf.GetName(), Value: v, Counter: counter}
			for _, l := range m.GetLabel() {
				sm.Labels = append(sm.Labels, schema.MetricLabel{Name: l.GetName(), Value: l.GetValue()})
			}
			sort.Slice(sm.Labels, func(i, j int) bool { return sm.Labels[i].Name < sm.Labels[j].Name })
			st.Metrics = append(st.Metrics, sm)
		}
	}
	return st, nil
}

// sendStats sends the sampler's metrics to the encoder every interval
// until ctx ends.
func sendStats(ctx context.Context, client *ipc.Client, reg prometheus.Gatherer, interval time.Duration, logger *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	var buf []byte
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			st, err := samplerStats(reg, now)
			if err == nil {
				buf, err = schema.EncodeSamplerStats(st, buf[:0])
			}
			if err != nil {
				logger.Warn("sampler stats not sent", "err", err)
				continue
			}
			client.SendStats(buf)
		}
	}
}
