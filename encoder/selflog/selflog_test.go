package selflog

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeExporter keeps what it is given, or fails with err.
type fakeExporter struct {
	mu      sync.Mutex
	err     error
	records []sdklog.Record
	calls   int
}

func (f *fakeExporter) Export(_ context.Context, rs []sdklog.Record) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.err != nil {
		return f.err
	}
	for _, r := range rs {
		f.records = append(f.records, r.Clone())
	}
	return nil
}
func (f *fakeExporter) Shutdown(context.Context) error   { return nil }
func (f *fakeExporter) ForceFlush(context.Context) error { return nil }

func testConfig() Config {
	cfg := DefaultConfig()
	cfg.ServiceVersion = "v1.2.3"
	cfg.HostName = "node-a"
	return cfg
}

func TestRecordsCarryResourceAndAttributes(t *testing.T) {
	fake := &fakeExporter{}
	reg := prometheus.NewRegistry()
	l, err := newLogs(testConfig(), fake, slog.New(slog.DiscardHandler), reg)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(l.Handler()).With("component", "test")
	logger.Info("started", "answer", 42)
	logger.Warn("second")
	if err := l.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	logger.Info("after shutdown: dropped")

	if len(fake.records) != 2 {
		t.Fatalf("exported %d records, want 2", len(fake.records))
	}
	r := fake.records[0]
	res := map[string]string{}
	for _, kv := range r.Resource().Attributes() {
		res[string(kv.Key)] = kv.Value.String()
	}
	for k, v := range map[string]string{"service.name": "tandem-encoder", "service.version": "v1.2.3", "host.name": "node-a"} {
		if res[k] != v {
			t.Errorf("resource %s = %q, want %q (all: %v)", k, res[k], v, res)
		}
	}
	if got := r.InstrumentationScope().Name; got != DefaultScopeName {
		t.Errorf("scope %q, want %q", got, DefaultScopeName)
	}
	if r.Body().AsString() != "started" || r.SeverityText() != "INFO" {
		t.Errorf("body %q severity %q", r.Body().AsString(), r.SeverityText())
	}
	attrs := map[string]string{}
	r.WalkAttributes(func(kv otellog.KeyValue) bool {
		attrs[kv.Key] = kv.Value.String()
		return true
	})
	if attrs["component"] != "test" || attrs["answer"] != "42" {
		t.Errorf("attributes %v, want component=test answer=42", attrs)
	}
	if exp, failed, dropped := l.Stats(); exp != 2 || failed != 0 || dropped != 0 {
		t.Errorf("stats exported %d failed %d dropped %d, want 2, 0 and 0", exp, failed, dropped)
	}
	want := `
# HELP tandem_encoder_selflog_exported_records_total The encoder's own log records exported over OTLP (--otlp-logging).
# TYPE tandem_encoder_selflog_exported_records_total counter
tandem_encoder_selflog_exported_records_total 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "tandem_encoder_selflog_exported_records_total"); err != nil {
		t.Error(err)
	}
}

// TestFailedExportsAreCountedNotLogged: a failing export says so once on
// the local logger, counts the records, and returns nothing to the SDK
// (whose error handler could route it back into the bridged logger).
func TestFailedExportsAreCountedNotLogged(t *testing.T) {
	fake := &fakeExporter{err: errors.New("unavailable")}
	var local bytes.Buffer
	l, err := newLogs(testConfig(), fake, slog.New(slog.NewTextHandler(&local, nil)), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(l.Handler())
	for range 3 {
		logger.Info("x")
		if err := l.provider.ForceFlush(t.Context()); err != nil {
			t.Fatalf("ForceFlush returned the export error: %v", err)
		}
	}
	if err := l.Shutdown(t.Context()); err != nil {
		t.Fatalf("Shutdown returned the export error: %v", err)
	}
	if _, failed, _ := l.Stats(); failed != 3 {
		t.Errorf("%d failed records counted, want 3", failed)
	}
	if n := strings.Count(local.String(), "\n"); n != 1 || fake.calls < 3 {
		t.Errorf("local logger wrote %d lines for %d failed exports, want 1:\n%s", n, fake.calls, local.String())
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name   string
		modify func(*Config)
		want   string
	}{
		{"default", func(*Config) {}, ""},
		{"no service", func(c *Config) { c.ServiceName = "" }, "service name"},
		{"compression", func(c *Config) { c.Compression = "zstd" }, `compression "zstd"`},
		{"interval", func(c *Config) { c.ExportInterval = 0 }, "export interval"},
		{"queue", func(c *Config) { c.MaxQueueSize = -1 }, "max queue size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tt.modify(&cfg)
			err := cfg.Validate()
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("Validate() = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestNewNeedsConnection(t *testing.T) {
	if _, err := New(DefaultConfig(), nil, slog.New(slog.DiscardHandler), nil); err == nil {
		t.Fatal("New(nil conn) succeeded")
	}
}

// blockingExporter holds every export until release is closed.
type blockingExporter struct {
	fakeExporter
	release chan struct{}
}

func (b *blockingExporter) Export(ctx context.Context, rs []sdklog.Record) error {
	<-b.release
	return b.fakeExporter.Export(ctx, rs)
}

// TestFullQueueDropsAreCounted: with exports stuck, records beyond the
// queue's bound are dropped before they are queued and counted, never
// dropped silently inside the SDK; once exports resume, every record that
// was accepted is exported.
func TestFullQueueDropsAreCounted(t *testing.T) {
	exp := &blockingExporter{release: make(chan struct{})}
	cfg := testConfig()
	cfg.MaxQueueSize = 8
	reg := prometheus.NewRegistry()
	l, err := newLogs(cfg, exp, slog.New(slog.DiscardHandler), reg)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(l.Handler())
	for i := range 20 {
		logger.Info("record", "i", i)
	}
	close(exp.release)
	if err := l.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	exported, failed, dropped := l.Stats()
	if exported != 8 || failed != 0 || dropped != 12 {
		t.Errorf("exported %d, failed %d, dropped %d; want 8, 0, 12", exported, failed, dropped)
	}
	if n := len(exp.records); n != int(exported) {
		t.Errorf("the exporter got %d records, Stats says %d", n, exported)
	}
	want := `
# HELP tandem_encoder_selflog_dropped_records_total The encoder's own log records dropped because the export queue was full (--otlp-logging).
# TYPE tandem_encoder_selflog_dropped_records_total counter
tandem_encoder_selflog_dropped_records_total 12
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "tandem_encoder_selflog_dropped_records_total"); err != nil {
		t.Error(err)
	}
}
