package selflog

import (
	"context"
	"log/slog"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	sdklog "go.opentelemetry.io/otel/sdk/log"
)

// countingExporter wraps the OTLP exporter. It counts what is exported and
// what is lost, says so on the local logger when exports start failing and
// when they recover (not once per failure), and returns nil: the batch
// processor would hand an error to otel.Handle, and from there it could be
// logged, bridged and exported again.
type countingExporter struct {
	sdklog.Exporter
	local    *slog.Logger
	exported atomic.Uint64
	failed   atomic.Uint64
	failing  atomic.Bool

	exportedDesc, failedDesc *prometheus.Desc
}

func newCountingExporter(exp sdklog.Exporter, local *slog.Logger) *countingExporter {
	return &countingExporter{
		Exporter: exp,
		local:    local,
		exportedDesc: prometheus.NewDesc("tandem_encoder_selflog_exported_records_total",
			"The encoder's own log records exported over OTLP (--otlp-logging).", nil, nil),
		failedDesc: prometheus.NewDesc("tandem_encoder_selflog_failed_records_total",
			"The encoder's own log records lost to failed OTLP exports (--otlp-logging).", nil, nil),
	}
}

// Export implements sdklog.Exporter.
func (e *countingExporter) Export(ctx context.Context, records []sdklog.Record) error {
	if err := e.Exporter.Export(ctx, records); err != nil {
		e.failed.Add(uint64(len(records)))
		if !e.failing.Swap(true) {
			e.local.Warn("exporting the encoder's own logs over OTLP failed; further failures are only counted (tandem_encoder_selflog_failed_records_total) until one succeeds",
				"records", len(records), "err", err)
		}
		return nil
	}
	e.exported.Add(uint64(len(records)))
	if e.failing.Swap(false) {
		e.local.Info("exporting the encoder's own logs over OTLP again")
	}
	return nil
}

// Describe implements prometheus.Collector.
func (e *countingExporter) Describe(ch chan<- *prometheus.Desc) {
	ch <- e.exportedDesc
	ch <- e.failedDesc
}

// Collect implements prometheus.Collector.
func (e *countingExporter) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(e.exportedDesc, prometheus.CounterValue, float64(e.exported.Load()))
	ch <- prometheus.MustNewConstMetric(e.failedDesc, prometheus.CounterValue, float64(e.failed.Load()))
}
