package ipc

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
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

	mu           sync.Mutex
	hello        []byte // whole frame
	unacked      []*pending
	unackedBytes int
	unackedLoss  int // FrameLoss frames among unacked (never evicted)
	lossBytes    int // their size
	// unconfirmed records, in sequence order, the frames evicted after
	// their write began on the current connection: an acknowledgement
	// retires them as delivered, the end of the connection as lost.
	unconfirmed        []evictedFrames
	unconfirmedSamples int
	lastSeq            uint64 // last sequence accepted by SendReliable
	hasSeq             bool
	highestSent        uint64 // highest sequence whose write began, on any connection
	hasSent            bool
	ackedSeq           uint64
	hasAck             bool
	// Per connection: the next reliable frame to write is the first one
	// after resumeAfter, or the first one of all when resumeFromStart.
	resumeAfter     uint64
	resumeFromStart bool
	execs           []execItem
	stats           []byte // latest FrameStats waiting to be written (whole frame)
	connected       bool
	running         bool
	runDone         chan struct{}
	stopRun         context.CancelFunc
	closing         bool // Close was called: accept nothing new, flush, say goodbye
	goodbye         []byte
	goodbyeSent     bool
	closed          bool // Close has finished
	lastErr         string
	lastLogged      string

	executablesSent, executablesDropped atomic.Uint64
}

type pending struct {
	seq     uint64
	samples int
	buf     []byte // the whole frame
}

func (p *pending) loss() bool { return FrameType(p.buf[0]) == FrameLoss }

// evictedFrames is one or more frames evicted after their write began,
// up to and including sequence seq, whose fate waits for an ack.
type evictedFrames struct {
	seq                    uint64
	frames, samples, bytes int
}

// maxUnconfirmed bounds Client.unconfirmed: past it the two oldest records
// merge (under the later sequence), so a server that reads but never
// acknowledges costs bounded memory.
const maxUnconfirmed = 1024

type execItem struct {
	buf []byte // the whole frame
	f   *os.File
}

// NewClient returns a Client for cfg. Nothing happens until Run. A nil
// logger discards; a nil registerer registers nothing.
func NewClient(cfg ClientConfig, logger *slog.Logger, reg prometheus.Registerer) (*Client, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("new client: invalid config: %w", err)
	}
	m, err := newClientMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("new client: register metrics: %w", err)
	}
	return &Client{
		cfg:    cfg,
		logger: orDiscard(logger).With("component", "ipc.client"),
		m:      m,
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
	buf := appendFrame(make([]byte, 0, HeaderSize+len(payload)), FrameHello, 0, payload)
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
	if !t.Reliable() || len(payload) > MaxFrameSize {
		c.m.rejectedFrames.inc()
		c.logger.Error("reliable frame refused", "type", t.String(), "seq", seq, "bytes", len(payload))
		return
	}
	size := HeaderSize + len(payload)
	buf := appendFrame(make([]byte, 0, size), t, 0, payload)
	p := &pending{seq: seq, samples: max(samples, 0), buf: buf}

	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		c.m.rejectedFrames.inc()
		return
	}
	if c.hasSeq && seq <= c.lastSeq {
		last := c.lastSeq
		c.mu.Unlock()
		c.m.rejectedFrames.inc()
		c.logger.Error("reliable frame refused: sequence does not increase", "seq", seq, "last", last)
		return
	}
	c.lastSeq, c.hasSeq = seq, true
	if !p.loss() && size > c.cfg.MaxUnackedBytes-c.lossBytes {
		// It does not fit even with every other batch evicted: it is
		// lost at once.
		c.evictLocked(p)
		c.updateGaugesLocked()
		c.mu.Unlock()
		return
	}
	if over := c.unackedBytes + size - c.cfg.MaxUnackedBytes; over > 0 {
		kept := c.unacked[:0]
		for _, q := range c.unacked {
			if over > 0 && !q.loss() {
				over -= len(q.buf)
				c.unackedBytes -= len(q.buf)
				c.evictLocked(q)
				continue
			}
			kept = append(kept, q)
		}
		clear(c.unacked[len(kept):])
		c.unacked = kept
	}
	c.unacked = append(c.unacked, p)
	c.unackedBytes += size
	if p.loss() {
		c.unackedLoss++
		c.lossBytes += size
	}
	c.updateGaugesLocked()
	c.mu.Unlock()
	c.signal()
}

// evictLocked counts p as evicted, and as lost unless its write began on
// the current connection, in which case its fate waits for an ack.
func (c *Client) evictLocked(p *pending) {
	c.m.evictedFrames.inc()
	c.m.evictedBytes.add(uint64(len(p.buf)))
	c.m.evictedSamples.add(uint64(p.samples))
	if !c.connected || c.resumeFromStart || p.seq > c.resumeAfter {
		c.countLost(1, len(p.buf), p.samples)
		return
	}
	if len(c.unconfirmed) >= maxUnconfirmed {
		a, b := c.unconfirmed[0], c.unconfirmed[1]
		c.unconfirmed[1] = evictedFrames{seq: b.seq, frames: a.frames + b.frames, samples: a.samples + b.samples, bytes: a.bytes + b.bytes}
		c.unconfirmed = slices.Delete(c.unconfirmed, 0, 1)
	}
	c.unconfirmed = append(c.unconfirmed, evictedFrames{seq: p.seq, frames: 1, samples: p.samples, bytes: len(p.buf)})
	c.unconfirmedSamples += p.samples
}

func (c *Client) countLost(frames, bytes, samples int) {
	c.m.lostFrames.add(uint64(frames))
	c.m.lostBytes.add(uint64(bytes))
	c.m.lostSamples.add(uint64(samples))
}

// settleUnconfirmedLocked retires the unconfirmed records up to and
// including seq as delivered, or all of them as lost when the connection
// ended (lost).
func (c *Client) settleUnconfirmedLocked(seq uint64, lost bool) {
	i := len(c.unconfirmed)
	if !lost {
		i = sort.Search(len(c.unconfirmed), func(i int) bool { return c.unconfirmed[i].seq > seq })
	}
	for _, e := range c.unconfirmed[:i] {
		if lost {
			c.countLost(e.frames, e.bytes, e.samples)
		} else {
			c.m.deliveredEvictedFrames.add(uint64(e.frames))
			c.m.deliveredEvictedSamples.add(uint64(e.samples))
		}
		c.unconfirmedSamples -= e.samples
	}
	c.unconfirmed = slices.Delete(c.unconfirmed, 0, i)
}

func (c *Client) updateGaugesLocked() {
	c.m.unackedFrames.Set(float64(len(c.unacked)))
	c.m.unackedBytes.Set(float64(c.unackedBytes))
	c.m.unconfirmedSamples.Set(float64(c.unconfirmedSamples))
}

// SendExecutable queues an executable notice with its descriptor f (nil
// for none). The client owns f from the call on: it closes f once sent, or
// at once when it drops the notice. It returns false, and counts the drop,
// when no connection is up, the queue is full, the payload is larger than
// MaxFrameSize, or Close was called. It never blocks.
func (c *Client) SendExecutable(payload []byte, f *os.File) bool {
	var flags uint8
	if f != nil {
		flags = FlagDescriptor
	}
	ok := len(payload) <= MaxFrameSize
	var buf []byte
	if ok {
		buf = appendFrame(make([]byte, 0, HeaderSize+len(payload)), FrameExecutable, flags, payload)
		c.mu.Lock()
		ok = c.connected && !c.closing && len(c.execs) < c.cfg.MaxQueuedExecutables
		if ok {
			c.execs = append(c.execs, execItem{buf: buf, f: f})
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
	buf := appendFrame(make([]byte, 0, HeaderSize+len(payload)), FrameStats, 0, payload)
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

func (c *Client) dropExecutable(f *os.File) {
	c.executablesDropped.Add(1)
	if f != nil {
		f.Close()
		c.m.fdsDropped.inc()
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

	backoff := c.cfg.MinBackoff
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
			backoff = c.cfg.MinBackoff
		}
		c.logFailure(err)
		delay := backoff/2 + rand.N(backoff/2+1)
		backoff = min(2*backoff, c.cfg.MaxBackoff)
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-runCtx.Done():
			t.Stop()
		}
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
	case errors.Is(err, ErrPeerRejected) || errors.Is(err, ErrProtocol):
		c.logger.Error("connection refused, retrying", "err", err)
	default:
		c.logger.Warn("connection failed, retrying", "err", err)
	}
}

// connect dials, verifies the server and serves one connection. healthy
// says whether the connection was good enough to reset the backoff.
func (c *Client) connect(ctx context.Context) (healthy bool, err error) {
	dctx, cancel := context.WithTimeout(ctx, c.cfg.DialTimeout)
	nc, err := (&net.Dialer{}).DialContext(dctx, "unix", c.cfg.Path)
	cancel()
	if err != nil {
		return false, fmt.Errorf("connect to %s: %w", c.cfg.Path, err)
	}
	uc := nc.(*net.UnixConn)
	cred, err := peerCred(uc)
	if err != nil {
		uc.Close()
		return false, fmt.Errorf("check server on %s: %w", c.cfg.Path, err)
	}
	if !slices.Contains(c.cfg.PeerUIDs, cred.Uid) {
		uc.Close()
		c.m.peerRejected.inc()
		return false, fmt.Errorf("check server on %s: it runs as uid %d (pid %d), which is not in the allowed peer uids %v (set %s): %w",
			c.cfg.Path, cred.Uid, cred.Pid, c.cfg.PeerUIDs, PeerUIDsFlag, ErrPeerRejected)
	}
	return c.serve(ctx, uc, cred)
}

// serve runs one verified connection until it fails or, when closing, the
// goodbye is sent and everything acknowledged.
func (c *Client) serve(ctx context.Context, uc *net.UnixConn, cred *unix.Ucred) (bool, error) {
	c.mu.Lock()
	c.connected = true
	c.resumeFromStart = true
	hello := c.hello
	c.lastLogged = ""
	c.mu.Unlock()
	c.m.connects.inc()
	c.m.connected.Set(1)
	c.logger.Info("connected", "path", c.cfg.Path, "server_uid", cred.Uid, "server_pid", cred.Pid)

	start := time.Now()
	connCtx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(connCtx, func() { uc.Close() })
	var gotAck atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() { cancel(c.readAcks(uc, &gotAck)) })
	cancel(c.writeLoop(connCtx, uc, hello))
	wg.Wait()
	stop()
	uc.Close()

	c.mu.Lock()
	c.connected = false
	c.resumeFromStart = true
	// What was written on this connection but not acknowledged may never
	// have been read: evicted frames among it are lost (the rest will be
	// resent).
	c.settleUnconfirmedLocked(0, true)
	c.updateGaugesLocked()
	execs := c.execs
	c.execs = nil
	c.mu.Unlock()
	for _, it := range execs {
		c.dropExecutable(it.f)
	}
	c.m.connected.Set(0)
	healthy := gotAck.Load() || time.Since(start) >= c.cfg.MaxBackoff
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
			c.execs[0] = execItem{}
			c.execs = c.execs[1:]
			c.mu.Unlock()
			if err := c.writeExecutable(uc, it); err != nil {
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
		if p := c.nextUnsentLocked(); p != nil {
			resend := c.hasSent && p.seq <= c.highestSent
			if !resend {
				c.highestSent, c.hasSent = p.seq, true
			}
			c.resumeAfter, c.resumeFromStart = p.seq, false
			c.mu.Unlock()
			if resend {
				c.m.resent.inc()
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
			if len(c.unacked) == 0 && len(c.unconfirmed) == 0 {
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

// nextUnsentLocked returns the first reliable frame not yet written on this
// connection.
func (c *Client) nextUnsentLocked() *pending {
	i := 0
	if !c.resumeFromStart {
		i = sort.Search(len(c.unacked), func(i int) bool { return c.unacked[i].seq > c.resumeAfter })
	}
	if i < len(c.unacked) {
		return c.unacked[i]
	}
	return nil
}

func (c *Client) write(uc *net.UnixConn, frame []byte) error {
	n, err := uc.Write(frame)
	c.m.bytes.add(uint64(n))
	t := FrameType(frame[0])
	if err != nil {
		return fmt.Errorf("write %s frame: %w", t, err)
	}
	c.m.frames.get(t).inc()
	return nil
}

// writeExecutable writes an executable frame, its descriptor attached to
// the frame's first byte with SCM_RIGHTS, then closes the descriptor.
func (c *Client) writeExecutable(uc *net.UnixConn, it execItem) error {
	if it.f == nil {
		err := c.write(uc, it.buf)
		if err == nil {
			c.executablesSent.Add(1)
		} else {
			c.executablesDropped.Add(1)
		}
		return err
	}
	defer it.f.Close()
	rc, err := it.f.SyscallConn()
	if err != nil {
		c.executablesDropped.Add(1)
		c.m.fdsDropped.inc()
		c.logger.Warn("executable notice dropped: descriptor unusable", "err", err)
		return nil
	}
	var n int
	var werr error
	cerr := rc.Control(func(fd uintptr) {
		n, _, werr = uc.WriteMsgUnix(it.buf, unix.UnixRights(int(fd)), nil)
	})
	if cerr != nil {
		c.executablesDropped.Add(1)
		c.m.fdsDropped.inc()
		c.logger.Warn("executable notice dropped: descriptor unusable", "err", cerr)
		return nil
	}
	c.m.bytes.add(uint64(n))
	if werr == nil || n > 0 {
		c.m.fdsSent.inc()
	}
	if werr == nil && n < len(it.buf) {
		// A stream socket may take part of a message; the descriptor went
		// with the first part.
		var m int
		m, werr = uc.Write(it.buf[n:])
		c.m.bytes.add(uint64(m))
	}
	if werr != nil {
		c.executablesDropped.Add(1)
		if n == 0 {
			c.m.fdsDropped.inc()
		}
		return fmt.Errorf("write executable frame: %w", werr)
	}
	c.executablesSent.Add(1)
	c.m.frames.get(FrameExecutable).inc()
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
		t, flags := FrameType(b[0]), b[1]
		rsv := binary.LittleEndian.Uint16(b[2:4])
		length := binary.LittleEndian.Uint32(b[4:8])
		if t != FrameAck || flags != 0 || rsv != 0 || length != AckPayloadSize {
			return c.protocolError(fmt.Errorf("server sent a %s frame with flags 0x%02x, reserved 0x%04x, length %d; want an ack with flags 0, reserved 0, length %d",
				t, flags, rsv, length, AckPayloadSize))
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
	c.m.protocolErrors.inc()
	return fmt.Errorf("drop connection: %w: %w", err, ErrProtocol)
}

// ack frees every reliable frame up to and including seq.
func (c *Client) ack(seq uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.hasSent || seq > c.highestSent {
		if !c.hasSent {
			return fmt.Errorf("server acked sequence %d, but nothing was sent", seq)
		}
		return fmt.Errorf("server acked sequence %d, higher than the highest sent %d", seq, c.highestSent)
	}
	if c.hasAck && seq < c.ackedSeq {
		return fmt.Errorf("server acked sequence %d after %d: acks went backwards", seq, c.ackedSeq)
	}
	c.ackedSeq, c.hasAck = seq, true
	c.m.ackedSeq.Set(float64(seq))
	i := sort.Search(len(c.unacked), func(i int) bool { return c.unacked[i].seq > seq })
	for _, p := range c.unacked[:i] {
		c.unackedBytes -= len(p.buf)
		if p.loss() {
			c.unackedLoss--
			c.lossBytes -= len(p.buf)
		}
	}
	clear(c.unacked[:i])
	c.unacked = c.unacked[i:]
	c.settleUnconfirmedLocked(seq, false)
	c.updateGaugesLocked()
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
	gb := appendFrame(make([]byte, 0, HeaderSize+len(goodbye)), FrameGoodbye, 0, goodbye)
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
	unacked := len(c.unacked)
	execs := c.execs
	c.execs = nil
	c.mu.Unlock()
	for _, it := range execs {
		c.dropExecutable(it.f)
	}
	switch {
	case sent:
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("close: goodbye not sent, %d reliable frames unacknowledged: %w", unacked, ctx.Err())
	default:
		return fmt.Errorf("close: goodbye not sent, %d reliable frames unacknowledged: client was not running", unacked)
	}
}

// Stats returns a snapshot of the client's state and counters. The
// eviction counters are read together: EvictedFrames = LostFrames +
// DeliveredEvictedFrames + UnconfirmedFrames, and likewise for samples.
func (c *Client) Stats() ClientStats {
	c.mu.Lock()
	s := ClientStats{
		Connected:     c.connected,
		AckedSeq:      c.ackedSeq,
		UnackedFrames: len(c.unacked),
		UnackedBytes:  c.unackedBytes,

		UnackedLossFrames: c.unackedLoss,

		EvictedFrames:           c.m.evictedFrames.load(),
		EvictedBytes:            c.m.evictedBytes.load(),
		EvictedSamples:          c.m.evictedSamples.load(),
		LostFrames:              c.m.lostFrames.load(),
		LostBytes:               c.m.lostBytes.load(),
		LostSamples:             c.m.lostSamples.load(),
		DeliveredEvictedFrames:  c.m.deliveredEvictedFrames.load(),
		DeliveredEvictedSamples: c.m.deliveredEvictedSamples.load(),
		UnconfirmedSamples:      c.unconfirmedSamples,

		LastError: c.lastErr,
	}
	for _, e := range c.unconfirmed {
		s.UnconfirmedFrames += e.frames
	}
	c.mu.Unlock()
	s.Connects = c.m.connects.load()
	s.PeerRejected = c.m.peerRejected.load()
	s.ProtocolErrors = c.m.protocolErrors.load()
	s.FramesSent = c.m.frames.total()
	s.BytesSent = c.m.bytes.load()
	s.Resent = c.m.resent.load()
	s.RejectedFrames = c.m.rejectedFrames.load()
	s.ExecutablesSent = c.executablesSent.Load()
	s.ExecutablesDropped = c.executablesDropped.Load()
	s.DescriptorsSent = c.m.fdsSent.load()
	s.DescriptorsDropped = c.m.fdsDropped.load()
	return s
}
