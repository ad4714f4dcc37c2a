package debuginfo

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tandem-profiler/tandem/test/promtest"
)

func TestMetricsLint(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	s := startParcaServer(t, false)
	u, err := New(testConfig(t), s.Dial(t), testLogger(t), reg)
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close(t.Context())
	u.Submit(notice("/nonexistent", 1, ""), nil)
	u.m.uploads.WithLabelValues(resultSuccess).Inc()
	u.m.dropped.WithLabelValues("queue_full").Inc()
	u.m.stripBytes.WithLabelValues("input").Add(1)
	mfs := promtest.Lint(t, reg)
	if len(mfs) != 8 {
		t.Errorf("%d metric families, want 8", len(mfs))
	}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "tandem_encoder_debuginfo_") {
			t.Errorf("metric %s lacks the tandem_encoder_debuginfo_ prefix", mf.GetName())
		}
	}
	// A second uploader on the same registry is refused, not a panic.
	if _, err := New(testConfig(t), s.Dial(t), testLogger(t), reg); err == nil {
		t.Error("second registration on one registry succeeded")
	}
}
