package export_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tandem-profiler/tandem/encoder/export"
	recvtest "github.com/tandem-profiler/tandem/test/otlptest"
)

// unknownCompressor sends an encoding no server registers.
type unknownCompressor struct{}

func (unknownCompressor) Do(w io.Writer, p []byte) error {
	_, err := w.Write(p)
	return err
}
func (unknownCompressor) Type() string { return "x-tandem-unknown" }

// TestHintOnRealFailures provokes each failure against a real server (or
// none) and checks that the error the exporter sees gets the right hint.
func TestHintOnRealFailures(t *testing.T) {
	plain := recvtest.StartReceiver(t)
	web := httptest.NewServer(http.NotFoundHandler())
	defer web.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	tests := []struct {
		name   string
		addr   string
		tls    bool
		dial   []grpc.DialOption
		substr string
	}{
		{"TLS against plaintext", plain.Addr(), true, nil, "--remote-store-insecure"},
		{"connection refused", closed, false, nil, "nothing listens"},
		{"not gRPC", strings.TrimPrefix(web.URL, "http://"), false, nil, "does not answer gRPC"},
		// A receiver that lacks the request's grpc-encoding (gzip, for a
		// receiver built without it) refuses it as Unimplemented, which
		// must not read as a wrong format.
		//lint:ignore SA1019 the only way to send an encoding this process's server lacks
		{"compression not accepted", plain.Addr(), false, []grpc.DialOption{grpc.WithCompressor(unknownCompressor{})}, "--remote-store-compression=none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(tt.addr)
			cfg.Insecure = !tt.tls
			cfg.GiveUpAfter = time.Millisecond
			if tt.dial != nil {
				cfg.Compression = export.CompressionNone // the legacy compressor applies only without UseCompressor
			}
			err := newExporterWith(t, cfg, nil, tt.dial...).Export(context.Background(), smallRequest(t))
			if err == nil {
				t.Fatal("export succeeded")
			}
			if h := export.Hint(err); !strings.Contains(h, tt.substr) {
				t.Errorf("Hint(%v) = %q, want it to mention %q", err, h, tt.substr)
			}
		})
	}
}

func TestHint(t *testing.T) {
	tests := []struct {
		err    error
		substr string
	}{
		{errors.New(`dial tcp: lookup nowhere.invalid: no such host`), "does not resolve"},
		{errors.New(`tls: failed to verify certificate: x509: certificate signed by unknown authority`), "ca-file"},
		{status.Error(codes.Unimplemented, "unknown service"), "format"},
		{status.Error(codes.Unauthenticated, "no token"), "bearer token"},
		{errors.New("open /x/.tandem-1.tmp: permission denied"), "not writable"},
		{errors.New("something else"), ""},
	}
	for _, tt := range tests {
		h := export.Hint(tt.err)
		if (tt.substr == "") != (h == "") || !strings.Contains(h, tt.substr) {
			t.Errorf("Hint(%v) = %q, want %q", tt.err, h, tt.substr)
		}
	}
}

// records is a slog.Handler keeping every record.
type records struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recs = append(r.recs, rec.Clone())
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

func (r *records) snapshot() []slog.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.recs)
}

// TestFirstFailureLoggedAtOnce: the first failed attempt is logged at once,
// at warning level with the hint; the retries after it are not logged again
// within the minute.
func TestFirstFailureLoggedAtOnce(t *testing.T) {
	plain := recvtest.StartReceiver(t)
	cfg := testConfig(plain.Addr())
	cfg.Insecure = false // TLS against a plaintext server
	cfg.GiveUpAfter = 200 * time.Millisecond
	recs := &records{}
	conn, err := export.Dial(cfg.Config, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	e, err := export.New(cfg.QueueConfig, "store", slog.New(recs), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	res := e.Deliver(context.Background(), otlpRequest{export.NewClient(cfg.Config, conn), smallRequest(t)})
	if res.Lost[export.ReasonUnavailable] != testSamples {
		t.Fatalf("result %+v, want the samples lost as unavailable", res)
	}
	var warns []slog.Record
	for _, r := range recs.snapshot() {
		if r.Level == slog.LevelWarn {
			warns = append(warns, r)
		}
	}
	if len(warns) != 1 {
		t.Fatalf("%d warnings over several failed attempts, want 1 (then one a minute)", len(warns))
	}
	hint := ""
	warns[0].Attrs(func(a slog.Attr) bool {
		if a.Key == "hint" {
			hint = a.Value.String()
		}
		return true
	})
	if !strings.Contains(hint, "--remote-store-insecure") {
		t.Errorf("hint %q, want --remote-store-insecure", hint)
	}
	if err := e.Failing(); err == nil {
		t.Error("Failing() = nil after failures")
	}
}
