package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"

	"github.com/tandem-profiler/tandem/encoder/export"
	"github.com/tandem-profiler/tandem/encoder/selflog"
	"github.com/tandem-profiler/tandem/internal/logging"
)

// Flags of the encoder's own logs.
const (
	flagOTLPLogging = "otlp-logging"
	flagNode        = "node"
)

// logShutdownTimeout bounds the last export of the encoder's own logs at
// exit.
const logShutdownTimeout = 5 * time.Second

// msgOTLPLogging is the first record --otlp-logging exports.
const msgOTLPLogging = "exporting the encoder's own logs over OTLP"

// loggingFlags are the output flags about the encoder's own logs.
type loggingFlags struct {
	otlp bool   // --otlp-logging
	node string // --node
}

func (l *loggingFlags) register(fs *pflag.FlagSet) {
	host, _ := os.Hostname()
	fs.BoolVar(&l.otlp, flagOTLPLogging, false,
		"also export the encoder's own logs (at --log-level) over OTLP/logs to --remote-store-address, with its TLS, token and headers")
	fs.StringVar(&l.node, flagNode, host, "node name: host.name of the logs --otlp-logging exports")
}

func (l *loggingFlags) validate(r *export.Config) error {
	if l.otlp && r.Address == "" {
		return fmt.Errorf("--%s sends the logs to the remote store: add --remote-store-address", flagOTLPLogging)
	}
	return nil
}

// newSelfLog builds --otlp-logging's provider. It is called nowhere else,
// and never without the flag: tests replace it to see that.
var newSelfLog = selflog.New

// startLogging returns the logger serve and replay use, and a function to
// call at exit. Without --otlp-logging that is logger itself and a no-op:
// no provider, exporter or bridge exists. With it, records at the local
// level also go to the remote store over conn, and stop flushes them
// (bounded by logShutdownTimeout) before the caller closes conn.
func startLogging(f *loggingFlags, r *export.Config, conn *grpc.ClientConn, logger *slog.Logger, reg prometheus.Registerer) (*slog.Logger, func(), error) {
	if !f.otlp {
		return logger, func() {}, nil
	}
	if conn == nil {
		return nil, nil, errors.New("--otlp-logging: no remote store connection")
	}
	cfg := selflog.DefaultConfig()
	cfg.HostName = f.node
	cfg.Compression = r.Compression
	logs, err := newSelfLog(cfg, conn, logger.With("component", "selflog"), reg)
	if err != nil {
		return nil, nil, fmt.Errorf("start OTLP logging: %w", err)
	}
	local := logger
	logger = logging.Tee(logger, logs.Handler())
	logger.Info(msgOTLPLogging, "address", r.Address, "node", f.node)
	return logger, func() {
		ctx, cancel := context.WithTimeout(context.Background(), logShutdownTimeout)
		defer cancel()
		if err := logs.Shutdown(ctx); err != nil {
			local.Warn("the last of the encoder's own logs may not have been exported", "err", err)
		}
	}, nil
}
