package export_test

import (
	"context"
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

	"github.com/tandem-profiler/tandem/encoder"
	"github.com/tandem-profiler/tandem/encoder/export"
	"github.com/tandem-profiler/tandem/encoder/internal/testcorpus"
	"github.com/tandem-profiler/tandem/encoder/otlp"
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

// nullExporter returns an Exporter connected to a null endpoint over an
// in-memory listener.
func nullExporter(tb testing.TB, compression string) (*export.Exporter, *wireCounter) {
	tb.Helper()
	lis := bufconn.Listen(4 << 20)
	wc := &wireCounter{}
	srv := grpc.NewServer(
		grpc.ForceServerCodecV2(rawCodec{}),
		grpc.RPCDecompressor(nullDecompressor{}), //nolint:staticcheck // the only way to skip inflate
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
	e, err := export.New(conn, nil, nil, cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = e.Close(context.Background())
		_ = conn.Close()
		srv.Stop()
	})
	return e, wc
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

// pipe is the encoder's whole path for one flush interval.
type pipe struct {
	c   *testcorpus.Corpus
	agg *encoder.Aggregator
	enc *otlp.Encoder
	exp *export.Exporter
	now time.Time
}

func newPipe(tb testing.TB, c *testcorpus.Corpus, exp *export.Exporter) *pipe {
	tb.Helper()
	agg, err := encoder.NewAggregator(encoder.DefaultConfig(), nil)
	if err != nil {
		tb.Fatal(err)
	}
	enc, err := otlp.NewEncoder(otlp.DefaultConfig())
	if err != nil {
		tb.Fatal(err)
	}
	last := c.Batches[len(c.Batches)-1]
	return &pipe{c: c, agg: agg, enc: enc, exp: exp,
		now: time.Unix(0, last.Samples[len(last.Samples)-1].TimestampUnixNano)}
}

func (p *pipe) accumulate(tb testing.TB) *encoder.Flush {
	for _, b := range p.c.Batches {
		if err := p.agg.Add(&p.c.Hello, b); err != nil {
			tb.Fatal(err)
		}
	}
	return p.agg.Flush(p.now)
}

// flush accumulates, encodes and sends one flush interval.
func (p *pipe) flush(tb testing.TB) {
	f := p.accumulate(tb)
	req := p.enc.Encode(f)
	if err := p.exp.Export(context.Background(), req); err != nil {
		tb.Fatal(err)
	}
	p.enc.Release(req)
	p.agg.Release(f)
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

// protoSize returns the serialized size of one flush's request.
func protoSize(tb testing.TB, p *pipe) int {
	f := p.accumulate(tb)
	req := p.enc.Encode(f)
	buf, err := req.MarshalProto()
	if err != nil {
		tb.Fatal(err)
	}
	p.enc.Release(req)
	p.agg.Release(f)
	return len(buf)
}

// BenchmarkOTLPAccumulate measures the Aggregator alone: every batch of the
// corpus added, then the flush snapshot cut and released.
func BenchmarkOTLPAccumulate(b *testing.B) {
	c := benchCorpus(b)
	p := newPipe(b, c, nil)
	p.agg.Release(p.accumulate(b))
	b.ReportAllocs()
	ps := startPerSample(c.Samples())
	for b.Loop() {
		p.agg.Release(p.accumulate(b))
	}
	ps.report(b)
}

// BenchmarkEncodeOTLP measures a whole flush interval: accumulate, encode,
// serialize, compress and send to the null endpoint.
func BenchmarkEncodeOTLP(b *testing.B) {
	c := benchCorpus(b)
	for _, comp := range []string{export.CompressionGzip, export.CompressionNone} {
		b.Run(comp, func(b *testing.B) {
			exp, wc := nullExporter(b, comp)
			p := newPipe(b, c, exp)
			p.flush(b)
			p.flush(b)
			wc.reset()
			proto := protoSize(b, p)
			b.ReportAllocs()
			ps := startPerSample(c.Samples())
			for b.Loop() {
				p.flush(b)
			}
			ps.report(b)
			n := float64(b.N) * float64(c.Samples())
			b.ReportMetric(float64(wc.reset())/n, "wire-B/sample")
			b.ReportMetric(float64(proto)/float64(c.Samples()), "proto-B/sample")
		})
	}
}

// BenchmarkOTLPEncodeOnly isolates the OTLP encoder (Flush -> pdata) and
// protobuf serialization, without gRPC.
func BenchmarkOTLPEncodeOnly(b *testing.B) {
	c := benchCorpus(b)
	p := newPipe(b, c, nil)
	f := p.accumulate(b)
	p.enc.Release(p.enc.Encode(f))
	b.ReportAllocs()
	ps := startPerSample(c.Samples())
	for b.Loop() {
		req := p.enc.Encode(f)
		if _, err := req.MarshalProto(); err != nil {
			b.Fatal(err)
		}
		p.enc.Release(req)
	}
	ps.report(b)
}

// TestPipelineAllocationBudget guards the steady-state allocation budget of
// a whole flush (accumulate, encode, gzip, send): at most one allocation per
// sample, the null endpoint's share included.
func TestPipelineAllocationBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	c := testcorpus.Generate(testcorpus.Benchmark())
	exp, _ := nullExporter(t, export.CompressionGzip)
	p := newPipe(t, c, exp)
	p.flush(t)
	p.flush(t)
	allocs := testing.AllocsPerRun(3, func() { p.flush(t) })
	per := allocs / float64(c.Samples())
	t.Logf("%.0f allocations per flush of %d samples: %.3f/sample", allocs, c.Samples(), per)
	if per > 1 {
		t.Errorf("%.3f allocations per sample, budget 1", per)
	}
}
