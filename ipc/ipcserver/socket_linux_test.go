package ipcserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/test/waittest"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	clocktesting "k8s.io/utils/clock/testing"
)

// waitTimeout only keeps a broken test from hanging; nothing is expected
// to take more than a fraction of it.
const waitTimeout = time.Minute

var testUID = uint32(os.Getuid())

// unusedUID is a uid no test runs as.
func unusedUID(t *testing.T) uint32 {
	if testUID == 12345 {
		t.Skip("the tests use uid 12345 as a foreign uid")
	}
	return 12345
}

func socketPath(t *testing.T) string { return filepath.Join(t.TempDir(), "tandem.sock") }

func startServer(t *testing.T, cfg Config) *Server {
	t.Helper()
	if cfg.Path == "" {
		cfg.Path = socketPath(t)
	}
	if cfg.AllowedUIDs == nil {
		cfg.AllowedUIDs = []uint32{testUID}
	}
	s, err := Listen(cfg, testLogger(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func accept(t *testing.T, s *Server) *Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	c, err := s.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// newTestClient returns a client with fast reconnection, not yet running.
func newTestClient(t *testing.T, path string, mod func(*ipc.ClientConfig)) *ipc.Client {
	t.Helper()
	cfg := ipc.ClientConfig{
		Path:       path,
		PeerUIDs:   []uint32{testUID},
		MinBackoff: time.Millisecond,
		MaxBackoff: 10 * time.Millisecond,
	}
	if mod != nil {
		mod(&cfg)
	}
	c, err := ipc.NewClient(cfg, testLogger(), nil)
	if err != nil {
		t.Fatal(err)
	}
	c.SetHello([]byte("hello"))
	return c
}

// run runs the client until the test ends and checks how Run returned.
func run(t *testing.T, c *ipc.Client) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v", err)
		}
		c.Close(ctx, nil)
	})
}

func next(t *testing.T, c *Conn) ipc.Frame {
	t.Helper()
	f, err := c.Next()
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return f
}

func expectFrame(t *testing.T, c *Conn, ft ipc.FrameType, payload []byte) ipc.Frame {
	t.Helper()
	f := next(t, c)
	if f.Type != ft || !bytes.Equal(f.Payload, payload) {
		t.Fatalf("got %s frame %q, want %s frame %q", f.Type, f.Payload, ft, payload)
	}
	return f
}

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

func checkNoFDLeak(t *testing.T) {
	before := openFDs(t)
	t.Cleanup(func() {
		// Closed sockets and files are released synchronously, but give
		// any goroutine still winding down a moment.
		waittest.For(t, "descriptors to be released", func() bool { return openFDs(t) <= before })
	})
}

func TestSocketRoundTrip(t *testing.T) {
	checkNoFDLeak(t)
	s := startServer(t, Config{})
	cl := newTestClient(t, s.Addr().String(), nil)
	cl.SendReliable(1, ipc.FrameBatch, seqPayload(1, 100), 10)
	cl.SendReliable(2, ipc.FrameLoss, seqPayload(2, 20), 0)
	run(t, cl)
	conn := accept(t, s)
	if conn.PeerUID() != testUID || conn.PeerPID() != int32(os.Getpid()) {
		t.Errorf("peer uid %d pid %d, want %d %d", conn.PeerUID(), conn.PeerPID(), testUID, os.Getpid())
	}
	expectFrame(t, conn, ipc.FrameHello, []byte("hello"))
	expectFrame(t, conn, ipc.FrameBatch, seqPayload(1, 100))
	expectFrame(t, conn, ipc.FrameLoss, seqPayload(2, 20))

	// An executable with its descriptor, and one without.
	content := []byte("\x7fELF pretend executable")
	exe := filepath.Join(t.TempDir(), "exe")
	if err := os.WriteFile(exe, content, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	waittest.For(t, "client to be connected", func() bool { return cl.Stats().Connected })
	if !cl.SendExecutable([]byte("notice with fd"), f) {
		t.Fatal("SendExecutable refused while connected")
	}
	if !cl.SendExecutable([]byte("notice without fd"), nil) {
		t.Fatal("SendExecutable refused while connected")
	}
	got := expectFrame(t, conn, ipc.FrameExecutable, []byte("notice with fd"))
	if got.File == nil {
		t.Fatal("executable frame arrived without its descriptor")
	}
	b, err := io.ReadAll(got.File)
	got.File.Close()
	if err != nil || !bytes.Equal(b, content) {
		t.Fatalf("read %q, %v through the received descriptor; want %q", b, err, content)
	}
	if got := expectFrame(t, conn, ipc.FrameExecutable, []byte("notice without fd")); got.File != nil {
		t.Fatal("executable frame without descriptor got one")
	}
	// The client keeps its copy, to send it again on a later connection
	// (an encoder that restarted knows no executable), until Close.
	if _, err := f.Stat(); err != nil {
		t.Fatalf("the client closed its copy of the descriptor after sending it: %v", err)
	}

	// A batch sent while connected, then acks.
	cl.SendReliable(3, ipc.FrameBatch, seqPayload(3, 5), 1)
	expectFrame(t, conn, ipc.FrameBatch, seqPayload(3, 5))
	if err := conn.Ack(3); err != nil {
		t.Fatal(err)
	}
	waittest.For(t, "ack 3", func() bool { st := cl.Stats(); return st.AckedSeq == 3 && st.UnackedFrames == 0 })

	// Close: flush, goodbye, end of stream.
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	closed := make(chan error, 1)
	go func() { closed <- cl.Close(ctx, []byte("bye")) }()
	expectFrame(t, conn, ipc.FrameGoodbye, []byte("bye"))
	if _, err := conn.Next(); err != io.EOF {
		t.Fatalf("Next after goodbye = %v, want io.EOF", err)
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if cl.SendExecutable(nil, nil) {
		t.Fatal("SendExecutable accepted after Close")
	}
	if _, err := f.Stat(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("after Close, the client's copy of the descriptor: Stat = %v, want closed", err)
	}

	st := cl.Stats()
	if st.Connects != 1 || st.DescriptorsSent != 1 || st.ExecutablesSent != 2 || st.EvictedFrames != 0 || st.Resent != 0 {
		t.Errorf("client stats %+v", st)
	}
	if st.FramesSent != 7 { // hello, 3 reliable, 2 executables, goodbye
		t.Errorf("client sent %d frames, want 7", st.FramesSent)
	}
	ss := s.Stats()
	if ss.Accepted != 1 || ss.Frames != 7 || ss.DescriptorsReceived != 1 || ss.DescriptorsDropped != 0 || ss.Acks != 1 || ss.Bytes != st.BytesSent {
		t.Errorf("server stats %+v (client sent %d bytes)", ss, st.BytesSent)
	}
}

func TestResendAfterDroppedConnection(t *testing.T) {
	checkNoFDLeak(t)
	s := startServer(t, Config{})
	cl := newTestClient(t, s.Addr().String(), nil)
	for seq := uint64(1); seq <= 3; seq++ {
		cl.SendReliable(seq, ipc.FrameBatch, seqPayload(seq, 50), 1)
	}
	run(t, cl)

	seen := map[uint64]int{}
	conn := accept(t, s)
	expectFrame(t, conn, ipc.FrameHello, []byte("hello"))
	for seq := uint64(1); seq <= 3; seq++ {
		seen[payloadSeq(expectFrame(t, conn, ipc.FrameBatch, seqPayload(seq, 50)).Payload)]++
	}
	exe, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if !cl.SendExecutable([]byte("exe"), exe) {
		t.Fatal("SendExecutable refused while connected")
	}
	if got := expectFrame(t, conn, ipc.FrameExecutable, []byte("exe")); got.File == nil {
		t.Fatal("executable frame arrived without its descriptor")
	} else {
		got.File.Close()
	}
	// Acknowledge 2 of 3, then drop the connection without acking 3.
	if err := conn.Ack(2); err != nil {
		t.Fatal(err)
	}
	waittest.For(t, "ack 2", func() bool { return cl.Stats().AckedSeq == 2 })
	conn.Close()
	cl.SendReliable(4, ipc.FrameBatch, seqPayload(4, 50), 1)
	cl.SendReliable(5, ipc.FrameLoss, seqPayload(5, 50), 0)

	conn = accept(t, s)
	expectFrame(t, conn, ipc.FrameHello, []byte("hello"))
	// The executable again, before the resent frames that may need it: a
	// restarted encoder knows none.
	if got := expectFrame(t, conn, ipc.FrameExecutable, []byte("exe")); got.File == nil {
		t.Fatal("executable frame written again without its descriptor")
	} else {
		got.File.Close()
	}
	var order []uint64
	for range 3 {
		f := next(t, conn)
		order = append(order, payloadSeq(f.Payload))
		seen[payloadSeq(f.Payload)]++
	}
	if !slices.Equal(order, []uint64{3, 4, 5}) {
		t.Fatalf("second connection carried %v, want [3 4 5]: acked frames resent or order lost", order)
	}
	for seq := uint64(1); seq <= 5; seq++ {
		if seen[seq] == 0 {
			t.Errorf("sequence %d never arrived", seq)
		}
	}
	if err := conn.Ack(5); err != nil {
		t.Fatal(err)
	}
	waittest.For(t, "ack 5", func() bool {
		st := cl.Stats()
		return st.AckedSeq == 5 && st.UnackedFrames == 0 && st.UnackedBytes == 0
	})
	// 3 was resent; 4 too if the client tried it on the dead connection.
	if st := cl.Stats(); st.Connects != 2 || st.Resent < 1 || st.Resent > 2 {
		t.Errorf("Connects = %d, Resent = %d; want 2, 1 or 2", st.Connects, st.Resent)
	}
}

func TestEviction(t *testing.T) {
	const payload, frameSize = 100, ipc.FrameOverhead + 100
	path := socketPath(t)
	cl := newTestClient(t, path, func(c *ipc.ClientConfig) { c.MaxUnackedBytes = 3 * frameSize })
	for seq := uint64(1); seq <= 10; seq++ {
		cl.SendReliable(seq, ipc.FrameBatch, seqPayload(seq, payload), 7)
	}
	st := cl.Stats()
	if st.EvictedFrames != 7 || st.EvictedBytes != 7*frameSize || st.EvictedSamples != 49 {
		t.Errorf("evicted %d frames, %d bytes, %d samples; want 7, %d, 49", st.EvictedFrames, st.EvictedBytes, st.EvictedSamples, 7*frameSize)
	}
	if st.UnackedFrames != 3 || st.UnackedBytes != 3*frameSize {
		t.Errorf("kept %d frames, %d bytes; want 3, %d", st.UnackedFrames, st.UnackedBytes, 3*frameSize)
	}

	// A frame that could never fit is evicted at once; the rest stay.
	cl.SendReliable(11, ipc.FrameBatch, make([]byte, 4*frameSize), 5)
	if st := cl.Stats(); st.EvictedFrames != 8 || st.EvictedSamples != 54 || st.UnackedFrames != 3 {
		t.Errorf("after an oversized frame: %+v", st)
	}
	// Refused: not increasing, not reliable, after Close.
	cl.SendReliable(11, ipc.FrameBatch, nil, 1)
	cl.SendReliable(12, ipc.FrameHello, nil, 1)
	if st := cl.Stats(); st.RejectedFrames != 2 {
		t.Errorf("RejectedFrames = %d, want 2", st.RejectedFrames)
	}

	// Only the survivors reach the server.
	checkNoFDLeak(t)
	s := startServer(t, Config{Path: path})
	run(t, cl)
	conn := accept(t, s)
	expectFrame(t, conn, ipc.FrameHello, []byte("hello"))
	for seq := uint64(8); seq <= 10; seq++ {
		expectFrame(t, conn, ipc.FrameBatch, seqPayload(seq, payload))
	}
}

func TestClientValidatesAcks(t *testing.T) {
	ack := func(seq uint64) []byte { return frame(ipc.FrameAck, seqPayload(seq, 8)) }
	tests := []struct {
		name   string
		before uint64 // ack this first, and wait for it
		bogus  []byte
		resend []uint64
	}{
		{"sequence never sent", 0, ack(99), []uint64{1, 2, 3}},
		{"sequence going backwards", 2, ack(1), []uint64{3}},
		{"wrong frame type", 0, frame(ipc.FrameBatch, seqPayload(1, 8)), []uint64{1, 2, 3}},
		{"short payload", 0, frame(ipc.FrameAck, []byte{1, 0, 0, 0}), []uint64{1, 2, 3}},
		{"long payload", 1, frame(ipc.FrameAck, seqPayload(3, 16)), []uint64{2, 3}},
		{"huge length", 0, rawFrame(ipc.FrameAck, 0, 0, 0xffffffff, nil), []uint64{1, 2, 3}},
		{"flags", 0, rawFrame(ipc.FrameAck, ipc.FlagDescriptor, 0, 8, seqPayload(1, 8)), []uint64{1, 2, 3}},
		{"reserved bits", 0, rawFrame(ipc.FrameAck, 0, 1, 8, seqPayload(1, 8)), []uint64{1, 2, 3}},
		// Acks never carry a checksum (protocol 1.3 included): a
		// checksummed one is refused like any other flag.
		{"checksummed ack", 0, cframe(ipc.FrameAck, seqPayload(1, 8)), []uint64{1, 2, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkNoFDLeak(t)
			// A hand-made server that can send anything.
			path := socketPath(t)
			ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			cl := newTestClient(t, path, nil)
			for seq := uint64(1); seq <= 3; seq++ {
				cl.SendReliable(seq, ipc.FrameBatch, seqPayload(seq, 10), 1)
			}
			run(t, cl)

			acceptRaw := func() (*net.UnixConn, *ipc.Reader) {
				ln.SetDeadline(time.Now().Add(waitTimeout))
				c, err := ln.AcceptUnix()
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.Close() })
				return c, ipc.NewReader(c)
			}
			readSeqs := func(r *ipc.Reader, n int) []uint64 {
				if f, err := r.Next(); err != nil || f.Type != ipc.FrameHello {
					t.Fatalf("first frame %v, %v; want hello", f.Type, err)
				}
				var seqs []uint64
				for range n {
					f, err := r.Next()
					if err != nil {
						t.Fatal(err)
					}
					seqs = append(seqs, payloadSeq(f.Payload))
				}
				return seqs
			}

			c, r := acceptRaw()
			readSeqs(r, 3)
			if tt.before != 0 {
				if _, err := c.Write(ack(tt.before)); err != nil {
					t.Fatal(err)
				}
				waittest.For(t, "the valid ack", func() bool { return cl.Stats().AckedSeq == tt.before })
			}
			if _, err := c.Write(tt.bogus); err != nil {
				t.Fatal(err)
			}
			// The client hangs up...
			// (a reset when the bogus frame was not read to its end).
			if _, err := r.Next(); err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("after the bogus ack: %v, want io.EOF or ECONNRESET", err)
			}
			waittest.For(t, "the violation to be recorded", func() bool {
				return strings.Contains(cl.Stats().LastError, "protocol violation")
			})
			if st := cl.Stats(); st.ProtocolErrors != 1 {
				t.Errorf("ProtocolErrors = %d, want 1", st.ProtocolErrors)
			}
			// ...and comes back with what is still unacknowledged.
			_, r = acceptRaw()
			if got := readSeqs(r, len(tt.resend)); !slices.Equal(got, tt.resend) {
				t.Errorf("resent %v, want %v", got, tt.resend)
			}
		})
	}
}

func TestServerRejectsForeignUID(t *testing.T) {
	checkNoFDLeak(t)
	s := startServer(t, Config{AllowedUIDs: []uint32{unusedUID(t)}})
	ctx, cancel := context.WithCancel(context.Background())
	accepted := make(chan error, 1)
	go func() {
		c, err := s.Accept(ctx)
		if c != nil {
			c.Close()
		}
		accepted <- err
	}()

	c, err := net.Dial("unix", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(waitTimeout))
	if n, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read from rejected connection: %d, %v; want io.EOF", n, err)
	}
	waittest.For(t, "rejection to be counted", func() bool { return s.Stats().Rejected == 1 })
	cancel()
	if err := <-accepted; !errors.Is(err, context.Canceled) {
		t.Fatalf("Accept = %v, want context.Canceled", err)
	}
	if st := s.Stats(); st.Accepted != 0 || st.Active != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestClientRefusesForeignServer(t *testing.T) {
	checkNoFDLeak(t)
	s := startServer(t, Config{})
	foreign := unusedUID(t)
	cl := newTestClient(t, s.Addr().String(), func(c *ipc.ClientConfig) { c.PeerUIDs = []uint32{foreign} })
	cl.SendReliable(1, ipc.FrameBatch, seqPayload(1, 10), 1)
	run(t, cl)
	conn := accept(t, s)
	// The client hangs up without sending anything, not even the hello.
	if f, err := conn.Next(); err != io.EOF {
		t.Fatalf("Next = %v, %v; want io.EOF", f.Type, err)
	}
	waittest.For(t, "the refusal to be recorded", func() bool { return cl.Stats().LastError != "" })
	st := cl.Stats()
	for _, want := range []string{"uid " + strconv.FormatUint(uint64(testUID), 10), "[12345]", ipc.PeerUIDsFlag, "peer rejected"} {
		if !strings.Contains(st.LastError, want) {
			t.Errorf("LastError = %q, want it to name %q", st.LastError, want)
		}
	}
	if st.PeerRejected == 0 || st.Connects != 0 || st.FramesSent != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestSendExecutableWhileDisconnected(t *testing.T) {
	cl := newTestClient(t, socketPath(t), nil)
	f, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if cl.SendExecutable([]byte("n"), f) {
		t.Fatal("SendExecutable accepted while not connected")
	}
	if _, err := f.Stat(); !errors.Is(err, os.ErrClosed) {
		t.Fatalf("descriptor left open: Stat = %v", err)
	}
	if st := cl.Stats(); st.DescriptorsDropped != 1 || st.ExecutablesDropped != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestExecutableQueueBound(t *testing.T) {
	checkNoFDLeak(t)
	s := startServer(t, Config{})
	cl := newTestClient(t, s.Addr().String(), func(c *ipc.ClientConfig) { c.MaxQueuedExecutables = 2 })
	run(t, cl)
	conn := accept(t, s)
	expectFrame(t, conn, ipc.FrameHello, []byte("hello"))
	waittest.For(t, "client to be connected", func() bool { return cl.Stats().Connected })
	// The server does not read, so the queue fills once the socket buffer
	// does: large payloads get there quickly.
	big := make([]byte, 1<<20)
	dropped := false
	for i := 0; i < 1000 && !dropped; i++ {
		f, err := os.Open(os.Args[0])
		if err != nil {
			t.Fatal(err)
		}
		dropped = !cl.SendExecutable(big, f)
	}
	if !dropped {
		t.Fatal("queue never filled")
	}
	if st := cl.Stats(); st.DescriptorsDropped == 0 {
		t.Errorf("stats %+v", st)
	}
}

// sendRaw writes b on c with the descriptors attached.
func sendRaw(t *testing.T, c *net.UnixConn, b []byte, files ...*os.File) {
	t.Helper()
	var oob []byte
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, f := range files {
			fds[i] = int(f.Fd())
		}
		oob = unix.UnixRights(fds...)
	}
	if _, _, err := c.WriteMsgUnix(b, oob, nil); err != nil {
		t.Fatal(err)
	}
}

func TestServerDescriptorQueue(t *testing.T) {
	checkNoFDLeak(t)
	s := startServer(t, Config{MaxPendingDescriptors: 4})
	raw, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: s.Addr().String(), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	conn := accept(t, s)

	files := make([]*os.File, 6)
	for i := range files {
		p := filepath.Join(t.TempDir(), "f")
		if err := os.WriteFile(p, []byte{byte('a' + i)}, 0o600); err != nil {
			t.Fatal(err)
		}
		if files[i], err = os.Open(p); err != nil {
			t.Fatal(err)
		}
		defer files[i].Close()
	}
	// A flagged frame with no descriptor: delivered without one.
	sendRaw(t, raw, rawFrame(ipc.FrameExecutable, ipc.FlagDescriptor, 0, 1, []byte("0")))
	if f := next(t, conn); f.Type != ipc.FrameExecutable || f.File != nil {
		t.Fatalf("got %s with file %v", f.Type, f.File)
	}
	// Six descriptors on unflagged frames: four are kept, two closed.
	for i := range 6 {
		sendRaw(t, raw, frame(ipc.FrameHello, nil), files[i])
		next(t, conn)
	}
	// A flagged frame gets the oldest kept descriptor.
	sendRaw(t, raw, rawFrame(ipc.FrameExecutable, ipc.FlagDescriptor, 0, 1, []byte("1")), files[5])
	f := next(t, conn)
	if f.File == nil {
		t.Fatal("flagged frame without descriptor")
	}
	b, err := io.ReadAll(f.File)
	f.File.Close()
	if err != nil || string(b) != "a" {
		t.Fatalf("descriptor reads %q, %v; want the first file's %q", b, err, "a")
	}
	st := s.Stats()
	if st.DescriptorsReceived != 7 || st.DescriptorsDropped != 3 || st.DescriptorsMissing != 1 {
		t.Errorf("stats %+v", st)
	}
	// Close releases the three still queued.
	conn.Close()
	if st := s.Stats(); st.DescriptorsDropped != 6 || st.Active != 0 {
		t.Errorf("after Close: %+v", st)
	}
	if _, err := conn.Next(); !errors.Is(err, ipc.ErrClosed) {
		t.Fatalf("Next after Close = %v, want ipc.ErrClosed", err)
	}
}

func TestServerRefusesProtocolViolations(t *testing.T) {
	plain, checked := frame(ipc.FrameHello, nil), cframe(ipc.FrameHello, nil)
	corrupt := cframe(ipc.FrameBatch, seqPayload(1, 64))
	corrupt[len(corrupt)-1] ^= 0x01
	tests := []struct {
		name  string
		hello []byte // the first frame: plain (1.0-1.2) or checksummed (1.3)
		data  []byte
		is    error
	}{
		{"descriptor flag on a batch", plain, rawFrame(ipc.FrameBatch, ipc.FlagDescriptor, 0, 0, nil), ipc.ErrCorrupt},
		{"ack from the sampler", plain, frame(ipc.FrameAck, seqPayload(1, 8)), ipc.ErrProtocol},
		{"oversized", plain, rawFrame(ipc.FrameBatch, 0, 0, ipc.MaxFrameSize+1, nil), ipc.ErrFrameTooLarge},
		{"checksum after a hello without one", plain, cframe(ipc.FrameBatch, nil), ipc.ErrCorrupt},
		{"no checksum after a hello with one", checked, frame(ipc.FrameBatch, nil), ipc.ErrCorrupt},
		{"checksum mismatch", checked, corrupt, ipc.ErrChecksum},
		{"checksummed ack from the sampler", checked, cframe(ipc.FrameAck, seqPayload(1, 8)), ipc.ErrProtocol},
		{"descriptor flag on a checksummed batch", checked, rawCFrame(ipc.FrameBatch, ipc.FlagDescriptor, 0, 0, nil), ipc.ErrCorrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := startServer(t, Config{})
			raw, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: s.Addr().String(), Net: "unix"})
			if err != nil {
				t.Fatal(err)
			}
			defer raw.Close()
			conn := accept(t, s)
			sendRaw(t, raw, concat(tt.hello, tt.data))
			next(t, conn)
			_, err = conn.Next()
			at := fmt.Sprintf("at byte %d", len(tt.hello))
			if !errors.Is(err, tt.is) || !strings.Contains(err.Error(), at) {
				t.Fatalf("Next = %v, want %v %s", err, tt.is, at)
			}
		})
	}
}

func TestReadDeadlineAtFrameBoundary(t *testing.T) {
	s := startServer(t, Config{})
	raw, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: s.Addr().String(), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	conn := accept(t, s)
	conn.SetReadDeadline(time.Now())
	if _, err := conn.Next(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Next = %v, want a deadline error", err)
	}
	conn.SetReadDeadline(time.Time{})
	sendRaw(t, raw, frame(ipc.FrameHello, []byte("late")))
	expectFrame(t, conn, ipc.FrameHello, []byte("late"))
}

func TestListenPath(t *testing.T) {
	t.Run("sets the mode and removes the socket on Close", func(t *testing.T) {
		path := socketPath(t)
		s, err := Listen(Config{Path: path, Mode: 0o640}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != 0o640 {
			t.Errorf("socket mode %v, want socket 0640", fi.Mode())
		}
		if s.Activated() {
			t.Error("Activated() without systemd")
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("socket file left behind: %v", err)
		}
		if _, err := s.Accept(context.Background()); !errors.Is(err, ipc.ErrClosed) {
			t.Errorf("Accept after Close = %v, want ipc.ErrClosed", err)
		}
	})
	t.Run("replaces a stale socket", func(t *testing.T) {
		path := socketPath(t)
		ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		ln.SetUnlinkOnClose(false)
		ln.Close()
		s := startServer(t, Config{Path: path})
		if s.Addr().String() != path {
			t.Errorf("Addr() = %v", s.Addr())
		}
	})
	t.Run("refuses a live socket", func(t *testing.T) {
		s := startServer(t, Config{})
		if _, err := Listen(Config{Path: s.Addr().String()}, nil, nil); err == nil || !strings.Contains(err.Error(), "another process is listening") {
			t.Fatalf("second Listen = %v", err)
		}
	})
	t.Run("refuses to remove a regular file", func(t *testing.T) {
		path := socketPath(t)
		if err := os.WriteFile(path, []byte("precious"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Listen(Config{Path: path}, nil, nil)
		if err == nil || !strings.Contains(err.Error(), "not a socket") {
			t.Fatalf("Listen = %v, want a refusal", err)
		}
		if b, _ := os.ReadFile(path); string(b) != "precious" {
			t.Fatal("the file was touched")
		}
	})
	t.Run("names a missing directory once, with the fix", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "missing")
		path := filepath.Join(dir, "tandem.sock")
		_, err := Listen(Config{Path: path}, nil, nil)
		if err == nil || strings.Count(err.Error(), path) != 1 || !strings.Contains(err.Error(), "the directory "+dir+" does not exist") ||
			!strings.Contains(err.Error(), "--socket") {
			t.Fatalf("Listen = %v, want the path once, the missing directory and the fix", err)
		}
	})
	t.Run("needs a path without systemd", func(t *testing.T) {
		if _, err := Listen(Config{}, nil, nil); err == nil || !strings.Contains(err.Error(), "LISTEN_FDS") {
			t.Fatalf("Listen = %v", err)
		}
	})
}

func TestClientLifecycleErrors(t *testing.T) {
	cl, err := ipc.NewClient(ipc.ClientConfig{Path: socketPath(t)}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "SetHello") {
		t.Fatalf("Run without hello = %v", err)
	}
	cl.SetHello(nil)
	// Nothing listens: Close gives up when its context ends.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cl.Run(context.Background()) }()
	waittest.For(t, "a failed connection attempt", func() bool { return cl.Stats().LastError != "" })
	cancel()
	if err := cl.Close(ctx, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Close = %v, want context.Canceled", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Run after Close = %v, want nil", err)
	}
	if err := cl.Run(context.Background()); !errors.Is(err, ipc.ErrClosed) {
		t.Fatalf("Run after Close = %v, want ipc.ErrClosed", err)
	}
	if err := cl.Close(context.Background(), nil); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	cl.SendReliable(1, ipc.FrameBatch, nil, 1)
	if st := cl.Stats(); st.RejectedFrames != 1 {
		t.Errorf("RejectedFrames = %d after Close", st.RejectedFrames)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := (ipc.ClientConfig{}).Validate(); err == nil {
		t.Error("empty ipc.ClientConfig is valid")
	}
	bad := ipc.ClientConfig{Path: strings.Repeat("x", 200), MaxUnackedBytes: -1, MinBackoff: 2 * time.Second, MaxBackoff: time.Second}
	err := bad.Validate()
	for _, want := range []string{"longer than", "negative", "exceeds max backoff"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to report %q", err, want)
		}
	}
	if _, err := ipc.NewClient(bad, nil, nil); err == nil {
		t.Error("NewClient accepted an invalid config")
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Errorf("default server config: %v", err)
	}
	if err := (Config{Mode: fs.ModeDir | 0o600, MaxPendingDescriptors: -1}).Validate(); err == nil {
		t.Error("invalid Config is valid")
	}
	c := ipc.DefaultClientConfig()
	c.Path = "/run/tandem.sock"
	if err := c.Validate(); err != nil {
		t.Errorf("default client config: %v", err)
	}
}

// TestClientReconnectWaitsOnTheClock: between connection attempts the
// client waits on its clock (the one retry policy's), so a test steps a
// fake clock instead of sleeping: an encoder that appears is not tried
// before the wait is over, and is connected to once it is.
func TestClientReconnectWaitsOnTheClock(t *testing.T) {
	path := socketPath(t)
	clk := clocktesting.NewFakeClock(time.Unix(1_000_000, 0))
	cl := newTestClient(t, path, func(c *ipc.ClientConfig) {
		c.MinBackoff, c.MaxBackoff, c.Clock = time.Second, 4*time.Second, clk
	})
	run(t, cl)
	// Nothing listens: the first attempt fails and the client waits.
	waittest.For(t, "the client to wait after a failed attempt", clk.HasWaiters)
	s := startServer(t, Config{Path: path})
	clk.Step(500 * time.Millisecond) // below the first wait (1 s ±20%)
	if !clk.HasWaiters() || cl.Stats().Connects != 0 {
		t.Fatalf("the client tried again before its wait was over (connects %d)", cl.Stats().Connects)
	}
	clk.Step(time.Second)
	conn := accept(t, s)
	expectFrame(t, conn, ipc.FrameHello, []byte("hello"))
	waittest.For(t, "the connection", func() bool { return cl.Stats().Connects == 1 })
}
