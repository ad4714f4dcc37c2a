package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tandem-profiler/tandem/encoder"
	"github.com/tandem-profiler/tandem/encoder/arrow"
	"github.com/tandem-profiler/tandem/encoder/export"
	"github.com/tandem-profiler/tandem/encoder/labels"
)

// arrowOutput encodes flushes for Parca's ProfileStoreService (Arrow v2 or
// v1); the pipeline's exporter sends them over the remote-store connection.
type arrowOutput struct {
	v2 *arrow.V2Encoder
	v1 *arrow.V1Encoder
}

func newArrowOutput(o *outputFlags, logger *slog.Logger, reg prometheus.Registerer) (*arrowOutput, error) {
	labeler, err := labels.New(o.parca.labelConfig, reg) // satisfies arrow.Labeler
	if err != nil {
		return nil, fmt.Errorf("create labeler: %w", err)
	}
	cfg := arrow.DefaultConfig()
	cfg.MaxMessageBytes = o.remote.MaxCallSendMsgSize
	a := &arrowOutput{}
	switch o.remote.Format {
	case export.FormatArrowV2:
		a.v2, err = arrow.NewV2Encoder(cfg, labeler, nil)
	case export.FormatArrowV1:
		a.v1, err = arrow.NewV1Encoder(cfg, labeler, nil)
	default:
		err = fmt.Errorf("format %q is not an Arrow format", o.remote.Format)
	}
	if err != nil {
		return nil, fmt.Errorf("create Arrow encoder: %w", err)
	}
	logger.Info("exporting to Parca's ProfileStoreService", "format", o.remote.Format, "address", o.remote.Address,
		"insecure", o.remote.Insecure, "max_message_bytes", cfg.MaxMessageBytes)
	return a, nil
}

// deliverArrow encodes f and sends it like deliver does for OTLP: waiting
// when syncExport is set, queued otherwise; acked is called once the server
// took every request of the flush.
func (p *pipeline) deliverArrow(ctx context.Context, f *encoder.Flush, acked func()) {
	var (
		run    func(context.Context) error
		submit func(func(error)) error
		err    error
	)
	if p.arrow.v2 != nil {
		var payloads [][]byte
		payloads, err = p.arrow.v2.Encode(f)
		run = func(ctx context.Context) error { return p.exporter.ExportArrowV2(ctx, payloads) }
		submit = func(done func(error)) error { return p.exporter.SubmitArrowV2(payloads, done) }
	} else {
		var xs []*arrow.Exchange
		xs, err = p.arrow.v1.Encode(f)
		exchanges := make([]export.WriteExchange, len(xs))
		for i, x := range xs {
			exchanges[i] = x
		}
		run = func(ctx context.Context) error { return p.exporter.ExportArrowV1(ctx, exchanges) }
		submit = func(done func(error)) error { return p.exporter.SubmitArrowV1(exchanges, done) }
	}
	p.agg.Release(f) // the encoded requests do not refer to f
	if err != nil {
		p.metrics.flushes.WithLabelValues("failure").Inc()
		p.logger.Error("encode Arrow records; the flush is lost", "err", err)
		return
	}
	p.send(ctx, run, submit, nil, acked)
}
