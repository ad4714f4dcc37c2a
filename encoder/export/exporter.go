package export

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/collector/pdata/pprofile/pprofileotlp"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/status"

	profilestorev1alpha1 "github.com/tandem-profiler/tandem/schema/parca/parca/profilestore/v1alpha1"
)

// Errors Submit returns.
var (
	ErrQueueFull = errors.New("export queue full")
	ErrClosed    = errors.New("exporter closed")
)

// Retryable reports whether a failed export may succeed if sent again: the
// receiver was unreachable, overloaded, or ran out of time. Everything else
// (invalid data, authentication, unimplemented, errors that are not gRPC
// statuses) is permanent.
func Retryable(err error) bool {
	s, ok := status.FromError(err)
	if !ok {
		return false
	}
	switch s.Code() {
	case codes.Unavailable, codes.ResourceExhausted, codes.Aborted, codes.DeadlineExceeded,
		codes.Canceled, codes.OutOfRange, codes.DataLoss:
		return true
	}
	return false
}

// retryDelay returns the delay a server asked for in a RetryInfo detail.
func retryDelay(err error) time.Duration {
	s, ok := status.FromError(err)
	if !ok {
		return 0
	}
	for _, d := range s.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay() != nil {
			return ri.GetRetryDelay().AsDuration()
		}
	}
	return 0
}

type job struct {
	run  func(context.Context) error
	done func(error)
}

type exporterMetrics struct {
	requests *prometheus.CounterVec
	retries  prometheus.Counter
	dropped  prometheus.Counter
	rejected prometheus.Counter
	duration prometheus.Histogram
}

// Exporter sends export requests to the remote store. See the package
// documentation.
type Exporter struct {
	client   pprofileotlp.GRPCClient
	store    profilestorev1alpha1.ProfileStoreServiceClient
	cfg      Config
	logger   *slog.Logger
	metrics  exporterMetrics
	callOpts []grpc.CallOption

	mu     sync.Mutex
	closed bool
	queue  chan job

	ctx    context.Context // canceled by Close when draining runs out of time
	cancel context.CancelFunc
	done   chan struct{} // closed when the worker exits
}

// New returns an Exporter sending over conn and starts its queue worker;
// Close stops it. logger and reg may be nil.
func New(conn *grpc.ClientConn, logger *slog.Logger, reg prometheus.Registerer, cfg Config) (*Exporter, error) {
	if conn == nil {
		return nil, errors.New("new exporter: nil connection")
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("exporter config: %w", err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	e := &Exporter{
		client: pprofileotlp.NewGRPCClient(conn),
		store:  profilestorev1alpha1.NewProfileStoreServiceClient(conn),
		cfg:    cfg,
		logger: logger.With("component", "export", "address", cfg.Address),
		queue:  make(chan job, cfg.QueueSize),
		done:   make(chan struct{}),
		metrics: exporterMetrics{
			requests: prometheus.NewCounterVec(prometheus.CounterOpts{
				Name: "tandem_encoder_export_requests_total",
				Help: "Export requests finished, by result: success, or failure (permanent error or out of retries).",
			}, []string{"result"}),
			retries: prometheus.NewCounter(prometheus.CounterOpts{
				Name: "tandem_encoder_export_retries_total",
				Help: "Export attempts that failed with a retryable error and were retried.",
			}),
			dropped: prometheus.NewCounter(prometheus.CounterOpts{
				Name: "tandem_encoder_export_dropped_total",
				Help: "Export requests dropped because the queue was full.",
			}),
			rejected: prometheus.NewCounter(prometheus.CounterOpts{
				Name: "tandem_encoder_export_rejected_profiles_total",
				Help: "Profiles the receiver rejected in a partial success.",
			}),
			duration: prometheus.NewHistogram(prometheus.HistogramOpts{
				Name:    "tandem_encoder_export_duration_seconds",
				Help:    "Time to finish an export, retries included.",
				Buckets: prometheus.ExponentialBuckets(0.005, 4, 9),
			}),
		},
	}
	if cfg.Compression == CompressionGzip {
		e.callOpts = append(e.callOpts, grpc.UseCompressor(gzip.Name))
	}
	if reg != nil {
		queued := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "tandem_encoder_export_queue_length",
			Help: "Export requests waiting in the queue.",
		}, func() float64 { return float64(len(e.queue)) })
		for _, c := range []prometheus.Collector{e.metrics.requests, e.metrics.retries, e.metrics.dropped, e.metrics.rejected, e.metrics.duration, queued} {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("register export metrics: %w", err)
			}
		}
	}
	e.ctx, e.cancel = context.WithCancel(context.Background())
	go e.run()
	return e, nil
}

func (e *Exporter) run() {
	defer close(e.done)
	for j := range e.queue {
		err := j.run(e.ctx)
		if j.done != nil {
			j.done(err)
		}
	}
}

// Submit queues req for export and returns at once. done, if not nil, is
// called from the worker goroutine with Export's result once the request
// is finished; until then req belongs to the Exporter. When the queue is
// full Submit returns ErrQueueFull, after Close ErrClosed; done is then not
// called and req stays the caller's.
func (e *Exporter) Submit(req pprofileotlp.ExportRequest, done func(error)) error {
	return e.submit(func(ctx context.Context) error { return e.Export(ctx, req) }, done)
}

// SubmitArrowV2 queues WriteArrow payloads like Submit (see ExportArrowV2).
func (e *Exporter) SubmitArrowV2(payloads [][]byte, done func(error)) error {
	return e.submit(func(ctx context.Context) error { return e.ExportArrowV2(ctx, payloads) }, done)
}

// SubmitArrowV1 queues Write exchanges like Submit (see ExportArrowV1).
func (e *Exporter) SubmitArrowV1(exchanges []WriteExchange, done func(error)) error {
	return e.submit(func(ctx context.Context) error { return e.ExportArrowV1(ctx, exchanges) }, done)
}

func (e *Exporter) submit(run func(context.Context) error, done func(error)) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return ErrClosed
	}
	select {
	case e.queue <- job{run: run, done: done}:
		return nil
	default:
		e.metrics.dropped.Inc()
		e.logger.Warn("export queue full, dropping a flush", "queue_size", cap(e.queue))
		return ErrQueueFull
	}
}

// Close stops accepting requests and waits for the queued ones to be
// exported. When ctx ends first, the export in flight and those still queued
// are canceled (their callbacks get an error) and Close returns ctx's error
// once the worker has stopped.
func (e *Exporter) Close(ctx context.Context) error {
	e.mu.Lock()
	if !e.closed {
		e.closed = true
		close(e.queue)
	}
	e.mu.Unlock()
	select {
	case <-e.done:
		e.cancel()
		return nil
	case <-ctx.Done():
		e.cancel()
		<-e.done
		return ctx.Err()
	}
}

// Export sends req, retrying retryable failures with backoff, and returns
// nil once the receiver accepted it. It gives up on a permanent error, when
// Config.RPCTimeout has passed, or when ctx ends. req is only read.
func (e *Exporter) Export(ctx context.Context, req pprofileotlp.ExportRequest) error {
	return e.observe(ctx, func(ctx context.Context) error {
		return e.retry(ctx, "export profiles", func(actx context.Context) error {
			resp, err := e.client.Export(actx, req, e.callOpts...)
			if err != nil {
				return err
			}
			if ps := resp.PartialSuccess(); ps.RejectedProfiles() > 0 || ps.ErrorMessage() != "" {
				e.metrics.rejected.Add(float64(ps.RejectedProfiles()))
				e.logger.Warn("remote store rejected part of an export",
					"rejected_profiles", ps.RejectedProfiles(), "message", ps.ErrorMessage())
			}
			return nil
		})
	})
}

// observe runs one export under Config.RPCTimeout and counts it.
func (e *Exporter) observe(ctx context.Context, run func(context.Context) error) error {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, e.cfg.RPCTimeout)
	defer cancel()
	err := run(ctx)
	e.metrics.duration.Observe(time.Since(start).Seconds())
	if err != nil {
		e.metrics.requests.WithLabelValues("failure").Inc()
		return err
	}
	e.metrics.requests.WithLabelValues("success").Inc()
	return nil
}

// retry runs attempt (each under Config.AttemptTimeout) until it succeeds,
// fails permanently or ctx ends, with jittered exponential backoff.
func (e *Exporter) retry(ctx context.Context, what string, attempt func(context.Context) error) error {
	backoff := e.cfg.RetryInitialBackoff
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for n := 1; ; n++ {
		actx, acancel := context.WithTimeout(ctx, e.cfg.AttemptTimeout)
		err := attempt(actx)
		acancel()
		if err == nil {
			return nil
		}
		if !Retryable(err) {
			return fmt.Errorf("%s: %w", what, err)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: gave up after %d attempts: %w", what, n, errors.Join(err, context.Cause(ctx)))
		}
		// ±20% jitter keeps a fleet of encoders from retrying in step.
		wait := time.Duration(float64(backoff) * (0.8 + 0.4*rand.Float64()))
		if d := retryDelay(err); d > wait {
			wait = d
		}
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < wait {
			return fmt.Errorf("%s: gave up after %d attempts, next retry past the deadline: %w", what, n, err)
		}
		e.metrics.retries.Inc()
		e.logger.Debug("export failed, retrying", "attempt", n, "wait", wait, "err", err)
		if timer == nil {
			timer = time.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: gave up after %d attempts: %w", what, n, errors.Join(err, context.Cause(ctx)))
		case <-timer.C:
		}
		backoff = min(2*backoff, e.cfg.RetryMaxBackoff)
	}
}

// ExportAll sends the requests of one flush (split to fit the message size
// limit) in order, each retried like Export, all within one
// Config.RPCTimeout, and returns nil once the receiver accepted every one.
func (e *Exporter) ExportAll(ctx context.Context, reqs []pprofileotlp.ExportRequest) error {
	if len(reqs) == 1 {
		return e.Export(ctx, reqs[0])
	}
	return e.observe(ctx, func(ctx context.Context) error {
		for i, req := range reqs {
			err := e.retry(ctx, "export profiles", func(actx context.Context) error {
				resp, err := e.client.Export(actx, req, e.callOpts...)
				if err == nil {
					if ps := resp.PartialSuccess(); ps.RejectedProfiles() > 0 || ps.ErrorMessage() != "" {
						e.metrics.rejected.Add(float64(ps.RejectedProfiles()))
						e.logger.Warn("remote store rejected part of an export",
							"rejected_profiles", ps.RejectedProfiles(), "message", ps.ErrorMessage())
					}
				}
				return err
			})
			if err != nil {
				return fmt.Errorf("request %d of %d: %w", i+1, len(reqs), err)
			}
		}
		return nil
	})
}

// SubmitAll queues the requests of one flush like Submit (see ExportAll).
func (e *Exporter) SubmitAll(reqs []pprofileotlp.ExportRequest, done func(error)) error {
	return e.submit(func(ctx context.Context) error { return e.ExportAll(ctx, reqs) }, done)
}
