package schema_test

import (
	"fmt"
	"testing"

	"github.com/tandem-profiler/tandem/internal/synth"
	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/schema"
)

// dictStream is a corpus as a protocol 1.4 sampler sends it on one
// connection: per batch, the chunk of the entries it defines (nil when it
// defines none) and the batch in layout 2.
type dictStream struct {
	chunks  []*schema.DictionaryChunk
	batches []*schema.Batch
}

func dictionaryStream(c *corpus) *dictStream {
	d := synth.NewDictionaries(1)
	s := &dictStream{}
	for _, b := range c.batches {
		ch, l2 := d.Batch(b)
		s.chunks = append(s.chunks, ch)
		s.batches = append(s.batches, l2)
	}
	return s
}

// wire returns the bytes batch i and its chunk put on the socket, frame
// headers and checksums included, and encodes them (into buf) to do so.
func (s *dictStream) wire(tb testing.TB, i int, buf []byte) (int, []byte) {
	n := 0
	var err error
	if ch := s.chunks[i]; ch != nil {
		if buf, err = schema.EncodeDictionaryChunk(ch, buf[:0]); err != nil {
			tb.Fatal(err)
		}
		n += ipc.FrameOverhead + len(buf)
	}
	if buf, err = schema.EncodeDictionaryBatch(s.batches[i], buf[:0]); err != nil {
		tb.Fatal(err)
	}
	return n + ipc.FrameOverhead + len(buf), buf
}

// BenchmarkEncodeDictionaryBatch measures what a protocol 1.4 sampler
// encodes per batch, schema.EncodeDictionaryChunk for the entries the
// batch defines and schema.EncodeDictionaryBatch for its processes and
// samples, and the bytes both put on the socket. The first batch of a
// connection carries most of the dictionary, so it is reported apart:
// "steady" encodes every later batch, "all" every batch.
func BenchmarkEncodeDictionaryBatch(b *testing.B) {
	for _, size := range benchBatchSizes {
		for _, which := range []string{"steady", "all"} {
			b.Run(fmt.Sprintf("batch=%d/%s", size, which), func(b *testing.B) {
				s := dictionaryStream(benchCorpus(b, size))
				if len(s.batches) < 2 {
					b.Fatal("corpus has one batch: no steady state")
				}
				var buf []byte
				first, steady, samples := 0, 0, 0
				first, buf = s.wire(b, 0, buf)
				for i := 1; i < len(s.batches); i++ {
					var n int
					n, buf = s.wire(b, i, buf)
					steady += n
					samples += len(s.batches[i].Samples)
				}
				total := samples + len(s.batches[0].Samples)
				from, encoded := 1, samples
				if which == "all" {
					from, encoded = 0, total
				}
				for b.Loop() {
					for i := from; i < len(s.batches); i++ {
						_, buf = s.wire(b, i, buf)
					}
				}
				b.ReportMetric(float64(first)/float64(len(s.batches[0].Samples)), "first-B/sample")
				b.ReportMetric(float64(steady)/float64(samples), "steady-B/sample")
				b.ReportMetric(float64(first+steady)/float64(total), "all-B/sample")
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(encoded), "encode-ns/sample")
			})
		}
	}
}
