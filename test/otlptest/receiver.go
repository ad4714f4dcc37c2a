package otlptest

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/collector/pdata/pprofile"
	"go.opentelemetry.io/collector/pdata/pprofile/pprofileotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	_ "google.golang.org/grpc/encoding/gzip" // accept gzip-compressed exports
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Behaviour is what a receiver does with a request some of whose
// profiles it refuses. Real receivers differ, and a client that resends
// must be right about all of them.
type Behaviour int

const (
	// AllOrNothing refuses the whole request with InvalidArgument and
	// stores none of it, as the OpenTelemetry Collector's receiver does.
	AllOrNothing Behaviour = iota
	// StoreValidThenError stores the profiles it takes, then answers
	// InvalidArgument for the whole request. Pyroscope stores profile by
	// profile and stops at the first it refuses; storing every valid one
	// is the worst case of that for a client that resends.
	StoreValidThenError
	// PartialSuccess stores the profiles it takes and answers success with
	// partial_success.rejected_profiles, as the OTLP specification says.
	PartialSuccess
)

func (b Behaviour) String() string {
	switch b {
	case AllOrNothing:
		return "all-or-nothing"
	case StoreValidThenError:
		return "store-valid-then-error"
	case PartialSuccess:
		return "partial-success"
	}
	return fmt.Sprintf("behaviour(%d)", int(b))
}

// Behaviours lists every Behaviour, for tests that run against each.
var Behaviours = []Behaviour{AllOrNothing, StoreValidThenError, PartialSuccess}

// Call is one Export call as the receiver saw it.
type Call struct {
	N        int // from 1
	Metadata metadata.MD
	Profiles pprofile.Profiles
}

// Receiver is an in-process OTLP/profiles gRPC server, built from the
// real pprofileotlp service, as strict as the strictest receiver Tandem
// targets: a request Decode refuses is refused whole (InvalidArgument), and
// each profile must have a name (ProfileName) and pass the test's
// RefuseProfiles check, or the receiver treats it as its Behaviour says.
// It keeps what it stores, the metadata and TLS version of every call, and
// what arrived on the wire.
type Receiver struct {
	pprofileotlp.UnimplementedGRPCServer
	WireStats // as the server saw the bytes (when started by StartReceiver)

	addr string

	mu          sync.Mutex
	behaviour   Behaviour
	reject      func(Call) error
	refuse      func(Resource, Profile) error
	block       chan struct{}
	started     chan struct{}
	calls       int
	md          []metadata.MD
	tlsVersions []uint16
	reqs        []pprofile.Profiles // requests stored, whole or in part
	stored      []Resource          // one profile each, in arrival order
	copies      map[string]int      // stored profiles by content
	duplicates  int                 // observations stored again
	refused     int                 // profiles refused
	malformed   []error             // requests Decode refused
}

// NewReceiver returns a Receiver to register on a server of the test's
// own (pprofileotlp.RegisterGRPCServer), beside other services.
func NewReceiver() *Receiver { return &Receiver{copies: map[string]int{}} }

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
	r := NewReceiver()
	r.addr = ln.Addr().String()
	srv := grpc.NewServer(append(opts, grpc.StatsHandler(&r.WireStats))...)
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

// SetBehaviour chooses what the receiver does with a request some of
// whose profiles it refuses (AllOrNothing by default).
func (r *Receiver) SetBehaviour(b Behaviour) {
	r.mu.Lock()
	r.behaviour = b
	r.mu.Unlock()
}

// Reject makes the receiver refuse every call for which reject returns an
// error (a gRPC status), before looking at its content and storing none
// of it, as a receiver refusing a tenant, a token or its own load does.
// nil accepts everything again.
func (r *Receiver) Reject(reject func(Call) error) {
	r.mu.Lock()
	r.reject = reject
	r.mu.Unlock()
}

// RefuseProfiles makes the receiver refuse, besides the profiles without
// a name, every profile for which refuse returns an error (a receiver that
// does not take a type, say); its Behaviour says what becomes of the
// request. nil refuses only the unnamed again.
func (r *Receiver) RefuseProfiles(refuse func(Resource, Profile) error) {
	r.mu.Lock()
	r.refuse = refuse
	r.mu.Unlock()
}

// RefuseType is a RefuseProfiles check refusing the profiles of one
// sample type, as a receiver that does not take that type does.
func RefuseType(sampleType string) func(Resource, Profile) error {
	return func(_ Resource, p Profile) error {
		if p.SampleType == sampleType {
			return fmt.Errorf("sample type %s not taken", sampleType)
		}
		return nil
	}
}

// Block makes every call wait until release is called (or the call's
// context ends); started receives a value as each call begins to wait.
func (r *Receiver) Block() (started <-chan struct{}, release func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.block, r.started = make(chan struct{}), make(chan struct{}, 64)
	var once sync.Once
	block := r.block
	return r.started, func() { once.Do(func() { close(block) }) }
}

// Export implements pprofileotlp.GRPCServer.
func (r *Receiver) Export(ctx context.Context, req pprofileotlp.ExportRequest) (pprofileotlp.ExportResponse, error) {
	resp := pprofileotlp.NewExportResponse()
	md, _ := metadata.FromIncomingContext(ctx)
	r.mu.Lock()
	r.calls++
	call := Call{N: r.calls, Metadata: md, Profiles: req.Profiles()}
	r.md = append(r.md, md)
	if p, ok := peer.FromContext(ctx); ok {
		if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok {
			r.tlsVersions = append(r.tlsVersions, ti.State.Version)
		}
	}
	behaviour, reject, refuse, block, started := r.behaviour, r.reject, r.refuse, r.block, r.started
	r.mu.Unlock()
	if block != nil {
		select {
		case started <- struct{}{}:
		default: // nobody counts the calls
		}
		select {
		case <-block:
		case <-ctx.Done():
			return resp, ctx.Err()
		}
	}
	if reject != nil {
		if err := reject(call); err != nil {
			return resp, err
		}
	}
	decoded, err := Decode(req.Profiles())
	if err != nil {
		r.mu.Lock()
		r.malformed = append(r.malformed, fmt.Errorf("call %d: %w", call.N, err))
		r.mu.Unlock()
		return resp, status.Error(codes.InvalidArgument, err.Error())
	}
	var take []Resource
	var why []string
	for _, res := range decoded.Resources {
		for _, p := range res.Profiles {
			_, err := ProfileName(p)
			if err == nil && refuse != nil {
				err = refuse(res, p)
			}
			if err != nil {
				why = append(why, fmt.Sprintf("%s of %s: %v", p.TypeString(), res.Attributes["service.name"], err))
				continue
			}
			take = append(take, Resource{Attributes: res.Attributes, Profiles: []Profile{p}})
		}
	}
	if len(why) > 0 && behaviour == AllOrNothing {
		take = nil
	}
	r.store(req.Profiles(), take, len(why))
	if len(why) == 0 {
		return resp, nil
	}
	msg := fmt.Sprintf("%d profiles refused: %s", len(why), strings.Join(why, "; "))
	if behaviour == PartialSuccess {
		resp.PartialSuccess().SetRejectedProfiles(int64(len(why)))
		resp.PartialSuccess().SetErrorMessage(msg)
		return resp, nil
	}
	return resp, status.Error(codes.InvalidArgument, msg)
}

// store keeps take (profiles of req) and counts what it stores again.
func (r *Receiver) store(req pprofile.Profiles, take []Resource, refused int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.refused += refused
	if len(take) == 0 {
		return
	}
	p := pprofile.NewProfiles()
	req.CopyTo(p)
	r.reqs = append(r.reqs, p)
	for _, res := range take {
		// A profile's resource, type and samples (timestamps included)
		// identify it: the same content twice is one profile stored twice.
		h := sha256.New()
		fmt.Fprint(h, res.Attributes, res.Profiles[0])
		key := string(h.Sum(nil))
		if r.copies[key] > 0 {
			r.duplicates += observations(res.Profiles[0].Samples)
		}
		r.copies[key]++
		r.stored = append(r.stored, res)
	}
}

func observations(ss []Sample) int {
	n := 0
	for _, s := range ss {
		n += len(s.Timestamps)
	}
	return n
}

// ProfileName is the name a receiver that names profiles by their type
// (Pyroscope) gives p, or why it has none: such a receiver reads the
// period type only when the period is not zero, and names the profile
// after it unless the type is CPU samples or off-CPU time. A profile
// without a name is refused ("invalid metric name").
func ProfileName(p Profile) (string, error) {
	if p.SampleType == "" || p.SampleUnit == "" {
		return "", fmt.Errorf("profile type %q: no sample type", p.TypeString())
	}
	var periodType, periodUnit string
	if p.Period != 0 {
		periodType, periodUnit = p.PeriodType, p.PeriodUnit
	}
	switch key := p.SampleType + ":" + p.SampleUnit + ":" + periodType + ":" + periodUnit; key {
	case "samples:count:cpu:nanoseconds":
		return "process_cpu", nil
	case "off_cpu:nanoseconds::":
		return "off_cpu", nil
	}
	if !validMetricName(periodType) {
		return "", fmt.Errorf("profile type %q: invalid metric name %q (the period type, read only when the period is not 0)", p.TypeString(), periodType)
	}
	return periodType, nil
}

// validMetricName is Prometheus's rule: [a-zA-Z_:][a-zA-Z0-9_:]*.
func validMetricName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		letter := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == ':'
		if !letter && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
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
	for _, rp := range p.ResourceProfiles().All() {
		for _, sp := range rp.ScopeProfiles().All() {
			for _, prof := range sp.Profiles().All() {
				st := prof.SampleType()
				out = append(out, str(st.TypeStrindex())+"/"+str(st.UnitStrindex()))
			}
		}
	}
	return out
}

// Observations returns the samples stored so far, counted as the sampler
// counts them (one per timestamp), copies included.
func (r *Receiver) Observations(t testing.TB) int {
	t.Helper()
	return observations(r.Samples(t))
}

// Duplicates returns the samples stored more than once: the observations
// of every profile stored again with the same content.
func (r *Receiver) Duplicates() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.duplicates
}

// Refused returns the number of profiles refused so far (by name or by
// RefuseProfiles), whatever the behaviour did with their requests.
func (r *Receiver) Refused() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refused
}

// Calls returns the number of Export calls so far, refused ones included.
func (r *Receiver) Calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls
}

// Metadata returns the incoming metadata of every call, in order.
func (r *Receiver) Metadata() []metadata.MD {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]metadata.MD(nil), r.md...)
}

// TLSVersions returns the TLS version of every call made over TLS.
func (r *Receiver) TLSVersions() []uint16 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]uint16(nil), r.tlsVersions...)
}

// Requests returns the requests the receiver stored, whole or in part.
func (r *Receiver) Requests() []pprofile.Profiles {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]pprofile.Profiles(nil), r.reqs...)
}

// Samples returns every sample stored so far, in arrival order. It fails
// the test when a request was malformed (refused by Decode).
func (r *Receiver) Samples(t testing.TB) []Sample {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.malformed) > 0 {
		t.Fatalf("the receiver refused %d malformed requests, the first: %v", len(r.malformed), r.malformed[0])
	}
	var all []Sample
	for _, res := range r.stored {
		all = append(all, res.Profiles[0].Samples...)
	}
	return all
}

// Resources returns every resource stored so far (one profile each), in
// arrival order.
func (r *Receiver) Resources() []Resource {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Resource(nil), r.stored...)
}
