package promtest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func TestValue(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "c_total", Help: "c"}, []string{"output", "reason"})
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "g", Help: "g"})
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "h_seconds", Help: "h"})
	reg.MustRegister(c, g, h)
	c.WithLabelValues("a", "x").Add(2)
	c.WithLabelValues("a", "y").Add(3)
	c.WithLabelValues("b", "x").Add(5)
	g.Set(7)
	h.Observe(1)
	h.Observe(2)
	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"c_total", nil, 10},
		{"c_total", []string{"output", "a"}, 5},
		{"c_total", []string{"output", "a", "reason", "x"}, 2},
		{"c_total", []string{"output", "c"}, 0},
		{"g", nil, 7},
		{"h_seconds", nil, 2},
		{"absent_total", nil, 0},
	} {
		if got := Value(t, reg, tc.name, tc.labels...); got != tc.want {
			t.Errorf("Value(%s, %q) = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
}
