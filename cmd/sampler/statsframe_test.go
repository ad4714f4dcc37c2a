package main

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tandem-profiler/tandem/schema"
)

func TestSamplerStatsFromRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "tandem_sampler_test_dropped_total", Help: "h"}, []string{"stage", "reason"})
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "tandem_ipc_client_unacked_bytes", Help: "h"})
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "tandem_sampler_test_seconds", Help: "h"})
	reg.MustRegister(c, g, h)
	c.WithLabelValues("queue", "full").Add(3)
	g.Set(4096)
	h.Observe(1)
	now := time.Unix(1764460800, 0)
	st, err := samplerStats(reg, now)
	if err != nil {
		t.Fatal(err)
	}
	payload, err := schema.EncodeSamplerStats(st, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := schema.DecodeSamplerStats(payload)
	if err != nil {
		t.Fatal(err)
	}
	if got.TimeUnixNano != now.UnixNano() {
		t.Errorf("time %d, want %d", got.TimeUnixNano, now.UnixNano())
	}
	byName := map[string]schema.SamplerMetric{}
	for _, m := range got.Metrics {
		byName[m.Name] = m
	}
	if len(byName) != 2 {
		t.Errorf("metrics %v, want the counter and the gauge only", byName)
	}
	cm := byName["tandem_sampler_test_dropped_total"]
	if !cm.Counter || cm.Value != 3 || len(cm.Labels) != 2 || cm.Labels[0].Name != "reason" || cm.Labels[1] != (schema.MetricLabel{Name: "stage", Value: "queue"}) {
		t.Errorf("counter %+v, want 3 with labels sorted by name", cm)
	}
	if gm := byName["tandem_ipc_client_unacked_bytes"]; gm.Counter || gm.Value != 4096 {
		t.Errorf("gauge %+v, want 4096", gm)
	}
}
