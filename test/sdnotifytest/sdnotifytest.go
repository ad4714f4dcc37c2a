package sdnotifytest

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// Socket is a NOTIFY_SOCKET that records what it receives.
type Socket struct {
	conn *net.UnixConn
	path string

	mu       sync.Mutex
	messages []string // one per datagram
	changed  chan struct{}
}

// Listen binds a notification socket in dir (mode 0666, so that a process
// of any uid can send to it) and closes it when the test ends.
func Listen(t testing.TB, dir string) *Socket {
	t.Helper()
	path := filepath.Join(dir, "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatalf("listen for sd_notify messages: %v", err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		conn.Close()
		t.Fatal(err)
	}
	s := &Socket{conn: conn, path: path, changed: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			s.mu.Lock()
			s.messages = append(s.messages, string(buf[:n]))
			close(s.changed)
			s.changed = make(chan struct{})
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() { conn.Close(); <-done })
	return s
}

// Path is the socket's path: the value of NOTIFY_SOCKET.
func (s *Socket) Path() string { return s.path }

// Env is the NOTIFY_SOCKET=path entry for a child's environment.
func (s *Socket) Env() string { return "NOTIFY_SOCKET=" + s.path }

// Received reports whether a message carried the assignment kv (e.g.
// "READY=1"), alone or among others.
func (s *Socket) Received(kv string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.ContainsFunc(s.messages, func(m string) bool { return slices.Contains(strings.Split(m, "\n"), kv) })
}

// ErrExited is returned by WaitFor when the process exited first.
var ErrExited = errors.New("the process exited before notifying")

// WaitFor waits until a message carries kv. It returns ErrExited as soon
// as exited is closed (pass the channel that a Wait goroutine closes), and
// an error once timeout has passed.
func (s *Socket) WaitFor(kv string, exited <-chan struct{}, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		s.mu.Lock()
		changed := s.changed
		s.mu.Unlock()
		if s.Received(kv) {
			return nil
		}
		select {
		case <-changed:
		case <-exited:
			if s.Received(kv) {
				return nil
			}
			return ErrExited
		case <-deadline.C:
			return errors.New("no " + kv + " within " + timeout.String())
		}
	}
}
