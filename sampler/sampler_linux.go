package sampler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/metric/noop"

	"go.opentelemetry.io/ebpf-profiler/libpf"
	profilerlog "go.opentelemetry.io/ebpf-profiler/log"
	"go.opentelemetry.io/ebpf-profiler/metrics"
	"go.opentelemetry.io/ebpf-profiler/times"
	"go.opentelemetry.io/ebpf-profiler/tracer"
	tracertypes "go.opentelemetry.io/ebpf-profiler/tracer/types"

	"github.com/tandem-profiler/tandem/internal/counters"
	"github.com/tandem-profiler/tandem/schema"
)

// realtimeSyncInterval re-reads the boot-time offset of trace timestamps
// (the profiler's -clock-sync-interval default).
const realtimeSyncInterval = 3 * time.Minute

// quietPeriod: after the tracer's context is cancelled, its ring-buffer
// poller may still send up to two rounds of traces on the unbuffered
// channel; the consumer keeps receiving until nothing came for this long.
const quietPeriod = 600 * time.Millisecond

// metricsStart starts the profiler's process-global metrics once, with a
// no-op meter (without it every metric update logs a warning).
var metricsStart = sync.OnceFunc(func() { metrics.Start(noop.Meter{}) })

// Sampler runs the tracer and streams what it reports to a Sink.
type Sampler struct {
	cfg    Config
	sink   Sink
	logger *slog.Logger // component=sampler
	root   *slog.Logger
	m      *samplerMetrics
	hello  schema.Hello

	queue   *dropQueue[traceEntry]
	batcher *batcher
	rep     *traceReporter

	started atomic.Bool
	ready   chan struct{} // closed once the tracer samples
}

// New validates cfg and prepares a sampler; it touches neither the kernel
// nor the sink. The sampler scopes logger with a component attribute; its
// counters are registered in set as tandem_sampler_* (set may be nil: no
// metrics registered).
func New(cfg Config, sink Sink, logger *slog.Logger, set *counters.Set) (*Sampler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid sampler config: %w", err)
	}
	if sink == nil {
		return nil, errors.New("sampler needs a sink")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	hello, err := newHello(&cfg)
	if err != nil {
		return nil, err
	}
	m, err := newSamplerMetrics(set)
	if err != nil {
		return nil, fmt.Errorf("new sampler: %w", err)
	}
	s := &Sampler{
		cfg:    cfg,
		sink:   sink,
		logger: logger.With("component", "sampler"),
		root:   logger,
		m:      m,
		hello:  hello,
		ready:  make(chan struct{}),
		queue:  newDropQueue[traceEntry](cfg.QueueBytes, cfg.BatchMaxSamples),
	}
	s.batcher = newBatcher(&s.cfg, s.queue, sink, logger.With("component", "batcher"), s.m)
	s.rep = &traceReporter{queue: s.queue, m: s.m, ownPID: uint32(os.Getpid())}
	if !cfg.KeepEncoderSamples {
		s.batcher.isEncoder = sink.IsEncoder
	}
	if cfg.SendExecutables {
		adm := newAdmission(cfg.ExecutableRate, cfg.ExecutableBurst, cfg.ExecutableMaxTotal, time.Now)
		s.rep.exec = newExecutableSender(sink, adm, cfg.ExecutableParkLimit, openWorkers, s.m, logger.With("component", "executables"))
		s.batcher.onCycle = s.rep.exec.flushParked
		s.batcher.droppedDescriptors = s.rep.exec.dropped.Load
	}
	return s, nil
}

func newHello(cfg *Config) (schema.Hello, error) {
	release, err := kernelRelease()
	if err != nil {
		return schema.Hello{}, err
	}
	h := baseHello(cfg)
	h.KernelRelease = release
	h.BootID = readBootID()
	return h, nil
}

// Hello returns the Hello the sampler sends first.
func (s *Sampler) Hello() schema.Hello { return s.hello }

// LastSequence returns the sequence number of the last batch or loss
// report handed to the sink (0: none yet). Use it for the Goodbye.
func (s *Sampler) LastSequence() uint64 { return s.batcher.lastSeq.Load() }

// offCPUThreshold scales a probability to the profiler's uint32 form.
func offCPUThreshold(p float64) uint32 {
	return uint32(p * float64(math.MaxUint32))
}

// intervals implements tracer.Intervals from the Config.
type intervals struct{ cfg *Config }

func (i intervals) MonitorInterval() time.Duration       { return i.cfg.MonitorInterval }
func (i intervals) TracePollInterval() time.Duration     { return i.cfg.TracePollInterval }
func (i intervals) PIDCleanupInterval() time.Duration    { return i.cfg.PIDCleanupInterval }
func (i intervals) ExecutableUnloadDelay() time.Duration { return i.cfg.ExecutableUnloadDelay }

var _ tracer.Intervals = intervals{}

// Run checks the host, loads the tracer and streams until ctx is cancelled
// or the tracer fails (ErrTracerFailed). Either way it then stops the
// tracer and flushes what is queued to the sink, within
// Config.ShutdownTimeout, before returning. A cancelled ctx is a clean stop
// and returns nil. Run may be called once.
func (s *Sampler) Run(ctx context.Context) error {
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("sampler already started")
	}
	if err := checkHost(&s.cfg, s.logger); err != nil {
		return err
	}
	helloPayload, err := schema.EncodeHello(&s.hello, nil)
	if err != nil {
		return fmt.Errorf("encode hello: %w", err)
	}
	s.sink.SetHello(helloPayload)

	profilerlog.SetLogger(*slog.New(newUpstreamHandler(s.root.With("component", "tracer").Handler(), s.m.benignLogs)))
	metricsStart()

	// The tracer's goroutines live in their own context so that Run decides
	// the order of the shutdown.
	tctx, stopTracer := context.WithCancel(context.Background())
	defer stopTracer()

	stopBatcher := make(chan struct{})
	batcherDone := make(chan struct{})
	go func() {
		defer close(batcherDone)
		s.batcher.run(stopBatcher)
	}()
	flush := func() error {
		close(stopBatcher)
		select {
		case <-batcherDone:
			return nil
		case <-time.After(s.cfg.ShutdownTimeout):
			return errors.New("flush the queue: timed out")
		}
	}

	trc, traceCh, err := s.startTracer(ctx, tctx)
	if err != nil {
		stopTracer()
		err = errors.Join(err, flush())
		if s.rep.exec != nil {
			s.rep.exec.close()
		}
		return err
	}

	close(s.ready)
	runErr := s.consume(ctx, trc, traceCh)

	// Stop: cancel the tracer's goroutines, keep handling what the poller
	// still sends, close the tracer, then flush the queue.
	stopTracer()
	s.drain(trc, traceCh)
	trc.Close()
	err = flush()
	if s.rep.exec != nil {
		s.rep.exec.close()
	}
	return errors.Join(runErr, err)
}

// Ready is closed once Run has loaded the tracer and sampling has begun
// (perf events enabled, the ring buffer polled): the moment to tell a
// supervisor the service is up (sd_notify READY=1). It stays open when
// Run fails before that.
func (s *Sampler) Ready() <-chan struct{} { return s.ready }

// startTracer is the profiler's start-up sequence (what its controller
// does), through the public API. The tracer's goroutines live in ctx;
// runCtx (Run's) stops retries of the load.
func (s *Sampler) startTracer(runCtx, ctx context.Context) (*tracer.Tracer, chan *libpf.EbpfTrace, error) {
	times.StartRealtimeSync(ctx, realtimeSyncInterval)

	included, err := tracertypes.Parse(joinComma(s.cfg.TracerNames()))
	if err != nil {
		return nil, nil, fmt.Errorf("parse tracers: %w", err)
	}
	envVars := libpf.Set[string]{}
	for _, e := range s.cfg.IncludeEnvVars {
		envVars[e] = libpf.Void{}
	}
	probThreshold := s.cfg.ProbabilisticThreshold
	var share spanMapShare
	if s.cfg.OBIProcessCtx {
		if share, err = prepareSpanMapShare(s.cfg.BPFFSRoot); err != nil {
			return nil, nil, err
		}
	}

	start := time.Now()
	tcfg := &tracer.Config{
		TraceReporter:          s.rep,
		ExecutableReporter:     s.rep,
		Intervals:              intervals{&s.cfg},
		IncludeTracers:         included,
		SamplesPerSecond:       s.cfg.SamplesPerSecond,
		MapScaleFactor:         s.cfg.MapScaleFactor,
		FilterErrorFrames:      !s.cfg.SendErrorFrames,
		FilterIdleFrames:       true,
		KernelVersionCheck:     true,
		BPFVerifierLogLevel:    s.cfg.BPFVerifierLogLevel,
		ProbabilisticInterval:  s.cfg.ProbabilisticInterval,
		ProbabilisticThreshold: probThreshold,
		OffCPUThreshold:        offCPUThreshold(s.cfg.OffCPUThreshold),
		IncludeEnvVars:         envVars,
		BPFFSRoot:              s.cfg.BPFFSRoot,
		OBIProcessCtx:          s.cfg.OBIProcessCtx,
	}
	trc, err := loadTracer(runCtx, func() (*tracer.Tracer, error) { return tracer.NewTracer(ctx, tcfg) }, s.logger, s.m)
	if err != nil {
		return nil, nil, err
	}
	if s.cfg.OBIProcessCtx {
		if err := share.checkPinned(); err != nil {
			trc.Close()
			return nil, nil, err
		}
		s.logger.Info("span map shared with OBI", "path", share.path, "pinned_before", share.existed)
	}
	loadTime := time.Since(start)
	s.m.tracerLoadSeconds.Set(loadTime.Seconds())
	s.logger.Info("eBPF tracer loaded", "duration", loadTime.Round(time.Millisecond),
		"tracers", included.String(), "frequency_hz", s.cfg.SamplesPerSecond)

	fail := func(format string, err error) (*tracer.Tracer, chan *libpf.EbpfTrace, error) {
		trc.Close()
		return nil, nil, fmt.Errorf(format, err)
	}
	trc.StartPIDEventProcessor(ctx)
	if err := trc.AttachTracer(); err != nil {
		return fail("attach tracer to perf events: %w", err)
	}
	if s.cfg.OffCPUThreshold > 0 {
		if err := trc.StartOffCPUProfiling(); err != nil {
			return fail("start off-CPU profiling: %w", err)
		}
	}
	if probThreshold < tracer.ProbabilisticThresholdMax {
		trc.StartProbabilisticProfiling(ctx)
	} else if err := trc.EnableProfiling(); err != nil {
		return fail("enable perf events: %w", err)
	}
	if err := trc.AttachSchedMonitor(); err != nil {
		return fail("attach scheduler monitor: %w", err)
	}
	traceCh := make(chan *libpf.EbpfTrace)
	if err := trc.StartMapMonitors(ctx, traceCh); err != nil {
		return fail("start map monitors: %w", err)
	}
	s.logger.Info("sampling", "startup", time.Since(start).Round(time.Millisecond))
	return trc, traceCh, nil
}

// consume hands every trace to the tracer's HandleTrace (which symbolizes
// and calls the reporter) until ctx is done or the tracer fails.
func (s *Sampler) consume(ctx context.Context, trc *tracer.Tracer, traceCh <-chan *libpf.EbpfTrace) error {
	for {
		select {
		case t := <-traceCh:
			if t != nil {
				trc.HandleTrace(t)
			}
		case <-trc.Done():
			return ErrTracerFailed
		case <-ctx.Done():
			return nil
		}
	}
}

// drain keeps handling traces after the tracer's context was cancelled
// until the poller has gone quiet (it does not select on its context while
// sending), bounded by the shutdown timeout.
func (s *Sampler) drain(trc *tracer.Tracer, traceCh <-chan *libpf.EbpfTrace) {
	deadline := time.After(s.cfg.ShutdownTimeout / 2)
	quiet := time.NewTimer(quietPeriod)
	defer quiet.Stop()
	for {
		select {
		case t := <-traceCh:
			if t != nil {
				trc.HandleTrace(t)
			}
			quiet.Reset(quietPeriod)
		case <-quiet.C:
			return
		case <-deadline:
			return
		}
	}
}
