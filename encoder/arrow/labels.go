package arrow

import (
	promlabels "github.com/prometheus/prometheus/model/labels"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
)

// Label is one label of a sample: Prometheus' label type, so that
// encoder/labels' Labeler satisfies Labeler as it is.
type Label = promlabels.Label

// Labeler chooses the labels of a sample. Labels appends the labels of
// sample s of f to dst and returns the result, sorted by name, with unique
// names and no empty value, and whether to keep the sample at all (false:
// a relabel rule dropped it; the Labeler counts such drops). It is called
// once per aggregated sample, not per event, from one goroutine at a time.
type Labeler interface {
	Labels(dst []Label, f *aggregate.Flush, s *aggregate.Sample) (out []Label, keep bool)
}
