package pipeline_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/test/bufconn"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
	"github.com/tandem-profiler/tandem/encoder/arrow"
	"github.com/tandem-profiler/tandem/encoder/export"
	"github.com/tandem-profiler/tandem/encoder/ingest"
	"github.com/tandem-profiler/tandem/encoder/internal/testcorpus"
	"github.com/tandem-profiler/tandem/encoder/otlp"
	"github.com/tandem-profiler/tandem/encoder/output"
	"github.com/tandem-profiler/tandem/encoder/pipeline"
	"github.com/tandem-profiler/tandem/test/parcatest"
)

// The null endpoint accepts any method, decodes nothing and replies with an
// empty message, so benchmarks are not charged for a receiver's unmarshal
// (registering the real service would rebuild every Sample and Location in
// pdata). It does not even decompress: its gzip "decompressor" discards the
// payload, so the in-process server's inflate does not land on the
// benchmark's clock either. The client side stays real: pdata's proto codec,
// gzip, HTTP/2 framing.

type rawCodec struct{}

func (rawCodec) Marshal(any) (mem.BufferSlice, error) { return nil, nil }
func (rawCodec) Unmarshal(mem.BufferSlice, any) error { return nil }
func (rawCodec) Name() string                         { return "proto" }

// nullDecompressor stands in for gzip on the null endpoint and discards.
type nullDecompressor struct{}

func (nullDecompressor) Do(io.Reader) ([]byte, error) { return nil, nil }
func (nullDecompressor) Type() string                 { return "gzip" }

func nullHandler(_ any, stream grpc.ServerStream) error {
	if err := stream.RecvMsg(&struct{}{}); err != nil {
		return err
	}
	return stream.SendMsg(&struct{}{})
}

// wireCounter counts the bytes that reach the null endpoint.
type wireCounter struct {
	mu   sync.Mutex
	wire int64
}

func (w *wireCounter) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (w *wireCounter) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}
func (w *wireCounter) HandleConn(context.Context, stats.ConnStats) {}
func (w *wireCounter) HandleRPC(_ context.Context, s stats.RPCStats) {
	if in, ok := s.(*stats.InPayload); ok {
		w.mu.Lock()
		w.wire += int64(in.WireLength)
		w.mu.Unlock()
	}
}

func (w *wireCounter) reset() (wire int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	wire, w.wire = w.wire, 0
	return wire
}

// nullConn returns a connection to a null endpoint over an in-memory
// listener, and the endpoint's byte counter.
func nullConn(tb testing.TB, compression string) (*grpc.ClientConn, *wireCounter) {
	tb.Helper()
	lis := bufconn.Listen(4 << 20)
	wc := &wireCounter{}
	srv := grpc.NewServer(
		grpc.ForceServerCodecV2(rawCodec{}),
		//lint:ignore SA1019 the only way to skip inflate: the null endpoint must not charge decompression
		grpc.RPCDecompressor(nullDecompressor{}),
		grpc.UnknownServiceHandler(nullHandler),
		grpc.StatsHandler(wc),
		grpc.MaxRecvMsgSize(64<<20),
	)
	go func() { _ = srv.Serve(lis) }()
	cfg := export.DefaultConfig()
	cfg.Address = "passthrough:///null"
	cfg.Insecure = true
	cfg.Compression = compression
	conn, err := export.Dial(cfg, nil, grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
		return lis.DialContext(ctx)
	}))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = conn.Close()
		srv.Stop()
	})
	return conn, wc
}

// benchCorpus is the corpus source: the dump named by $TANDEM_BENCH_CORPUS,
// or the generated benchmark corpus.
func benchCorpus(tb testing.TB) *testcorpus.Corpus {
	tb.Helper()
	c, err := testcorpus.ForBenchmark()
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// pipe is the shipped pipeline (pipeline.Pipeline and its Outputs) fed the
// corpus directly, as the ingest tracker would feed it.
type pipe struct {
	c    *testcorpus.Corpus
	p    *pipeline.Pipeline
	sess *ingest.Session
	now  time.Time
}

// newPipe builds the pipeline with one output per format, each sending to
// its own null endpoint (pprof outputs write into a temporary directory).
// With no formats the pipeline has a pprof output it never reaches
// (accumulation only).
func newPipe(tb testing.TB, c *testcorpus.Corpus, compression string, formats ...string) (*pipe, []*wireCounter) {
	tb.Helper()
	var outs []*output.Output
	var wcs []*wireCounter
	if len(formats) == 0 {
		formats = []string{output.FormatPprof}
	}
	for i, format := range formats {
		cfg := output.DefaultConfig(fmt.Sprintf("%s-%d", format, i), format)
		deps := output.Deps{}
		if format == output.FormatPprof {
			cfg.Dir = tb.TempDir()
		} else {
			cfg.Remote.Address = "passthrough:///null"
			cfg.Remote.Insecure = true
			cfg.Remote.Compression = compression
			conn, wc := nullConn(tb, compression)
			deps.Conn = conn
			wcs = append(wcs, wc)
		}
		o, err := output.Open(cfg, deps)
		if err != nil {
			tb.Fatal(err)
		}
		outs = append(outs, o)
	}
	p, err := pipeline.New(pipeline.DefaultConfig(), outs, nil, nil, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = p.Close(context.Background()) })
	last := c.Batches[len(c.Batches)-1]
	return &pipe{c: c, p: p, sess: &ingest.Session{Hello: c.Hello},
		now: time.Unix(0, last.Samples[len(last.Samples)-1].TimestampUnixNano)}, wcs
}

// feed hands every batch of the corpus to the pipeline.
func (p *pipe) feed() {
	for _, b := range p.c.Batches {
		p.p.Batch(p.sess, b)
	}
}

// accumulate feeds the corpus and cuts the flush from the pipeline's
// aggregator, without delivering it.
func (p *pipe) accumulate() *aggregate.Flush {
	p.feed()
	return p.p.Aggregator().Flush(p.now)
}

// flush runs one interval through the shipped path: feed, Flush (cut,
// encode per output, queue), and wait until every output delivered it.
func (p *pipe) flush(tb testing.TB) {
	p.feed()
	p.p.Flush(p.now)
	if err := p.p.WaitIdle(context.Background()); err != nil {
		tb.Fatal(err)
	}
}

// perSample reports per-sample figures: wall time, CPU time of the whole
// process (client, in-process null endpoint and GC; on a loaded machine the
// more stable of the two), and allocations.
type perSample struct {
	samples int
	mallocs uint64
	cpu     time.Duration
}

func startPerSample(samples int) perSample {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return perSample{samples: samples, mallocs: ms.Mallocs, cpu: processCPU()}
}

func (p perSample) report(b *testing.B) {
	cpu := processCPU() - p.cpu
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	n := float64(b.N) * float64(p.samples)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/sample")
	if cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/n, "cpu-ns/sample")
	}
	b.ReportMetric(float64(ms.Mallocs-p.mallocs)/n, "allocs/sample")
}

func wire(wcs []*wireCounter) int64 {
	var n int64
	for _, wc := range wcs {
		n += wc.reset()
	}
	return n
}

// BenchmarkAccumulate measures the pipeline's aggregation alone: every
// batch of the corpus added, then the flush snapshot cut and released.
func BenchmarkAccumulate(b *testing.B) {
	c := benchCorpus(b)
	p, _ := newPipe(b, c, export.CompressionNone)
	agg := p.p.Aggregator()
	agg.Release(p.accumulate())
	b.ReportAllocs()
	ps := startPerSample(c.Samples())
	for b.Loop() {
		agg.Release(p.accumulate())
	}
	ps.report(b)
}

// benchPipeline measures whole flush intervals through the shipped
// pipeline with the given outputs.
func benchPipeline(b *testing.B, compression string, formats ...string) {
	c := benchCorpus(b)
	p, wcs := newPipe(b, c, compression, formats...)
	p.flush(b)
	p.flush(b)
	wire(wcs)
	b.ReportAllocs()
	ps := startPerSample(c.Samples())
	for b.Loop() {
		p.flush(b)
	}
	ps.report(b)
	n := float64(b.N) * float64(c.Samples())
	b.ReportMetric(float64(wire(wcs))/n, "wire-B/sample")
}

// BenchmarkEncodeOTLP measures a whole flush interval: accumulate, encode,
// serialize, compress and send to the null endpoint. gzip is level 1, the
// default; gzip-5 is --remote-store-compression-level=5.
func BenchmarkEncodeOTLP(b *testing.B) {
	for _, comp := range []string{export.CompressionGzip, export.CompressionNone} {
		b.Run(comp, func(b *testing.B) { benchPipeline(b, comp, output.FormatOTLP) })
	}
	b.Run("gzip-5", func(b *testing.B) {
		if err := export.SetGzipLevel(5); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = export.SetGzipLevel(export.DefaultGzipLevel) })
		benchPipeline(b, export.CompressionGzip, output.FormatOTLP)
	})
}

// BenchmarkEncodeArrowV2 measures a whole flush interval: accumulate,
// encode the v2 record (LZ4 IPC) and send it with WriteArrow.
func BenchmarkEncodeArrowV2(b *testing.B) {
	benchPipeline(b, export.CompressionNone, output.FormatArrowV2)
}

// BenchmarkEncodeArrowV1 measures a whole flush interval: accumulate,
// encode the v1 sample record and run the Write exchange against the null
// endpoint (which asks for no locations, so the locations record is not
// built; BenchmarkArrowV1Locations measures it).
func BenchmarkEncodeArrowV1(b *testing.B) {
	benchPipeline(b, export.CompressionNone, output.FormatArrowV1)
}

// BenchmarkEncodePprof measures a whole flush interval to a pprof file.
func BenchmarkEncodePprof(b *testing.B) {
	benchPipeline(b, export.CompressionNone, output.FormatPprof)
}

// BenchmarkSecondOutput measures what a second output costs: OTLP alone,
// then OTLP plus Arrow v2, from one aggregation.
func BenchmarkSecondOutput(b *testing.B) {
	b.Run("otlp", func(b *testing.B) { benchPipeline(b, export.CompressionGzip, output.FormatOTLP) })
	b.Run("otlp+arrow-v2", func(b *testing.B) {
		benchPipeline(b, export.CompressionGzip, output.FormatOTLP, output.FormatArrowV2)
	})
	b.Run("otlp+otlp", func(b *testing.B) {
		benchPipeline(b, export.CompressionGzip, output.FormatOTLP, output.FormatOTLP)
	})
}

// BenchmarkOTLPEncodeOnly isolates the OTLP encoder (Flush -> pdata) and
// protobuf serialization, without gRPC.
func BenchmarkOTLPEncodeOnly(b *testing.B) {
	c := benchCorpus(b)
	p, _ := newPipe(b, c, export.CompressionNone)
	f := p.accumulate()
	enc, err := otlp.NewEncoder(otlp.DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	enc.Release(enc.Encode(f))
	b.ReportAllocs()
	ps := startPerSample(c.Samples())
	for b.Loop() {
		req := enc.Encode(f)
		if _, err := req.MarshalProto(); err != nil {
			b.Fatal(err)
		}
		enc.Release(req)
	}
	ps.report(b)
}

// BenchmarkArrowV2EncodeOnly isolates the v2 encoder (Flush -> LZ4 IPC).
func BenchmarkArrowV2EncodeOnly(b *testing.B) {
	c := benchCorpus(b)
	p, _ := newPipe(b, c, export.CompressionNone)
	f := p.accumulate()
	enc, err := arrow.NewV2Encoder(arrow.DefaultConfig(), nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer enc.Close()
	if _, err := enc.Encode(f); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	ps := startPerSample(c.Samples())
	for b.Loop() {
		if _, err := enc.Encode(f); err != nil {
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
	p, _ := newPipe(b, c, export.CompressionNone)
	f := p.accumulate()
	enc, err := arrow.NewV1Encoder(arrow.DefaultConfig(), nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer enc.Close()
	xs, err := enc.Encode(f)
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

// TestPipelineAllocationBudget guards the steady-state allocation budget of
// a whole flush through the shipped pipeline (accumulate, encode, gzip,
// send): at most one allocation per sample with OTLP, half with Arrow v2,
// the null endpoint's share included.
func TestPipelineAllocationBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	c := testcorpus.Generate(testcorpus.Benchmark())
	for _, tt := range []struct {
		format, compression string
		budget              float64
	}{
		{output.FormatOTLP, export.CompressionGzip, 1},
		{output.FormatArrowV2, export.CompressionNone, 0.5},
	} {
		t.Run(tt.format, func(t *testing.T) {
			p, _ := newPipe(t, c, tt.compression, tt.format)
			p.flush(t)
			p.flush(t)
			allocs := testing.AllocsPerRun(3, func() { p.flush(t) })
			per := allocs / float64(c.Samples())
			t.Logf("%.0f allocations per flush of %d samples: %.3f/sample", allocs, c.Samples(), per)
			if per > tt.budget {
				t.Errorf("%.3f allocations per sample, budget %v", per, tt.budget)
			}
		})
	}
}
