package main

import (
	"slices"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/relabel"

	"github.com/tandem-profiler/tandem/encoder"
	"github.com/tandem-profiler/tandem/encoder/arrow"
	"github.com/tandem-profiler/tandem/encoder/labels"
)

func TestArrowLabeler(t *testing.T) {
	f := &encoder.Flush{
		Strings:   []string{"", "node-1", "app", "worker", "sh"},
		LabelEnds: []uint32{0},
		Resources: []encoder.Resource{{PID: 42, Comm: 2, NodeName: 1}, {PID: 7, Comm: 4, NodeName: 1}},
		Samples: []encoder.Sample{
			{Resource: 0, TID: 43, CPU: 3, ThreadName: 3, Timestamps: []int64{1}, Values: []int64{1}},
			{Resource: 1, TID: 7, CPU: 0, Timestamps: []int64{2}, Values: []int64{1}},
		},
	}
	drop := relabel.DefaultRelabelConfig
	drop.Action, drop.SourceLabels, drop.Regex = relabel.Drop, []model.LabelName{"comm"}, relabel.MustNewRegexp("sh")
	a, err := newArrowLabeler(labels.Config{ExternalLabels: map[string]string{"zone": "z"}, RelabelConfigs: []*relabel.Config{&drop}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	prefix := []arrow.Label{{Name: "x", Value: "y"}}
	got, keep := a.Labels(prefix, f, &f.Samples[0])
	var want []arrow.Label
	for _, nv := range [][2]string{{"x", "y"}, {"comm", "app"}, {"cpu", "3"}, {"node", "node-1"}, {"thread_id", "43"}, {"thread_name", "worker"}, {"zone", "z"}} {
		want = append(want, arrow.Label{Name: nv[0], Value: nv[1]})
	}
	if !keep || !slices.Equal(got, want) {
		t.Errorf("Labels = %v, %v; want %v, true", got, keep, want)
	}
	if got, keep := a.Labels(prefix, f, &f.Samples[1]); keep || !slices.Equal(got, prefix) {
		t.Errorf("dropped sample: Labels = %v, %v; want %v, false", got, keep, prefix)
	}
}
