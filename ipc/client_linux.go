package ipc

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tandem-profiler/tandem/internal/counters"
	"github.com/tandem-profiler/tandem/internal/heldfd"
	"github.com/tandem-profiler/tandem/ipc/internal/sockopt"
	"github.com/tandem-profiler/tandem/schema"
)

// errDrained ends a connection after the goodbye was sent and every
// reliable frame was acknowledged.
var errDrained = errors.New("goodbye sent and every frame acknowledged")

// Client is the sampler's end of the socket. It keeps one connection to
// the encoder up (Run), verifies that the server runs as an allowed uid,
// and streams frames without ever blocking the caller: SendReliable and
// SendExecutable only queue, and the Run goroutine writes. Reliable frames
// stay buffered, within MaxUnackedBytes, until the server acknowledges
// them, and are sent again on the next connection if it does not. All
// methods are safe for concurrent use.
type Client struct {
	cfg    ClientConfig
	logger *slog.Logger
	m      *clientMetrics

	kick chan struct{} // capacity 1: something changed that the writer may act on

	mu    sync.Mutex
	hello []byte // whole frame
	l     *ledger
	execs []*execItem
	// retained are the executables written on this or an earlier
	// connection, in the order written, written again first on every new
	// connection (bounded by MaxRetainedExecutables and, with execs,
	// MaxRetainedExecutableBytes; see checkExecutables for the rest).
	retained []*execItem
	// The descriptors of execs and retained: how many, their files'
	// sizes, and how many of those were deleted at the last check.
	held        heldfd.Tally
	conn        uint64 // connections served so far: the current one's number
	stats       []byte // latest FrameStats waiting to be written (whole frame)
	running     bool
	runDone     chan struct{}
	stopRun     context.CancelFunc
	closing     bool // Close was called: accept nothing new, flush, say goodbye
	goodbye     []byte
	goodbyeSent bool
	closed      bool // Close has finished
	lastErr     string
	lastLogged  string

	executablesSent, executablesDropped atomic.Uint64
	// servers says which processes are the encoder (IsServer), read for
	// every trace the sampler handles; serversMu orders its writers.
	servers   atomic.Pointer[serverSet]
	serversMu sync.Mutex
}

// Socket activation: the listening socket's creator (a service manager)
// starts the encoder only when a client connects, so the encoder's pid is
// known only once it holds the socket. While the creator holds it alone,
// the client looks every activationPoll and says the encoder is starting
// (ServerStarting) for at most activationWait, then every lookupPoll until
// the server has acknowledged something. A server's pid stays known for
// pastServerTTL after its connection ends: the tracer reports traces up
// to about half a second after they were taken.
const (
	activationWait = 2 * time.Second
	activationPoll = 20 * time.Millisecond
	lookupPoll     = 500 * time.Millisecond
	pastServerTTL  = 10 * time.Second
)

// serverSet is an immutable snapshot of the processes that are the
// encoder: the connected server and those of ended connections.
type serverSet struct {
	pid      uint32 // the connected server; 0: none, or not known
	starting bool   // a socket-activated server may be starting now
	past     []pastServer
}

type pastServer struct {
	pid   uint32
	until time.Time
}

type execItem struct {
	buf []byte // the whole frame
	// The descriptor (File nil: none, or closed), its file's size and
	// whether the file was deleted at the last check (a VDSO's memfd,
	// never linked, is not counted deleted).
	heldfd.Desc
	// The process the notice names and its start time, to tell when it
	// is gone; hasPID is false when the notice names none (or is not
	// one), and the executable is then never released early.
	pid    uint32
	start  uint64
	hasPID bool
	vdso   bool
	// Where it was last written: on connection conn, after reliable
	// frames up to sequence mark (hasMark false: none yet). An ack on
	// that connection of a later sequence means the server read it.
	conn    uint64
	mark    uint64
	hasMark bool
	acked   bool
}

// NewClient returns a Client for cfg. Nothing happens until Run. A nil
// logger discards; a nil set registers nothing. The counters are
// registered in set as tandem_ipc_client_*.
func NewClient(cfg ClientConfig, logger *slog.Logger, set *counters.Set) (*Client, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("new client: invalid config: %w", err)
	}
	m, err := newClientMetrics(set)
	if err != nil {
		return nil, fmt.Errorf("new client: register metrics: %w", err)
	}
	return &Client{
		cfg:    cfg,
		logger: orDiscard(logger).With("component", "ipc.client"),
		m:      m,
		l:      newLedger(cfg.MaxUnackedBytes, &m.ledger),
		kick:   make(chan struct{}, 1),
	}, nil
}

func (c *Client) signal() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// SetHello sets the payload of the FrameHello sent first on every
// connection. It applies from the next connection on. The payload is
// copied.
func (c *Client) SetHello(payload []byte) {
	if len(payload) > MaxFrameSize {
		c.logger.Error("hello payload too large, ignored", "bytes", len(payload), "max", MaxFrameSize)
		return
	}
	buf := encodeFrame(FrameHello, 0, payload)
	c.mu.Lock()
	c.hello = buf
	c.mu.Unlock()
}

// SendReliable queues a reliable frame (FrameBatch or FrameLoss) whose
// payload carries sequence number seq; sequences must increase from call
// to call. The payload is copied. The frame stays buffered until the server
// acknowledges seq or a later sequence; when the buffer would exceed
// MaxUnackedBytes, the oldest batches are evicted (counted in
// Stats.Evicted*, with the samples passed for them), or the new batch
// itself when it would not fit beside the loss reports. A batch evicted before
// it was written on the current connection is lost (Stats.Lost*); one
// evicted after its write began is delivered once the server acknowledges
// it and lost if the connection ends first. Loss reports are never
// evicted: they stay until acknowledged, beyond MaxUnackedBytes if need be,
// so the caller bounds how many it leaves unacknowledged
// (Stats.UnackedLossFrames). SendReliable never blocks. Frames of another
// type, with a sequence that does not increase, larger than MaxFrameSize or
// sent after Close are refused and counted (Stats.RejectedFrames).
func (c *Client) SendReliable(seq uint64, t FrameType, payload []byte, samples int) {
	c.SendReliableWith(seq, t, payload, samples, DictionaryRef{})
}

// SendReliableWith is SendReliable for a frame that refers to a dictionary
// (a layout-2 batch, protocol 1.4): on every connection, the client writes
// the chunks of dict that the connection has not had yet before the frame.
// dict must be in its log already, and a frame must not need an older
// generation than an earlier frame did; otherwise it is refused and
// counted. The chunks are not part of the resend buffer: evicting or
// acknowledging the frame does not touch its log.
func (c *Client) SendReliableWith(seq uint64, t FrameType, payload []byte, samples int, dict DictionaryRef) {
	if !t.Reliable() || len(payload) > MaxFrameSize {
		c.mu.Lock()
		c.l.reject()
		c.mu.Unlock()
		c.logger.Error("reliable frame refused", "type", t.String(), "seq", seq, "bytes", len(payload))
		return
	}
	buf := encodeFrame(t, 0, payload)
	c.mu.Lock()
	if c.closing {
		c.l.reject()
		c.mu.Unlock()
		return
	}
	err := c.l.add(seq, buf, samples, dict)
	c.mu.Unlock()
	if err != nil {
		c.logger.Error("reliable frame refused", "type", t.String(), "err", err)
		return
	}
	c.signal()
}

// SendExecutable queues an executable notice with its descriptor f (nil
// for none). The client owns f from the call on: once sent it keeps f,
// within its bounds, to send the notice again on a new connection, and
// closes it when the bounds or the release rules of docs/executables.md
// drop it, or at Close; it closes f at once when it drops the notice. It returns false, and counts the drop,
// when no connection is up, the queue is full, the payload is larger than
// MaxFrameSize, or Close was called. It never blocks.
func (c *Client) SendExecutable(payload []byte, f *os.File) bool {
	var flags uint8
	if f != nil {
		flags = FlagDescriptor
	}
	ok := len(payload) <= MaxFrameSize
	var it *execItem
	if ok {
		it = newExecItem(encodeFrame(FrameExecutable, flags, payload), payload, f)
		c.mu.Lock()
		ok = c.l.connected && !c.closing && len(c.execs) < c.cfg.MaxQueuedExecutables
		if ok {
			c.execs = append(c.execs, it)
			c.holdLocked(it)
			c.enforceLocked()
		}
		c.mu.Unlock()
	}
	if !ok {
		c.dropExecutable(f)
		return false
	}
	c.signal()
	return true
}

// SendStats queues a FrameStats with payload, replacing one still waiting:
// stats are best effort, each carries every current value, and only the
// latest matters. It is written on the current connection, or on the next
// one. It returns false when the payload is larger than MaxFrameSize or
// Close was called. It never blocks.
func (c *Client) SendStats(payload []byte) bool {
	if len(payload) > MaxFrameSize {
		return false
	}
	buf := encodeFrame(FrameStats, 0, payload)
	c.mu.Lock()
	ok := !c.closing
	if ok {
		c.stats = buf
	}
	c.mu.Unlock()
	if ok {
		c.signal()
	}
	return ok
}

// newExecItem returns the queue item of an executable frame buf with
// notice payload and descriptor f (nil for none).
func newExecItem(buf, payload []byte, f *os.File) *execItem {
	it := &execItem{buf: buf, Desc: heldfd.Desc{File: f}}
	if f != nil {
		if st, err := f.Stat(); err == nil {
			it.Size = st.Size()
		}
	}
	if n, err := schema.DecodeExecutableNotice(payload); err == nil {
		it.vdso = n.IsVDSO
		if n.PID != 0 && !n.IsVDSO {
			it.pid, it.hasPID = n.PID, true
			it.start, _ = procStartTime(n.PID) // 0, never matched: gone already
		}
	}
	return it
}

// procStartTime returns the start time of process pid (/proc/PID/stat's
// field 22), which tells it from a later process given the same PID.
func procStartTime(pid uint32) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.FormatUint(uint64(pid), 10) + "/stat")
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')') // the command name may hold anything
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 { // state is field 3, start time field 22
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the command name", pid, len(f))
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// holdLocked counts it's descriptor as held; c.mu is held.
func (c *Client) holdLocked(it *execItem) {
	c.held.Hold(&it.Desc)
	c.setHeldGauges()
}

// closeItemLocked closes it's descriptor and stops counting it; c.mu is
// held.
func (c *Client) closeItemLocked(it *execItem) {
	if c.held.Close(&it.Desc) {
		c.setHeldGauges()
	}
}

func (c *Client) setHeldGauges() {
	c.m.execsHeld.Set(float64(c.held.Files))
	c.m.execsHeldBytes.Set(float64(c.held.Bytes))
	c.m.execsHeldDeleted.Set(float64(c.held.Deleted))
}

// enforceLocked closes the oldest kept executables past
// MaxRetainedExecutables (kept ones) and MaxRetainedExecutableBytes
// (queued and kept ones); c.mu is held. Queued ones are never closed
// here: they are written within moments, and kept or closed then.
func (c *Client) enforceLocked() {
	n := 0
	for ; n < len(c.retained); n++ {
		bound := 1
		switch {
		case len(c.retained)-n > c.cfg.MaxRetainedExecutables:
			bound = 0
		case c.held.Bytes > c.cfg.MaxRetainedExecutableBytes:
		default:
			bound = -1
		}
		if bound < 0 {
			break
		}
		if old := c.retained[n]; old.File != nil {
			c.closeItemLocked(old)
			c.m.execsEvicted[bound].Inc()
		}
	}
	if n > 0 {
		c.retained = slices.Delete(c.retained, 0, n)
	}
}

func (c *Client) dropExecutable(f *os.File) {
	c.executablesDropped.Add(1)
	if f != nil {
		f.Close()
		c.m.fdsDropped.Inc()
	}
}

// Run connects to the server and keeps a connection up until Close or
// until ctx ends, reconnecting with exponential backoff and jitter. On
// every connection it checks the server's uid, sends the hello, resends
// every unacknowledged reliable frame in sequence order, then streams new
// frames, while reading and validating acknowledgements. A server that
// sends anything but a valid ack is disconnected. Connection failures are
// logged and retried, never returned. Run returns nil once Close has been
// called, ctx.Err() when ctx ends first, and an error when called twice,
// after Close, or before SetHello.
func (c *Client) Run(ctx context.Context) error {
	c.mu.Lock()
	switch {
	case c.closing:
		c.mu.Unlock()
		return fmt.Errorf("run: %w", ErrClosed)
	case c.running:
		c.mu.Unlock()
		return errors.New("run: already running")
	case c.hello == nil:
		c.mu.Unlock()
		return errors.New("run: no hello payload: call SetHello first")
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	c.running, c.stopRun, c.runDone = true, cancel, done
	c.mu.Unlock()
	defer func() {
		cancel()
		c.mu.Lock()
		c.running = false
		c.mu.Unlock()
		close(done)
	}()

	var checks sync.WaitGroup
	checks.Go(func() { c.checkLoop(runCtx) })
	defer func() { cancel(); checks.Wait() }() // before Run is marked done

	// A Unix socket's peer cannot ask for a delay.
	waits := c.cfg.backoff().Retrier(nil)
	for {
		healthy, err := c.connect(runCtx)
		c.mu.Lock()
		closing, goodbyeSent := c.closing, c.goodbyeSent
		if err != nil && !errors.Is(err, errDrained) && runCtx.Err() == nil {
			c.lastErr = err.Error()
		}
		c.mu.Unlock()
		switch {
		case closing && goodbyeSent:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case runCtx.Err() != nil: // Close gave up waiting
			return nil
		}
		if healthy {
			waits.Reset()
		}
		c.logFailure(err)
		_ = waits.Wait(runCtx, err) // runCtx ending is handled above
	}
}

// logFailure logs a connection failure loudly when it differs from the
// previous one and quietly when it repeats, so that an absent encoder does
// not flood the log.
func (c *Client) logFailure(err error) {
	if err == nil {
		return
	}
	msg := err.Error()
	c.mu.Lock()
	repeated := msg == c.lastLogged
	c.lastLogged = msg
	c.mu.Unlock()
	switch {
	case repeated:
		c.logger.Debug("connection failed again, retrying", "err", err)
	case errors.Is(err, ErrPeerRejected) || errors.Is(err, ErrProtocol) || errors.Is(err, ErrUnsafeSocketDir):
		c.logger.Error("connection refused, retrying", "err", err)
	default:
		c.logger.Warn("connection failed, retrying", "err", err)
	}
}

// connect dials, verifies the server and serves one connection. healthy
// says whether the connection was good enough to reset the backoff.
func (c *Client) connect(ctx context.Context) (healthy bool, err error) {
	if !c.cfg.TrustSocketDir {
		if err := CheckSocketDir(c.cfg.Path, c.cfg.PeerUIDs); err != nil {
			c.m.peerRejected.Inc()
			return false, err
		}
	}
	dctx, cancel := context.WithTimeout(ctx, c.cfg.DialTimeout)
	nc, err := (&net.Dialer{}).DialContext(dctx, "unix", c.cfg.Path)
	cancel()
	if err != nil {
		return false, fmt.Errorf("connect to %s: %w", c.cfg.Path, err)
	}
	uc := nc.(*net.UnixConn)
	cred, err := sockopt.PeerCred(uc)
	if err != nil {
		uc.Close()
		return false, fmt.Errorf("check server on %s: %w", c.cfg.Path, err)
	}
	if !slices.Contains(c.cfg.PeerUIDs, cred.Uid) {
		uc.Close()
		c.m.peerRejected.Inc()
		return false, fmt.Errorf("check server on %s: it runs as uid %d (pid %d), which is not in the allowed peer uids %v (set %s): %w",
			c.cfg.Path, cred.Uid, cred.Pid, c.cfg.PeerUIDs, PeerUIDsFlag, ErrPeerRejected)
	}
	return c.serve(ctx, uc, cred)
}

// serve runs one verified connection until it fails or, when closing, the
// goodbye is sent and everything acknowledged.
func (c *Client) serve(ctx context.Context, uc *net.UnixConn, cred *unix.Ucred) (bool, error) {
	c.mu.Lock()
	c.l.connect()
	c.conn++
	c.execs = append(c.retained, c.execs...)
	c.retained = nil
	hello := c.hello
	c.lastLogged = ""
	c.mu.Unlock()
	c.m.connects.Inc()
	c.m.connected.Set(1)
	clk := c.cfg.backoff().Clk()
	start := clk.Now()
	connected := time.Now() // the activation polls run on real time
	// Under socket activation the encoder may not run yet: it is looked
	// for again until it shows or acknowledges something.
	resolve := func(starting bool) uint32 {
		server, err := serverPID("/proc", c.cfg.Path, cred.Pid, cred.Uid)
		if err != nil {
			c.logger.Warn("the encoder's pid is unknown: its samples are kept", "err", err)
		}
		c.setServer(server, starting && server == uint32(cred.Pid))
		return server
	}
	// A root creator holding the socket alone may be a service manager
	// whose encoder starts only now: said before the first look, which
	// takes a while on a busy node.
	root := cred.Uid == 0
	c.setStarting(root)
	first := resolve(root)
	activating := root && first == uint32(cred.Pid)
	c.logger.Info("connected", "path", c.cfg.Path, "server_uid", cred.Uid, "server_pid", cred.Pid, "encoder_pid", first)

	connCtx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(connCtx, func() { uc.Close() })
	var gotAck atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() { cancel(c.readAcks(uc, &gotAck)) })
	if activating {
		// Look again until another holder shows or the encoder has
		// acknowledged something (it runs, and it is the creator):
		// often at first, so that the batcher holds the encoder's
		// first traces back until they can be told apart (ServerStarting).
		wg.Go(func() {
			defer c.setStarting(false)
			for !gotAck.Load() {
				wait := lookupPoll
				starting := time.Since(connected) < activationWait
				if starting {
					wait = activationPoll
				} else {
					c.setStarting(false)
				}
				select {
				case <-connCtx.Done():
					return
				case <-time.After(wait):
				}
				if p := resolve(starting); p != first {
					if p != 0 { // 0: unknown, said by resolve
						c.logger.Info("encoder found: it serves the socket its creator passed on", "encoder_pid", p, "creator_pid", first)
					}
					return
				}
			}
		})
	}
	cancel(c.writeLoop(connCtx, uc, hello))
	wg.Wait()
	stop()
	uc.Close()

	c.mu.Lock()
	c.l.disconnect()
	// What was not written goes with the next connection's resends.
	execs := c.execs
	c.execs = nil
	for _, it := range execs {
		c.retainLocked(it)
	}
	c.mu.Unlock()
	c.m.connected.Set(0)
	c.endServer(time.Now())
	healthy := gotAck.Load() || clk.Since(start) >= c.cfg.MaxBackoff
	return healthy, context.Cause(connCtx)
}

// writeLoop writes the hello, then executables and unsent reliable frames
// as they come, then, when closing, the goodbye.
func (c *Client) writeLoop(ctx context.Context, uc *net.UnixConn, hello []byte) error {
	if err := c.write(uc, hello); err != nil {
		return err
	}
	for {
		c.mu.Lock()
		if len(c.execs) > 0 {
			it := c.execs[0]
			c.execs[0] = nil
			c.execs = c.execs[1:]
			c.mu.Unlock()
			err := c.writeExecutable(uc, it)
			c.mu.Lock()
			switch {
			case errors.Is(err, errDescriptorUnusable):
				c.closeItemLocked(it)
			case err == nil:
				it.conn, it.mark, it.hasMark, it.acked = c.conn, c.l.highestSent, c.l.hasSent, false
				c.retainLocked(it)
			default: // to be written on the next connection
				c.retainLocked(it)
			}
			c.mu.Unlock()
			if err != nil && !errors.Is(err, errDescriptorUnusable) {
				return err
			}
			continue
		}
		if c.stats != nil {
			buf := c.stats
			c.stats = nil
			c.mu.Unlock()
			if err := c.write(uc, buf); err != nil {
				return err
			}
			continue
		}
		if p, chunks, _ := c.l.next(); p != nil {
			c.mu.Unlock()
			for _, ch := range chunks {
				if err := c.write(uc, ch); err != nil {
					return err
				}
			}
			if err := c.write(uc, p.buf); err != nil {
				return err
			}
			continue
		}
		if c.closing {
			if !c.goodbyeSent {
				gb := c.goodbye
				c.mu.Unlock()
				if err := c.write(uc, gb); err != nil {
					return err
				}
				c.mu.Lock()
				c.goodbyeSent = true
				c.mu.Unlock()
				continue
			}
			if c.l.drained() {
				c.mu.Unlock()
				return errDrained
			}
		}
		c.mu.Unlock()
		select {
		case <-c.kick:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

func (c *Client) write(uc *net.UnixConn, frame []byte) error {
	n, err := uc.Write(frame)
	c.m.bytes.Add(uint64(n))
	t := FrameType(frame[0])
	if err != nil {
		return fmt.Errorf("write %s frame: %w", t, err)
	}
	c.m.frameCounter(t).Inc()
	return nil
}

// errDescriptorUnusable: an executable's descriptor could not be passed;
// the notice is dropped (and its descriptor closed), the connection goes on.
var errDescriptorUnusable = errors.New("executable descriptor unusable")

// retainLocked keeps it to be written again on the next connection,
// closing the oldest retained descriptors past the bounds. c.mu is held.
func (c *Client) retainLocked(it *execItem) {
	if c.closed {
		if it.File != nil {
			c.closeItemLocked(it)
			c.executablesDropped.Add(1)
			c.m.fdsDropped.Inc()
		}
		return
	}
	c.retained = append(c.retained, it)
	c.enforceLocked()
}

// checkLoop runs checkExecutables every ExecutableCheckInterval until
// ctx ends.
func (c *Client) checkLoop(ctx context.Context) {
	tick := time.NewTicker(c.cfg.ExecutableCheckInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			c.checkExecutables()
		}
	}
}

// checkExecutables closes the kept descriptors nothing needs any more:
// the file was deleted (only the descriptor keeps its disk space), the
// server acknowledged the notice, and the process it named is gone. A
// restarted encoder then does not name that executable, but no running
// process maps it either: a deleted file cannot be run again. (A child
// the named process forked, outliving it, is the exception: its frames of
// that executable go unnamed after an encoder restart.) A linked file
// costs no disk and is kept within the bounds: the tracer reports each
// executable once, from whichever process it saw first.
func (c *Client) checkExecutables() {
	type kept struct {
		it *execItem
		f  *os.File
	}
	c.mu.Lock()
	all := make([]kept, 0, len(c.retained))
	for _, it := range c.retained {
		if it.File != nil && !it.vdso {
			all = append(all, kept{it, it.File})
		}
	}
	c.mu.Unlock()
	for _, k := range all {
		var st unix.Stat_t
		if err := fstat(k.f, &st); err != nil {
			continue // closed meanwhile
		}
		deleted := st.Nlink == 0
		gone := false
		if deleted && k.it.hasPID {
			start, err := procStartTime(k.it.pid)
			gone = err != nil || start != k.it.start
		}
		c.mu.Lock()
		if k.it.File == k.f {
			if c.held.SetDeleted(&k.it.Desc, deleted) {
				c.setHeldGauges()
			}
			if deleted && gone && k.it.acked {
				if i := slices.Index(c.retained, k.it); i >= 0 {
					c.retained = slices.Delete(c.retained, i, i+1)
				}
				c.closeItemLocked(k.it)
				c.m.execsReleasedEarly.Inc()
			}
		}
		c.mu.Unlock()
	}
}

// fstat stats f's descriptor.
func fstat(f *os.File, st *unix.Stat_t) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.Fstat(int(fd), st) }); err != nil {
		return err
	}
	return serr
}

// writeExecutable writes an executable frame, its descriptor attached to
// the frame's first byte with SCM_RIGHTS. The caller keeps the descriptor
// (to send it again on a later connection), except when it is unusable
// (errDescriptorUnusable): then the caller closes it.
func (c *Client) writeExecutable(uc *net.UnixConn, it *execItem) error {
	if it.File == nil {
		err := c.write(uc, it.buf)
		if err == nil {
			c.executablesSent.Add(1)
		}
		return err
	}
	rc, err := it.File.SyscallConn()
	if err != nil {
		c.executablesDropped.Add(1)
		c.m.fdsDropped.Inc()
		c.logger.Warn("executable notice dropped: descriptor unusable", "err", err)
		return errDescriptorUnusable
	}
	var n int
	var werr error
	cerr := rc.Control(func(fd uintptr) {
		n, _, werr = uc.WriteMsgUnix(it.buf, unix.UnixRights(int(fd)), nil)
	})
	if cerr != nil {
		c.executablesDropped.Add(1)
		c.m.fdsDropped.Inc()
		c.logger.Warn("executable notice dropped: descriptor unusable", "err", cerr)
		return errDescriptorUnusable
	}
	c.m.bytes.Add(uint64(n))
	if werr == nil || n > 0 {
		c.m.fdsSent.Inc()
	}
	if werr == nil && n < len(it.buf) {
		// A stream socket may take part of a message; the descriptor went
		// with the first part.
		var m int
		m, werr = uc.Write(it.buf[n:])
		c.m.bytes.Add(uint64(m))
	}
	if werr != nil { // written again on the next connection
		return fmt.Errorf("write executable frame: %w", werr)
	}
	c.executablesSent.Add(1)
	c.m.frameCounter(FrameExecutable).Inc()
	return nil
}

// readAcks reads acknowledgements until the connection fails. Anything but
// a well-formed ack for a sequence in range is a protocol error.
func (c *Client) readAcks(uc *net.UnixConn, gotAck *atomic.Bool) error {
	var b [HeaderSize + AckPayloadSize]byte
	for {
		if _, err := io.ReadFull(uc, b[:HeaderSize]); err != nil {
			if errors.Is(err, io.EOF) {
				return errors.New("read ack: server closed the connection")
			}
			return fmt.Errorf("read ack: %w", err)
		}
		// The ack is never checksummed: its 16 bytes are fixed and checked
		// field by field.
		if h := parseHeader(b[:]); h.t != FrameAck || h.flags != 0 || h.reserved != 0 || h.length != AckPayloadSize {
			return c.protocolError(fmt.Errorf("server sent a %s frame with flags 0x%02x, reserved 0x%04x, length %d; want an ack with flags 0, reserved 0, length %d",
				h.t, h.flags, h.reserved, h.length, AckPayloadSize))
		}
		if _, err := io.ReadFull(uc, b[HeaderSize:]); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return c.protocolError(errors.New("server closed the connection inside an ack"))
			}
			return fmt.Errorf("read ack: %w", err)
		}
		if err := c.ack(binary.LittleEndian.Uint64(b[HeaderSize:])); err != nil {
			return c.protocolError(err)
		}
		gotAck.Store(true)
	}
}

func (c *Client) protocolError(err error) error {
	c.m.protocolErrors.Inc()
	return fmt.Errorf("drop connection: %w: %w", err, ErrProtocol)
}

// ack frees every reliable frame up to and including seq.
func (c *Client) ack(seq uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.l.ack(seq); err != nil {
		return err
	}
	for _, it := range c.retained {
		if !it.acked && it.conn == c.conn && (!it.hasMark || seq > it.mark) {
			it.acked = true // the server read a frame written after it
		}
	}
	if c.closing {
		c.signal()
	}
	return nil
}

// Close stops accepting frames, lets Run flush everything queued, send the
// goodbye payload (as a FrameGoodbye) and wait for the remaining
// acknowledgements, all within ctx, then stops Run and closes every
// descriptor still queued. Run returns nil. Close returns nil when the
// goodbye was sent, and otherwise an error (wrapping ctx.Err() when ctx
// ended first). Calling Close again returns nil.
func (c *Client) Close(ctx context.Context, goodbye []byte) error {
	if len(goodbye) > MaxFrameSize {
		goodbye = nil
	}
	gb := encodeFrame(FrameGoodbye, 0, goodbye)
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return nil
	}
	c.closing, c.goodbye = true, gb
	running, done, stopRun := c.running, c.runDone, c.stopRun
	c.mu.Unlock()
	c.signal()

	if running {
		select {
		case <-done:
		case <-ctx.Done():
			stopRun()
			<-done
		}
	}

	c.mu.Lock()
	c.closed = true
	sent := c.goodbyeSent
	unacked := len(c.l.unacked)
	for _, it := range c.execs {
		if it.File != nil {
			c.closeItemLocked(it)
			c.m.fdsDropped.Inc()
		}
		c.executablesDropped.Add(1)
	}
	for _, it := range c.retained { // sent already: not a drop
		c.closeItemLocked(it)
	}
	c.execs, c.retained = nil, nil
	c.mu.Unlock()
	switch {
	case sent:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("close: goodbye not sent, %d reliable frames unacknowledged: %w", unacked, ctx.Err())
	default:
		return fmt.Errorf("close: goodbye not sent, %d reliable frames unacknowledged: client was not running", unacked)
	}
}

// IsServer reports whether pid is the server the client is connected to
// or was connected to less than pastServerTTL ago: the process
// SO_PEERCRED names at connect time, or, when that is a root process that
// passed the listening socket on (socket activation), the process it
// passed it to (serverPID). Pids are in the client's pid namespace (the
// host's for tandem-sampler, whatever namespace the encoder runs in). It
// is called for every trace: it never blocks and reads the clock only
// for a pid of an ended connection.
func (c *Client) IsServer(pid uint32) bool {
	s := c.servers.Load()
	if s == nil || pid == 0 {
		return false
	}
	if pid == s.pid {
		return true
	}
	for _, p := range s.past {
		if p.pid == pid {
			return time.Now().Before(p.until)
		}
	}
	return false
}

// ServerStarting reports whether the client is connected to a socket whose
// creator (a service manager) may be starting the server now, for at most
// activationWait after connecting: until the server is known, its traces
// cannot be told apart, so the sampler holds traces back meanwhile.
func (c *Client) ServerStarting() bool {
	s := c.servers.Load()
	return s != nil && s.starting
}

// setServer records the connected server's pid.
func (c *Client) setServer(pid uint32, starting bool) {
	c.serversMu.Lock()
	defer c.serversMu.Unlock()
	next := serverSet{pid: pid, starting: starting}
	if s := c.servers.Load(); s != nil {
		next.past = s.past
	}
	c.servers.Store(&next)
}

// setStarting sets ServerStarting's answer, keeping the rest.
func (c *Client) setStarting(starting bool) {
	c.serversMu.Lock()
	defer c.serversMu.Unlock()
	next := serverSet{starting: starting}
	if s := c.servers.Load(); s != nil {
		next = *s
		next.starting = starting
	}
	c.servers.Store(&next)
}

// endServer forgets the connected server after pastServerTTL, and the
// servers of earlier connections whose time is up.
func (c *Client) endServer(now time.Time) {
	c.serversMu.Lock()
	defer c.serversMu.Unlock()
	s := c.servers.Load()
	if s == nil {
		return
	}
	var next serverSet
	for _, p := range s.past {
		if now.Before(p.until) && p.pid != s.pid {
			next.past = append(next.past, p)
		}
	}
	if s.pid != 0 {
		next.past = append(next.past, pastServer{pid: s.pid, until: now.Add(pastServerTTL)})
	}
	c.servers.Store(&next)
}

// Stats returns a snapshot of the client's state and counters. The
// eviction counters are read together: EvictedFrames = LostFrames +
// DeliveredEvictedFrames + UnconfirmedFrames, and likewise for samples.
func (c *Client) Stats() ClientStats {
	c.mu.Lock()
	s := ClientStats{Connected: c.l.connected, LastError: c.lastErr}
	s.ExecutablesHeld, s.ExecutablesHeldDeleted, s.ExecutablesHeldBytes = c.held.Files, c.held.Deleted, c.held.Bytes
	c.l.stats(&s)
	c.mu.Unlock()
	s.Connects = c.m.connects.Load()
	s.PeerRejected = c.m.peerRejected.Load()
	s.ProtocolErrors = c.m.protocolErrors.Load()
	s.FramesSent = c.m.framesTotal()
	s.BytesSent = c.m.bytes.Load()
	s.ExecutablesSent = c.executablesSent.Load()
	s.ExecutablesDropped = c.executablesDropped.Load()
	s.DescriptorsSent = c.m.fdsSent.Load()
	s.DescriptorsDropped = c.m.fdsDropped.Load()
	s.ExecutablesReleasedEarly = c.m.execsReleasedEarly.Load()
	s.ExecutablesEvictedForCount = c.m.execsEvicted[0].Load()
	s.ExecutablesEvictedForBytes = c.m.execsEvicted[1].Load()
	return s
}
