package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"

	"github.com/tandem-profiler/tandem/confine"
	"github.com/tandem-profiler/tandem/internal/cli"
	"github.com/tandem-profiler/tandem/internal/counters"
	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/sampler"
	"github.com/tandem-profiler/tandem/schema"
)

// run wires the sink (IPC client and/or dump) to a sampler and runs it until
// SIGINT/SIGTERM or a tracer failure, then shuts down in order: the
// sampler stops the tracer and flushes its queue, the goodbye goes to the
// dump and the encoder, the client delivers what it holds within
// --shutdown-timeout.
func run(ctx context.Context, o *options, logger *slog.Logger, set *counters.Set) error {
	ctx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	ctx, stopSignals := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stopSignals()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go func() {
		for {
			select {
			case <-hup:
				logger.Info("SIGHUP ignored: the sampler has no configuration to reload")
			case <-ctx.Done():
				return
			}
		}
	}()

	logger.Debug("effective configuration", "sampler", fmt.Sprintf("%+v", o.cfg),
		"socket", o.socket, "encoder_uids", o.encoderUIDs, "record", o.record,
		"no_encoder", o.noEncoder, "max_buffer_bytes", o.maxBufferBytes)

	sink := &streamSink{logger: logger.With("component", "sink")}
	if o.record != "" {
		dump, err := ipc.CreateDump(o.record)
		if err != nil {
			return err
		}
		sink.dump = dump
		logger.Info("recording the stream", "dump", o.record)
	}

	var clientWG sync.WaitGroup
	clientCtx, cancelClient := context.WithCancel(context.Background())
	defer cancelClient()
	if !o.noEncoder {
		peers, err := o.peerUIDs()
		if err != nil {
			return cli.Usage(err)
		}
		if o.socketDirCheck {
			// Checked again before every connection attempt; failing
			// here says at once what to fix.
			if err := ipc.CheckSocketDir(o.socket, peers); err != nil {
				return err
			}
		} else {
			logger.Warn("socket directory not checked (--socket-dir-check=false): whoever can write it can replace the socket", "socket", o.socket)
		}
		client, err := ipc.NewClient(ipc.ClientConfig{
			Path:            o.socket,
			PeerUIDs:        peers,
			MaxUnackedBytes: o.maxBufferBytes,
			TrustSocketDir:  !o.socketDirCheck,

			MaxRetainedExecutables:     o.maxHeldExecutables,
			MaxRetainedExecutableBytes: o.maxHeldExecutableBytes,
		}, logger, set)
		if err != nil {
			return fmt.Errorf("create IPC client: %w", err)
		}
		sink.client = client
		if o.statsInterval > 0 {
			clientWG.Go(func() { sendStats(clientCtx, client, set, o.statsInterval, logger) })
		}
		var once sync.Once
		sink.startClient = func([]byte) {
			once.Do(func() {
				clientWG.Go(func() {
					if err := client.Run(clientCtx); err != nil && !errors.Is(err, context.Canceled) {
						logger.Error("IPC client stopped", "err", err)
					}
				})
			})
		}
	}

	s, err := sampler.New(o.cfg, sink, logger, set)
	if err != nil {
		return cli.Usage(err)
	}
	h := s.Hello()
	logger.Info("starting", "version", h.SamplerVersion, "node", h.NodeName, "kernel", h.KernelRelease,
		"frequency_hz", h.SamplingFrequencyHz, "tracers", h.Tracers, "session", fmt.Sprintf("%x", h.SessionID),
		"socket", socketOrNone(o))

	metricsDone := make(chan struct{})
	if o.metricsLogInterval > 0 {
		go func() {
			defer close(metricsDone)
			t := time.NewTicker(o.metricsLogInterval)
			defer t.Stop()
			for {
				select {
				case <-t.C:
					logMetrics(logger, set, "metrics")
				case <-ctx.Done():
					return
				}
			}
		}()
	} else {
		close(metricsDone)
	}

	// Once the tracer samples, the sampler confines itself (start-up needs
	// more than the steady state), then tells systemd (Type=notify) and
	// anything else that passes NOTIFY_SOCKET that it is ready.
	readyDone := make(chan struct{})
	var confineErr error // set before readyDone closes
	go func() {
		defer close(readyDone)
		select {
		case <-s.Ready():
			if confineErr = confineSelf(o, logger); confineErr != nil {
				stopRun()
				return
			}
			if sent, err := daemon.SdNotify(false, daemon.SdNotifyReady); err != nil {
				logger.Warn("readiness not sent to the service manager", "err", err)
			} else if sent {
				logger.Debug("readiness sent to the service manager")
			}
		case <-ctx.Done():
		}
	}()

	runErr := s.Run(ctx)
	stopSignals()
	<-metricsDone
	<-readyDone
	runErr = errors.Join(confineErr, runErr)
	_, _ = daemon.SdNotify(false, daemon.SdNotifyStopping)

	reason := "shutdown"
	if runErr != nil {
		reason = "error: " + runErr.Error()
	}
	goodbye, err := schema.EncodeGoodbye(&schema.Goodbye{Reason: reason, LastSequence: s.LastSequence()}, nil)
	if err != nil {
		return errors.Join(runErr, fmt.Errorf("encode goodbye: %w", err))
	}
	closeCtx, cancel := context.WithTimeout(context.Background(), o.cfg.ShutdownTimeout)
	closeErr := sink.close(closeCtx, goodbye)
	cancel()
	cancelClient()
	clientWG.Wait()
	switch {
	case closeErr != nil:
		logger.Warn("stream not fully delivered", "err", closeErr)
	case runErr == nil:
		logger.Info("stopped", "last_sequence", s.LastSequence())
	}
	logMetrics(logger, set, "final metrics")
	return runErr
}

// confineSelf installs the sampler's confinement (package confine) on
// every thread, unless --confine=false.
func confineSelf(o *options, logger *slog.Logger) error {
	if !o.confine {
		logger.Warn("not confined (--confine=false): the root process keeps every capability it started with and any system call")
		return nil
	}
	// No writable paths: the sampler gets no Landlock domain (see
	// confine.Install).
	cfg := confine.Config{Role: confine.Sampler}
	rep, err := confine.Install(cfg)
	if err != nil {
		return fmt.Errorf("%w: the sampler does not run unconfined unless told to (--confine=false, for debugging)", err)
	}
	attrs := []any{"capabilities", rep.Capabilities.String(), "seccomp_filters", rep.SeccompFilters, "landlock_abi", rep.LandlockABI}
	if extra := rep.Bounding &^ rep.Capabilities; extra != 0 {
		attrs = append(attrs, "bounding_kept", extra.String())
	}
	logger.Info("confined", attrs...)
	return nil
}

func socketOrNone(o *options) string {
	if o.noEncoder {
		return "none"
	}
	return o.socket
}
