package ipcserver

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/test/waittest"
)

// TestClientRefusesUnsafeSocketDir: a server listening in a directory
// anyone can write gets no connection, and the refusal names the fix;
// TrustSocketDir (a pod's emptyDir) connects.
func TestClientRefusesUnsafeSocketDir(t *testing.T) {
	checkNoFDLeak(t)
	dir := filepath.Join(t.TempDir(), "shared")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "tandem.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()

	cl := newTestClient(t, path, nil)
	cl.SendReliable(1, ipc.FrameBatch, seqPayload(1, 10), 1)
	run(t, cl)
	waittest.For(t, "the refusal to be recorded", func() bool { return cl.Stats().PeerRejected >= 2 })
	st := cl.Stats()
	if !strings.Contains(st.LastError, "unsafe socket directory") || !strings.Contains(st.LastError, ipc.SocketDirCheckFlag) {
		t.Errorf("LastError = %q, want the unsafe directory and %s named", st.LastError, ipc.SocketDirCheckFlag)
	}
	if st.Connects != 0 || st.FramesSent != 0 {
		t.Errorf("stats %+v: want no connection and nothing sent", st)
	}
	// Nothing even dialed: no connection waits to be accepted.
	ln.SetDeadline(time.Now().Add(10 * time.Millisecond))
	if c, err := ln.Accept(); err == nil {
		c.Close()
		t.Fatal("the client dialed a socket in a world-writable directory")
	}

	trusting := newTestClient(t, path, func(c *ipc.ClientConfig) { c.TrustSocketDir = true })
	trusting.SendReliable(1, ipc.FrameBatch, seqPayload(1, 10), 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- trusting.Run(ctx) }()
	ln.SetDeadline(time.Now().Add(waitTimeout))
	c, err := ln.Accept()
	if err != nil {
		t.Fatalf("TrustSocketDir: %v", err)
	}
	r := ipc.NewReader(c)
	if f, err := r.Next(); err != nil || f.Type != ipc.FrameHello {
		t.Fatalf("first frame %v, %v; want hello", f.Type, err)
	}
	c.Close()
	cancel()
	<-done
	trusting.Close(context.Background(), nil)
}
