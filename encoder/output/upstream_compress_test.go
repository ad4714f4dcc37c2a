//go:build upstreamcompare

package output_test

import (
	"bytes"
	stdgzip "compress/gzip"
	"encoding/binary"
	"io"
	"os"
	"slices"
	"testing"

	kgzip "github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"go.opentelemetry.io/collector/pdata/pprofile/pprofileotlp"
)

// Wire compressions other than the exporter's gzip-1, measured on the same
// two requests as TestOTLPSizeAgainstUpstream (docs/benchmarks/encoding.md, "Other
// wire compressions"):
//
//	GOFLAGS=-mod=vendor go test -tags upstreamcompare -run TestOTLPCompressionsAgainstUpstream -v ./encoder/output/
//	GOFLAGS=-mod=vendor go test -tags upstreamcompare -run '^$' -bench OTLPCompress -benchmem ./encoder/output/

type codec struct {
	name string
	new  func(w io.Writer) resetWriter
}

// resetWriter is what every codec's writer offers, so a benchmark reuses
// one writer, as a pooled gRPC compressor does.
type resetWriter interface {
	io.WriteCloser
	Reset(io.Writer)
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

var codecs = []codec{
	{"gzip-1 (std)", func(w io.Writer) resetWriter { return must(stdgzip.NewWriterLevel(w, 1)) }},
	{"gzip-2 (std)", func(w io.Writer) resetWriter { return must(stdgzip.NewWriterLevel(w, 2)) }},
	{"gzip-3 (std)", func(w io.Writer) resetWriter { return must(stdgzip.NewWriterLevel(w, 3)) }},
	{"gzip-4 (std)", func(w io.Writer) resetWriter { return must(stdgzip.NewWriterLevel(w, 4)) }},
	{"gzip-5 (std)", func(w io.Writer) resetWriter { return must(stdgzip.NewWriterLevel(w, 5)) }},
	{"gzip-6 (std)", func(w io.Writer) resetWriter { return must(stdgzip.NewWriterLevel(w, 6)) }},
	{"gzip-9 (std)", func(w io.Writer) resetWriter { return must(stdgzip.NewWriterLevel(w, 9)) }},
	{"gzip-1 (klauspost)", func(w io.Writer) resetWriter { return must(kgzip.NewWriterLevel(w, 1)) }},
	{"gzip-3 (klauspost)", func(w io.Writer) resetWriter { return must(kgzip.NewWriterLevel(w, 3)) }},
	{"gzip-4 (klauspost)", func(w io.Writer) resetWriter { return must(kgzip.NewWriterLevel(w, 4)) }},
	{"gzip-5 (klauspost)", func(w io.Writer) resetWriter { return must(kgzip.NewWriterLevel(w, 5)) }},
	{"gzip-6 (klauspost)", func(w io.Writer) resetWriter { return must(kgzip.NewWriterLevel(w, 6)) }},
	{"gzip-7 (klauspost)", func(w io.Writer) resetWriter { return must(kgzip.NewWriterLevel(w, 7)) }},
	{"gzip-8 (klauspost)", func(w io.Writer) resetWriter { return must(kgzip.NewWriterLevel(w, 8)) }},
	{"gzip-9 (klauspost)", func(w io.Writer) resetWriter { return must(kgzip.NewWriterLevel(w, 9)) }},
	{"snappy", func(w io.Writer) resetWriter { return snappy.NewBufferedWriter(w) }},
	{"zstd fastest", zstdWriter(zstd.SpeedFastest)},
	{"zstd default", zstdWriter(zstd.SpeedDefault)},
	{"zstd better", zstdWriter(zstd.SpeedBetterCompression)},
	{"zstd best", zstdWriter(zstd.SpeedBestCompression)},
	{"zstd fastest, 512 KiB window", zstdWriter(zstd.SpeedFastest, zstd.WithWindowSize(512<<10))},
	{"zstd default, 512 KiB window", zstdWriter(zstd.SpeedDefault, zstd.WithWindowSize(512<<10))},
	{"zstd better, 512 KiB window", zstdWriter(zstd.SpeedBetterCompression, zstd.WithWindowSize(512<<10))},
}

func zstdWriter(l zstd.EncoderLevel, opts ...zstd.EOption) func(io.Writer) resetWriter {
	return func(w io.Writer) resetWriter {
		return must(zstd.NewWriter(w, append([]zstd.EOption{zstd.WithEncoderLevel(l), zstd.WithEncoderConcurrency(1)}, opts...)...))
	}
}

func compressedLen(c codec, b []byte) int {
	var buf bytes.Buffer
	w := c.new(&buf)
	if _, err := w.Write(b); err != nil {
		panic(err)
	}
	if err := w.Close(); err != nil {
		panic(err)
	}
	return buf.Len()
}

func TestOTLPCompressionsAgainstUpstream(t *testing.T) {
	c := benchCorpus(t)
	p, _ := newPipe(t, c, "none")
	f, tb := tandemRequest(t, p)
	defer p.p.Aggregator().Release(f)
	if path := os.Getenv("TANDEM_OTLP_REQUEST"); path != "" {
		// For BenchmarkOTLPCompress under callgrind, without the corpus.
		if err := os.WriteFile(path, binary.LittleEndian.AppendUint32(tb, uint32(f.Events)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Upstream's map order moves its sizes: every codec is measured on the
	// same 3*upstreamRuns requests and the median taken per codec.
	var ubs [][]byte
	n := f.Events
	for range 3 * upstreamRuns {
		up, skipped := upstreamProfiles(t, f, int(p.c.Hello.SamplingFrequencyHz))
		n = f.Events - skipped
		ub, err := pprofileotlp.NewExportRequestFromProfiles(up).MarshalProto()
		if err != nil {
			t.Fatal(err)
		}
		ubs = append(ubs, ub)
	}
	median := func(cd codec) float64 {
		var s []float64
		for _, ub := range ubs {
			s = append(s, float64(compressedLen(cd, ub))/float64(n))
		}
		slices.Sort(s)
		return s[len(s)/2]
	}
	base := median(codecs[0])
	t.Logf("protobuf B/sample: tandem %.2f; upstream gzip-1 %.2f B/sample", float64(len(tb))/float64(f.Events), base)
	t.Logf("| codec | tandem B/sample | upstream B/sample | tandem / upstream gzip-1 | tandem / upstream same codec |")
	for _, cd := range codecs {
		tz := float64(compressedLen(cd, tb)) / float64(f.Events)
		uz := median(cd)
		t.Logf("| %s | %.2f | %.2f | %.3f | %.3f |", cd.name, tz, uz, tz/base, tz/uz)
	}
}

// BenchmarkOTLPCompress compresses one flush's Tandem request per op: the
// corpus's, or the one TestOTLPCompressionsAgainstUpstream wrote to
// $TANDEM_OTLP_REQUEST (so callgrind does not also run the corpus).
func BenchmarkOTLPCompress(b *testing.B) {
	req, events := benchRequest(b)
	for _, cd := range codecs {
		b.Run(cd.name, func(b *testing.B) {
			var buf bytes.Buffer
			buf.Grow(len(req))
			w := cd.new(&buf)
			for b.Loop() {
				compressOnce(b, w, &buf, req)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(events), "ns/sample")
			b.ReportMetric(float64(buf.Len())/float64(events), "B/sample")
		})
	}
}

// compressOnce is one op, the function callgrind's --toggle-collect names.
//
//go:noinline
func compressOnce(b *testing.B, w resetWriter, buf *bytes.Buffer, req []byte) {
	buf.Reset()
	w.Reset(buf)
	if _, err := w.Write(req); err != nil {
		b.Fatal(err)
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
}

func benchRequest(b *testing.B) ([]byte, int) {
	if path := os.Getenv("TANDEM_OTLP_REQUEST"); path != "" {
		raw, err := os.ReadFile(path)
		if err != nil || len(raw) < 4 {
			b.Fatalf("$TANDEM_OTLP_REQUEST: %v (%d bytes)", err, len(raw))
		}
		n := len(raw) - 4
		return raw[:n], int(binary.LittleEndian.Uint32(raw[n:]))
	}
	p, _ := newPipe(b, benchCorpus(b), "none")
	f, req := tandemRequest(b, p)
	defer p.p.Aggregator().Release(f)
	return req, f.Events
}
