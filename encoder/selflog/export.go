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
	dropped  atomic.Uint64 // by boundedProcessor, never queued
	failing  atomic.Bool

	exportedDesc, failedDesc, droppedDesc *prometheus.Desc
}

func newCountingExporter(exp sdklog.Exporter, local *slog.Logger) *countingExporter {
	return &countingExporter{
		Exporter: exp,
		local:    local,
		exportedDesc: prometheus.NewDesc("tandem_encoder_selflog_exported_records_total",
			"The encoder's own log records exported over OTLP (--otlp-logging).", nil, nil),
		failedDesc: prometheus.NewDesc("tandem_encoder_selflog_failed_records_total",
			"The encoder's own log records lost to failed OTLP exports (--otlp-logging).", nil, nil),
		droppedDesc: prometheus.NewDesc("tandem_encoder_selflog_dropped_records_total",
			"The encoder's own log records dropped because the export queue was full (--otlp-logging).", nil, nil),
	}
}

// done is how many records left the pipeline, exported or lost.
func (e *countingExporter) done() uint64 { return e.exported.Load() + e.failed.Load() }

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
	ch <- e.droppedDesc
}

// Collect implements prometheus.Collector.
func (e *countingExporter) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(e.exportedDesc, prometheus.CounterValue, float64(e.exported.Load()))
	ch <- prometheus.MustNewConstMetric(e.failedDesc, prometheus.CounterValue, float64(e.failed.Load()))
	ch <- prometheus.MustNewConstMetric(e.droppedDesc, prometheus.CounterValue, float64(e.dropped.Load()))
}

// boundedProcessor sits in front of the batch processor and keeps its
// queue from overflowing. The SDK drops the oldest records of a full queue
// and says so only to OpenTelemetry's global logger, which discards it by
// default; here a record that would not fit is dropped before it is
// queued, and counted. Records in flight are those emitted and not yet
// exported or lost, which bounds the queue from above.
type boundedProcessor struct {
	sdklog.Processor
	exp     *countingExporter
	limit   uint64
	emitted atomic.Uint64
}

// OnEmit implements sdklog.Processor.
func (p *boundedProcessor) OnEmit(ctx context.Context, r *sdklog.Record) error {
	for {
		n := p.emitted.Load()
		if n-p.exp.done() >= p.limit {
			p.exp.dropped.Add(1)
			return nil
		}
		if p.emitted.CompareAndSwap(n, n+1) {
			return p.Processor.OnEmit(ctx, r)
		}
	}
}
