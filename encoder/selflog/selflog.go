// Package selflog exports the encoder's own log records over OTLP/logs
// (gRPC), through the OpenTelemetry log SDK and its log/slog bridge.
//
// New builds one LoggerProvider with a batch processor and the OTLP gRPC log
// exporter on a connection the caller owns (the remote store's, so the logs
// travel with its TLS, bearer token and headers). Nothing here touches
// OpenTelemetry's process-global state: the provider is passed to the slog
// bridge explicitly, and export failures are counted and reported on the
// caller's local logger, never through otel.Handle or the bridged logger,
// so a failing export cannot feed itself. A process that does not want its
// logs exported does not call New, and nothing of the SDK is built.
//
// A Logs is safe for concurrent use. Shutdown flushes what is queued,
// bounded by its context, and stops the batch processor; records handed to
// the Handler afterwards are dropped. Shutdown does not close the
// connection.
package selflog

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/contrib/bridges/otelslog"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"google.golang.org/grpc"

	"github.com/tandem-profiler/tandem/internal/buildinfo"
	"github.com/tandem-profiler/tandem/internal/prom"
)

// Defaults of Config.
const (
	DefaultServiceName    = "tandem-encoder"
	DefaultScopeName      = "github.com/tandem-profiler/tandem/cmd/encoder"
	DefaultExportInterval = time.Second
	DefaultExportTimeout  = 30 * time.Second
	DefaultMaxQueueSize   = 2048
)

// Config says what the exported records carry and how they are batched.
type Config struct {
	// ServiceName, ServiceVersion and HostName become the resource's
	// service.name, service.version and host.name; an empty HostName is
	// left out.
	ServiceName    string
	ServiceVersion string
	HostName       string
	// ScopeName is the instrumentation scope of every record.
	ScopeName string
	// Compression is "gzip" or "none".
	Compression string
	// ExportInterval is how often queued records are exported.
	ExportInterval time.Duration
	// ExportTimeout bounds one export, retries included.
	ExportTimeout time.Duration
	// MaxQueueSize bounds the records waiting for export; beyond it new
	// ones are dropped and counted.
	MaxQueueSize int

	_ struct{}
}

// DefaultConfig returns the encoder's settings: service tandem-encoder at
// this build's version, gzip, a one-second export interval.
func DefaultConfig() Config {
	return Config{
		ServiceName:    DefaultServiceName,
		ServiceVersion: buildinfo.String(),
		ScopeName:      DefaultScopeName,
		Compression:    "gzip",
		ExportInterval: DefaultExportInterval,
		ExportTimeout:  DefaultExportTimeout,
		MaxQueueSize:   DefaultMaxQueueSize,
	}
}

// Validate reports every invalid field.
func (c Config) Validate() error {
	var errs []error
	if c.ServiceName == "" {
		errs = append(errs, errors.New("service name is empty"))
	}
	if c.ScopeName == "" {
		errs = append(errs, errors.New("scope name is empty"))
	}
	if c.Compression != "gzip" && c.Compression != "none" {
		errs = append(errs, fmt.Errorf("compression %q: want gzip or none", c.Compression))
	}
	if c.ExportInterval <= 0 {
		errs = append(errs, fmt.Errorf("export interval %v: must be positive", c.ExportInterval))
	}
	if c.ExportTimeout <= 0 {
		errs = append(errs, fmt.Errorf("export timeout %v: must be positive", c.ExportTimeout))
	}
	if c.MaxQueueSize <= 0 {
		errs = append(errs, fmt.Errorf("max queue size %d: must be positive", c.MaxQueueSize))
	}
	return errors.Join(errs...)
}

// Logs is a LoggerProvider exporting over OTLP/logs, and its slog handler.
type Logs struct {
	provider *sdklog.LoggerProvider
	handler  slog.Handler
	exporter *countingExporter
}

// New builds the provider, its batch processor and the OTLP gRPC log
// exporter on conn, which stays the caller's to close (after Shutdown).
// Export failures are counted on reg (nil: not registered) and reported on
// local, which must not lead back to the returned Handler.
func New(cfg Config, conn *grpc.ClientConn, local *slog.Logger, reg prometheus.Registerer) (*Logs, error) {
	if conn == nil {
		return nil, errors.New("no connection")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opts := []otlploggrpc.Option{otlploggrpc.WithGRPCConn(conn)}
	if cfg.Compression == "gzip" {
		opts = append(opts, otlploggrpc.WithCompressor("gzip"))
	}
	exp, err := otlploggrpc.New(context.Background(), opts...)
	if err != nil {
		return nil, fmt.Errorf("create OTLP log exporter: %w", err)
	}
	return newLogs(cfg, exp, local, reg)
}

// newLogs builds a Logs around any exporter (tests use a fake one).
func newLogs(cfg Config, exp sdklog.Exporter, local *slog.Logger, reg prometheus.Registerer) (*Logs, error) {
	ce := newCountingExporter(exp, local)
	if err := prom.Register(reg, "log export", ce); err != nil {
		return nil, err
	}
	attrs := []attribute.KeyValue{semconv.ServiceName(cfg.ServiceName)}
	if cfg.ServiceVersion != "" {
		attrs = append(attrs, semconv.ServiceVersion(cfg.ServiceVersion))
	}
	if cfg.HostName != "" {
		attrs = append(attrs, semconv.HostName(cfg.HostName))
	}
	provider := sdklog.NewLoggerProvider(
		sdklog.WithResource(resource.NewWithAttributes(semconv.SchemaURL, attrs...)),
		sdklog.WithProcessor(&boundedProcessor{
			Processor: sdklog.NewBatchProcessor(ce,
				sdklog.WithExportInterval(cfg.ExportInterval),
				sdklog.WithExportTimeout(cfg.ExportTimeout),
				sdklog.WithMaxQueueSize(cfg.MaxQueueSize),
				sdklog.WithExportMaxBatchSize(min(cfg.MaxQueueSize, 512)),
			),
			exp:   ce,
			limit: uint64(cfg.MaxQueueSize),
		}),
	)
	return &Logs{
		provider: provider,
		handler: otelslog.NewHandler(cfg.ScopeName,
			otelslog.WithLoggerProvider(provider),
			otelslog.WithVersion(cfg.ServiceVersion),
			otelslog.WithSchemaURL(semconv.SchemaURL)),
		exporter: ce,
	}, nil
}

// Handler returns the slog handler that emits into the provider. It is
// enabled for every level: gate it (internal/logging.Tee does).
func (l *Logs) Handler() slog.Handler { return l.handler }

// Stats returns the records exported, lost to failed exports and dropped
// for a full queue so far.
func (l *Logs) Stats() (exported, failed, dropped uint64) {
	return l.exporter.exported.Load(), l.exporter.failed.Load(), l.exporter.dropped.Load()
}

// Shutdown exports what is queued, bounded by ctx, and stops the provider.
func (l *Logs) Shutdown(ctx context.Context) error {
	if err := l.provider.Shutdown(ctx); err != nil {
		return fmt.Errorf("shut down OTLP logging: %w", err)
	}
	return nil
}
