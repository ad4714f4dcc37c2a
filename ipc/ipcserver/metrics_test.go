package ipcserver

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/test/promtest"
)

func TestMetricsRegistration(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	// Two on one registry share the collectors.
	for range 2 {
		m, err := newServerMetrics(reg)
		if err != nil {
			t.Fatal(err)
		}
		m.frames.get(ipc.FrameBatch).inc()
		m.frames.get(200).inc()
		m.fdsDropped.inc()
	}
	mfs := promtest.Lint(t, reg)
	if len(mfs) < 9 {
		t.Errorf("gathered %d metric families", len(mfs))
	}
	values := map[string]float64{}
	for _, mf := range mfs {
		name := mf.GetName()
		if !strings.HasPrefix(name, "tandem_ipc_server_") {
			t.Errorf("metric %s lacks the tandem_ipc_server_ prefix", name)
		}
		for _, m := range mf.GetMetric() {
			key := name
			for _, l := range m.GetLabel() {
				key += "{" + l.GetName() + "=" + l.GetValue() + "}"
			}
			values[key] = m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	for key, want := range map[string]float64{
		"tandem_ipc_server_frames_received_total{type=batch}":      2,
		"tandem_ipc_server_frames_received_total{type=unknown}":    2,
		"tandem_ipc_server_frames_received_total{type=executable}": 0,
		"tandem_ipc_server_descriptors_dropped_total":              2,
		"tandem_ipc_server_connections":                            0,
	} {
		if got, ok := values[key]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", key, got, ok, want)
		}
	}
}

func TestNilRegistererAndLogger(t *testing.T) {
	if _, err := newServerMetrics(nil); err != nil {
		t.Fatal(err)
	}
	orDiscard(nil).Info("discarded")
}
