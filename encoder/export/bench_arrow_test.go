package export_test

import (
	"context"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tandem-profiler/tandem/encoder/arrow"
	"github.com/tandem-profiler/tandem/encoder/export"
	"github.com/tandem-profiler/tandem/encoder/internal/testcorpus"
	"github.com/tandem-profiler/tandem/internal/parcatest"
)

// arrowPipe is the encoder's whole path for one flush interval with an
// Arrow encoder: accumulate, encode, send to the null endpoint.
type arrowPipe struct {
	*pipe
	v2 *arrow.V2Encoder
	v1 *arrow.V1Encoder
}

func newArrowPipe(tb testing.TB, c *testcorpus.Corpus, exp *export.Exporter, v1 bool) *arrowPipe {
	tb.Helper()
	p := &arrowPipe{pipe: newPipe(tb, c, exp)}
	var err error
	if v1 {
		p.v1, err = arrow.NewV1Encoder(arrow.DefaultConfig(), nil, nil)
	} else {
		p.v2, err = arrow.NewV2Encoder(arrow.DefaultConfig(), nil, nil)
	}
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if p.v1 != nil {
			p.v1.Close()
		} else {
			p.v2.Close()
		}
	})
	return p
}

// flush accumulates, encodes and sends one interval; it returns the bytes
// of the records it sent.
func (p *arrowPipe) flush(tb testing.TB) int {
	f := p.accumulate(tb)
	defer p.agg.Release(f)
	size := 0
	if p.v2 != nil {
		payloads, err := p.v2.Encode(f)
		if err != nil {
			tb.Fatal(err)
		}
		for _, b := range payloads {
			size += len(b)
		}
		if p.exp != nil {
			if err := p.exp.ExportArrowV2(context.Background(), payloads); err != nil {
				tb.Fatal(err)
			}
		}
		return size
	}
	xs, err := p.v1.Encode(f)
	if err != nil {
		tb.Fatal(err)
	}
	exchanges := make([]export.WriteExchange, len(xs))
	for i, x := range xs {
		exchanges[i] = x
		size += len(x.SampleRecord())
	}
	if p.exp != nil {
		if err := p.exp.ExportArrowV1(context.Background(), exchanges); err != nil {
			tb.Fatal(err)
		}
	}
	return size
}

func benchArrow(b *testing.B, v1 bool) {
	c := benchCorpus(b)
	exp, wc := nullExporter(b, export.CompressionNone)
	p := newArrowPipe(b, c, exp, v1)
	p.flush(b)
	p.flush(b)
	wc.reset()
	size := p.flush(b)
	wc.reset()
	b.ReportAllocs()
	ps := startPerSample(c.Samples())
	for b.Loop() {
		p.flush(b)
	}
	ps.report(b)
	n := float64(b.N) * float64(c.Samples())
	b.ReportMetric(float64(wc.reset())/n, "wire-B/sample")
	b.ReportMetric(float64(size)/float64(c.Samples()), "ipc-B/sample")
}

// BenchmarkEncodeArrowV2 measures a whole flush interval: accumulate,
// encode the v2 record (LZ4 IPC) and send it with WriteArrow to the null
// endpoint.
func BenchmarkEncodeArrowV2(b *testing.B) { benchArrow(b, false) }

// BenchmarkEncodeArrowV1 measures a whole flush interval: accumulate,
// encode the v1 sample record and run the Write exchange against the null
// endpoint (which asks for no locations, so the locations record is not
// built; BenchmarkArrowV1Locations measures it).
func BenchmarkEncodeArrowV1(b *testing.B) { benchArrow(b, true) }

// benchAccumulate is the Aggregator alone with an Arrow encoder in the
// pipe: in Tandem accumulation is format-independent (the encoders start
// from the Flush), so the Accumulate twins match BenchmarkOTLPAccumulate,
// and Encode* minus Accumulate is what the format's encoding and sending
// cost.
func benchAccumulate(b *testing.B, v1 bool) {
	c := benchCorpus(b)
	p := newArrowPipe(b, c, nil, v1)
	p.agg.Release(p.accumulate(b))
	b.ReportAllocs()
	ps := startPerSample(c.Samples())
	for b.Loop() {
		p.agg.Release(p.accumulate(b))
	}
	ps.report(b)
}

// BenchmarkArrowV2Accumulate is BenchmarkEncodeArrowV2 without the flush's
// encoding and sending.
func BenchmarkArrowV2Accumulate(b *testing.B) { benchAccumulate(b, false) }

// BenchmarkArrowV1Accumulate is BenchmarkEncodeArrowV1 without the flush's
// encoding and sending.
func BenchmarkArrowV1Accumulate(b *testing.B) { benchAccumulate(b, true) }

// BenchmarkArrowV2EncodeOnly isolates the v2 encoder (Flush -> LZ4 IPC).
func BenchmarkArrowV2EncodeOnly(b *testing.B) {
	c := benchCorpus(b)
	p := newArrowPipe(b, c, nil, false)
	f := p.accumulate(b)
	if _, err := p.v2.Encode(f); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	ps := startPerSample(c.Samples())
	for b.Loop() {
		if _, err := p.v2.Encode(f); err != nil {
			b.Fatal(err)
		}
	}
	ps.report(b)
}

// BenchmarkArrowV1Locations measures the second half of a v1 exchange the
// null endpoint skips: answering a request for every stacktrace id of the
// flush with the locations record.
func BenchmarkArrowV1Locations(b *testing.B) {
	c := benchCorpus(b)
	p := newArrowPipe(b, c, nil, true)
	f := p.accumulate(b)
	xs, err := p.v1.Encode(f)
	if err != nil {
		b.Fatal(err)
	}
	reqs := make([][]byte, len(xs))
	for i, x := range xs {
		smp, err := parcatest.DecodeV1Samples(x.SampleRecord(), memory.DefaultAllocator)
		if err != nil {
			b.Fatal(err)
		}
		if reqs[i], err = parcatest.StacktraceRequest(smp.IDs, memory.DefaultAllocator); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	ps := startPerSample(c.Samples())
	for b.Loop() {
		for i, x := range xs {
			if _, err := x.LocationsFor(reqs[i]); err != nil {
				b.Fatal(err)
			}
		}
	}
	ps.report(b)
}

// TestArrowV2AllocationBudget guards the steady-state allocation budget
// of a whole Arrow v2 flush (accumulate, encode, LZ4, WriteArrow): at most
// half an allocation per sample, the null endpoint's share included.
func TestArrowV2AllocationBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	c := testcorpus.Generate(testcorpus.Benchmark())
	exp, _ := nullExporter(t, export.CompressionNone)
	p := newArrowPipe(t, c, exp, false)
	p.flush(t)
	p.flush(t)
	allocs := testing.AllocsPerRun(3, func() { p.flush(t) })
	per := allocs / float64(c.Samples())
	t.Logf("%.0f allocations per flush of %d samples: %.3f/sample", allocs, c.Samples(), per)
	if per > 0.5 {
		t.Errorf("%.3f allocations per sample, budget 0.5", per)
	}
}
