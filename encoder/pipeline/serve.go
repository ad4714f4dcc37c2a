package pipeline

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/tandem-profiler/tandem/encoder/ingest"
	"github.com/tandem-profiler/tandem/ipc"
)

// Sampler is one sampler's connection (*ipcserver.Conn): its frames, the
// acknowledgements it is sent, its end.
type Sampler interface {
	ipc.FrameSource
	ingest.Acker
	Close() error
}

// Listener hands out sampler connections (*ipcserver.Server). Accept
// returns an error once ctx ends or the Listener is closed.
type Listener[C Sampler] interface {
	Accept(ctx context.Context) (C, error)
	Close() error
}

// ServeConfig says how Serve runs. It is plain data and functions.
type ServeConfig struct {
	// FlushEvery is the flush interval (--profiling-duration).
	FlushEvery time.Duration
	// ShutdownTimeout bounds the final flush's export at exit.
	ShutdownTimeout time.Duration
	// DrainTimeout bounds how long, once ctx ends, Serve goes on reading
	// the connected samplers before the final cut, waiting for each to
	// end its stream (its goodbye). A sampler stopped together with the
	// encoder (a pod's containers get SIGTERM at once) sends its last
	// batches after the signal: read before the cut they are delivered,
	// after it they would be lost with the sampler. Zero: no wait.
	DrainTimeout time.Duration
	// Close closes the pipeline and what must end with it (bounded by its
	// context); nil: Pipeline.Close.
	Close func(ctx context.Context) error
	// Tee, if set, wraps each connection's frames (serve --record).
	Tee func(ipc.FrameSource) ipc.FrameSource
	// Tick and OnTick: OnTick runs on the flush loop at every tick (the
	// systemd watchdog: an encoder stuck in a flush stops pinging).
	Tick   <-chan time.Time
	OnTick func()
	// Stopping, if set, is called once, when the shutdown starts.
	Stopping func()
	Logger   *slog.Logger
}

// Serve feeds p from every sampler srv accepts, cutting a flush every
// FlushEvery, until ctx ends. Then it shuts down so that nothing is lost
// and nothing is sent twice: it stops accepting, reads the connected
// samplers until each has ended its stream or DrainTimeout has passed,
// cuts a final flush and closes the pipeline (the outputs deliver it, or
// give it up and count it) while the samplers still connected get its
// acknowledgement; only then does it close the listener and the
// connections. Whatever arrives after the cut stays unacknowledged, and
// the samplers resend it to the next encoder. It returns the pipeline's
// close error.
func Serve[C Sampler](ctx context.Context, p *Pipeline, srv Listener[C], cfg ServeConfig) error {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	closePipeline := cfg.Close
	if closePipeline == nil {
		closePipeline = p.Close
	}
	var conns sync.WaitGroup
	connCtx, cancelConns := context.WithCancel(context.Background())
	defer cancelConns()
	acceptDone := make(chan struct{})
	go func() {
		defer close(acceptDone)
		for {
			c, err := srv.Accept(ctx)
			if err != nil {
				if ctx.Err() == nil && !errors.Is(err, ipc.ErrClosed) {
					logger.Error("accept", "err", err)
				}
				return
			}
			conns.Add(1)
			go func() {
				defer conns.Done()
				serveSampler(connCtx, p, c, cfg.Tee, logger)
			}()
		}
	}()

	ticker := time.NewTicker(cfg.FlushEvery)
	defer ticker.Stop()
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case now := <-ticker.C:
			p.Flush(now)
		case <-cfg.Tick:
			cfg.OnTick()
		}
	}

	logger.Info("shutting down: final flush")
	if cfg.Stopping != nil {
		cfg.Stopping()
	}
	<-acceptDone
	drain(&conns, cfg.DrainTimeout, logger)
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	p.Flush(time.Now())
	err := closePipeline(sctx)
	_ = srv.Close()
	cancelConns()
	conns.Wait()
	return err
}

// drain waits until every connection has ended or timeout has passed.
func drain(conns *sync.WaitGroup, timeout time.Duration, logger *slog.Logger) {
	if timeout <= 0 {
		return
	}
	ended := make(chan struct{})
	go func() {
		conns.Wait()
		close(ended)
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-ended:
	case <-t.C:
		// Not an error: a sampler that goes on running (only the encoder
		// restarts) resends what the final cut leaves unacknowledged.
		logger.Info("final flush: samplers still connected after the drain timeout; what they send later goes to the next encoder", "drain_timeout", timeout)
	}
}

// serveSampler feeds p from one connection until it ends or ctx does.
func serveSampler[C Sampler](ctx context.Context, p *Pipeline, c C, tee func(ipc.FrameSource) ipc.FrameSource, logger *slog.Logger) {
	defer c.Close()
	log := logger
	if peer, ok := any(c).(interface {
		PeerPID() int32
		PeerUID() uint32
	}); ok {
		log = logger.With("peer_pid", peer.PeerPID(), "peer_uid", peer.PeerUID())
	}
	log.Info("sampler connected")
	var src ipc.FrameSource = c
	if tee != nil {
		src = tee(c)
	}
	if err := p.Tracker().Serve(ctx, src, c); err != nil && ctx.Err() == nil {
		log.Warn("sampler stream ended", "err", err)
		return
	}
	log.Info("sampler disconnected")
}
