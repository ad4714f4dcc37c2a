package main

import (
	"github.com/prometheus/client_golang/prometheus"
	promlabels "github.com/prometheus/prometheus/model/labels"

	"github.com/tandem-profiler/tandem/encoder"
	"github.com/tandem-profiler/tandem/encoder/arrow"
	"github.com/tandem-profiler/tandem/encoder/labels"
)

// arrowLabeler gives the Arrow encoders parca-agent's label pipeline
// (encoder/labels: relabel_configs, disable flags, external labels) through
// their Labeler interface. Not safe for concurrent use.
type arrowLabeler struct {
	l   *labels.Labeler
	buf []promlabels.Label
}

var _ arrow.Labeler = (*arrowLabeler)(nil)

// newArrowLabeler builds the pipeline from labelFlags.config's result.
func newArrowLabeler(cfg labels.Config, reg prometheus.Registerer) (*arrowLabeler, error) {
	l, err := labels.New(cfg, reg)
	if err != nil {
		return nil, err
	}
	return &arrowLabeler{l: l}, nil
}

// Labels implements arrow.Labeler.
func (a *arrowLabeler) Labels(dst []arrow.Label, f *encoder.Flush, s *encoder.Sample) ([]arrow.Label, bool) {
	out, keep := a.l.Labels(a.buf[:0], f, s)
	a.buf = out
	if !keep {
		return dst, false
	}
	for _, l := range out {
		dst = append(dst, arrow.Label{Name: l.Name, Value: l.Value})
	}
	return dst, true
}
