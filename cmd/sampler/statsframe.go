package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/tandem-profiler/tandem/internal/counters"
	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/schema"
)

// defaultStatsInterval is how often the sampler sends its metrics in-band.
const defaultStatsInterval = 15 * time.Second

// samplerStats reads every counter and gauge of set into a SamplerStats
// message.
func samplerStats(set *counters.Set, now time.Time) *schema.SamplerStats {
	snap := set.Snapshot()
	st := &schema.SamplerStats{TimeUnixNano: now.UnixNano(), Metrics: make([]schema.SamplerMetric, 0, len(snap))}
	for _, s := range snap {
		sm := schema.SamplerMetric{Name: s.Name, Value: s.Value, Counter: s.Counter}
		for _, l := range s.Labels { // sorted by name
			sm.Labels = append(sm.Labels, schema.MetricLabel{Name: l.Name, Value: l.Value})
		}
		st.Metrics = append(st.Metrics, sm)
	}
	return st
}

// sendStats sends the sampler's metrics to the encoder every interval
// until ctx ends.
func sendStats(ctx context.Context, client *ipc.Client, set *counters.Set, interval time.Duration, logger *slog.Logger) {
	t := time.NewTicker(interval)
	defer t.Stop()
	var buf []byte
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			var err error
			buf, err = schema.EncodeSamplerStats(samplerStats(set, now), buf[:0])
			if err != nil {
				logger.Warn("sampler stats not sent", "err", err)
				continue
			}
			client.SendStats(buf)
		}
	}
}
