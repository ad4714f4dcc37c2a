package export

import (
	"bufio"
	stdgzip "compress/gzip"
	"io"
	"sync"

	"google.golang.org/grpc/encoding"
	grpcgzip "google.golang.org/grpc/encoding/gzip" // registers "gzip", whose Decompress we keep
)

var gzipLevel1 sync.Once

// RegisterGzipLevel1 replaces the "gzip" compressor that every gRPC client
// and server in the process shares with one that compresses at level 1
// (BestSpeed) and hands its output to gRPC in 32 KiB chunks (grpc-go's own
// copies every small write flate makes into a separate buffer, thousands
// per flush). Decompression stays grpc-go's. Call it from main before any
// RPC starts: grpc-go requires compressors to be registered at
// initialization time. Later calls do nothing. Without it, gzip still works
// at grpc-go's default level 6.
func RegisterGzipLevel1() {
	gzipLevel1.Do(func() {
		encoding.RegisterCompressor(newGzipCompressor(encoding.GetCompressor(grpcgzip.Name), stdgzip.BestSpeed))
	})
}

const gzipChunk = 32 << 10

type gzipCompressor struct {
	writers    sync.Pool
	decompress encoding.Compressor
}

type gzipWriter struct {
	gz   *stdgzip.Writer
	buf  *bufio.Writer
	pool *sync.Pool
}

func newGzipCompressor(decompress encoding.Compressor, level int) *gzipCompressor {
	c := &gzipCompressor{decompress: decompress}
	c.writers.New = func() any {
		buf := bufio.NewWriterSize(io.Discard, gzipChunk)
		gz, err := stdgzip.NewWriterLevel(buf, level)
		if err != nil {
			panic("gzip level: " + err.Error()) // levels are constants here
		}
		return &gzipWriter{gz: gz, buf: buf, pool: &c.writers}
	}
	return c
}

func (c *gzipCompressor) Compress(w io.Writer) (io.WriteCloser, error) {
	z := c.writers.Get().(*gzipWriter)
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
