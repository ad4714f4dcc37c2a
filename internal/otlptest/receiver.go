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
	addr   string
	mu     sync.Mutex
	reqs   []pprofile.Profiles
	reject func(pprofile.Profiles) error
}

// StartReceiver starts a Receiver with the given server options.
func StartReceiver(t testing.TB, opts ...grpc.ServerOption) *Receiver {
	t.Helper()
	return StartReceiverAt(t, "127.0.0.1:0", opts...)
}

// StartReceiverAt starts a Receiver listening on addr (a backend coming
// back at the address its clients already use).
func StartReceiverAt(t testing.TB, addr string, opts ...grpc.ServerOption) *Receiver {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
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

// FreeAddr returns a loopback address nothing listens on: a backend that
// is down, which StartReceiverAt can bring up later.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// Export implements pprofileotlp.GRPCServer.
func (r *Receiver) Export(_ context.Context, req pprofileotlp.ExportRequest) (pprofileotlp.ExportResponse, error) {
	r.mu.Lock()
	reject := r.reject
	r.mu.Unlock()
	if reject != nil {
		if err := reject(req.Profiles()); err != nil {
			return pprofileotlp.NewExportResponse(), err
		}
	}
	p := pprofile.NewProfiles()
	req.Profiles().CopyTo(p)
	r.mu.Lock()
	r.reqs = append(r.reqs, p)
	r.mu.Unlock()
	return pprofileotlp.NewExportResponse(), nil
}

// Reject makes the receiver refuse every request for which reject returns
// an error (a gRPC status), storing none of it, as a real receiver refusing
// a request does. nil accepts everything again.
func (r *Receiver) Reject(reject func(pprofile.Profiles) error) {
	r.mu.Lock()
	r.reject = reject
	r.mu.Unlock()
}

// SampleTypes returns the sample types ("type/unit") of every profile in p.
func SampleTypes(p pprofile.Profiles) []string {
	var out []string
	strs := p.Dictionary().StringTable()
	str := func(i int32) string {
		if i < 0 || int(i) >= strs.Len() {
			return ""
		}
		return strs.At(int(i))
	}
	rps := p.ResourceProfiles()
	for i := 0; i < rps.Len(); i++ {
		sps := rps.At(i).ScopeProfiles()
		for j := 0; j < sps.Len(); j++ {
			ps := sps.At(j).Profiles()
			for k := 0; k < ps.Len(); k++ {
				st := ps.At(k).SampleType()
				out = append(out, str(st.TypeStrindex())+"/"+str(st.UnitStrindex()))
			}
		}
	}
	return out
}

// Observations returns the samples received so far, counted as the
// sampler counts them: one per timestamp.
func (r *Receiver) Observations(t testing.TB) int {
	n := 0
	for _, s := range r.Samples(t) {
		n += len(s.Timestamps)
	}
	return n
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
