package ipc

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/tandem-profiler/tandem/test/privtest"
	"github.com/tandem-profiler/tandem/test/waittest"
)

// TestClientFindsSocketActivatedServer: connected to a socket whose root
// creator holds it alone (a service manager that starts the encoder on
// connection), the client says the server is starting and, once another
// process holds the socket, names that process as the server; when none
// shows within activationWait it stops saying so and keeps the creator.
func TestClientFindsSocketActivatedServer(t *testing.T) {
	privtest.RequireRoot(t) // a non-root creator is the server itself
	for _, tc := range []struct {
		name       string
		startAfter bool // the holder starts only after activationWait
	}{
		{"started at once", false},
		{"started late", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "s.sock")
			ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() { // a server that reads and never acknowledges
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					go func() { _, _ = io.Copy(io.Discard, c); c.Close() }()
				}
			}()
			c := runClient(t, path, 0)

			self := uint32(os.Getpid())
			waittest.For(t, "connected, the creator holding the socket alone", func() bool { return c.IsServer(self) })
			if tc.startAfter {
				waittest.For(t, "the client to stop waiting for a server to start", func() bool { return !c.ServerStarting() })
				if !c.IsServer(self) {
					t.Error("no other holder showed: the creator should be the server")
				}
			} else if !c.ServerStarting() {
				t.Error("ServerStarting() = false just after connecting to a root creator holding the socket alone")
			}

			holder := holdSocket(t, ln)
			waittest.For(t, "the holder named as the server", func() bool { return c.IsServer(holder) })
			if c.ServerStarting() {
				t.Error("ServerStarting() = true after the server was found")
			}
			if c.IsServer(self) {
				t.Error("the creator is still named as the server after passing the socket on")
			}
		})
	}
}

// TestClientNonRootServer: a server whose socket was created by a non-root
// process is that process: the client never says it is starting (which
// would hold the sampler's batches back) and names it at once.
func TestClientNonRootServer(t *testing.T) {
	privtest.RequireRoot(t) // to start the server as another user
	const nobody = 65534
	python, err := exec.LookPath("/usr/bin/python3")
	if err != nil {
		privtest.SkipOrFail(t, "no /usr/bin/python3 to listen as another user: %v", err)
	}
	dir, err := os.MkdirTemp("", "tandem-ipc-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "s.sock")
	// Listens (the backlog takes the client's connection) until killed.
	server := exec.Command(python, "-c", "import socket, sys, time\n"+
		"s = socket.socket(socket.AF_UNIX)\ns.bind(sys.argv[1])\ns.listen(8)\ntime.sleep(600)", path)
	server.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = server.Process.Kill(); _ = server.Wait() })
	waittest.For(t, "the server's socket", func() bool { _, err := os.Stat(path); return err == nil })

	c := runClient(t, path, nobody)
	waittest.For(t, "the server named", func() bool { return c.IsServer(uint32(server.Process.Pid)) })
	if c.ServerStarting() {
		t.Error("ServerStarting() = true for a non-root server: the sampler would hold its batches back")
	}
}

// runClient runs a client of the socket at path, whose server runs as
// serverUID, until the test ends.
func runClient(t *testing.T, path string, serverUID uint32) *Client {
	t.Helper()
	c, err := NewClient(ClientConfig{Path: path, PeerUIDs: []uint32{serverUID}, TrustSocketDir: true,
		MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond}, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	c.SetHello([]byte("hello"))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v", err)
		}
	})
	return c
}

// holdSocket starts a process holding ln (as fd 3), as a socket-activated
// server does, and returns its pid.
func holdSocket(t *testing.T, ln *net.UnixListener) uint32 {
	t.Helper()
	f, err := ln.File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command("sleep", "600")
	cmd.ExtraFiles = []*os.File{f}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return uint32(cmd.Process.Pid)
}

// TestServerPIDOutlivesConnection: a server stays named for pastServerTTL
// after its connection ended (the tracer reports traces late), beside the
// next one, and is forgotten after that.
func TestServerPIDOutlivesConnection(t *testing.T) {
	c := &Client{}
	if c.IsServer(7) {
		t.Fatal("IsServer(7) before any connection")
	}
	c.setServer(7, false)
	c.endServer(time.Now())
	c.setServer(8, false)
	for pid, want := range map[uint32]bool{7: true, 8: true, 9: false, 0: false} {
		if got := c.IsServer(pid); got != want {
			t.Errorf("IsServer(%d) = %v, want %v", pid, got, want)
		}
	}
	c.endServer(time.Now().Add(-pastServerTTL - time.Second)) // 8 ended long ago
	if !c.IsServer(7) || c.IsServer(8) {
		t.Errorf("IsServer(7) = %v, IsServer(8) = %v: want 7 still named, 8 forgotten", c.IsServer(7), c.IsServer(8))
	}
	c.setServer(0, false)
	c.endServer(time.Now().Add(pastServerTTL)) // 7's time is up
	if c.IsServer(7) {
		t.Error("IsServer(7) after its time was up")
	}
}
