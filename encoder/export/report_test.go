package export_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tandem-profiler/tandem/encoder/export"
)

// TestHintOnRealFailures provokes each failure against a real server (or
// none) and checks that the error the exporter sees gets the right hint.
func TestHintOnRealFailures(t *testing.T) {
	plain := startReceiver(t, &receiver{})
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
		substr string
	}{
		{"TLS against plaintext", plain.addr, true, "--remote-store-insecure"},
		{"connection refused", closed, false, "nothing listens"},
		{"not gRPC", strings.TrimPrefix(web.URL, "http://"), false, "does not answer gRPC"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(tt.addr)
			cfg.Insecure = !tt.tls
			cfg.GiveUpAfter = time.Millisecond
			err := newExporter(t, cfg, nil).Export(context.Background(), smallRequest(t))
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
