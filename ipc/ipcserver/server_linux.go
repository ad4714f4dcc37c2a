package ipcserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/activation"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/ipc/internal/sockopt"
)

// maxDescriptorsPerRead is how many descriptors one read's control buffer
// holds. The sampler sends one per message; the kernel closes any that do
// not fit and reports MSG_CTRUNC.
const maxDescriptorsPerRead = 16

// Server is the encoder's end of the socket: a listening Unix stream socket
// that admits only peers running as an allowed uid. Its methods are safe
// for concurrent use.
type Server struct {
	cfg    Config
	logger *slog.Logger
	m      *serverMetrics

	ln        *net.UnixListener
	activated bool
	bound     os.FileInfo // the socket file Listen created, removed by Close
	acceptSem chan struct{}

	mu     sync.Mutex
	conns  map[*Conn]struct{}
	closed bool

	rejectLog, truncLog logLimiter
}

// Listen starts the server. When the process was started by systemd socket
// activation (LISTEN_PID/LISTEN_FDS name this process), it uses the
// inherited listening socket and ignores cfg.Path; otherwise it binds
// cfg.Path, replacing a stale socket file but refusing to remove any other
// kind of file or a socket another process still listens on, and sets the
// file's mode. A nil logger discards; a nil registerer registers nothing.
func Listen(cfg Config, logger *slog.Logger, reg prometheus.Registerer) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("listen: invalid config: %w", err)
	}
	m, err := newServerMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("listen: register metrics: %w", err)
	}
	s := &Server{
		cfg:       cfg,
		logger:    orDiscard(logger).With("component", "ipc.server"),
		m:         m,
		acceptSem: make(chan struct{}, 1),
		conns:     make(map[*Conn]struct{}),
	}
	ln, err := activatedListener()
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	if ln != nil {
		s.ln, s.activated = ln, true
		s.logger.Info("using socket passed by systemd", "addr", ln.Addr().String())
		return s, nil
	}
	if cfg.Path == "" {
		return nil, errors.New("listen: no socket path configured and no socket passed by systemd (LISTEN_FDS)")
	}
	s.ln, s.bound, err = bindUnix(cfg.Path, cfg.Mode)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	s.logger.Info("listening", "path", cfg.Path, "mode", cfg.Mode.String(), "allowed_uids", cfg.AllowedUIDs)
	return s, nil
}

// activatedListener returns the listening socket passed by systemd, or nil
// when there is none.
func activatedListener() (*net.UnixListener, error) {
	files := activation.Files(true)
	if len(files) == 0 {
		return nil, nil
	}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	if len(files) != 1 {
		return nil, fmt.Errorf("use systemd socket: got %d descriptors (LISTEN_FDS), want 1", len(files))
	}
	f := files[0]
	typ, listening, err := sockopt.SocketType(f)
	if err != nil {
		return nil, fmt.Errorf("use systemd socket %s: %w", f.Name(), err)
	}
	if typ != unix.SOCK_STREAM || !listening {
		return nil, fmt.Errorf("use systemd socket %s: not a listening stream socket (use ListenStream= in the .socket unit)", f.Name())
	}
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("use systemd socket %s: %w", f.Name(), err)
	}
	ul, ok := ln.(*net.UnixListener)
	if !ok {
		ln.Close()
		return nil, fmt.Errorf("use systemd socket %s: %s is not a Unix socket", f.Name(), ln.Addr())
	}
	ul.SetUnlinkOnClose(false)
	return ul, nil
}

// bindUnix binds path, replacing a stale socket file.
func bindUnix(path string, mode fs.FileMode) (*net.UnixListener, os.FileInfo, error) {
	if err := removeStaleSocket(path); err != nil {
		return nil, nil, err
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, nil, bindError(path, err)
	}
	ln.SetUnlinkOnClose(false)
	fi, err := os.Lstat(path)
	if err == nil {
		err = os.Chmod(path, mode)
	}
	if err != nil {
		ln.Close()
		os.Remove(path)
		return nil, nil, fmt.Errorf("set mode of %s: %w", path, err)
	}
	return ln, fi, nil
}

// bindError says why a socket could not be created at path and what to
// do, naming the path once (net's own error repeats it).
func bindError(path string, err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		err = errno // without net's repetition of the address and the call
	}
	dir := filepath.Dir(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("bind %s: %w: the directory %s does not exist; create it (writable only by root and the encoder's user, e.g. install -d -m 0750 -o ENCODER_USER %s) or give --socket a path in an existing directory", path, err, dir, dir)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("bind %s: %w: the encoder's user cannot create files in %s; make the directory writable by it (owner or group), or give --socket a path in a directory it owns", path, err, dir)
	}
	return fmt.Errorf("bind %s: %w", path, err)
}

// removeStaleSocket removes a socket file nobody listens on. It refuses to
// remove anything else.
func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("check existing %s: %w", path, err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("bind %s: refusing to replace a file that is not a socket (mode %v)", path, fi.Mode())
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("bind %s: another process is listening on it", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("bind %s: check whether the existing socket is stale: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	return nil
}

// Addr returns the listening address.
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Activated reports whether the listening socket came from systemd.
func (s *Server) Activated() bool { return s.activated }

// Accept waits for the next connection from a peer running as an allowed
// uid and returns it. Peers with another uid are closed, logged and
// counted, and Accept goes on waiting. It returns an error wrapping
// ctx.Err() when ctx ends, and one wrapping ErrClosed after Close.
// Concurrent calls are served one at a time.
func (s *Server) Accept(ctx context.Context) (*Conn, error) {
	select {
	case s.acceptSem <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("accept: %w", ctx.Err())
	}
	defer func() { <-s.acceptSem }()

	fired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		s.ln.SetDeadline(time.Unix(1, 0))
		close(fired)
	})
	defer func() {
		if !stop() {
			<-fired
			s.ln.SetDeadline(time.Time{})
		}
	}()

	var delay time.Duration
	for {
		uc, err := s.ln.AcceptUnix()
		if err != nil {
			if ctx.Err() != nil {
				return nil, fmt.Errorf("accept: %w", ctx.Err())
			}
			if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) ||
				errors.Is(err, syscall.ENOBUFS) || errors.Is(err, syscall.ENOMEM) {
				// Out of resources: wait and retry, like net/http.
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				s.logger.Warn("accept failed, retrying", "err", err, "delay", delay)
				t := time.NewTimer(delay)
				select {
				case <-t.C:
				case <-ctx.Done():
					t.Stop()
					return nil, fmt.Errorf("accept: %w", ctx.Err())
				}
				continue
			}
			return nil, fmt.Errorf("accept: %w", err)
		}
		delay = 0
		c, err := s.admit(uc)
		if err != nil {
			return nil, err
		}
		if c != nil {
			return c, nil
		}
	}
}

// admit checks the peer's credentials and wraps an allowed connection.
func (s *Server) admit(uc *net.UnixConn) (*Conn, error) {
	cred, err := sockopt.PeerCred(uc)
	if err != nil {
		uc.Close()
		s.m.rejected.inc()
		s.rejectLog.do(func(suppressed uint64) {
			s.logger.Warn("rejected peer", "reason", "credentials unreadable", "err", err, "suppressed", suppressed)
		})
		return nil, nil
	}
	if !slices.Contains(s.cfg.AllowedUIDs, cred.Uid) {
		uc.Close()
		s.m.rejected.inc()
		s.rejectLog.do(func(suppressed uint64) {
			s.logger.Warn("rejected peer", "reason", "uid not allowed", "uid", cred.Uid, "pid", cred.Pid,
				"allowed_uids", s.cfg.AllowedUIDs, "flag", AllowedUIDsFlag, "suppressed", suppressed)
		})
		return nil, nil
	}
	c := &Conn{
		s:    s,
		uc:   uc,
		cred: *cred,
		oob:  make([]byte, unix.CmsgSpace(maxDescriptorsPerRead*4)),
	}
	c.r = ipc.NewSocketReader(connReader{c})
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		uc.Close()
		return nil, fmt.Errorf("accept: %w", ipc.ErrClosed)
	}
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	s.m.accepted.inc()
	s.m.active.Inc()
	s.logger.Info("accepted peer", "uid", cred.Uid, "pid", cred.Pid)
	return c, nil
}

func (s *Server) forget(c *Conn) {
	s.mu.Lock()
	_, ok := s.conns[c]
	delete(s.conns, c)
	s.mu.Unlock()
	if ok {
		s.m.active.Dec()
	}
}

// Stats returns a snapshot of the server's counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	active := len(s.conns)
	s.mu.Unlock()
	return Stats{
		Accepted:            s.m.accepted.load(),
		Rejected:            s.m.rejected.load(),
		Active:              active,
		Frames:              s.m.frames.total(),
		Bytes:               s.m.bytes.load(),
		UnknownFrames:       s.m.unknown.load(),
		DescriptorsReceived: s.m.fdsReceived.load(),
		DescriptorsDropped:  s.m.fdsDropped.load(),
		DescriptorsMissing:  s.m.fdsMissing.load(),
		Acks:                s.m.acks.load(),
	}
}

// Close stops listening, removes the socket file Listen created (unless
// another server has replaced it since), and closes every open Conn. A
// socket inherited from systemd stays with systemd. Accept then returns an
// error wrapping ErrClosed. Calling Close again returns nil.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	conns := make([]*Conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()

	var errs []error
	if err := s.ln.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close listener: %w", err))
	}
	if s.bound != nil {
		if fi, err := os.Lstat(s.cfg.Path); err == nil && os.SameFile(fi, s.bound) {
			if err := os.Remove(s.cfg.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove socket: %w", err))
			}
		}
	}
	for _, c := range conns {
		c.Close()
	}
	return errors.Join(errs...)
}

// Conn is one accepted connection from a sampler. Next must be called from
// one goroutine at a time; Ack and Close may be called concurrently with
// Next and with each other.
type Conn struct {
	s    *Server
	uc   *net.UnixConn
	r    *ipc.Reader
	cred unix.Ucred
	oob  []byte

	fdMu      sync.Mutex
	fds       []*os.File // received, not yet claimed, in arrival order
	fdsClosed bool

	// Reader progress already added to the server's counters.
	seenSkipped uint64
	seenOff     int64

	wmu sync.Mutex
	ack []byte

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

// connReader reads the socket, collecting descriptors passed with
// SCM_RIGHTS into the Conn's queue.
type connReader struct{ c *Conn }

func (r connReader) Read(p []byte) (int, error) {
	n, oobn, flags, _, err := r.c.uc.ReadMsgUnix(p, r.c.oob)
	if n < 0 {
		// A failed recvmsg (for example on a connection closed under
		// us) can report -1; io.Reader forbids negative counts.
		n = 0
	}
	if oobn > 0 {
		r.c.takeDescriptors(r.c.oob[:oobn])
	}
	if flags&unix.MSG_CTRUNC != 0 {
		r.c.s.truncLog.do(func(suppressed uint64) {
			r.c.s.logger.Warn("descriptors lost: control message truncated (descriptor limit reached?)",
				"pid", r.c.cred.Pid, "suppressed", suppressed)
		})
	}
	if n == 0 && err == nil && len(p) > 0 {
		// recvmsg returns 0 at the end of a stream; ReadMsgUnix does not
		// turn that into io.EOF.
		return 0, io.EOF
	}
	return n, err
}

func (c *Conn) takeDescriptors(oob []byte) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		c.s.logger.Warn("unparsable control message", "err", err)
		return
	}
	for i := range msgs {
		if msgs[i].Header.Level != unix.SOL_SOCKET || msgs[i].Header.Type != unix.SCM_RIGHTS {
			continue
		}
		fds, err := unix.ParseUnixRights(&msgs[i])
		if err != nil {
			c.s.logger.Warn("unparsable descriptors", "err", err)
			continue
		}
		for _, fd := range fds {
			c.s.m.fdsReceived.inc()
			c.fdMu.Lock()
			if c.fdsClosed || len(c.fds) >= c.s.cfg.MaxPendingDescriptors {
				c.fdMu.Unlock()
				unix.Close(fd)
				c.s.m.fdsDropped.inc()
				continue
			}
			c.fds = append(c.fds, os.NewFile(uintptr(fd), fmt.Sprintf("descriptor from pid %d", c.cred.Pid)))
			c.fdMu.Unlock()
		}
	}
}

func (c *Conn) popDescriptor() *os.File {
	c.fdMu.Lock()
	defer c.fdMu.Unlock()
	if len(c.fds) == 0 {
		return nil
	}
	f := c.fds[0]
	c.fds[0] = nil
	c.fds = c.fds[1:]
	return f
}

// Next returns the next frame of a known type from the sampler, skipping
// (and counting) frames of unknown types. A FrameExecutable whose header
// has FlagDescriptor set carries the next received descriptor in
// Frame.File; the caller owns it. Next returns io.EOF when the sampler
// closed the connection at a frame boundary, a *FrameError for a malformed
// stream, an error wrapping ErrProtocol for an ack (acks only flow to the
// sampler), and an error wrapping ErrClosed after Close. Frame.Payload is
// valid until the next call.
func (c *Conn) Next() (ipc.Frame, error) {
	if c.closed.Load() {
		return ipc.Frame{}, fmt.Errorf("read frame: %w", ipc.ErrClosed)
	}
	f, flags, err := c.r.NextWithFlags()
	if skipped, _ := c.r.SkippedFrames(); skipped != c.seenSkipped {
		c.s.m.unknown.add(skipped - c.seenSkipped)
		c.seenSkipped = skipped
	}
	if off := c.r.Offset(); off != c.seenOff {
		c.s.m.bytes.add(uint64(off - c.seenOff))
		c.seenOff = off
	}
	if err != nil {
		return ipc.Frame{}, err
	}
	c.s.m.frames.get(f.Type).inc()
	if f.Type == ipc.FrameAck {
		return ipc.Frame{}, c.r.Fail(fmt.Errorf("frame at byte %d: sampler sent an ack: %w", c.r.FrameOffset(), ipc.ErrProtocol))
	}
	if f.Type == ipc.FrameExecutable && flags&ipc.FlagDescriptor != 0 {
		f.File = c.popDescriptor()
		if f.File == nil {
			c.s.m.fdsMissing.inc()
		}
	}
	return f, nil
}

// Ack acknowledges every reliable frame up to and including seq. It may be
// called concurrently with Next.
func (c *Conn) Ack(seq uint64) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.ack = ipc.AppendAck(c.ack[:0], seq)
	if _, err := c.uc.Write(c.ack); err != nil {
		return fmt.Errorf("write ack %d: %w", seq, err)
	}
	c.s.m.acks.inc()
	return nil
}

// SetReadDeadline sets the deadline for Next. A deadline that expires
// while Next waits for a frame to start leaves the stream usable; one that
// expires inside a frame makes the error permanent.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.uc.SetReadDeadline(t) }

// PeerUID returns the sampler's uid (SO_PEERCRED).
func (c *Conn) PeerUID() uint32 { return c.cred.Uid }

// PeerPID returns the sampler's pid (SO_PEERCRED).
func (c *Conn) PeerPID() int32 { return c.cred.Pid }

// Close closes the connection and every received descriptor no frame has
// claimed. Next then returns an error wrapping ErrClosed. Calling Close
// again returns the first call's result.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		if err := c.uc.Close(); err != nil {
			c.closeErr = fmt.Errorf("close connection: %w", err)
		}
		c.fdMu.Lock()
		fds := c.fds
		c.fds, c.fdsClosed = nil, true
		c.fdMu.Unlock()
		for _, f := range fds {
			f.Close()
			c.s.m.fdsDropped.inc()
		}
		c.s.forget(c)
	})
	return c.closeErr
}

func orDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
