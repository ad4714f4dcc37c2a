package schema_test

import (
	"testing"

	"github.com/tandem-profiler/tandem/internal/synth"
	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/schema"
)

// BenchmarkLinks measures what trace links cost on the stream, per sample
// of the reference corpus at 1,000-sample batches in layout 2 (what a 1.5
// sampler sends): links=none is the corpus as it is, links=all the same
// batches with every sample linked (synth.Linked, a span per 4 samples of
// a thread). encode is schema.EncodeDictionaryBatch per batch, decode
// schema.DecodeBatchWith into one reused Batch against the connection's
// dictionary; B/sample counts the batch payloads and their frame headers
// (the dictionary chunks are the same either way).
func BenchmarkLinks(b *testing.B) {
	for _, links := range []string{"none", "all"} {
		s := dictionaryStream(benchCorpus(b, 1000))
		dict := &schema.Dictionary{}
		for _, ch := range s.chunks {
			if ch == nil {
				continue
			}
			data, err := schema.EncodeDictionaryChunk(ch, nil)
			if err != nil {
				b.Fatal(err)
			}
			var c schema.DictionaryChunk
			if err := schema.DecodeDictionaryChunk(data, &c); err != nil {
				b.Fatal(err)
			}
			if err := dict.Apply(&c); err != nil {
				b.Fatal(err)
			}
		}
		batches := s.batches
		if links == "all" {
			batches = make([]*schema.Batch, len(s.batches))
			for i, bt := range s.batches {
				batches[i] = synth.Linked(bt, 4)
			}
		}
		samples, wire := 0, 0
		payloads := make([][]byte, len(batches))
		for i, bt := range batches {
			bt.Generation = dict.Generation
			p, err := schema.EncodeDictionaryBatch(bt, nil)
			if err != nil {
				b.Fatal(err)
			}
			payloads[i] = p
			samples += len(bt.Samples)
			wire += ipc.FrameOverhead + len(p)
		}
		b.Run("links="+links+"/encode", func(b *testing.B) {
			var buf []byte
			for b.Loop() {
				for _, bt := range batches {
					var err error
					if buf, err = schema.EncodeDictionaryBatch(bt, buf[:0]); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(wire)/float64(samples), "B/sample")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(samples), "ns/sample")
		})
		b.Run("links="+links+"/decode", func(b *testing.B) {
			var out schema.Batch
			// Guard: the linked corpus decodes with a link per sample.
			if err := schema.DecodeBatchWith(payloads[0], dict, &out); err != nil {
				b.Fatal(err)
			}
			if want := len(batches[0].Links); len(out.Links) != want {
				b.Fatalf("decoded %d links, want %d", len(out.Links), want)
			}
			for b.Loop() {
				for _, p := range payloads {
					if err := schema.DecodeBatchWith(p, dict, &out); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(samples), "ns/sample")
		})
	}
}
