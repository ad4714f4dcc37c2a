package export

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tandem-profiler/tandem/internal/grpcretry"
	"github.com/tandem-profiler/tandem/internal/prom"
	"github.com/tandem-profiler/tandem/internal/retry"
)

// ErrClosed is what Submit reports (in the Result) after Close.
var ErrClosed = errors.New("exporter closed")

// Reasons a Result gives for lost samples: the values of the reason label
// of tandem_encoder_lost_samples_total.
const (
	// ReasonQueueFull: the output held QueueSize flushes or QueueBytes
	// bytes, and this was the oldest.
	ReasonQueueFull = "queue_full"
	// ReasonRejected: the receiver refused the data with a permanent error
	// (invalid data, authentication, unimplemented, a local write that
	// cannot succeed), or rejected it in a partial success.
	ReasonRejected = "rejected"
	// ReasonUnconfirmed: the receiver refused a request it may have stored
	// part of (an error after storing some profiles, as Pyroscope answers,
	// or a partial success that does not say which profiles it rejected):
	// these samples were neither confirmed nor resent, so none is stored
	// twice; some may be stored once.
	ReasonUnconfirmed = "unconfirmed"
	// ReasonUnavailable: the output had been failing for GiveUpAfter.
	ReasonUnavailable = "unavailable"
	// ReasonShutdown: the exporter closed before the data was delivered.
	ReasonShutdown = "shutdown"
)

// Request is one flush's worth of data for one backend, already encoded:
// a sequence of parts (one part per RPC or file) sent in order. The
// Exporter only calls it from its worker goroutine.
type Request interface {
	// Parts is the number of parts; PartSamples(i) the samples
	// (observations) part i carries; Bytes the encoded size of them all.
	Parts() int
	PartSamples(i int) int
	Bytes() int
	// Send makes one attempt at delivering part i. An error means the
	// attempt failed and the receiver stored none of the part: it is
	// retried when Retryable, else the request is given up. Without an
	// error the part is done: its samples are delivered but for those the
	// Outcome counts, which are never resent.
	Send(ctx context.Context, i int) (Outcome, error)
	// Release frees the request once the Exporter is done with it.
	Release()
}

// Outcome is what became of a part the receiver answered without failing
// the attempt: samples it refused (a partial success, or a refusal it
// made without storing anything) and samples whose fate is unknown (it
// refused the request after it may have stored some of it).
type Outcome struct {
	Rejected    int   // counted lost, ReasonRejected
	Unconfirmed int   // counted lost, ReasonUnconfirmed
	Err         error // the receiver's reason, when Rejected or Unconfirmed
}

// Result is what became of a Request: every sample of it is either
// delivered or lost, for a reason (ReasonQueueFull, ...).
type Result struct {
	Delivered int
	Lost      map[string]int
	// Err is the last error, nil when everything was delivered.
	Err error
}

func (r *Result) lose(reason string, n int) {
	if n == 0 {
		return
	}
	if r.Lost == nil {
		r.Lost = make(map[string]int, 1)
	}
	r.Lost[reason] += n
}

// LostSamples returns the samples lost for any reason.
func (r Result) LostSamples() int {
	n := 0
	for _, v := range r.Lost {
		n += v
	}
	return n
}

// Errors a job's context is canceled with.
var (
	errEvicted  = errors.New("given up: the output's queue is full and this is its oldest flush")
	errShutdown = errors.New("given up: the exporter is closing")
)

type job struct {
	req    Request
	done   func(Result)
	bytes  int
	ctx    context.Context
	cancel context.CancelCauseFunc
	// inFlight is set while the worker holds the job. evicted is closed
	// when the job, in flight, is pushed out of the queue: it is given up
	// at its next failure or wait, never in the middle of an attempt (an
	// attempt the receiver may already have taken must not count lost).
	inFlight bool
	evicted  chan struct{}
}

type exporterMetrics struct {
	retries  prometheus.Counter
	duration prometheus.Histogram
	failing  prometheus.Gauge
}

// Exporter delivers Requests for one output: a bounded queue served in
// order by one worker goroutine, one retry policy, a timeout per attempt,
// and metrics. See the package documentation.
type Exporter struct {
	name    string
	cfg     QueueConfig
	logger  *slog.Logger
	metrics exporterMetrics
	report  *failureReport

	mu       sync.Mutex
	cond     *sync.Cond // signalled when the queue changes
	queue    []*job     // oldest first; queue[0] may be in flight
	bytes    int        // of the jobs in queue
	closed   bool
	shutdown bool // Close ran out of time: give up what is left

	done chan struct{} // closed when the worker exits
}

// New returns an Exporter for the output called name and starts its
// worker; Close stops it. logger and reg may be nil; reg receives the
// exporter's metrics labelled output=name.
func New(cfg QueueConfig, name string, logger *slog.Logger, reg prometheus.Registerer) (*Exporter, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("exporter %s: %w", name, err)
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	e := &Exporter{
		name:   name,
		cfg:    cfg,
		logger: logger.With("component", "export", "output", name),
		done:   make(chan struct{}),
		metrics: exporterMetrics{
			retries: prometheus.NewCounter(prometheus.CounterOpts{
				Name: "tandem_encoder_export_retries_total",
				Help: "Attempts that failed with a retryable error and were retried.",
			}),
			duration: prometheus.NewHistogram(prometheus.HistogramOpts{
				Name:    "tandem_encoder_export_duration_seconds",
				Help:    "Time to finish a flush, retries included.",
				Buckets: prometheus.ExponentialBuckets(0.005, 4, 9),
			}),
			failing: prometheus.NewGauge(prometheus.GaugeOpts{
				Name: "tandem_encoder_export_failing",
				Help: "1 while the output's last attempt failed (and nothing succeeded since).",
			}),
		},
	}
	e.report = newFailureReport(e.logger, name, cfg.Retry.Clk())
	e.cond = sync.NewCond(&e.mu)
	if reg != nil {
		reg = prometheus.WrapRegistererWith(prometheus.Labels{"output": name}, reg)
		queued := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "tandem_encoder_export_queue_length",
			Help: "Flushes the output holds (queued or being sent).",
		}, func() float64 { e.mu.Lock(); defer e.mu.Unlock(); return float64(len(e.queue)) })
		queuedBytes := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "tandem_encoder_export_queue_bytes",
			Help: "Encoded bytes the output holds (queued or being sent).",
		}, func() float64 { e.mu.Lock(); defer e.mu.Unlock(); return float64(e.bytes) })
		if err := prom.Register(reg, "export of "+name, e.metrics.retries, e.metrics.duration, e.metrics.failing, queued, queuedBytes); err != nil {
			return nil, err
		}
	}
	go e.run()
	return e, nil
}

// Name returns the output's name.
func (e *Exporter) Name() string { return e.name }

// Submit queues req; done is called exactly once, from the worker goroutine
// or from a later Submit (when req is given up to make room), or from
// Submit itself after Close. After done, req is released. Without
// Backpressure, Submit never blocks: when the queue holds more than
// QueueSize flushes or QueueBytes bytes the oldest is given up
// (ReasonQueueFull), the one in flight included (at the end of its current
// attempt, or at once when it is waiting to retry). With Backpressure,
// Submit waits for room instead.
func (e *Exporter) Submit(req Request, done func(Result)) {
	ctx, cancel := context.WithCancelCause(context.Background())
	j := &job{req: req, done: done, bytes: req.Bytes(), ctx: ctx, cancel: cancel, evicted: make(chan struct{})}
	var evicted []*job
	e.mu.Lock()
	for e.cfg.Backpressure && !e.closed && len(e.queue) > 0 && e.over(j.bytes) {
		e.cond.Wait()
	}
	if e.closed {
		e.mu.Unlock()
		e.finish(j, e.giveUp(j, 0, ReasonShutdown, ErrClosed))
		return
	}
	e.queue = append(e.queue, j)
	e.bytes += j.bytes
	for len(e.queue) > 1 && e.over(0) {
		old := e.queue[0]
		e.queue = e.queue[1:]
		e.bytes -= old.bytes
		if old.inFlight {
			close(old.evicted) // the worker finishes it
			continue
		}
		evicted = append(evicted, old)
	}
	e.cond.Broadcast()
	e.mu.Unlock()
	for _, old := range evicted {
		e.finish(old, e.giveUp(old, 0, ReasonQueueFull, errEvicted))
	}
}

// over reports whether the queue, plus extra bytes, exceeds its bounds.
// Called with e.mu held.
func (e *Exporter) over(extra int) bool {
	n := len(e.queue)
	if extra > 0 {
		n++
	}
	return n > e.cfg.QueueSize || e.bytes+extra > e.cfg.QueueBytes
}

func (e *Exporter) run() {
	defer close(e.done)
	for {
		e.mu.Lock()
		for len(e.queue) == 0 && !e.closed {
			e.cond.Wait()
		}
		if len(e.queue) == 0 {
			e.mu.Unlock()
			return
		}
		j := e.queue[0]
		j.inFlight = true
		if e.shutdown {
			j.cancel(errShutdown)
		}
		e.mu.Unlock()

		res := e.deliver(j.ctx, j.req, j.evicted)

		e.mu.Lock()
		if len(e.queue) > 0 && e.queue[0] == j {
			e.queue = e.queue[1:]
			e.bytes -= j.bytes
		}
		e.cond.Broadcast()
		e.mu.Unlock()
		e.finish(j, res)
	}
}

func (e *Exporter) finish(j *job, res Result) {
	j.cancel(nil)
	j.req.Release()
	if j.done != nil {
		j.done(res)
	}
}

// giveUp is the Result of a request given up from part `from` on.
func (e *Exporter) giveUp(j *job, from int, reason string, err error) Result {
	var res Result
	for i := from; i < j.req.Parts(); i++ {
		res.lose(reason, j.req.PartSamples(i))
	}
	res.Err = err
	return res
}

// Close stops accepting requests and waits for the queued ones to be
// delivered. When ctx ends first, what is in flight and still queued is
// given up (ReasonShutdown) and Close returns ctx's error once the worker
// has stopped.
func (e *Exporter) Close(ctx context.Context) error {
	e.mu.Lock()
	e.closed = true
	e.cond.Broadcast()
	e.mu.Unlock()
	select {
	case <-e.done:
		return nil
	case <-ctx.Done():
		e.mu.Lock()
		e.shutdown = true
		for _, j := range e.queue {
			j.cancel(errShutdown)
		}
		e.mu.Unlock()
		<-e.done
		return ctx.Err()
	}
}

// Failing returns nil while the output works (or has not been tried yet),
// and the last error, with when failures began, while its last attempt
// failed.
func (e *Exporter) Failing() error { return e.report.failing() }

// Deliver sends req now, on the caller's goroutine, with the retry policy
// the queue uses, and returns what became of it; ctx ending gives it up
// (ReasonShutdown). It does not release req. It is for callers that
// manage their own ordering (and tests); Submit is the queued path.
func (e *Exporter) Deliver(ctx context.Context, req Request) Result {
	return e.deliver(ctx, req, nil)
}

// deliver runs the retry policy over req's parts in order.
func (e *Exporter) deliver(ctx context.Context, req Request, evicted <-chan struct{}) Result {
	clk := e.cfg.Retry.Clk()
	start := clk.Now()
	defer func() { e.metrics.duration.Observe(clk.Since(start).Seconds()) }()
	var res Result
	for i := 0; i < req.Parts(); i++ {
		out, err := e.retry(ctx, req, i, evicted)
		if err != nil {
			reason := ReasonRejected
			switch {
			case errors.Is(err, errEvicted):
				reason = ReasonQueueFull
			case errors.Is(err, errShutdown), ctx.Err() != nil:
				reason = ReasonShutdown
			case errors.Is(err, errGaveUp):
				reason = ReasonUnavailable
			}
			for k := i; k < req.Parts(); k++ {
				res.lose(reason, req.PartSamples(k))
			}
			res.Err = err
			return res
		}
		res.lose(ReasonRejected, out.Rejected)
		res.lose(ReasonUnconfirmed, out.Unconfirmed)
		if out.Err != nil {
			res.Err = out.Err
		}
		res.Delivered += req.PartSamples(i) - out.Rejected - out.Unconfirmed
	}
	return res
}

var (
	errGaveUp   = errors.New("gave up")
	errNoAnswer = errors.New("no answer within the give-up time")
)

// retry makes attempts at part i until one succeeds, one fails
// permanently, ctx ends, evicted is closed (checked between attempts
// only), or the output has been failing for GiveUpAfter (when set), with
// the retry policy's backoff honouring a server's RetryInfo.
//
// The give-up is a deadline, not a check made at the next attempt: the
// output's failure streak began at the start of its first failed attempt,
// and no later attempt nor wait reaches past that start plus GiveUpAfter,
// so a dead output is given up on time whatever the backoff or the RPC
// timeout. The first attempt of a working output runs its RPCTimeout: a
// slow answer is not a failure, and a failure's own error (and hint) is
// what the operator needs. Once past the deadline, each flush still gets
// one attempt (a probe: the output may be back), of at most GiveUpAfter,
// and is given up when that fails.
func (e *Exporter) retry(ctx context.Context, req Request, i int, evicted <-chan struct{}) (Outcome, error) {
	waits := e.cfg.Retry.Retrier(grpcretry.ServerDelay)
	clk := waits.Clock()
	var prev error // the last attempt's error
	for n := 1; ; n++ {
		select {
		case <-evicted:
			return Outcome{}, errEvicted
		default:
		}
		start := clk.Now()
		timeout := e.cfg.RPCTimeout
		giveUpAt, giving := e.giveUpAt(start)
		if giving && !e.report.streakStart().IsZero() {
			// Failing: no attempt reaches past the deadline; a probe,
			// once past it, lasts at most GiveUpAfter.
			left := giveUpAt.Sub(start)
			if left <= 0 {
				left = e.cfg.GiveUpAfter
			}
			timeout = min(timeout, left)
		}
		actx, acancel := context.WithTimeout(ctx, timeout)
		out, err := req.Send(actx, i)
		// Cut short by the give-up deadline: the client's context ended, or
		// the receiver, told the deadline, gave up a moment before it.
		cut := timeout < e.cfg.RPCTimeout && (errors.Is(actx.Err(), context.DeadlineExceeded) ||
			errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded)
		acancel()
		switch {
		case err == nil || !cut:
		case prev != nil:
			// Cut short by the give-up deadline: the cause is still the
			// one the output has been failing with.
			err = prev
		default:
			err = fmt.Errorf("%w %v: %w", errNoAnswer, e.cfg.GiveUpAfter, err)
		}
		prev = err
		if err == nil {
			e.report.success()
			e.metrics.failing.Set(0)
			return out, nil
		}
		if cause := context.Cause(ctx); cause != nil {
			return Outcome{}, fmt.Errorf("%w (last error: %w)", cause, err)
		}
		e.report.failure(err, start)
		e.metrics.failing.Set(1)
		if !Retryable(err) {
			return Outcome{}, err
		}
		now := clk.Now()
		gaveUp := func() error {
			return fmt.Errorf("%w after %d attempts, the output failing for %v: %w", errGaveUp, n, e.report.failingFor(now).Round(time.Millisecond), err)
		}
		if giving && !now.Before(giveUpAt) {
			return Outcome{}, gaveUp()
		}
		wait := waits.Next(err)
		last := giving && !now.Add(wait).Before(giveUpAt)
		if last {
			wait = giveUpAt.Sub(now)
		} else {
			e.metrics.retries.Inc()
		}
		timer := clk.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return Outcome{}, fmt.Errorf("%w (last error: %w)", context.Cause(ctx), err)
		case <-evicted:
			timer.Stop()
			return Outcome{}, fmt.Errorf("%w (last error: %w)", errEvicted, err)
		case now = <-timer.C():
		}
		if last {
			return Outcome{}, gaveUp()
		}
	}
}

// Retryable reports whether a failed attempt may succeed if made again: a
// retryable gRPC failure (grpcretry.Retryable), or any error a Request
// marked with retry.Transient (a directory that may become writable).
func Retryable(err error) bool {
	return retry.IsTransient(err) || grpcretry.Retryable(err)
}

// giveUpAt returns when a flush whose attempt starts at start is given up:
// GiveUpAfter past the start of the output's failure streak, or of this
// attempt when the output is not failing. giving is false without
// GiveUpAfter.
func (e *Exporter) giveUpAt(start time.Time) (at time.Time, giving bool) {
	if e.cfg.GiveUpAfter <= 0 {
		return time.Time{}, false
	}
	since := e.report.streakStart()
	if since.IsZero() {
		since = start
	}
	return since.Add(e.cfg.GiveUpAfter), true
}
