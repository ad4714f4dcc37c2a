package executables

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/tandem-profiler/tandem/debuginfo"
	"github.com/tandem-profiler/tandem/encoder/symbolize"
	"github.com/tandem-profiler/tandem/internal/prom"
	"github.com/tandem-profiler/tandem/schema"
)

// Deps are a Router's destinations and telemetry.
type Deps struct {
	// Symbolizer names native frames in the encoder; nil: it does not.
	Symbolizer *symbolize.Symbolizer
	// Uploader uploads symbols; nil: upload is off. UploaderConn, its
	// connection, is closed with it.
	Uploader     *debuginfo.Uploader
	UploaderConn io.Closer
	Logger       *slog.Logger
	// Registerer takes the Router's metrics; nil: none.
	Registerer prometheus.Registerer
}

// Router routes executables (see the package documentation). It is safe
// for concurrent use.
type Router struct {
	sym      *symbolize.Symbolizer
	uploader *debuginfo.Uploader
	conn     io.Closer
	logger   *slog.Logger
	noFD     prometheus.Counter
	unused   prometheus.Counter
	noFDSeen atomic.Int64
	dupErrs  atomic.Int64
	reopened atomic.Int64 // descriptor-less notices' executables opened by path for the symbolizer
}

// New returns a Router to d's destinations.
func New(d Deps) (*Router, error) {
	logger := d.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	r := &Router{
		sym:      d.Symbolizer,
		uploader: d.Uploader,
		conn:     d.UploaderConn,
		logger:   logger,
		noFD: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tandem_encoder_executable_notices_without_descriptor_total",
			Help: "Executable notices that arrived without a descriptor (dumps, or the sampler could not open the file): not uploaded.",
		}),
		unused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tandem_encoder_executables_not_uploaded_total",
			Help: "Executable descriptors closed unused because symbol upload is off.",
		}),
	}
	if err := prom.Register(d.Registerer, "executable", r.noFD, r.unused); err != nil {
		return nil, err
	}
	return r, nil
}

// Submit takes ownership of f (which may be nil).
func (r *Router) Submit(n *schema.ExecutableNotice, f *os.File) {
	if f == nil && r.sym != nil {
		// A dump (or a file the sampler could not open): on the machine
		// that recorded it the executable is usually still there.
		if g, err := symbolize.Reopen(n); err == nil {
			r.reopened.Add(1)
			r.sym.Add(n, g)
		}
	}
	if f != nil && r.sym != nil {
		// The symbolizer keeps its own descriptor: the uploader closes
		// f when its upload is done.
		if dup, err := dupFile(f); err != nil {
			if r.dupErrs.Add(1) == 1 {
				r.logger.Warn("cannot duplicate an executable descriptor; its native frames stay unnamed", "path", n.Path, "err", err)
			}
		} else {
			r.sym.Add(n, dup)
		}
	}
	switch {
	case f == nil:
		r.noFD.Inc()
		r.noFDSeen.Add(1)
	case r.uploader != nil:
		r.uploader.Submit(n, f)
	default:
		f.Close()
		r.unused.Inc()
	}
}

// ReopenedByPath is how many descriptor-less notices the symbolizer could
// read by their path (the same file id on this machine).
func (r *Router) ReopenedByPath() int64 { return r.reopened.Load() }

// WithoutDescriptor is how many notices came without a descriptor.
func (r *Router) WithoutDescriptor() int64 { return r.noFDSeen.Load() }

// Close closes the symbolizer, stops the uploader (running uploads get
// until ctx ends) and closes every descriptor it still holds, then its
// connection.
func (r *Router) Close(ctx context.Context) error {
	if r.sym != nil {
		r.sym.Close()
	}
	if r.uploader == nil {
		return nil
	}
	err := r.uploader.Close(ctx)
	if r.conn != nil {
		err = errors.Join(err, r.conn.Close())
	}
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
