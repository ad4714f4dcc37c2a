package sdnotifytest

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
)

func TestWaitForReady(t *testing.T) {
	s := Listen(t, t.TempDir())
	t.Setenv("NOTIFY_SOCKET", s.Path())
	if sent, err := daemon.SdNotify(false, "STATUS=loading\nREADY=1"); !sent || err != nil {
		t.Fatalf("SdNotify: %v, %v", sent, err)
	}
	if err := s.WaitFor("READY=1", nil, time.Minute); err != nil {
		t.Fatal(err)
	}
	if !s.Received("STATUS=loading") || s.Received("STOPPING=1") {
		t.Error("Received disagrees with what was sent")
	}
}

func TestWaitForFailsFastOnExit(t *testing.T) {
	s := Listen(t, t.TempDir())
	exited := make(chan struct{})
	close(exited)
	if err := s.WaitFor("READY=1", exited, time.Hour); !errors.Is(err, ErrExited) {
		t.Fatalf("WaitFor after exit: %v, want ErrExited", err)
	}
	c, err := net.Dial("unixgram", s.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("READY=1")); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitFor("READY=1", nil, time.Minute); err != nil {
		t.Fatal(err)
	}
	// A message that arrived before the exit counts.
	if err := s.WaitFor("READY=1", exited, time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitFor("WATCHDOG=1", nil, 10*time.Millisecond); err == nil {
		t.Error("WaitFor of a message never sent returned nil")
	}
}
