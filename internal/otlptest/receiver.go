package otlptest

import (
	"context"
	"net"
	"sync"
	"testing"

	"go.opentelemetry.io/collector/pdata/pprofile"
	"go.opentelemetry.io/collector/pdata/pprofile/pprofileotlp"
	"google.golang.org/grpc"
	_ "google.golang.org/grpc/encoding/gzip" // accept gzip-compressed exports
)

// Receiver is an in-process OTLP/profiles gRPC server on 127.0.0.1 that
// keeps a copy of every request. It stops when the test ends.
type Receiver struct {
	pprofileotlp.UnimplementedGRPCServer
	addr string
	mu   sync.Mutex
	reqs []pprofile.Profiles
}

// StartReceiver starts a Receiver with the given server options.
func StartReceiver(t testing.TB, opts ...grpc.ServerOption) *Receiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	r := &Receiver{addr: ln.Addr().String()}
	srv := grpc.NewServer(opts...)
	pprofileotlp.RegisterGRPCServer(srv, r)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return r
}

// Addr returns host:port.
func (r *Receiver) Addr() string { return r.addr }

// Export implements pprofileotlp.GRPCServer.
func (r *Receiver) Export(_ context.Context, req pprofileotlp.ExportRequest) (pprofileotlp.ExportResponse, error) {
	p := pprofile.NewProfiles()
	req.Profiles().CopyTo(p)
	r.mu.Lock()
	r.reqs = append(r.reqs, p)
	r.mu.Unlock()
	return pprofileotlp.NewExportResponse(), nil
}

// Requests returns the requests received so far.
func (r *Receiver) Requests() []pprofile.Profiles {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]pprofile.Profiles(nil), r.reqs...)
}

// Samples flattens every request received so far.
func (r *Receiver) Samples(t testing.TB) []Sample {
	t.Helper()
	var all []Sample
	for i, p := range r.Requests() {
		s, err := Flatten(p)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		all = append(all, s...)
	}
	return all
}
