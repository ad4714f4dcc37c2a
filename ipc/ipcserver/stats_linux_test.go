package ipcserver

import (
	"testing"

	"github.com/tandem-profiler/tandem/ipc"
)

// TestSendStatsKeepsLatest queues stats before the client connects: only
// the latest is written, after the hello and before later frames.
func TestSendStatsKeepsLatest(t *testing.T) {
	s := startServer(t, Config{})
	cl := newTestClient(t, s.Addr().String(), nil)
	if !cl.SendStats([]byte("stats 1")) || !cl.SendStats([]byte("stats 2")) {
		t.Fatal("SendStats refused before Close")
	}
	run(t, cl)
	conn := accept(t, s)
	expectFrame(t, conn, ipc.FrameHello, []byte("hello"))
	expectFrame(t, conn, ipc.FrameStats, []byte("stats 2"))
	cl.SendReliable(1, ipc.FrameBatch, seqPayload(1, 10), 1)
	expectFrame(t, conn, ipc.FrameBatch, seqPayload(1, 10))
	if !cl.SendStats([]byte("stats 3")) {
		t.Fatal("SendStats refused while connected")
	}
	expectFrame(t, conn, ipc.FrameStats, []byte("stats 3"))
	if got := s.Stats().Frames; got != 4 {
		t.Errorf("server counted %d frames, want 4", got)
	}
}
