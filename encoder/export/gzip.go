package export

import (
	"bufio"
	stdgzip "compress/gzip"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/encoding"
	grpcgzip "google.golang.org/grpc/encoding/gzip" // registers "gzip", whose Decompress we keep
)

// Gzip levels SetGzipLevel accepts: compress/gzip's BestSpeed to
// BestCompression.
const (
	MinGzipLevel     = stdgzip.BestSpeed
	MaxGzipLevel     = stdgzip.BestCompression
	DefaultGzipLevel = MinGzipLevel
)

var (
	registerGzip sync.Once
	tandemGzip   *gzipCompressor
)

// RegisterGzip replaces the "gzip" compressor that every gRPC client and
// server in the process shares with one that compresses at the level
// SetGzipLevel chose (level 1, BestSpeed, until then) and hands its output
// to gRPC in 32 KiB chunks (grpc-go's own copies every small write flate
// makes into a separate buffer, thousands per flush). Decompression stays
// grpc-go's. Call it from main before any RPC starts: grpc-go requires
// compressors to be registered at initialization time. Later calls do
// nothing. Without it, gzip still works at grpc-go's default level 6, and
// SetGzipLevel fails.
func RegisterGzip() {
	registerGzip.Do(func() {
		tandemGzip = newGzipCompressor(encoding.GetCompressor(grpcgzip.Name), DefaultGzipLevel)
		encoding.RegisterCompressor(tandemGzip)
	})
}

// SetGzipLevel sets the level of the compressor RegisterGzip registered,
// for every gzip-compressed gRPC message the process sends from then on
// (grpc-go has one "gzip" compressor per process, so the level cannot
// differ between connections). Level 1 is the fastest; docs/benchmarks/encoding.md
// measures the others on OTLP requests.
func SetGzipLevel(level int) error {
	if level < MinGzipLevel || level > MaxGzipLevel {
		return fmt.Errorf("gzip level %d: want %d (fastest) to %d (smallest); for no compression use compression \"none\"", level, MinGzipLevel, MaxGzipLevel)
	}
	if tandemGzip == nil || encoding.GetCompressor(grpcgzip.Name) != encoding.Compressor(tandemGzip) {
		return fmt.Errorf("gzip level %d: export.RegisterGzip was not called, so gRPC's own gzip compressor (level 6) is in use", level)
	}
	tandemGzip.level.Store(int32(level))
	return nil
}

const gzipChunk = 32 << 10

type gzipCompressor struct {
	level atomic.Int32
	// writers holds one pool per level, so a level change never resets a
	// pooled writer to another level.
	writers    [MaxGzipLevel + 1]sync.Pool
	decompress encoding.Compressor
}

type gzipWriter struct {
	gz   *stdgzip.Writer
	buf  *bufio.Writer
	pool *sync.Pool
}

func newGzipCompressor(decompress encoding.Compressor, level int) *gzipCompressor {
	c := &gzipCompressor{decompress: decompress}
	c.level.Store(int32(level))
	for l := MinGzipLevel; l <= MaxGzipLevel; l++ {
		pool := &c.writers[l]
		pool.New = func() any {
			buf := bufio.NewWriterSize(io.Discard, gzipChunk)
			gz, err := stdgzip.NewWriterLevel(buf, l)
			if err != nil {
				panic("gzip level: " + err.Error()) // l is within compress/gzip's range
			}
			return &gzipWriter{gz: gz, buf: buf, pool: pool}
		}
	}
	return c
}

func (c *gzipCompressor) Compress(w io.Writer) (io.WriteCloser, error) {
	z := c.writers[c.level.Load()].Get().(*gzipWriter)
	z.buf.Reset(w)
	z.gz.Reset(z.buf)
	return z, nil
}

func (z *gzipWriter) Write(p []byte) (int, error) { return z.gz.Write(p) }

func (z *gzipWriter) Close() error {
	err := z.gz.Close()
	if ferr := z.buf.Flush(); err == nil {
		err = ferr
	}
	z.buf.Reset(io.Discard) // drop the reference to gRPC's buffer
	z.pool.Put(z)
	return err
}

func (c *gzipCompressor) Decompress(r io.Reader) (io.Reader, error) {
	return c.decompress.Decompress(r)
}

func (c *gzipCompressor) Name() string { return grpcgzip.Name }
