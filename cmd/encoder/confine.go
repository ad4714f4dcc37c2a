package main

import (
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/tandem-profiler/tandem/confine"
)

// confineSelf confines the encoder (package confine) once its listeners,
// outputs and dumps are open: writes only to dirs (its output and scratch
// directories, the socket's) and files (dumps), and its seccomp filter,
// on every thread. Unless --confine=false.
func (o *outputFlags) confineSelf(logger *slog.Logger, dirs, files []string) error {
	if !o.confine {
		logger.Warn("not confined (--confine=false): the encoder may write anywhere its user can and make any system call")
		return nil
	}
	for _, c := range o.outputConfigs() {
		if c.Dir != "" {
			dirs = append(dirs, c.Dir)
		}
	}
	if _, off := o.debuginfo.target(o.symbolOutput()); off == "" && o.debuginfo.upload.Strip {
		dirs = append(dirs, o.debuginfo.upload.ScratchDir())
	}
	cfg := confine.Config{Role: confine.Encoder}
	for _, d := range dirs {
		abs, err := filepath.Abs(d)
		if err != nil {
			return fmt.Errorf("confine the encoder: %w", err)
		}
		cfg.WritableDirs = append(cfg.WritableDirs, abs)
	}
	for _, f := range files {
		abs, err := filepath.Abs(f)
		if err != nil {
			return fmt.Errorf("confine the encoder: %w", err)
		}
		cfg.WritableFiles = append(cfg.WritableFiles, abs)
	}
	rep, err := confine.Install(cfg)
	if err != nil {
		return fmt.Errorf("%w: the encoder does not run unconfined unless told to (--confine=false, for debugging)", err)
	}
	logger.Info("confined", "writable", append(cfg.WritableDirs, cfg.WritableFiles...),
		"seccomp_filters", rep.SeccompFilters, "landlock_abi", rep.LandlockABI)
	if rep.LandlockABI == 0 {
		logger.Warn("this kernel has no Landlock: the encoder's writes are not restricted to its outputs")
	}
	return nil
}
