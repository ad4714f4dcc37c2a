package labels_test

import (
	"slices"
	"testing"
	"time"

	promlabels "github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/relabel"

	"github.com/tandem-profiler/tandem/encoder"
	"github.com/tandem-profiler/tandem/encoder/arrow"
	"github.com/tandem-profiler/tandem/encoder/internal/testcorpus"
	"github.com/tandem-profiler/tandem/encoder/labels"
)

func corpusFlush(t testing.TB, c *testcorpus.Corpus) *encoder.Flush {
	t.Helper()
	a, err := encoder.NewAggregator(encoder.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range c.Batches {
		if err := a.Add(&c.Hello, b); err != nil {
			t.Fatal(err)
		}
	}
	return a.Flush(time.Unix(0, c.Hello.StartTimeUnixNano+6e9))
}

// TestLabelsMatchArrowDefault checks that with no relabel configs the
// Labeler gives every sample of a realistic stream exactly parca-agent's
// default set, as encoder/arrow's DefaultLabeler computes it.
func TestLabelsMatchArrowDefault(t *testing.T) {
	f := corpusFlush(t, testcorpus.Generate(testcorpus.Small()))
	ext := map[string]string{"cluster": "eu-1", "node": "ignored"}
	for _, tt := range []struct {
		name string
		cfg  labels.Config
		acfg arrow.DefaultLabelerConfig
	}{
		{"defaults", labels.Config{ExternalLabels: ext}, arrow.DefaultLabelerConfig{External: ext}},
		{"disabled", labels.Config{DisableCPULabel: true, DisableThreadIDLabel: true, DisableThreadCommLabel: true},
			arrow.DefaultLabelerConfig{DisableCPU: true, DisableThreadID: true, DisableThreadName: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l, err := labels.New(tt.cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			ref := arrow.NewDefaultLabeler(tt.acfg)
			var got []promlabels.Label
			var want []arrow.Label
			custom := 0
			for i := range f.Samples {
				s := &f.Samples[i]
				if s.Labels != 0 {
					custom++
				}
				var keep bool
				got, keep = l.Labels(got[:0], f, s)
				want, _ = ref.Labels(want[:0], f, s)
				if !keep || !slices.Equal(got, want) {
					t.Fatalf("sample %d: keep %v\n got %v\nwant %v", i, keep, got, want)
				}
			}
			if custom == 0 {
				t.Error("the corpus has no sample with custom labels")
			}
		})
	}
}

// BenchmarkLabels labels every sample of the benchmark corpus's flush, at
// steady state (caches warm), with parca-agent's shipped config.yaml rules.
func BenchmarkLabels(b *testing.B) {
	c, err := testcorpus.ForBenchmark()
	if err != nil {
		b.Fatal(err)
	}
	f := corpusFlush(b, c)
	rules, err := labels.LoadConfigFile("testdata/good.yaml")
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name  string
		rules []*relabel.Config
	}{{"default", nil}, {"relabel", rules}} {
		b.Run(bc.name, func(b *testing.B) {
			l, err := labels.New(labels.Config{RelabelConfigs: bc.rules, ExternalLabels: map[string]string{"cluster": "c1"}}, nil)
			if err != nil {
				b.Fatal(err)
			}
			dst := make([]promlabels.Label, 0, 64)
			for i := range f.Samples {
				dst, _ = l.Labels(dst[:0], f, &f.Samples[i])
			}
			b.ReportAllocs()
			for b.Loop() {
				for i := range f.Samples {
					dst, _ = l.Labels(dst[:0], f, &f.Samples[i])
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(f.Samples)), "ns/sample")
		})
	}
	// The reference point: encoder/arrow's DefaultLabeler (no relabelling).
	b.Run("arrow-default", func(b *testing.B) {
		l := arrow.NewDefaultLabeler(arrow.DefaultLabelerConfig{External: map[string]string{"cluster": "c1"}})
		dst := make([]arrow.Label, 0, 64)
		for i := range f.Samples {
			dst, _ = l.Labels(dst[:0], f, &f.Samples[i])
		}
		b.ReportAllocs()
		for b.Loop() {
			for i := range f.Samples {
				dst, _ = l.Labels(dst[:0], f, &f.Samples[i])
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(f.Samples)), "ns/sample")
	})
}
