package otlptest

import (
	"context"
	"slices"
	"sync"

	"google.golang.org/grpc/stats"
)

// WireStats is a gRPC stats.Handler for a test server
// (grpc.StatsHandler): what arrived on the wire, as the server saw it.
type WireStats struct {
	mu                             sync.Mutex
	encodings                      []string
	wire, compressed, uncompressed int
}

// TagRPC implements stats.Handler.
func (w *WireStats) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

// TagConn implements stats.Handler.
func (w *WireStats) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}

// HandleConn implements stats.Handler.
func (w *WireStats) HandleConn(context.Context, stats.ConnStats) {}

// HandleRPC implements stats.Handler.
func (w *WireStats) HandleRPC(_ context.Context, s stats.RPCStats) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch s := s.(type) {
	case *stats.InHeader:
		w.encodings = append(w.encodings, s.Compression)
	case *stats.InPayload:
		w.wire += s.WireLength
		w.compressed += s.CompressedLength
		w.uncompressed += s.Length
	}
}

// Encodings returns the grpc-encoding of every request received ("" when
// uncompressed).
func (w *WireStats) Encodings() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.encodings)
}

// Bytes returns the bytes of every message received: on the wire (gRPC
// framing included), compressed, and uncompressed.
func (w *WireStats) Bytes() (wire, compressed, uncompressed int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.wire, w.compressed, w.uncompressed
}
