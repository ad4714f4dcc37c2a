package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/tandem-profiler/tandem/encoder/pipeline"
	"github.com/tandem-profiler/tandem/internal/buildinfo"
	"github.com/tandem-profiler/tandem/internal/cli"
	"github.com/tandem-profiler/tandem/internal/logging"
	"github.com/tandem-profiler/tandem/internal/prom"
	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/ipc/ipcserver"
)

// shutdownTimeout bounds the final flush and export at exit.
const shutdownTimeout = 10 * time.Second

// drainTimeout bounds the wait at exit for connected samplers to end their
// streams before the final flush: the sampler's own default
// --shutdown-timeout, within which a sampler stopped beside the encoder
// (a pod's containers get SIGTERM together) flushes its queue and says
// goodbye. With the export after it, within the chart's
// terminationGracePeriodSeconds (30).
const drainTimeout = 5 * time.Second

type serveFlags struct {
	out         outputFlags
	socket      string
	allowedUIDs []uint
	record      string
	httpAddress string
	kube        kubeFlags
}

func newServeCommand(opts *logOptions) *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "receive the sampler's stream on a Unix socket (or a systemd-activated one) and export it",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.out.validate(); err != nil {
				return err
			}
			if f.httpAddress != "" {
				if err := cli.CheckHostPort(f.httpAddress); err != nil {
					return cli.Usage(fmt.Errorf("--http-address: %w", err))
				}
			}
			logger, err := logging.New(os.Stderr, opts.level, opts.format)
			if err != nil {
				return cli.Usage(err)
			}
			routeClientGoLogs(logger)
			return serve(cmd.Context(), &f, logger, prometheus.NewRegistry())
		},
	}
	fs := cmd.Flags()
	f.out.register(fs)
	fs.StringVar(&f.socket, "socket", "/run/tandem/tandem.sock", "Unix socket to listen on (ignored under systemd socket activation)")
	fs.UintSliceVar(&f.allowedUIDs, "allowed-uid", []uint{0}, "uids a sampler may connect as (repeatable)")
	fs.StringVar(&f.record, "record", "", "also write every frame that arrives to this dump file")
	fs.StringVar(&f.httpAddress, "http-address", defaultHTTPAddress, "serve /metrics, /healthz and /readyz on this address; empty disables")
	f.kube.register(fs)
	return cmd
}

// registry is what serve registers every component's metrics with and
// serves on /metrics: a *prometheus.Registry, or a wrapper of one that also
// keeps what is registered (tools/reference's Recorder, for the metrics'
// reference page).
type registry interface {
	prometheus.Registerer
	prometheus.Gatherer
}

func serve(ctx context.Context, f *serveFlags, logger *slog.Logger, reg registry) error {
	if err := prom.Register(reg, "runtime", collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return err
	}

	conn, err := dialRemote(&f.out, reg)
	if err != nil {
		return err
	}
	if conn != nil {
		defer conn.Close()
	}
	logger, stopLogging, err := startLogging(&f.out.logging, &f.out.def.Remote, conn, logger, reg)
	if err != nil {
		return err
	}
	defer stopLogging() // before conn.Close: the last records go over conn

	uids := make([]uint32, len(f.allowedUIDs))
	for i, u := range f.allowedUIDs {
		uids[i] = uint32(u)
	}
	srvCfg := ipcserver.DefaultConfig()
	srvCfg.Path = f.socket
	srvCfg.AllowedUIDs = uids
	srv, err := ipcserver.Listen(srvCfg, logger.With("component", "ipc"), reg)
	if err != nil {
		return fmt.Errorf("listen for samplers: %w", err)
	}
	defer srv.Close()

	kcfg, err := f.kube.config(f.out.logging.node, f.out.parca.labelConfig.CacheTTL)
	if err != nil {
		return err
	}
	workloads, kubeWarning, stopKube, err := startKube(ctx, kcfg, logger, reg)
	if err != nil {
		return err
	}
	defer stopKube()
	pcfg := pipeline.DefaultConfig()
	pcfg.Aggregator.Workloads = workloads
	p, err := newPipeline(&f.out, conn, logger, reg, pcfg, nil)
	if err != nil {
		return err
	}
	var rec *ipc.Recorder
	if f.record != "" {
		w, err := ipc.CreateDump(f.record)
		if err != nil {
			return fmt.Errorf("--record: %w", err)
		}
		rec = ipc.NewRecorder(w, logger)
	}

	var files []string
	if f.record != "" {
		files = append(files, f.record)
	}
	if err := f.out.confineSelf(logger, []string{filepath.Dir(f.socket)}, files); err != nil {
		return err
	}

	if f.httpAddress != "" {
		stop, err := serveHTTP(f.httpAddress, reg, p.Ready, kubeWarning, logger)
		if err != nil {
			return err
		}
		defer stop()
	}

	logger.Info("tandem-encoder serving", "version", buildinfo.String(), "socket", srv.Addr().String(),
		"systemd_activated", srv.Activated(), "allowed_uids", uids, "profiling_duration", f.out.profilingDuration)
	_, _ = daemon.SdNotify(false, daemon.SdNotifyReady)

	// The watchdog is pinged from the flush loop: an encoder stuck in a
	// flush stops pinging and systemd restarts it.
	watchdog, stopWatchdog := watchdogTicker(logger)
	defer stopWatchdog()
	scfg := pipeline.ServeConfig{
		FlushEvery:      f.out.profilingDuration,
		ShutdownTimeout: shutdownTimeout,
		DrainTimeout:    drainTimeout,
		Close:           p.close,
		Tick:            watchdog,
		OnTick:          func() { _, _ = daemon.SdNotify(false, daemon.SdNotifyWatchdog) },
		Stopping:        func() { _, _ = daemon.SdNotify(false, daemon.SdNotifyStopping) },
		Logger:          logger,
	}
	if rec != nil {
		scfg.Tee = func(src ipc.FrameSource) ipc.FrameSource { return rec.Tee(src) }
	}
	err = pipeline.Serve(ctx, p.Pipeline, srv, scfg)
	if rec != nil {
		if rerr := rec.Close(); rerr != nil {
			err = errors.Join(err, fmt.Errorf("--record: %w", rerr))
		}
	}
	return err
}

// defaultHTTPAddress serves the encoder's own telemetry on loopback only.
const defaultHTTPAddress = "127.0.0.1:7071"

// watchdogTicker returns a channel that ticks at half the systemd watchdog
// interval (WATCHDOG_USEC, for this process), or a nil channel when no
// watchdog is set.
func watchdogTicker(logger *slog.Logger) (<-chan time.Time, func()) {
	interval, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		logger.Warn("systemd watchdog settings are invalid; not pinging", "err", err)
	}
	if err != nil || interval <= 0 {
		return nil, func() {}
	}
	t := time.NewTicker(interval / 2)
	logger.Info("pinging the systemd watchdog", "every", interval/2)
	return t.C, t.Stop
}

// serveHTTP serves /metrics, /healthz (the process answers) and /readyz
// (ready reports nil: see health.go; each line of a non-empty warning,
// such as a failing or forbidden Kubernetes API request, is a "warning:"
// line of a ready answer, never a reason to be not ready).
func serveHTTP(addr string, reg registry, ready func() error, warning func() string, logger *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, cli.Usage(fmt.Errorf("--http-address=%s: %w", addr, err))
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := ready(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		var b strings.Builder
		b.WriteString("ok\n")
		if msg := warning(); msg != "" {
			for line := range strings.Lines(msg) {
				b.WriteString("warning: " + strings.TrimSuffix(line, "\n") + "\n")
			}
		}
		_, _ = w.Write([]byte(b.String()))
	})
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("http server", "err", err)
		}
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
	}, nil
}
