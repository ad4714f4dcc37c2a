package ingest

import (
	"fmt"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"

	"github.com/tandem-profiler/tandem/schema"
)

// maxSamplerMetrics bounds the metrics kept from one sampler's stats.
const maxSamplerMetrics = 2048

// samplerStats exports the latest SamplerStats of every node as
// tandem_sampler_* metrics with a "node" label. The sampler's own
// "tandem_" prefix is replaced by "tandem_sampler_" (a name already
// starting with tandem_sampler_ keeps it). Metrics with invalid names,
// with a "node" label of their own, or whose label names differ from the
// first metric of the same name are skipped, so that a sampler can never
// make the encoder's /metrics fail.
type samplerStats struct {
	mu     sync.Mutex
	latest map[string]schema.SamplerStats // by node name
}

func newSamplerStats() *samplerStats {
	return &samplerStats{latest: make(map[string]schema.SamplerStats)}
}

func (s *samplerStats) set(node string, st schema.SamplerStats) {
	if len(st.Metrics) > maxSamplerMetrics {
		st.Metrics = st.Metrics[:maxSamplerMetrics]
	}
	s.mu.Lock()
	s.latest[node] = st
	s.mu.Unlock()
}

// exportedName maps a sampler metric name to the encoder's.
func exportedName(name string) string {
	if strings.HasPrefix(name, "tandem_sampler_") {
		return name
	}
	return "tandem_sampler_" + strings.TrimPrefix(name, "tandem_")
}

// Describe sends nothing: the metrics are only known once samplers report
// them (an unchecked collector).
func (s *samplerStats) Describe(chan<- *prometheus.Desc) {}

// Collect implements prometheus.Collector.
func (s *samplerStats) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	defer s.mu.Unlock()
	labelsOf := map[string]string{} // exported name -> its type and label names
	seen := map[string]bool{}       // exported name and label values
	for node, st := range s.latest {
		for _, m := range st.Metrics {
			name := exportedName(m.Name)
			if !model.LegacyValidation.IsValidMetricName(name) {
				continue
			}
			names := make([]string, 0, len(m.Labels)+1)
			values := make([]string, 0, len(m.Labels)+1)
			ok := true
			for _, l := range m.Labels {
				if l.Name == "node" || !model.LegacyValidation.IsValidLabelName(l.Name) {
					ok = false
					break
				}
				names = append(names, l.Name)
				values = append(values, l.Value)
			}
			if !ok {
				continue
			}
			typ := prometheus.GaugeValue
			if m.Counter {
				typ = prometheus.CounterValue
			}
			key := fmt.Sprint(typ, names)
			if prev, ok := labelsOf[name]; ok && prev != key {
				continue
			}
			labelsOf[name] = key
			series := fmt.Sprint(name, values, node)
			if seen[series] {
				continue
			}
			seen[series] = true
			desc := prometheus.NewDesc(name, "A tandem-sampler metric, reported in-band by the sampler.", append(names, "node"), nil)
			metric, err := prometheus.NewConstMetric(desc, typ, m.Value, append(values, node)...)
			if err == nil {
				ch <- metric
			}
		}
	}
}
