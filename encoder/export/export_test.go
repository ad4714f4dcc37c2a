package export_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/collector/pdata/pprofile/pprofileotlp"
	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/tandem-profiler/tandem/encoder/export"
	"github.com/tandem-profiler/tandem/encoder/internal/flushtest"
	"github.com/tandem-profiler/tandem/encoder/internal/otlpcorpus"
	"github.com/tandem-profiler/tandem/encoder/internal/testcorpus"
	"github.com/tandem-profiler/tandem/encoder/otlp"
	recvtest "github.com/tandem-profiler/tandem/test/otlptest"
	"github.com/tandem-profiler/tandem/test/promtest"
	"github.com/tandem-profiler/tandem/test/waittest"
)

func TestMain(m *testing.M) {
	export.RegisterGzip() // as cmd/encoder's main does
	goleak.VerifyTestMain(m)
}

// testSetup is what an output gives its exporter: a connection and a
// delivery policy.
type testSetup struct {
	export.Config
	export.QueueConfig
}

func testConfig(addr string) testSetup {
	cfg := testSetup{export.DefaultConfig(), export.DefaultQueueConfig()}
	cfg.Address = addr
	cfg.Insecure = true
	cfg.RPCTimeout = 5 * time.Second
	cfg.GiveUpAfter = 10 * time.Second
	cfg.Retry.Initial, cfg.Retry.Max = 10*time.Millisecond, 40*time.Millisecond
	return cfg
}

// testExporter is an Exporter with OTLP requests of one part each.
type testExporter struct {
	*export.Exporter
	client *export.Client
}

// otlpRequest is one OTLP request as an export.Request of one part, one
// profile of testSamples samples, counted as the OTLP output counts
// (PartialOutcome).
type otlpRequest struct {
	client *export.Client
	req    pprofileotlp.ExportRequest
}

const testSamples = 10

func (r otlpRequest) Parts() int          { return 1 }
func (r otlpRequest) PartSamples(int) int { return testSamples }
func (r otlpRequest) Bytes() int          { return 1000 }
func (r otlpRequest) Release()            {}
func (r otlpRequest) Send(ctx context.Context, _ int) (export.Outcome, error) {
	rejected, msg, err := r.client.ExportOTLP(ctx, r.req)
	if err != nil {
		return export.Outcome{}, err
	}
	return export.PartialOutcome([]int{testSamples}, rejected, msg), nil
}

// Export delivers req at once and returns the error of the result.
func (e testExporter) Export(ctx context.Context, req pprofileotlp.ExportRequest) error {
	return e.Deliver(ctx, otlpRequest{e.client, req}).Err
}

// Submit queues req; done gets the result.
func (e testExporter) Submit(req pprofileotlp.ExportRequest, done func(export.Result)) {
	e.Exporter.Submit(otlpRequest{e.client, req}, done)
}

func newExporter(t *testing.T, cfg testSetup, reg prometheus.Registerer) testExporter {
	t.Helper()
	return newExporterWith(t, cfg, reg)
}

// newExporterWith is newExporter with extra dial options.
func newExporterWith(t *testing.T, cfg testSetup, reg prometheus.Registerer, opts ...grpc.DialOption) testExporter {
	t.Helper()
	conn, err := export.Dial(cfg.Config, reg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	e, err := export.New(cfg.QueueConfig, "test", nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(context.Background()); err != nil {
			t.Error(err)
		}
		_ = conn.Close()
	})
	return testExporter{e, export.NewClient(cfg.Config, conn)}
}

// pipeline runs a corpus through the Aggregator and the OTLP encoder.
func pipeline(t testing.TB, c *testcorpus.Corpus) pprofileotlp.ExportRequest {
	t.Helper()
	req, err := otlp.Encode(flushtest.Default(t, c), otlp.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func smallRequest(t testing.TB) pprofileotlp.ExportRequest {
	cfg := testcorpus.Small()
	cfg.Samples, cfg.Stacks = 50, 10
	return pipeline(t, testcorpus.Generate(cfg))
}

func TestConfigValidate(t *testing.T) {
	tests := []validateCase[export.Config]{
		{"default", func(*export.Config) {}, nil},
		{"with address", func(c *export.Config) { c.Address = "parca:7070" }, nil},
		{"none compression", func(c *export.Config) { c.Compression = export.CompressionNone }, nil},
		{"zstd", func(c *export.Config) { c.Compression = "zstd" }, []string{`compression "zstd"`}},
		{"cert without key", func(c *export.Config) { c.ClientCert = "c.pem" }, []string{"given together"}},
		{"token twice", func(c *export.Config) { c.BearerToken, c.BearerTokenFile = "t", "f" }, []string{"mutually exclusive"}},
		{"insecure and skip verify", func(c *export.Config) { c.Insecure, c.InsecureSkipVerify = true, true }, []string{"contradicts"}},
		{"reserved header", func(c *export.Config) { c.GRPCHeaders = map[string]string{"grpc-timeout": "1"} }, []string{"grpc-timeout"}},
		{"zero connection timeout", func(c *export.Config) { c.ConnectionTimeout = 0 }, []string{"connection timeout"}},
		{"all reported", func(c *export.Config) { c.Compression, c.ClientCert = "y", "c.pem" },
			[]string{"compression", "given together"}},
	}
	runValidateCases(t, export.DefaultConfig, tests)
}

// validateCase is one case of a configuration's Validate table.
type validateCase[C any] struct {
	name   string
	mutate func(c *C)
	want   []string // substrings of the error; none = valid
}

// runValidateCases runs Validate on def() changed by each case.
func runValidateCases[C interface{ Validate() error }](t *testing.T, def func() C, tests []validateCase[C]) {
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := def()
			tt.mutate(&c)
			err := c.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatalf("Validate = %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate accepted an invalid config")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestQueueConfigValidate holds the delivery policy's cases, which were
// export.Config's while it embedded QueueConfig.
func TestQueueConfigValidate(t *testing.T) {
	tests := []validateCase[export.QueueConfig]{
		{"default", func(*export.QueueConfig) {}, nil},
		{"zero queue", func(c *export.QueueConfig) { c.QueueSize = 0 }, []string{"queue size"}},
		{"zero queue bytes", func(c *export.QueueConfig) { c.QueueBytes = 0 }, []string{"queue bytes"}},
		{"backoff order", func(c *export.QueueConfig) { c.Retry.Max = time.Millisecond }, []string{"below the initial"}},
		{"zero timeout", func(c *export.QueueConfig) { c.RPCTimeout = 0 }, []string{"RPC timeout"}},
		{"negative give-up", func(c *export.QueueConfig) { c.GiveUpAfter = -time.Second }, []string{"give-up time"}},
		{"all reported", func(c *export.QueueConfig) { c.QueueSize, c.RPCTimeout = 0, 0 }, []string{"queue size", "RPC timeout"}},
	}
	runValidateCases(t, export.DefaultQueueConfig, tests)
}

func TestDialNeedsAddress(t *testing.T) {
	if _, err := export.Dial(export.DefaultConfig(), nil); !errors.Is(err, export.ErrNoAddress) {
		t.Fatalf("Dial without address = %v, want ErrNoAddress", err)
	}
}

// TestExportEndToEnd sends a whole flush, built from batches through the
// Aggregator and the OTLP encoder, to a real pprofileotlp receiver, and
// checks every sample, attribute and dictionary invariant of what arrived,
// with both compressions, plus the bearer token and headers.
func TestExportEndToEnd(t *testing.T) {
	c := testcorpus.Generate(testcorpus.Small())
	req := pipeline(t, c)
	for _, comp := range []string{export.CompressionGzip, export.CompressionNone} {
		t.Run(comp, func(t *testing.T) {
			r := recvtest.StartReceiver(t)
			cfg := testConfig(r.Addr())
			cfg.Compression = comp
			cfg.BearerToken = "s3cret"
			cfg.GRPCHeaders = map[string]string{"X-Scope-OrgID": "tenant-1"}
			reg := prometheus.NewRegistry()
			e := newExporter(t, cfg, reg)
			if err := e.Export(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			if n := len(r.Requests()); n != 1 {
				t.Fatalf("receiver got %d requests", n)
			}
			res, err := otlpcorpus.Decode(r.Requests()[0])
			if err != nil {
				t.Fatal(err)
			}
			if diff := testcorpus.Diff(testcorpus.Events(c), res.Events, 5); diff != nil {
				t.Fatalf("received request differs from input:\n%s", strings.Join(diff, "\n"))
			}
			md := r.Metadata()[0]
			if got := md.Get("authorization"); len(got) != 1 || got[0] != "Bearer s3cret" {
				t.Errorf("authorization = %q", got)
			}
			if got := md.Get("x-scope-orgid"); len(got) != 1 || got[0] != "tenant-1" {
				t.Errorf("x-scope-orgid = %q", got)
			}
			wantComp := ""
			if comp == export.CompressionGzip {
				wantComp = "gzip"
				// A compressor that does nothing would send more than it
				// was given; the small corpus compresses to about half.
				if wire, _, raw := r.Bytes(); wire*10 > raw*6 {
					t.Errorf("gzip: %d bytes on the wire for %d uncompressed", wire, raw)
				}
			}
			if enc := r.Encodings(); len(enc) != 1 || enc[0] != wantComp {
				t.Errorf("compression = %q, want %q", enc, wantComp)
			}
			if got := promtest.Value(t, reg, "tandem_encoder_remote_store_sent_bytes_total", "encoding", "wire"); got == 0 {
				t.Error("no wire bytes counted")
			}
		})
	}
}

func TestExportBearerTokenFile(t *testing.T) {
	r := recvtest.StartReceiver(t)
	cfg := testConfig(r.Addr())
	cfg.BearerTokenFile = filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(cfg.BearerTokenFile, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := newExporter(t, cfg, nil).Export(context.Background(), smallRequest(t)); err != nil {
		t.Fatal(err)
	}
	if got := r.Metadata()[0].Get("authorization"); len(got) != 1 || got[0] != "Bearer from-file" {
		t.Errorf("authorization = %q", got)
	}
}

func TestExportRetriesUnavailable(t *testing.T) {
	r := recvtest.StartReceiver(t)
	r.Reject(func(c recvtest.Call) error {
		if c.N <= 2 {
			return status.Error(codes.Unavailable, "warming up")
		}
		return nil
	})
	reg := prometheus.NewRegistry()
	e := newExporter(t, testConfig(r.Addr()), reg)
	if err := e.Export(context.Background(), smallRequest(t)); err != nil {
		t.Fatalf("Export = %v, want success after retries", err)
	}
	if r.Calls() != 3 || len(r.Requests()) != 1 {
		t.Errorf("%d calls, %d accepted; want 3 and 1", r.Calls(), len(r.Requests()))
	}
	if got := promtest.Value(t, reg, "tandem_encoder_export_retries_total"); got != 2 {
		t.Errorf("retries_total = %v, want 2", got)
	}
}

// TestExportHonoursRetryInfo: a receiver's RetryInfo delay (20 s) longer
// than the backoff's (1 s) is waited out, on the retry policy's clock.
func TestExportHonoursRetryInfo(t *testing.T) {
	busy, err := status.New(codes.ResourceExhausted, "busy").WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(20 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	r := recvtest.StartReceiver(t)
	r.Reject(func(c recvtest.Call) error {
		if c.N == 1 {
			return busy.Err()
		}
		return nil
	})
	cfg := testConfig(r.Addr())
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	cfg.Retry = export.DefaultQueueConfig().Retry
	cfg.Retry.Clock = clk
	cfg.GiveUpAfter = 0 // serve's policy: retry until delivered
	done := make(chan error, 1)
	go func() { done <- newExporter(t, cfg, nil).Export(context.Background(), smallRequest(t)) }()
	waittest.For(t, "the exporter to wait after the refusal", clk.HasWaiters)
	clk.Step(19 * time.Second) // past any 1 s backoff, short of the server's delay
	if n := r.Calls(); n != 1 || !clk.HasWaiters() {
		t.Fatalf("%d calls 19 s into the receiver's 20 s RetryInfo delay, want 1", n)
	}
	clk.Step(time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if n := r.Calls(); n != 2 {
		t.Errorf("%d calls, want 2", n)
	}
}

func TestExportNoRetryOnInvalidArgument(t *testing.T) {
	r := recvtest.StartReceiver(t)
	r.Reject(func(recvtest.Call) error { return status.Error(codes.InvalidArgument, "bad dictionary") })
	reg := prometheus.NewRegistry()
	err := newExporter(t, testConfig(r.Addr()), reg).Export(context.Background(), smallRequest(t))
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("Export = %v, want InvalidArgument", err)
	}
	if r.Calls() != 1 {
		t.Errorf("%d calls, want 1 (no retry)", r.Calls())
	}
}

// TestExportGivesUpOnTime: a flush to a dead output is given up when the
// output has been failing for GiveUpAfter, on time, not at the next
// attempt the backoff (up to 30 s) allows. The waits run on a fake clock,
// stepped a second at a time while the exporter waits.
func TestExportGivesUpOnTime(t *testing.T) {
	r := recvtest.StartReceiver(t)
	r.Reject(func(recvtest.Call) error { return status.Error(codes.Unavailable, "down") })
	cfg := testConfig(r.Addr())
	cfg.Retry = export.DefaultQueueConfig().Retry // 1 s doubling to 30 s, ±20%
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	cfg.Retry.Clock = clk
	// With the default backoff, attempts start near 0, 1, 3, 7, 15, 31
	// and 61 s (±20%): none lands between 38 and 48 s.
	const giveUp = 45 * time.Second
	cfg.GiveUpAfter = giveUp
	e := newExporter(t, cfg, nil)
	start := clk.Now()
	done := make(chan error, 1)
	go func() { done <- e.Export(context.Background(), smallRequest(t)) }()
	for {
		var err error
		finished := false
		waittest.For(t, "the exporter to wait or finish", func() bool {
			select {
			case err = <-done:
				finished = true
				return true
			default:
				return clk.HasWaiters()
			}
		})
		if finished {
			if err == nil || !strings.Contains(err.Error(), "gave up") {
				t.Fatalf("Export = %v, want giving up", err)
			}
			break
		}
		clk.Step(time.Second)
	}
	if took := clk.Since(start); took > giveUp {
		t.Errorf("gave up after %v on the clock, want at %v", took, giveUp)
	}
	if r.Calls() < 5 {
		t.Errorf("only %d attempts before giving up", r.Calls())
	}
}

// TestExportGivesUpOnAHangingReceiver: a receiver that failed once and
// then takes requests and never answers is given up at the give-up time,
// not at the end of a (30 s) RPC timeout, with an error and a hint that
// say so.
func TestExportGivesUpOnAHangingReceiver(t *testing.T) {
	r := recvtest.StartReceiver(t)
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	r.Reject(func(c recvtest.Call) error {
		if c.N == 1 {
			return status.Error(codes.Unavailable, "restarting")
		}
		<-hang
		return nil
	})
	cfg := testConfig(r.Addr())
	cfg.RPCTimeout = export.DefaultRPCTimeout
	cfg.GiveUpAfter = 300 * time.Millisecond
	err := newExporter(t, cfg, nil).Export(context.Background(), smallRequest(t))
	if err == nil || !strings.Contains(err.Error(), "gave up") || !strings.Contains(err.Error(), "restarting") {
		t.Fatalf("Export = %v, want giving up, naming the failure", err)
	}
	if r.Calls() < 2 {
		t.Errorf("%d calls, want the hanging ones too", r.Calls())
	}
}

func TestExportPartialSuccess(t *testing.T) {
	r := recvtest.StartReceiver(t)
	r.SetBehaviour(recvtest.PartialSuccess)
	r.RefuseProfiles(func(recvtest.Resource, recvtest.Profile) error { return errors.New("bad profile") })
	e := newExporter(t, testConfig(r.Addr()), nil)
	res := e.Deliver(context.Background(), otlpRequest{e.client, smallRequest(t)})
	if res.Err == nil || !strings.Contains(res.Err.Error(), "bad profile") || res.Lost[export.ReasonRejected] != testSamples || res.Delivered != 0 {
		t.Fatalf("partial success = %+v, want every sample lost as rejected, not resent, with the receiver's message", res)
	}
	if r.Calls() != 1 {
		t.Errorf("%d calls, want 1", r.Calls())
	}
}

// TestSubmitQueue checks the queue's bound: past QueueSize the oldest
// flush, the one in flight included, is given up and counted (the one in
// flight once its attempt has ended: here it times out).
func TestSubmitQueue(t *testing.T) {
	r := recvtest.StartReceiver(t)
	started, release := r.Block()
	cfg := testConfig(r.Addr())
	cfg.QueueSize = 2
	cfg.RPCTimeout = 200 * time.Millisecond
	reg := prometheus.NewRegistry()
	e := newExporter(t, cfg, reg)
	req := smallRequest(t)
	results := make(chan export.Result, 4)
	done := func(res export.Result) { results <- res }
	e.Submit(req, done)
	<-started // the worker holds the first request
	e.Submit(req, done)
	e.Submit(req, done) // three held, bound two: the first goes
	first := <-results
	if first.Lost[export.ReasonQueueFull] != testSamples || first.Delivered != 0 {
		t.Fatalf("oldest flush: %+v, want given up as queue_full", first)
	}
	release()
	for range 2 {
		if res := <-results; res.Err != nil || res.Delivered != testSamples {
			t.Errorf("queued export: %+v", res)
		}
	}
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	e.Submit(req, done)
	if res := <-results; !errors.Is(res.Err, export.ErrClosed) || res.Lost[export.ReasonShutdown] != testSamples {
		t.Errorf("Submit after Close = %+v, want ErrClosed and the samples lost at shutdown", res)
	}
}

// TestSubmitQueueBytes checks the byte bound alone.
func TestSubmitQueueBytes(t *testing.T) {
	r := recvtest.StartReceiver(t)
	started, release := r.Block()
	cfg := testConfig(r.Addr())
	cfg.QueueBytes = 2500 // two and a half requests
	cfg.RPCTimeout = 200 * time.Millisecond
	e := newExporter(t, cfg, nil)
	results := make(chan export.Result, 4)
	done := func(res export.Result) { results <- res }
	req := smallRequest(t)
	e.Submit(req, done)
	<-started
	e.Submit(req, done)
	e.Submit(req, done)
	if res := <-results; res.Lost[export.ReasonQueueFull] != testSamples {
		t.Fatalf("oldest flush: %+v, want given up as queue_full", res)
	}
	release()
	for range 2 {
		if res := <-results; res.Delivered != testSamples {
			t.Errorf("queued export: %+v", res)
		}
	}
}

func TestCloseCancelsWhenOutOfTime(t *testing.T) {
	r := recvtest.StartReceiver(t)
	started, release := r.Block()
	defer release()
	e := newExporter(t, testConfig(r.Addr()), nil)
	results := make(chan export.Result, 2)
	for range 2 {
		e.Submit(smallRequest(t), func(res export.Result) { results <- res })
	}
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := e.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close = %v, want DeadlineExceeded", err)
	}
	for range 2 {
		if res := <-results; res.Err == nil || res.Lost[export.ReasonShutdown] != testSamples {
			t.Errorf("a canceled export: %+v, want its samples lost at shutdown", res)
		}
	}
}

// TestExportTLS checks TLS 1.3 against a self-signed server certificate,
// with a CA file, with verification skipped, without trust (failure), and
// with mutual TLS.
func TestExportTLS(t *testing.T) {
	dir := t.TempDir()
	serverCert, serverPEM, serverKeyPEM := selfSigned(t, "tandem-test-server", x509.ExtKeyUsageServerAuth)
	clientCert, clientPEM, clientKeyPEM := selfSigned(t, "tandem-test-client", x509.ExtKeyUsageClientAuth)
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	caFile := write("ca.pem", serverPEM)
	_ = write("server-key.pem", serverKeyPEM)
	clientCertFile, clientKeyFile := write("client.pem", clientPEM), write("client-key.pem", clientKeyPEM)
	clientPool := x509.NewCertPool()
	clientPool.AddCert(clientCert.Leaf)

	tests := []struct {
		name       string
		clientAuth tls.ClientAuthType
		cfg        func(c *export.Config)
		ok         bool
	}{
		{"ca file", tls.NoClientCert, func(c *export.Config) { c.CAFile = caFile }, true},
		{"skip verify", tls.NoClientCert, func(c *export.Config) { c.InsecureSkipVerify = true }, true},
		{"untrusted", tls.NoClientCert, func(*export.Config) {}, false},
		{"mutual", tls.RequireAndVerifyClientCert, func(c *export.Config) {
			c.CAFile, c.ClientCert, c.ClientKey = caFile, clientCertFile, clientKeyFile
		}, true},
		{"mutual without client cert", tls.RequireAndVerifyClientCert, func(c *export.Config) { c.CAFile = caFile }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			creds := credentials.NewTLS(&tls.Config{
				Certificates: []tls.Certificate{serverCert},
				MinVersion:   tls.VersionTLS12, // the client must insist on 1.3
				ClientAuth:   tt.clientAuth,
				ClientCAs:    clientPool,
			})
			r := recvtest.StartReceiver(t, grpc.Creds(creds))
			cfg := testConfig(r.Addr())
			cfg.Insecure = false
			cfg.BearerToken = "over-tls"
			cfg.RPCTimeout = 500 * time.Millisecond
			cfg.GiveUpAfter = 500 * time.Millisecond
			tt.cfg(&cfg.Config)
			err := newExporter(t, cfg, nil).Export(context.Background(), smallRequest(t))
			if tt.ok != (err == nil) {
				t.Fatalf("Export = %v, want success %v", err, tt.ok)
			}
			if !tt.ok {
				return
			}
			if len(r.TLSVersions()) != 1 || r.TLSVersions()[0] != tls.VersionTLS13 {
				t.Errorf("TLS versions %x, want 1.3", r.TLSVersions())
			}
			if got := r.Metadata()[0].Get("authorization"); len(got) != 1 || got[0] != "Bearer over-tls" {
				t.Errorf("authorization = %q", got)
			}
		})
	}
}

// selfSigned returns a self-signed certificate valid for 127.0.0.1 and
// localhost, with its PEM encodings.
func selfSigned(t *testing.T, cn string, usage x509.ExtKeyUsage) (tls.Certificate, []byte, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{usage},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return cert, certPEM, keyPEM
}
