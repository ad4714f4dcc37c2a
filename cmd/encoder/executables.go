package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tandem-profiler/tandem/debuginfo"
	"github.com/tandem-profiler/tandem/encoder/executables"
	"github.com/tandem-profiler/tandem/encoder/export"
	"github.com/tandem-profiler/tandem/encoder/symbolize"
)

// newExecutables returns the router serve and replay use: to sym (nil: no
// native symbolization) and to the symbol uploader the flags configure.
func newExecutables(o *outputFlags, sym *symbolize.Symbolizer, logger *slog.Logger, reg prometheus.Registerer) (*executables.Router, error) {
	deps := executables.Deps{Symbolizer: sym, Logger: logger, Registerer: reg}
	out := o.symbolOutput()
	address, off := o.debuginfo.target(out)
	if address == "" {
		logger.Info("symbol upload off", "reason", off)
		return executables.New(deps)
	}
	cfg := out.Remote // the remote store's TLS, token and headers, to another host
	cfg.Address = address
	conn, err := export.Dial(cfg, nil)
	if err != nil {
		return nil, fmt.Errorf("dial --debuginfo-address %s: %w", address, err)
	}
	up, err := debuginfo.New(o.debuginfo.upload, conn, logger.With("component", "debuginfo"), reg)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("start symbol upload: %w", err)
	}
	deps.Uploader, deps.UploaderConn = up, conn
	r, err := executables.New(deps)
	if err != nil {
		_ = up.Close(context.Background())
		conn.Close()
		return nil, err
	}
	logger.Info("uploading symbols", "address", address, "strip", o.debuginfo.upload.Strip,
		"queue_size", o.debuginfo.upload.QueueSize, "max_parallel", o.debuginfo.upload.MaxParallel)
	return r, nil
}
