package main

import (
	"testing"
	"time"

	"github.com/tandem-profiler/tandem/internal/counters"
	"github.com/tandem-profiler/tandem/schema"
)

func TestSamplerStatsFromSet(t *testing.T) {
	var set counters.Set
	c, err := set.Counter("tandem_sampler_test_dropped_total", "h",
		counters.Label{Name: "stage", Value: "queue"}, counters.Label{Name: "reason", Value: "full"})
	if err != nil {
		t.Fatal(err)
	}
	g, err := set.Gauge("tandem_ipc_client_unacked_bytes", "h")
	if err != nil {
		t.Fatal(err)
	}
	c.Add(3)
	g.Set(4096)
	now := time.Unix(1764460800, 0)
	payload, err := schema.EncodeSamplerStats(samplerStats(&set, now), nil)
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
		t.Errorf("metrics %v, want the counter and the gauge", byName)
	}
	cm := byName["tandem_sampler_test_dropped_total"]
	if !cm.Counter || cm.Value != 3 || len(cm.Labels) != 2 || cm.Labels[0] != (schema.MetricLabel{Name: "reason", Value: "full"}) || cm.Labels[1] != (schema.MetricLabel{Name: "stage", Value: "queue"}) {
		t.Errorf("counter %+v, want 3 with labels sorted by name", cm)
	}
	if gm := byName["tandem_ipc_client_unacked_bytes"]; gm.Counter || gm.Value != 4096 {
		t.Errorf("gauge %+v, want 4096", gm)
	}
}
