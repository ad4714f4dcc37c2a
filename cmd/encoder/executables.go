package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"

	"github.com/tandem-profiler/tandem/debuginfo"
	"github.com/tandem-profiler/tandem/encoder/export"
	"github.com/tandem-profiler/tandem/encoder/symbolize"
	"github.com/tandem-profiler/tandem/internal/prom"
	"github.com/tandem-profiler/tandem/schema"
)

// executables routes the executables the sampler passes over: a duplicate
// of each descriptor to the symbolizer when native frames are named in the
// encoder, and the descriptor to the symbol uploader when upload is on;
// otherwise descriptors are closed at once. Notices without a descriptor
// (every notice in a dump) are counted: their executables can be neither
// uploaded nor read.
type executables struct {
	sym      *symbolize.Symbolizer // nil: no native symbolization
	uploader *debuginfo.Uploader   // nil: upload off
	conn     *grpc.ClientConn
	noFD     prometheus.Counter
	unused   prometheus.Counter
	noFDSeen atomic.Int64
	logger   *slog.Logger
	dupErrs  atomic.Int64
	reopened atomic.Int64 // executables of descriptor-less notices opened by path for the symbolizer
}

// newExecutables returns the router serve and replay use: to sym (nil: no
// native symbolization) and to the symbol uploader the flags configure.
func newExecutables(o *outputFlags, sym *symbolize.Symbolizer, logger *slog.Logger, reg prometheus.Registerer) (*executables, error) {
	e, err := newRouter(sym, logger, reg)
	if err != nil {
		return nil, err
	}
	out := o.symbolOutput()
	address, off := o.debuginfo.target(out)
	if address == "" {
		logger.Info("symbol upload off", "reason", off)
		return e, nil
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
	e.uploader, e.conn = up, conn
	logger.Info("uploading symbols", "address", address, "strip", o.debuginfo.upload.Strip,
		"queue_size", o.debuginfo.upload.QueueSize, "max_parallel", o.debuginfo.upload.MaxParallel)
	return e, nil
}

// newRouter returns a router to sym alone (nil: descriptors are closed);
// newExecutables adds the uploader. reg may be nil.
func newRouter(sym *symbolize.Symbolizer, logger *slog.Logger, reg prometheus.Registerer) (*executables, error) {
	e := &executables{
		sym:    sym,
		logger: logger,
		noFD: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tandem_encoder_executable_notices_without_descriptor_total",
			Help: "Executable notices that arrived without a descriptor (dumps, or the sampler could not open the file): not uploaded.",
		}),
		unused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tandem_encoder_executables_not_uploaded_total",
			Help: "Executable descriptors closed unused because symbol upload is off.",
		}),
	}
	if err := prom.Register(reg, "executable", e.noFD, e.unused); err != nil {
		return nil, err
	}
	return e, nil
}

// Submit takes ownership of f (which may be nil).
func (e *executables) Submit(n *schema.ExecutableNotice, f *os.File) {
	if f == nil && e.sym != nil {
		// A dump (or a file the sampler could not open): on the machine
		// that recorded it the executable is usually still there.
		if g, err := symbolize.Reopen(n); err == nil {
			e.reopened.Add(1)
			e.sym.Add(n, g)
		}
	}
	if f != nil && e.sym != nil {
		// The symbolizer keeps its own descriptor: the uploader closes
		// f when its upload is done.
		if dup, err := dupFile(f); err != nil {
			if e.dupErrs.Add(1) == 1 {
				e.logger.Warn("cannot duplicate an executable descriptor; its native frames stay unnamed", "path", n.Path, "err", err)
			}
		} else {
			e.sym.Add(n, dup)
		}
	}
	switch {
	case f == nil:
		e.noFD.Inc()
		e.noFDSeen.Add(1)
	case e.uploader != nil:
		e.uploader.Submit(n, f)
	default:
		f.Close()
		e.unused.Inc()
	}
}

// reopenedByPath is how many descriptor-less notices the symbolizer could
// read by their path (the same file id on this machine).
func (e *executables) reopenedByPath() int64 { return e.reopened.Load() }

// withoutDescriptor is how many notices came without a descriptor.
func (e *executables) withoutDescriptor() int64 { return e.noFDSeen.Load() }

// close stops the uploader (running uploads get until ctx ends) and closes
// every descriptor it still holds.
func (e *executables) close(ctx context.Context) error {
	if e.sym != nil {
		e.sym.Close()
	}
	if e.uploader == nil {
		return nil
	}
	err := e.uploader.Close(ctx)
	e.conn.Close()
	return err
}

// dupFile duplicates f's descriptor (close-on-exec).
func dupFile(f *os.File) (*os.File, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	var nfd int
	var dupErr error
	if err := rc.Control(func(fd uintptr) { nfd, dupErr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return nil, err
	}
	if dupErr != nil {
		return nil, fmt.Errorf("dup %s: %w", f.Name(), dupErr)
	}
	return os.NewFile(uintptr(nfd), f.Name()), nil
}
