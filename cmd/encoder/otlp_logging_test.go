package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/pprofile/pprofileotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	_ "google.golang.org/grpc/encoding/gzip" // accept gzip-compressed exports
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tandem-profiler/tandem/encoder/export"
	"github.com/tandem-profiler/tandem/encoder/selflog"
	"github.com/tandem-profiler/tandem/internal/buildinfo"
	"github.com/tandem-profiler/tandem/internal/cli"
	"github.com/tandem-profiler/tandem/internal/synth"
	"github.com/tandem-profiler/tandem/test/otlptest"
)

// logRecord is one exported log record, flattened.
type logRecord struct {
	resource map[string]string
	scope    string
	body     string
	severity plog.SeverityNumber
	attrs    map[string]string
}

// logsReceiver is an in-process remote store on 127.0.0.1 serving the
// OTLP logs and profiles services (the real service definitions, from
// pdata), requiring a bearer token. It keeps every log record and the
// authorization each logs RPC carried, and stops when the test ends.
type logsReceiver struct {
	plogotlp.UnimplementedGRPCServer
	addr, token string
	arrived     chan struct{} // a token per logs request

	profiles *otlptest.Receiver

	mu      sync.Mutex
	records []logRecord
	auth    []string
}

func startLogsReceiver(t *testing.T, token string) *logsReceiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &logsReceiver{addr: ln.Addr().String(), token: token, arrived: make(chan struct{}, 1), profiles: otlptest.NewReceiver()}
	srv := grpc.NewServer(grpc.UnaryInterceptor(r.checkToken))
	plogotlp.RegisterGRPCServer(srv, r)
	pprofileotlp.RegisterGRPCServer(srv, r.profiles)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return r
}

func (r *logsReceiver) checkToken(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	auth := strings.Join(md.Get("authorization"), ",")
	if strings.Contains(info.FullMethod, "logs") {
		r.mu.Lock()
		r.auth = append(r.auth, auth)
		r.mu.Unlock()
	}
	if auth != "Bearer "+r.token {
		return nil, status.Error(codes.Unauthenticated, "bad token")
	}
	return handler(ctx, req)
}

// Export implements plogotlp.GRPCServer.
func (r *logsReceiver) Export(_ context.Context, req plogotlp.ExportRequest) (plogotlp.ExportResponse, error) {
	var got []logRecord
	rls := req.Logs().ResourceLogs()
	for i := range rls.Len() {
		rl := rls.At(i)
		res := attrMap(rl.Resource().Attributes())
		for j := range rl.ScopeLogs().Len() {
			sl := rl.ScopeLogs().At(j)
			for k := range sl.LogRecords().Len() {
				lr := sl.LogRecords().At(k)
				got = append(got, logRecord{
					resource: res, scope: sl.Scope().Name(), body: lr.Body().AsString(),
					severity: lr.SeverityNumber(), attrs: attrMap(lr.Attributes()),
				})
			}
		}
	}
	r.mu.Lock()
	r.records = append(r.records, got...)
	r.mu.Unlock()
	select {
	case r.arrived <- struct{}{}:
	default:
	}
	return plogotlp.NewExportResponse(), nil
}

func (r *logsReceiver) snapshot() (records []logRecord, auth []string, profiles int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]logRecord(nil), r.records...), append([]string(nil), r.auth...), len(r.profiles.Requests())
}

// find returns the first record for which match is true.
func (r *logsReceiver) find(match func(logRecord) bool) (logRecord, bool) {
	records, _, _ := r.snapshot()
	for _, rec := range records {
		if match(rec) {
			return rec, true
		}
	}
	return logRecord{}, false
}

func attrMap(m pcommon.Map) map[string]string {
	out := map[string]string{}
	m.Range(func(k string, v pcommon.Value) bool {
		out[k] = v.AsString()
		return true
	})
	return out
}

// countSelfLog counts the calls of newSelfLog until the test ends.
func countSelfLog(t *testing.T) *atomic.Int32 {
	var n atomic.Int32
	orig := newSelfLog
	newSelfLog = func(cfg selflog.Config, conn *grpc.ClientConn, local *slog.Logger, reg prometheus.Registerer) (*selflog.Logs, error) {
		n.Add(1)
		return orig(cfg, conn, local, reg)
	}
	t.Cleanup(func() { newSelfLog = orig })
	return &n
}

const testToken = "s3cret"

// TestReplayExportsOwnLogs runs replay with --otlp-logging against a
// remote store that serves OTLP logs and profiles: the encoder's records
// arrive there with the resource, the startup record's attributes and the
// bearer token, and only at --log-level and above.
func TestReplayExportsOwnLogs(t *testing.T) {
	dump, _ := writeSynthDump(t, 1000)
	for _, level := range []string{"info", "warn"} {
		t.Run(level, func(t *testing.T) {
			calls := countSelfLog(t)
			recv := startLogsReceiver(t, testToken)
			err := run(t, "--log-level", level, "replay", "--remote-store-address", recv.addr, "--remote-store-insecure",
				"--remote-store-bearer-token", testToken, "--debuginfo-upload-disable", "--profiling-duration", "1s",
				"--otlp-logging", "--node", "node-a", dump)
			if err != nil {
				t.Fatal(err)
			}
			if n := calls.Load(); n != 1 {
				t.Fatalf("newSelfLog called %d times, want 1", n)
			}
			records, auth, profiles := recv.snapshot()
			if profiles == 0 {
				t.Fatal("no profiles exported: the remote store was not used")
			}
			for _, a := range auth {
				if a != "Bearer "+testToken {
					t.Fatalf("logs export carried authorization %q, want the remote store's bearer token", a)
				}
			}
			minSeverity := plog.SeverityNumberInfo
			if level == "warn" {
				minSeverity = plog.SeverityNumberWarn
			}
			for _, r := range records {
				if r.severity < minSeverity {
					t.Fatalf("record %q at severity %v exported under --log-level=%s", r.body, r.severity, level)
				}
			}
			start, found := recv.find(func(r logRecord) bool { return r.body == msgOTLPLogging })
			if level == "warn" {
				if found {
					t.Fatal("the info-level startup record was exported under --log-level=warn")
				}
				return
			}
			if !found {
				t.Fatalf("the startup record is not among the %d exported (%d logs RPCs)", len(records), len(auth))
			}
			wantRes := map[string]string{"service.name": "tandem-encoder", "service.version": buildinfo.String(), "host.name": "node-a"}
			for k, v := range wantRes {
				if start.resource[k] != v {
					t.Errorf("resource %s = %q, want %q (all: %v)", k, start.resource[k], v, start.resource)
				}
			}
			if start.severity != plog.SeverityNumberInfo || start.attrs["address"] != recv.addr || start.attrs["node"] != "node-a" {
				t.Errorf("startup record: severity %v, attributes %v", start.severity, start.attrs)
			}
			if start.scope != selflog.DefaultScopeName {
				t.Errorf("scope %q, want %q", start.scope, selflog.DefaultScopeName)
			}
			// Records from the pipeline keep the attributes loggers add with With.
			if _, ok := recv.find(func(r logRecord) bool {
				return r.attrs["component"] == "ingest" && r.attrs["node"] == synth.DefaultNodeName
			}); !ok {
				t.Errorf("no record from the ingest component among %d", len(records))
			}
		})
	}
}

// TestReplayWithoutOTLPLogging: without the flag nothing of the log SDK is
// built and the remote store receives profiles but no logs.
func TestReplayWithoutOTLPLogging(t *testing.T) {
	dump, _ := writeSynthDump(t, 1000)
	calls := countSelfLog(t)
	recv := startLogsReceiver(t, testToken)
	err := run(t, "replay", "--remote-store-address", recv.addr, "--remote-store-insecure",
		"--remote-store-bearer-token", testToken, "--debuginfo-upload-disable", "--profiling-duration", "1s", dump)
	if err != nil {
		t.Fatal(err)
	}
	records, auth, profiles := recv.snapshot()
	if profiles == 0 {
		t.Fatal("no profiles exported: the remote store was not used")
	}
	if n := calls.Load(); n != 0 || len(records) != 0 || len(auth) != 0 {
		t.Fatalf("without --otlp-logging: newSelfLog called %d times, %d records in %d logs RPCs", n, len(records), len(auth))
	}
}

// TestStartLoggingOffBuildsNothing: without --otlp-logging the logger is
// returned as it came, its handler is the local one alone, and getting it
// allocates nothing.
func TestStartLoggingOffBuildsNothing(t *testing.T) {
	calls := countSelfLog(t)
	base := slog.New(slog.NewTextHandler(&strings.Builder{}, nil))
	f, r := &loggingFlags{node: "n"}, &export.Config{Address: "127.0.0.1:1"}
	got, stop, err := startLogging(f, r, nil, base, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	stop()
	if got != base || calls.Load() != 0 {
		t.Fatalf("logger %p (base %p), newSelfLog calls %d", got, base, calls.Load())
	}
	if _, ok := got.Handler().(*slog.TextHandler); !ok {
		t.Fatalf("handler %T, want the local handler alone", got.Handler())
	}
	allocs := testing.AllocsPerRun(100, func() {
		l, stop, _ := startLogging(f, r, nil, base, nil)
		stop()
		_ = l
	})
	if allocs != 0 {
		t.Fatalf("startLogging without --otlp-logging allocates %v times, want 0", allocs)
	}
}

// TestServeExportsOwnLogs runs serve with --otlp-logging until its startup
// record reaches the remote store, then stops it.
func TestServeExportsOwnLogs(t *testing.T) {
	calls := countSelfLog(t)
	recv := startLogsReceiver(t, testToken)
	sock := filepath.Join(t.TempDir(), "s.sock")
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cmd := newRootCommand()
	cmd.SetArgs([]string{"serve", "--confine=false", "--socket", sock, "--allowed-uid", strconv.Itoa(os.Getuid()), "--http-address", "",
		"--remote-store-address", recv.addr, "--remote-store-insecure", "--remote-store-bearer-token", testToken,
		"--debuginfo-upload-disable", "--otlp-logging", "--node", "node-b"})
	served := make(chan error, 1)
	go func() { served <- cmd.ExecuteContext(ctx) }()

	serving := func(r logRecord) bool { return r.attrs["socket"] == sock }
	for {
		if _, ok := recv.find(serving); ok {
			break
		}
		select {
		case <-recv.arrived:
		case err := <-served:
			t.Fatalf("serve stopped before its startup record was exported: %v", err)
		}
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("serve: %v", err)
	}
	rec, _ := recv.find(serving)
	if rec.attrs["version"] != buildinfo.String() || rec.resource["host.name"] != "node-b" || rec.resource["service.name"] != "tandem-encoder" {
		t.Errorf("serving record: attributes %v, resource %v", rec.attrs, rec.resource)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("newSelfLog called %d times, want 1", n)
	}
	_, auth, _ := recv.snapshot()
	for _, a := range auth {
		if a != "Bearer "+testToken {
			t.Fatalf("logs export carried authorization %q", a)
		}
	}
}

func TestOTLPLoggingFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string // "" for valid
	}{
		{"off", nil, ""},
		{"without address", []string{"--otlp-logging"}, "--otlp-logging sends the logs to the remote store: add --remote-store-address"},
		{"with address", []string{"--otlp-logging", "--remote-store-address", "collector:4317", "--debuginfo-upload-disable"}, ""},
		{"explicitly off without address", []string{"--otlp-logging=false"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o outputFlags
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			o.register(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			err := o.validate()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("validate: %v", err)
				}
				return
			}
			var ue cli.UsageError
			if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.As(err, &ue) {
				t.Fatalf("validate = %v, want a usage error containing %q", err, tt.want)
			}
		})
	}
	for _, command := range []string{"serve", "replay"} {
		t.Run(command+" command", func(t *testing.T) {
			args := []string{command, "--otlp-logging"}
			if command == "replay" {
				args = append(args, "x.dump")
			}
			err := run(t, args...)
			var ue cli.UsageError
			if err == nil || !strings.Contains(err.Error(), "--remote-store-address") || !errors.As(err, &ue) {
				t.Fatalf("%s --otlp-logging with no address: %v, want a usage error naming --remote-store-address", command, err)
			}
		})
	}
}
