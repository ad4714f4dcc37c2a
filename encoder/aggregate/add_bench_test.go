package aggregate

import (
	"fmt"
	"testing"
	"time"

	"github.com/tandem-profiler/tandem/internal/synth"
	"github.com/tandem-profiler/tandem/schema"
)

// BenchmarkAddReferenceCorpus measures Aggregator.Add over the stream
// benchmarks' reference corpus (internal/synth, DefaultConfig) at the
// 1,000-sample batches of docs/benchmarks/stream.md, with warm dictionaries: every
// op adds the whole corpus again and flushes, as the next window would. It
// is the encoder half of the stream's per-sample cost (schema.DecodeBatch
// is the other).
func BenchmarkAddReferenceCorpus(b *testing.B) {
	hello, batches := referenceBatches(b)
	benchWindows(b, countSamples(batches), func(a *Aggregator) { addBatches(b, a, hello, batches) })
}

// BenchmarkAddReferenceCorpusLayout2 is BenchmarkAddReferenceCorpus with
// the corpus as protocol 1.4 sends it on one connection: layout-2 batches
// against the connection's dictionary (docs/session-dictionaries.md).
func BenchmarkAddReferenceCorpusLayout2(b *testing.B) {
	hello, batches := referenceBatches(b)
	samples := countSamples(batches)
	c := newConn(1)
	for i, bt := range batches {
		batches[i] = c.layout2(b, bt)
	}
	benchWindows(b, samples, func(a *Aggregator) { addBatches(b, a, hello, batches) })
}

// BenchmarkDecodeAddReferenceCorpus is the encoder's whole per-sample
// stream cost, as ingest pays it: schema.DecodeBatchWith into one reused
// Batch, then Aggregator.Add, over the reference corpus at 1,000-sample
// batches, warm (every op decodes and adds the whole corpus again and
// flushes). layout=1 is what a 1.3 sampler sends; layout=2 the same
// stream as a 1.4 sampler sends it on one connection, whose dictionary
// already holds every chunk (applying them is BenchmarkApplyChunks).
func BenchmarkDecodeAddReferenceCorpus(b *testing.B) {
	for _, layout := range []int{1, 2} {
		b.Run(fmt.Sprintf("layout=%d", layout), func(b *testing.B) {
			hello, batches := referenceBatches(b)
			benchDecodeAdd(b, hello, batches, layout)
		})
	}
}

// BenchmarkDecodeAddLinks is BenchmarkDecodeAddReferenceCorpus/layout=2
// with trace links: links=none is the corpus as it is, links=all the same
// samples each with a link (synth.Linked: a span per 4 samples of a
// thread, about 5,000 distinct links per window, under the default bound).
func BenchmarkDecodeAddLinks(b *testing.B) {
	for _, links := range []string{"none", "all"} {
		b.Run("links="+links, func(b *testing.B) {
			hello, batches := referenceBatches(b)
			if links == "all" {
				for i, bt := range batches {
					batches[i] = synth.Linked(bt, 4)
				}
			}
			benchDecodeAdd(b, hello, batches, 2)
		})
	}
}

// benchDecodeAdd measures decoding batches encoded in layout and adding
// them, a window per op.
func benchDecodeAdd(b *testing.B, hello *schema.Hello, batches []*schema.Batch, layout int) {
	payloads, chunks := encodeReference(b, batches, layout)
	dict := applyChunks(b, chunks)
	var batch schema.Batch
	benchWindows(b, countSamples(batches), func(a *Aggregator) {
		for _, p := range payloads {
			if err := schema.DecodeBatchWith(p, dict, &batch); err != nil {
				b.Fatal(err)
			}
			if err := a.Add(hello, &batch); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkApplyChunks measures what the layout-2 stream of
// BenchmarkDecodeAddReferenceCorpus costs besides its batches: decoding
// and applying the connection's dictionary chunks (all of them, once:
// one op is one connection carrying the corpus), per sample of the corpus.
func BenchmarkApplyChunks(b *testing.B) {
	_, batches := referenceBatches(b)
	_, chunks := encodeReference(b, batches, 2)
	for b.Loop() {
		applyChunks(b, chunks)
	}
	reportPerSample(b, countSamples(batches))
}

// benchWindows measures add as every op of the Add benchmarks: add fills a
// warm Aggregator with one window's samples, which is then flushed.
func benchWindows(b *testing.B, samples int, add func(*Aggregator)) {
	a, err := NewAggregator(DefaultConfig(), nil)
	if err != nil {
		b.Fatal(err)
	}
	window := func() {
		add(a)
		a.Release(a.Flush(time.Unix(0, 0)))
	}
	window() // warm the dictionaries
	for b.Loop() {
		window()
	}
	reportPerSample(b, samples)
}

// addBatches adds batches to a.
func addBatches(b *testing.B, a *Aggregator, hello *schema.Hello, batches []*schema.Batch) {
	for _, bt := range batches {
		if err := a.Add(hello, bt); err != nil {
			b.Fatal(err)
		}
	}
}

// applyChunks returns a new dictionary with the encoded chunks applied, in
// order, as ingest applies a connection's.
func applyChunks(b *testing.B, chunks [][]byte) *schema.Dictionary {
	dict := &schema.Dictionary{}
	var chunk schema.DictionaryChunk
	for _, p := range chunks {
		if err := schema.DecodeDictionaryChunk(p, &chunk); err != nil {
			b.Fatal(err)
		}
		if err := dict.Apply(&chunk); err != nil {
			b.Fatal(err)
		}
	}
	return dict
}

func countSamples(batches []*schema.Batch) int {
	n := 0
	for _, bt := range batches {
		n += len(bt.Samples)
	}
	return n
}

// reportPerSample reports the time per op divided by the op's samples.
func reportPerSample(b *testing.B, samples int) {
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(samples), "ns/sample")
}

// encodeReference encodes batches as the stream carries them: layout 1
// (EncodeBatch), or layout 2 with the chunks of one connection's
// dictionary, in order (synth.Dictionaries.Encode).
func encodeReference(b *testing.B, batches []*schema.Batch, layout int) (payloads, chunks [][]byte) {
	d := synth.NewDictionaries(1)
	for _, bt := range batches {
		var p, chunk []byte
		var err error
		if layout == 1 {
			p, err = schema.EncodeBatch(bt, nil)
		} else {
			chunk, p, err = d.Encode(bt)
			if chunk != nil {
				chunks = append(chunks, chunk)
			}
		}
		if err != nil {
			b.Fatal(err)
		}
		payloads = append(payloads, p)
	}
	return payloads, chunks
}
