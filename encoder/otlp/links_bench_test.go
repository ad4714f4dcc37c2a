package otlp_test

import (
	"testing"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
	"github.com/tandem-profiler/tandem/encoder/internal/flushtest"
	"github.com/tandem-profiler/tandem/internal/synth"
)

// BenchmarkEncodeLinks measures the OTLP encoder (Flush -> pdata ->
// protobuf) on one window of the stream benchmarks' reference corpus
// (internal/synth, 1,000-sample batches): links=none as it is, links=all
// with every sample linked (synth.Linked, a span per 4 samples of a
// thread). B/sample is the serialized request.
func BenchmarkEncodeLinks(b *testing.B) {
	for _, links := range []string{"none", "all"} {
		b.Run("links="+links, func(b *testing.B) {
			cfg := synth.DefaultConfig()
			cfg.BatchSize = 1000
			msgs, err := synth.Collect(cfg)
			if err != nil {
				b.Fatal(err)
			}
			hello, batches := synth.Split(msgs)
			a := flushtest.NewAggregator(b, aggregate.DefaultConfig())
			samples := 0
			for _, bt := range batches {
				if links == "all" {
					bt = synth.Linked(bt, 4)
				}
				if err := a.Add(hello, bt); err != nil {
					b.Fatal(err)
				}
				samples += len(bt.Samples)
			}
			f := a.Flush(cfg.Start.Add(cfg.Duration))
			if links == "all" && len(f.Links) < 2 {
				b.Fatal("the linked corpus has no links")
			}
			e := newEncoder(b)
			size := 0
			for b.Loop() {
				req := e.Encode(f)
				data, err := req.MarshalProto()
				if err != nil {
					b.Fatal(err)
				}
				size = len(data)
				e.Release(req)
			}
			b.ReportMetric(float64(size)/float64(samples), "B/sample")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(samples), "ns/sample")
		})
	}
}
