package encoder

import (
	"testing"
	"time"

	"github.com/tandem-profiler/tandem/internal/synth"
)

// BenchmarkAddReferenceCorpus measures Aggregator.Add over the stream
// benchmarks' reference corpus (internal/synth, DefaultConfig) at the
// 1,000-sample batches of BENCHMARKS.md §1, with warm dictionaries: every
// op adds the whole corpus again and flushes, as the next window would. It
// is the encoder half of the stream's per-sample cost (schema.DecodeBatch
// is the other).
func BenchmarkAddReferenceCorpus(b *testing.B) {
	cfg := synth.DefaultConfig()
	cfg.BatchSize = 1000
	msgs, err := synth.Collect(cfg)
	if err != nil {
		b.Fatal(err)
	}
	hello, batches := synth.Split(msgs)
	samples := 0
	for _, bt := range batches {
		samples += len(bt.Samples)
	}
	a, err := NewAggregator(DefaultConfig(), nil)
	if err != nil {
		b.Fatal(err)
	}
	window := func() {
		for _, bt := range batches {
			if err := a.Add(hello, bt); err != nil {
				b.Fatal(err)
			}
		}
		a.Release(a.Flush(time.Unix(0, 0)))
	}
	window() // warm the dictionaries
	for b.Loop() {
		window()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(samples), "ns/sample")
}

// BenchmarkAddReferenceCorpusLayout2 is BenchmarkAddReferenceCorpus with
// the corpus as protocol 1.4 sends it on one connection: layout-2 batches
// against the connection's dictionary (docs/session-dictionaries.md).
func BenchmarkAddReferenceCorpusLayout2(b *testing.B) {
	hello, batches := referenceBatches(b)
	c := newConn(1)
	samples := 0
	for i, bt := range batches {
		batches[i] = c.layout2(b, bt)
		samples += len(bt.Samples)
	}
	a, err := NewAggregator(DefaultConfig(), nil)
	if err != nil {
		b.Fatal(err)
	}
	window := func() {
		for _, bt := range batches {
			if err := a.Add(hello, bt); err != nil {
				b.Fatal(err)
			}
		}
		a.Release(a.Flush(time.Unix(0, 0)))
	}
	window() // warm the dictionaries
	for b.Loop() {
		window()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(samples), "ns/sample")
}
