package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
	"github.com/tandem-profiler/tandem/encoder/export"
	"github.com/tandem-profiler/tandem/encoder/ingest"
	"github.com/tandem-profiler/tandem/encoder/output"
	"github.com/tandem-profiler/tandem/internal/prom"
	"github.com/tandem-profiler/tandem/schema"
)

// SessionIdle is how long a disconnected, fully acknowledged session is
// remembered for duplicate suppression.
const SessionIdle = time.Hour

// Executables takes the executables samplers pass over (symbol upload). It
// owns f, which may be nil.
type Executables interface {
	Submit(n *schema.ExecutableNotice, f *os.File)
}

// Config configures a Pipeline. It is plain data.
type Config struct {
	Aggregator aggregate.Config
	// StreamWindow, when positive, cuts a flush whenever a batch starts
	// StreamWindow or more (by its samples' timestamps) after the current
	// window began: replay's clock. Such flushes acknowledge nothing (a
	// dump has nobody to acknowledge to).
	StreamWindow time.Duration
	// TimeShift is added to every sample's timestamp as it arrives:
	// replay's "--timestamps now", which moves a recorded dump to the
	// present for backends that refuse old samples. 0 keeps the times.
	TimeShift time.Duration

	_ struct{}
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{Aggregator: aggregate.DefaultConfig()}
}

// Pipeline is the encoder proper: an ingest.Sink feeding one Aggregator,
// whose flushes go to every Output. See the package documentation for what
// is acknowledged when.
type Pipeline struct {
	cfg     Config
	agg     *aggregate.Aggregator
	tracker *ingest.Tracker
	outputs []*output.Output
	execs   Executables
	logger  *slog.Logger
	metrics pipelineMetrics

	// Stream-time windows (StreamWindow), under the tracker's lock.
	windowStart, lastTS int64

	mu                               sync.Mutex
	tickets                          []*ticket     // flushes not yet acknowledged, oldest first
	idle                             chan struct{} // closed when tickets empties; nil while empty
	halted                           bool          // a flush was given up at shutdown: acknowledge nothing more
	stats                            []OutputSummary
	rejectedBatches, rejectedSamples int
	produced                         int
}

// ticket is one flush on its way to every output.
type ticket struct {
	seqs     map[[16]byte]uint64 // what to acknowledge once done
	flush    *aggregate.Flush
	pending  int
	shutdown bool // some output gave part of it up at shutdown
}

type pipelineMetrics struct {
	flushes   *prometheus.CounterVec // output, result
	lost      *prometheus.CounterVec // output, reason
	delivered *prometheus.CounterVec // output
	rejected  prometheus.Counter
	unacked   prometheus.GaugeFunc
}

// OutputSummary is what became of the samples sent to one output.
type OutputSummary struct {
	Name      string
	Delivered int
	Lost      map[string]int // by reason
	LastErr   error
}

// LostSamples is the sum of Lost.
func (s OutputSummary) LostSamples() int {
	n := 0
	for _, v := range s.Lost {
		n += v
	}
	return n
}

// NewPipeline returns a Pipeline feeding outputs, which it owns from now
// on (Close closes them). execs may be nil (descriptors are then closed);
// logger and reg may be nil.
func New(cfg Config, outputs []*output.Output, execs Executables, logger *slog.Logger, reg prometheus.Registerer) (*Pipeline, error) {
	if len(outputs) == 0 {
		return nil, errors.New("new pipeline: no outputs: flushes would go nowhere")
	}
	seen := map[string]bool{}
	for _, o := range outputs {
		if seen[o.Name()] {
			return nil, fmt.Errorf("new pipeline: two outputs are named %q", o.Name())
		}
		seen[o.Name()] = true
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	p := &Pipeline{cfg: cfg, outputs: outputs, execs: execs, logger: logger}
	p.stats = make([]OutputSummary, len(outputs))
	for i, o := range outputs {
		p.stats[i].Name = o.Name()
	}
	p.metrics = pipelineMetrics{
		flushes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tandem_encoder_flushes_total",
			Help: "Flushes each output finished with, by result: delivered, partial (some samples lost), lost.",
		}, []string{"output", "result"}),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tandem_encoder_lost_samples_total",
			Help: "Samples an output gave up, by reason (queue_full, rejected, unconfirmed: refused after the receiver may have stored part, unavailable, shutdown, encode_failed).",
		}, []string{"output", "reason"}),
		delivered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tandem_encoder_delivered_samples_total",
			Help: "Samples an output delivered (the receiver took them, or the file was written).",
		}, []string{"output"}),
		rejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tandem_encoder_rejected_batches_total", Help: "Batches the aggregator rejected as inconsistent.",
		}),
	}
	p.metrics.unacked = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tandem_encoder_unacknowledged_flushes",
		Help: "Flushes cut but not yet delivered (or given up) by every output.",
	}, func() float64 { p.mu.Lock(); defer p.mu.Unlock(); return float64(len(p.tickets)) })
	var err error
	if p.agg, err = aggregate.NewAggregator(cfg.Aggregator, reg); err != nil {
		return nil, fmt.Errorf("create aggregator: %w", err)
	}
	if err := prom.Register(reg, "pipeline", p.metrics.flushes, p.metrics.lost, p.metrics.delivered, p.metrics.rejected, p.metrics.unacked); err != nil {
		return nil, err
	}
	if p.tracker, err = ingest.NewTracker(p, logger.With("component", "ingest"), reg); err != nil {
		return nil, fmt.Errorf("create tracker: %w", err)
	}
	return p, nil
}

// Tracker returns the ingest tracker that feeds the pipeline: serve a
// connection or a dump with it.
func (p *Pipeline) Tracker() *ingest.Tracker { return p.tracker }

// Aggregator returns the pipeline's aggregator (for its statistics).
func (p *Pipeline) Aggregator() *aggregate.Aggregator { return p.agg }

// Outputs returns the outputs, in the order given.
func (p *Pipeline) Outputs() []*output.Output { return p.outputs }

// Batch implements ingest.Sink.
func (p *Pipeline) Batch(s *ingest.Session, b *schema.Batch) {
	if p.cfg.TimeShift != 0 {
		for i := range b.Samples {
			b.Samples[i].TimestampUnixNano += int64(p.cfg.TimeShift)
		}
	}
	if p.cfg.StreamWindow > 0 && len(b.Samples) > 0 {
		first := b.Samples[0].TimestampUnixNano
		if p.windowStart == 0 {
			p.windowStart = first
		} else if first-p.windowStart >= int64(p.cfg.StreamWindow) {
			p.deliver(p.agg.Flush(time.Unix(0, first)), nil)
			p.windowStart = first
		}
		for i := range b.Samples {
			p.lastTS = max(p.lastTS, b.Samples[i].TimestampUnixNano)
		}
	}
	if err := p.agg.Add(&s.Hello, b); err != nil {
		p.metrics.rejected.Inc()
		p.mu.Lock()
		p.rejectedBatches++
		p.rejectedSamples += len(b.Samples)
		p.mu.Unlock()
		p.logger.Warn("rejected batch", "node", s.Hello.NodeName, "sequence", b.Sequence, "samples", len(b.Samples), "err", err)
		return
	}
	p.mu.Lock()
	p.produced += len(b.Samples)
	p.mu.Unlock()
}

// Loss implements ingest.Sink; the tracker already counted and logged it.
func (p *Pipeline) Loss(*ingest.Session, *schema.LossReport) {}

// Executable implements ingest.Sink.
func (p *Pipeline) Executable(_ *ingest.Session, n *schema.ExecutableNotice, f *os.File) {
	if p.execs != nil {
		p.execs.Submit(n, f)
	} else if f != nil {
		_ = f.Close()
	}
	// After the symbolizer has it: frames flushed before it arrived are
	// named from the next flush on. And full paths for pprof mappings.
	p.agg.NoteExecutable(n)
}

// Flush cuts the current interval, ending at now, and hands it to every
// output. The sequences it covers are acknowledged to the samplers once
// every output has delivered or given up this flush and every earlier one.
func (p *Pipeline) Flush(now time.Time) {
	var f *aggregate.Flush
	seqs := p.tracker.Cut(func() { f = p.agg.Flush(now) })
	p.deliver(f, seqs)
}

// FlushStreamEnd cuts the last stream-time window, ending at the last
// sample's timestamp (replay): a replayed dump's profiles claim the time
// they were recorded, not the time they were replayed.
func (p *Pipeline) FlushStreamEnd() {
	end := time.Now()
	if p.lastTS > 0 {
		end = time.Unix(0, p.lastTS)
	}
	p.deliver(p.agg.Flush(end), nil)
}

func (p *Pipeline) deliver(f *aggregate.Flush, seqs map[[16]byte]uint64) {
	if f.DroppedLinks > 0 {
		// Counted by the aggregator (links_dropped_samples_total).
		p.logger.Warn("trace links left out: the flush holds the most distinct links allowed (--max-links-per-flush); the samples are kept without them",
			"samples", f.DroppedLinks, "links", len(f.Links)-1)
	}
	t := &ticket{seqs: seqs, flush: f, pending: 1}
	if !f.Empty() {
		t.pending += len(p.outputs)
	}
	p.mu.Lock()
	p.tickets = append(p.tickets, t)
	if p.idle == nil {
		p.idle = make(chan struct{})
	}
	p.mu.Unlock()
	if !f.Empty() {
		for i, o := range p.outputs {
			o.Submit(f, func(res export.Result) { p.outputDone(t, i, res) })
		}
	}
	p.finishOne(t)
}

func (p *Pipeline) outputDone(t *ticket, i int, res export.Result) {
	name := p.outputs[i].Name()
	result := "delivered"
	switch {
	case res.Delivered == 0 && len(res.Lost) > 0:
		result = "lost"
	case len(res.Lost) > 0:
		result = "partial"
	}
	p.metrics.flushes.WithLabelValues(name, result).Inc()
	if res.Delivered > 0 {
		p.metrics.delivered.WithLabelValues(name).Add(float64(res.Delivered))
	}
	for reason, n := range res.Lost {
		p.metrics.lost.WithLabelValues(name, reason).Add(float64(n))
	}
	if lost := res.LostSamples(); lost > 0 {
		p.logger.Warn("samples lost", "output", name, "samples", lost, "reasons", fmt.Sprint(res.Lost), "err", res.Err)
	}
	p.mu.Lock()
	st := &p.stats[i]
	st.Delivered += res.Delivered
	for reason, n := range res.Lost {
		if st.Lost == nil {
			st.Lost = map[string]int{}
		}
		st.Lost[reason] += n
		if reason == export.ReasonShutdown {
			t.shutdown = true
		}
	}
	if res.Err != nil {
		st.LastErr = res.Err
	}
	p.mu.Unlock()
	p.finishOne(t)
}

// finishOne counts one party done with t; the last releases the flush and
// acknowledges every finished flush at the front of the line.
func (p *Pipeline) finishOne(t *ticket) {
	p.mu.Lock()
	t.pending--
	if t.pending > 0 {
		p.mu.Unlock()
		return
	}
	ack := map[[16]byte]uint64{}
	n := 0
	for ; n < len(p.tickets) && p.tickets[n].pending == 0; n++ {
		d := p.tickets[n]
		if d.shutdown {
			// Given up at shutdown: the sampler keeps it and resends it to
			// the next encoder.
			p.halted = true
		}
		if !p.halted {
			maps.Copy(ack, d.seqs) // later flushes hold later sequences
		}
	}
	p.tickets = slices.Delete(p.tickets, 0, n)
	if len(p.tickets) == 0 && p.idle != nil {
		close(p.idle)
		p.idle = nil
	}
	p.mu.Unlock()
	p.agg.Release(t.flush)
	if len(ack) > 0 {
		p.tracker.Ack(ack, SessionIdle)
	}
}

// WaitIdle waits until every flush cut so far is done with (delivered or
// given up by every output, and acknowledged), or ctx ends.
func (p *Pipeline) WaitIdle(ctx context.Context) error {
	p.mu.Lock()
	idle := p.idle
	p.mu.Unlock()
	if idle == nil {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Ready returns nil while every output works, and otherwise an error
// naming each failing output and why.
func (p *Pipeline) Ready() error {
	var errs []error
	for _, o := range p.outputs {
		if err := o.Ready(); err != nil {
			errs = append(errs, fmt.Errorf("output %s: %w", o.Name(), err))
		}
	}
	return errors.Join(errs...)
}

// Summary returns what became of the samples sent to each output.
func (p *Pipeline) Summary() []OutputSummary {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]OutputSummary, len(p.stats))
	for i, s := range p.stats {
		s.Lost = maps.Clone(s.Lost)
		out[i] = s
	}
	return out
}

// Rejected returns the batches, and their samples, the aggregator refused.
func (p *Pipeline) Rejected() (batches, samples int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rejectedBatches, p.rejectedSamples
}

// Produced returns the samples the aggregator took: what every output was
// sent.
func (p *Pipeline) Produced() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.produced
}

// Close waits for every output to deliver what it holds (bounded by ctx;
// past it the rest is given up, ReasonShutdown, and not acknowledged) and
// closes the outputs.
func (p *Pipeline) Close(ctx context.Context) error {
	errs := make([]error, len(p.outputs))
	var wg sync.WaitGroup
	for i, o := range p.outputs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := o.Close(ctx); err != nil {
				errs[i] = fmt.Errorf("close output %s: %w", o.Name(), err)
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
