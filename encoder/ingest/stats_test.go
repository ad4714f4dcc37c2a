package ingest

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/schema"
)

func statsFrame(t *testing.T, metrics ...schema.SamplerMetric) ipc.Frame {
	t.Helper()
	p, err := schema.EncodeSamplerStats(&schema.SamplerStats{TimeUnixNano: 1, Metrics: metrics}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ipc.Frame{Type: ipc.FrameStats, Payload: p}
}

// TestSamplerStatsExported feeds stats frames and checks what /metrics
// would show: tandem_sampler_* with the node's name, the latest values
// only, and nothing a sampler could send to break the exposition.
func TestSamplerStatsExported(t *testing.T) {
	reg := prometheus.NewRegistry()
	tr := newTracker(t, &recordingSink{}, nil, reg)
	src := &frames{list: []ipc.Frame{
		hello(t, schema.MajorVersion, 1),
		statsFrame(t, schema.SamplerMetric{Name: "tandem_ipc_client_evicted_samples_total", Value: 1, Counter: true}),
		statsFrame(t,
			schema.SamplerMetric{Name: "tandem_ipc_client_evicted_samples_total", Value: 128, Counter: true},
			schema.SamplerMetric{Name: "tandem_ipc_client_unacked_bytes", Value: 4096},
			schema.SamplerMetric{Name: "tandem_sampler_reporter_dropped_total", Labels: []schema.MetricLabel{{Name: "reason", Value: "queue_full"}}, Value: 3, Counter: true},
			// Skipped: an invalid name, a node label of its own, a label
			// set that differs from the first of the same name, a type
			// that differs, and a duplicate series.
			schema.SamplerMetric{Name: "tandem bad name", Value: 1},
			schema.SamplerMetric{Name: "tandem_x_total", Labels: []schema.MetricLabel{{Name: "node", Value: "other"}}, Value: 1, Counter: true},
			schema.SamplerMetric{Name: "tandem_sampler_reporter_dropped_total", Labels: []schema.MetricLabel{{Name: "stage", Value: "q"}}, Value: 9, Counter: true},
			schema.SamplerMetric{Name: "tandem_ipc_client_unacked_bytes", Value: 5, Counter: true},
			schema.SamplerMetric{Name: "tandem_ipc_client_evicted_samples_total", Value: 7, Counter: true},
		),
		goodbye(t),
	}}
	if err := tr.Serve(context.Background(), src, nil); err != nil {
		t.Fatal(err)
	}
	want := `
# HELP tandem_sampler_ipc_client_evicted_samples_total A tandem-sampler metric, reported in-band by the sampler.
# TYPE tandem_sampler_ipc_client_evicted_samples_total counter
tandem_sampler_ipc_client_evicted_samples_total{node="n"} 128
# HELP tandem_sampler_ipc_client_unacked_bytes A tandem-sampler metric, reported in-band by the sampler.
# TYPE tandem_sampler_ipc_client_unacked_bytes gauge
tandem_sampler_ipc_client_unacked_bytes{node="n"} 4096
# HELP tandem_sampler_reporter_dropped_total A tandem-sampler metric, reported in-band by the sampler.
# TYPE tandem_sampler_reporter_dropped_total counter
tandem_sampler_reporter_dropped_total{node="n",reason="queue_full"} 3
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"tandem_sampler_ipc_client_evicted_samples_total", "tandem_sampler_ipc_client_unacked_bytes",
		"tandem_sampler_reporter_dropped_total", "tandem_sampler_x_total"); err != nil {
		t.Error(err)
	}
	if _, err := reg.Gather(); err != nil {
		t.Errorf("gather fails with what the sampler sent: %v", err)
	}
	if got := testutil.ToFloat64(tr.metrics.frames.WithLabelValues("stats")); got != 2 {
		t.Errorf("stats frames counted %v, want 2", got)
	}
}

func TestMalformedStatsEndStream(t *testing.T) {
	tr := newTracker(t, &recordingSink{}, nil, nil)
	err := tr.Serve(context.Background(), &frames{list: []ipc.Frame{hello(t, schema.MajorVersion, 1), {Type: ipc.FrameStats, Payload: []byte("junk")}}}, nil)
	if err == nil || !strings.Contains(err.Error(), "read sampler stats") {
		t.Errorf("Serve error = %v, want read sampler stats", err)
	}
}
