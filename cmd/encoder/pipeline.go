package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"

	"github.com/tandem-profiler/tandem/encoder"
	"github.com/tandem-profiler/tandem/encoder/export"
	"github.com/tandem-profiler/tandem/encoder/otlp"
	"github.com/tandem-profiler/tandem/encoder/pprofout"
	"github.com/tandem-profiler/tandem/internal/ingest"
	"github.com/tandem-profiler/tandem/schema"
)

// sessionIdle is how long a disconnected, fully acknowledged session is
// remembered for duplicate suppression.
const sessionIdle = time.Hour

// outputFlags are the flags serve and replay share: where flushes go.
type outputFlags struct {
	profilingDuration time.Duration
	outputDir         string
	remote            export.Config
	grpcHeaders       []string
	maxExecutables    int
	debuginfo         debuginfoFlags
	parca             parcaFlags
	logging           loggingFlags
}

func (o *outputFlags) register(fs *pflag.FlagSet) {
	o.remote = export.DefaultConfig()
	r := &o.remote
	fs.DurationVar(&o.profilingDuration, "profiling-duration", 10*time.Second, "aggregate samples for this long before each export")
	fs.StringVar(&o.outputDir, "output-dir", "./profiles", "with no --remote-store-address, write each flush here as a gzipped pprof file")
	fs.StringVar(&r.Address, "remote-store-address", "", "gRPC address (host:port) of an OTLP/profiles receiver; empty writes pprof files instead")
	fs.BoolVar(&r.Insecure, "remote-store-insecure", false, "send plaintext gRPC (no TLS)")
	fs.BoolVar(&r.InsecureSkipVerify, "remote-store-insecure-skip-verify", false, "accept any server certificate")
	fs.StringVar(&r.CAFile, "remote-store-ca-file", "", "PEM roots to verify the server with instead of the system pool")
	fs.StringVar(&r.BearerToken, "remote-store-bearer-token", "", "bearer token sent with every RPC")
	fs.StringVar(&r.BearerTokenFile, "remote-store-bearer-token-file", "", "file holding the bearer token (read once, trimmed)")
	fs.StringVar(&r.ClientCert, "remote-store-client-cert", "", "PEM client certificate for mutual TLS")
	fs.StringVar(&r.ClientKey, "remote-store-client-key", "", "PEM client key for mutual TLS")
	fs.StringSliceVar(&o.grpcHeaders, "remote-store-grpc-headers", nil, "extra gRPC metadata, key=value (repeat or separate with ';' or ',')")
	fs.StringVar(&r.Format, "remote-store-format", r.Format, "profile encoding: otlp (OTLP/profiles), arrow-v2 (Parca WriteArrow) or arrow-v1 (Parca Write stream)")
	fs.StringVar(&r.Compression, "remote-store-compression", r.Compression, "gRPC compression for OTLP: gzip (level 1) or none (best over loopback)")
	fs.DurationVar(&r.ConnectionTimeout, "remote-store-grpc-connection-timeout", r.ConnectionTimeout, "bound on each connection attempt")
	fs.DurationVar(&r.RPCTimeout, "remote-store-rpc-unary-timeout", r.RPCTimeout, "bound on one export, retries included")
	fs.IntVar(&r.QueueSize, "remote-store-queue-size", r.QueueSize, "flushes waiting for export before new ones are dropped (counted)")
	fs.IntVar(&o.maxExecutables, "max-held-executables", 1024, "executable descriptors held for symbol upload; the oldest is closed past this")
	_ = fs.MarkDeprecated("max-held-executables", "executables are uploaded (or closed) as they arrive; see --debuginfo-upload-queue-size")
	o.debuginfo.register(fs)
	o.parca.register(fs, r)
	o.logging.register(fs)
}

// validate checks the flags and completes the export config.
func (o *outputFlags) validate() error {
	var errs []error
	if o.profilingDuration < time.Second {
		errs = append(errs, fmt.Errorf("--profiling-duration=%v: must be at least 1s", o.profilingDuration))
	}
	headers, err := parseKeyValues("--remote-store-grpc-headers", o.grpcHeaders, true)
	if err != nil {
		errs = append(errs, err)
	}
	o.remote.GRPCHeaders = headers
	if err := o.parca.validate(&o.remote); err != nil {
		errs = append(errs, err)
	}
	if err := o.remote.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("remote store flags: %w", err))
	}
	if o.remote.Address == "" && o.outputDir == "" {
		errs = append(errs, errors.New("neither --remote-store-address nor --output-dir is set: flushes would go nowhere"))
	}
	if err := o.debuginfo.validate(&o.remote); err != nil {
		errs = append(errs, err)
	}
	if err := o.logging.validate(&o.remote); err != nil {
		errs = append(errs, err)
	}
	if o.maxExecutables < 0 {
		errs = append(errs, fmt.Errorf("--max-held-executables=%d: must not be negative", o.maxExecutables))
	}
	if len(errs) > 0 {
		return usageError{errors.Join(errs...)}
	}
	return nil
}

// parseKeyValues reads a repeatable flag's key=value items, each possibly
// several separated with ';' (parca-agent's map syntax). A later key wins;
// values may be empty only when allowEmpty is set.
func parseKeyValues(flag string, raw []string, allowEmpty bool) (map[string]string, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	out := make(map[string]string)
	for _, item := range raw {
		for _, kv := range strings.Split(item, ";") {
			if strings.TrimSpace(kv) == "" {
				continue
			}
			k, v, ok := strings.Cut(kv, "=")
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			if !ok || k == "" || (v == "" && !allowEmpty) {
				return nil, fmt.Errorf("%s: %q is not key=value", flag, kv)
			}
			out[k] = v
		}
	}
	return out, nil
}

// pipeline is the encoder proper: ingest.Sink in, exports out. Aggregation,
// encoding and export stay separate pieces; the pipeline only wires them.
type pipeline struct {
	logger   *slog.Logger
	tracker  *ingest.Tracker
	agg      *encoder.Aggregator
	otlpEnc  *otlp.Encoder
	conn     *grpc.ClientConn
	exporter *export.Exporter
	arrow    *arrowOutput // Arrow formats; nil for OTLP
	maxMsg   int          // bound on one OTLP request (bytes)
	pprof    *pprofout.Sink
	execs    *executables

	// syncExport makes deliver wait for each export instead of queueing
	// it: replay produces flushes faster than any backend takes them, and
	// must not drop any.
	syncExport bool
	exports    sync.WaitGroup
	metrics    pipelineMetrics
}

type pipelineMetrics struct {
	flushes        *prometheus.CounterVec
	rejected       prometheus.Counter
	droppedFlushes prometheus.Counter
}

// otlpConfig is the OTLP encoder's configuration. When symbols are
// uploaded, executables without a GNU build id are uploaded under their
// file id, so their mappings carry it as the GNU build id too: Parca's
// OTLP ingestion looks symbols up by that attribute alone.
func (o *outputFlags) otlpConfig() otlp.Config {
	cfg := otlp.DefaultConfig()
	symbols, _ := o.debuginfo.target(&o.remote)
	cfg.FileIDAsGNUBuildID = symbols != ""
	return cfg
}

// dialRemote dials the remote store, or returns nil without
// --remote-store-address. The profile exporter and --otlp-logging share
// the connection; the caller closes it.
func dialRemote(o *outputFlags, reg prometheus.Registerer) (*grpc.ClientConn, error) {
	if o.remote.Address == "" {
		return nil, nil
	}
	conn, err := export.Dial(o.remote, reg)
	if err != nil {
		return nil, fmt.Errorf("dial remote store %s: %w", o.remote.Address, err)
	}
	return conn, nil
}

// newPipeline builds the pipeline. conn is the remote store connection
// from dialRemote (nil without an address); the pipeline uses it but does
// not close it.
func newPipeline(o *outputFlags, conn *grpc.ClientConn, logger *slog.Logger, reg prometheus.Registerer) (*pipeline, error) {
	p := &pipeline{logger: logger, conn: conn}
	p.metrics = pipelineMetrics{
		flushes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tandem_encoder_flushes_total", Help: "Flushes handed to the output, by result.",
		}, []string{"result"}),
		rejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tandem_encoder_rejected_batches_total", Help: "Batches the aggregator rejected as inconsistent.",
		}),
		droppedFlushes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tandem_encoder_dropped_flushes_total", Help: "Flushes dropped because the export queue was full.",
		}),
	}
	if reg != nil {
		reg.MustRegister(p.metrics.flushes, p.metrics.rejected, p.metrics.droppedFlushes)
	}
	var err error
	if p.agg, err = encoder.NewAggregator(encoder.DefaultConfig(), reg); err != nil {
		return nil, fmt.Errorf("create aggregator: %w", err)
	}
	if p.execs, err = newExecutables(o, logger, reg); err != nil {
		return nil, err
	}
	p.tracker = ingest.NewTracker(p, logger.With("component", "ingest"), reg)
	if o.remote.Address != "" {
		if p.otlpEnc, err = otlp.NewEncoder(o.otlpConfig()); err != nil {
			return nil, fmt.Errorf("create OTLP encoder: %w", err)
		}
		p.maxMsg = o.remote.MaxCallSendMsgSize - 64 // room for gRPC's framing
		if p.conn == nil {
			return nil, errors.New("no remote store connection")
		}
		if p.exporter, err = export.New(p.conn, logger.With("component", "export"), reg, o.remote); err != nil {
			return nil, fmt.Errorf("create exporter: %w", err)
		}
		if o.remote.Format != export.FormatOTLP {
			if p.arrow, err = newArrowOutput(o, logger, reg); err != nil {
				return nil, err
			}
			return p, nil
		}
		logger.Info("exporting OTLP/profiles", "address", o.remote.Address, "compression", o.remote.Compression, "insecure", o.remote.Insecure)
		return p, nil
	}
	pcfg := pprofout.DefaultConfig()
	pcfg.Dir = o.outputDir
	if p.pprof, err = pprofout.NewSink(pcfg, logger.With("component", "pprofout")); err != nil {
		return nil, fmt.Errorf("prepare --output-dir: %w", err)
	}
	logger.Info("writing pprof files", "dir", o.outputDir)
	return p, nil
}

// Batch implements ingest.Sink.
func (p *pipeline) Batch(s *ingest.Session, b *schema.Batch) {
	if err := p.agg.Add(&s.Hello, b); err != nil {
		p.metrics.rejected.Inc()
		p.logger.Warn("rejected batch", "node", s.Hello.NodeName, "sequence", b.Sequence, "err", err)
	}
}

// Loss implements ingest.Sink; the tracker already counted and logged it.
func (p *pipeline) Loss(*ingest.Session, *schema.LossReport) {}

// Executable implements ingest.Sink.
func (p *pipeline) Executable(_ *ingest.Session, n *schema.ExecutableNotice, f *os.File) {
	p.agg.NoteExecutable(n) // full paths for pprof mappings
	p.execs.submit(n, f)
}

// flush cuts the current interval and hands it to the output. On success
// the sequences it covers are acknowledged to the samplers (asynchronously
// for remote export).
func (p *pipeline) flush(ctx context.Context, now time.Time) {
	var f *encoder.Flush
	seqs := p.tracker.Cut(func() { f = p.agg.Flush(now) })
	p.deliver(ctx, f, func() { p.tracker.Ack(seqs, sessionIdle) })
}

// deliver encodes and sends f, calling acked once the output has it.
func (p *pipeline) deliver(ctx context.Context, f *encoder.Flush, acked func()) {
	if len(f.Samples) == 0 {
		p.agg.Release(f)
		acked()
		return
	}
	if p.arrow != nil {
		p.deliverArrow(ctx, f, acked)
		return
	}
	if p.exporter != nil {
		// A flush too large for one message goes as several requests.
		reqs, err := p.otlpEnc.EncodeLimited(f, p.maxMsg)
		p.agg.Release(f)
		if err != nil {
			p.metrics.flushes.WithLabelValues("failure").Inc()
			p.logger.Error("encode OTLP; the flush is lost", "err", err)
			return
		}
		release := func() {
			for _, r := range reqs {
				p.otlpEnc.Release(r)
			}
		}
		p.send(ctx,
			func(ctx context.Context) error { return p.exporter.ExportAll(ctx, reqs) },
			func(done func(error)) error { return p.exporter.SubmitAll(reqs, done) },
			release, acked)
		return
	}
	path, err := p.pprof.Write(f)
	p.agg.Release(f)
	if err != nil {
		p.metrics.flushes.WithLabelValues("failure").Inc()
		p.logger.Error("write pprof file", "err", err)
		return
	}
	p.metrics.flushes.WithLabelValues("success").Inc()
	p.logger.Debug("wrote profile", "path", path)
	acked()
}

// send exports an encoded flush: run waits for the export (syncExport),
// submit queues it. release, if not nil, frees the encoded requests once
// the export ended or was dropped; acked is called once the remote store
// took every request of the flush.
func (p *pipeline) send(ctx context.Context, run func(context.Context) error, submit func(done func(error)) error, release, acked func()) {
	finish := func(err error) {
		if release != nil {
			release()
		}
		if err != nil {
			p.metrics.flushes.WithLabelValues("failure").Inc()
			p.logger.Warn("export failed; the flush is lost", "err", err)
			return
		}
		p.metrics.flushes.WithLabelValues("success").Inc()
		acked()
	}
	if p.syncExport {
		finish(run(ctx))
		return
	}
	p.exports.Add(1)
	if err := submit(func(err error) {
		defer p.exports.Done()
		finish(err)
	}); err != nil {
		p.exports.Done()
		if release != nil {
			release()
		}
		p.metrics.droppedFlushes.Inc()
		p.metrics.flushes.WithLabelValues("dropped").Inc()
	}
}

// close waits for queued exports (bounded by ctx) and releases everything
// but the connection, which is the caller's.
func (p *pipeline) close(ctx context.Context) error {
	var err error
	if p.exporter != nil {
		err = p.exporter.Close(ctx)
		p.exports.Wait()
	}
	return errors.Join(err, p.execs.close(ctx))
}
