package ipcserver

import (
	"errors"
	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/test/waittest"
	"io"
	"slices"
	"testing"
	"time"
)

// Loss accounting against a server that stops reading and acknowledging:
// every batch the client accepted is either received by the server
// exactly once or counted lost (Stats.Lost*), never both, never neither.

const (
	stallFrameSize = 64 << 10 // several fill the socket's buffer
	stallFrames    = 40
	stallBound     = 4 * (ipc.FrameOverhead + stallFrameSize)
)

// samplesOf is the sample count the tests pass with batch seq.
func samplesOf(seq uint64) int { return int(seq%7) + 1 }

// fillStalled sends stallFrames batches to a client whose server has read
// the hello and nothing since, pausing between frames so that the writer
// fills the socket's buffer before the bound starts evicting.
func fillStalled(t *testing.T, cl *ipc.Client) {
	t.Helper()
	for seq := uint64(1); seq <= stallFrames; seq++ {
		cl.SendReliable(seq, ipc.FrameBatch, seqPayload(seq, stallFrameSize), samplesOf(seq))
		time.Sleep(2 * time.Millisecond)
	}
	st := cl.Stats()
	if st.UnconfirmedFrames == 0 || st.LostFrames == 0 {
		t.Fatalf("stalled: %d frames evicted after being written, %d lost; want some of each (stats %+v)", st.UnconfirmedFrames, st.LostFrames, st)
	}
	checkEvictionBalance(t, st)
}

// checkEvictionBalance checks that every evicted frame is lost, delivered
// or unconfirmed.
func checkEvictionBalance(t *testing.T, st ipc.ClientStats) {
	t.Helper()
	if st.EvictedFrames != st.LostFrames+st.DeliveredEvictedFrames+uint64(st.UnconfirmedFrames) ||
		st.EvictedSamples != st.LostSamples+st.DeliveredEvictedSamples+uint64(st.UnconfirmedSamples) {
		t.Errorf("evicted %d frames (%d samples) != lost %d (%d) + delivered %d (%d) + unconfirmed %d (%d)",
			st.EvictedFrames, st.EvictedSamples, st.LostFrames, st.LostSamples,
			st.DeliveredEvictedFrames, st.DeliveredEvictedSamples, st.UnconfirmedFrames, st.UnconfirmedSamples)
	}
}

// readAll reads reliable frames from conn until want is received or the
// stream ends, recording how often each sequence arrived; it acks
// the highest sequence each time it has drained what was buffered.
func readAll(t *testing.T, conn *Conn, seen map[uint64]int, want uint64) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for seen[want] == 0 {
		_ = conn.SetReadDeadline(deadline)
		f, err := conn.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		if !f.Type.Reliable() {
			continue
		}
		seq := payloadSeq(f.Payload)
		seen[seq]++
		if err := conn.Ack(seq); err != nil {
			t.Fatal(err)
		}
	}
}

// checkExact checks that every sequence in 1..n either arrived once or was
// counted lost, and that the lost counts match what never arrived.
func checkExact(t *testing.T, st ipc.ClientStats, seen map[uint64]int, n uint64) {
	t.Helper()
	var missingFrames, missingSamples uint64
	for seq := uint64(1); seq <= n; seq++ {
		switch seen[seq] {
		case 0:
			missingFrames++
			missingSamples += uint64(samplesOf(seq))
		case 1:
		default:
			t.Errorf("sequence %d arrived %d times", seq, seen[seq])
		}
	}
	if st.LostFrames != missingFrames || st.LostSamples != missingSamples {
		t.Errorf("client counts %d frames (%d samples) lost; %d frames (%d samples) never arrived",
			st.LostFrames, st.LostSamples, missingFrames, missingSamples)
	}
	if st.UnconfirmedFrames != 0 || st.UnconfirmedSamples != 0 {
		t.Errorf("%d frames (%d samples) still unconfirmed", st.UnconfirmedFrames, st.UnconfirmedSamples)
	}
	checkEvictionBalance(t, st)
}

func TestLossAccounting(t *testing.T) {
	tests := []struct {
		name string
		// after runs once the client has filled the stalled connection
		// and returns what the server received.
		after func(t *testing.T, s *Server, conn *Conn, cl *ipc.Client) map[uint64]int
	}{{
		name: "stall then resume",
		after: func(t *testing.T, s *Server, conn *Conn, cl *ipc.Client) map[uint64]int {
			seen := map[uint64]int{}
			readAll(t, conn, seen, stallFrames)
			waittest.For(t, "every frame acknowledged", func() bool {
				st := cl.Stats()
				return st.AckedSeq == stallFrames && st.UnackedFrames == 0 && st.UnconfirmedFrames == 0
			})
			st := cl.Stats()
			if st.DeliveredEvictedFrames == 0 || st.Connects != 1 || st.Resent != 0 {
				t.Errorf("after resuming: %+v; want evicted frames delivered, one connection, nothing resent", st)
			}
			return seen
		},
	}, {
		name: "stall then disconnect",
		after: func(t *testing.T, s *Server, conn *Conn, cl *ipc.Client) map[uint64]int {
			before := cl.Stats()
			// The server goes away without reading: what sat in the
			// socket is gone, evicted or not.
			conn.Close()
			conn2 := accept(t, s)
			expectFrame(t, conn2, ipc.FrameHello, []byte("hello"))
			seen := map[uint64]int{}
			readAll(t, conn2, seen, stallFrames)
			waittest.For(t, "every frame acknowledged", func() bool {
				st := cl.Stats()
				return st.AckedSeq == stallFrames && st.UnackedFrames == 0
			})
			st := cl.Stats()
			if st.LostFrames != st.EvictedFrames || st.DeliveredEvictedFrames != 0 {
				t.Errorf("after the disconnection: %d of %d evicted frames lost, %d delivered; want all lost",
					st.LostFrames, st.EvictedFrames, st.DeliveredEvictedFrames)
			}
			if st.LostFrames <= before.LostFrames {
				t.Errorf("lost frames %d before and after the disconnection: the unconfirmed ones should have become lost", st.LostFrames)
			}
			if got := uint64(len(seen)); got != stallFrames-st.LostFrames {
				t.Errorf("second connection carried %d frames, want the %d kept", got, stallFrames-st.LostFrames)
			}
			return seen
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkNoFDLeak(t)
			s := startServer(t, Config{})
			cl := newTestClient(t, s.Addr().String(), func(c *ipc.ClientConfig) { c.MaxUnackedBytes = stallBound })
			run(t, cl)
			conn := accept(t, s)
			expectFrame(t, conn, ipc.FrameHello, []byte("hello"))
			fillStalled(t, cl)
			seen := tt.after(t, s, conn, cl)
			checkExact(t, cl.Stats(), seen, stallFrames)
		})
	}
}

// TestLossReportsSurvivePressure: loss reports are never evicted, even
// past the bound, while the batches around them are; once the server
// reads, every loss report arrives, in sequence order, and every batch
// either arrives or is counted lost.
func TestLossReportsSurvivePressure(t *testing.T) {
	checkNoFDLeak(t)
	const size, frameSize, n = 100, ipc.FrameOverhead + 100, 30
	path := socketPath(t)
	cl := newTestClient(t, path, func(c *ipc.ClientConfig) { c.MaxUnackedBytes = 3 * frameSize })
	var reports []uint64
	var batches uint64
	for seq := uint64(1); seq <= n; seq++ {
		if seq%10 == 3 {
			cl.SendReliable(seq, ipc.FrameLoss, seqPayload(seq, size), 0)
			reports = append(reports, seq)
			continue
		}
		cl.SendReliable(seq, ipc.FrameBatch, seqPayload(seq, size), 1)
		batches++
		if st := cl.Stats(); st.UnackedBytes > 3*frameSize {
			t.Fatalf("after batch %d: %d bytes buffered with %d loss reports, over the bound %d", seq, st.UnackedBytes, st.UnackedLossFrames, 3*frameSize)
		}
	}
	// A loss report larger than the bound is kept too.
	cl.SendReliable(n+1, ipc.FrameLoss, seqPayload(n+1, 10*size), 0)
	reports = append(reports, n+1)
	st := cl.Stats()
	if st.UnackedLossFrames != len(reports) || st.RejectedFrames != 0 {
		t.Fatalf("not connected: %d loss reports kept, %d refused; want %d, 0", st.UnackedLossFrames, st.RejectedFrames, len(reports))
	}
	// Not connected: every evicted batch is lost.
	if st.LostFrames == 0 || st.LostFrames != st.EvictedFrames || st.LostSamples != st.LostFrames {
		t.Errorf("lost %d frames (%d samples), evicted %d; want every evicted batch lost", st.LostFrames, st.LostSamples, st.EvictedFrames)
	}

	s := startServer(t, Config{Path: path})
	run(t, cl)
	conn := accept(t, s)
	expectFrame(t, conn, ipc.FrameHello, []byte("hello"))
	seen := map[uint64]int{}
	readAll(t, conn, seen, n+1)
	var got []uint64
	var received uint64
	for seq := uint64(1); seq <= n+1; seq++ {
		switch {
		case seen[seq] > 0 && slices.Contains(reports, seq):
			got = append(got, seq)
		case seen[seq] > 0:
			received++
		}
	}
	if !slices.Equal(got, reports) {
		t.Errorf("loss reports received %v, want %v", got, reports)
	}
	waittest.For(t, "the acks", func() bool {
		st := cl.Stats()
		return st.UnackedFrames == 0 && st.UnackedLossFrames == 0 && st.UnackedBytes == 0
	})
	if st := cl.Stats(); received+st.LostFrames != batches {
		t.Errorf("%d batches received + %d lost, want %d", received, st.LostFrames, batches)
	}
}

// TestUnconfirmedRecordsBounded: a server that reads everything and never
// acknowledges costs the client a bounded record of evicted frames; the
// eventual ack still retires every one of them as delivered.
func TestUnconfirmedRecordsBounded(t *testing.T) {
	checkNoFDLeak(t)
	// More than the ledger keeps records for (ipc's maxUnconfirmed, 1024):
	// the records merge, the counts stay exact.
	const size, n = 16, 1024 + 200
	s := startServer(t, Config{})
	cl := newTestClient(t, s.Addr().String(), func(c *ipc.ClientConfig) { c.MaxUnackedBytes = ipc.FrameOverhead + size })
	run(t, cl)
	conn := accept(t, s)
	expectFrame(t, conn, ipc.FrameHello, []byte("hello"))
	for seq := uint64(1); seq <= n; seq++ {
		cl.SendReliable(seq, ipc.FrameBatch, seqPayload(seq, size), 2)
		expectFrame(t, conn, ipc.FrameBatch, seqPayload(seq, size)) // written before the next one evicts it
	}
	st := cl.Stats()
	if st.UnconfirmedFrames != n-1 || st.LostFrames != 0 {
		t.Errorf("%d unconfirmed frames, %d lost; want %d, 0", st.UnconfirmedFrames, st.LostFrames, n-1)
	}
	checkEvictionBalance(t, st)
	if err := conn.Ack(n); err != nil {
		t.Fatal(err)
	}
	waittest.For(t, "the ack", func() bool { return cl.Stats().AckedSeq == n })
	st = cl.Stats()
	if st.DeliveredEvictedFrames != n-1 || st.DeliveredEvictedSamples != 2*(n-1) || st.UnconfirmedFrames != 0 || st.LostFrames != 0 {
		t.Errorf("after the ack: %+v; want %d frames delivered, none unconfirmed or lost", st, n-1)
	}
	checkEvictionBalance(t, st)
}
