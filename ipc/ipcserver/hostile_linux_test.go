package ipcserver

import (
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/test/waittest"
)

// TestClientSurvivesHostileEncoder plays a compromised encoder: on each of
// many connections it sends the sampler's client arbitrary bytes (random
// lengths up to 1 MiB, sometimes with descriptors attached by SCM_RIGHTS).
// Each time the client closes that connection, counts one protocol error
// and comes back with every unacknowledged frame, in order: nothing else
// happens. It gains no descriptor, acknowledges nothing, and its buffer
// stays what it was.
func TestClientSurvivesHostileEncoder(t *testing.T) {
	checkNoFDLeak(t)
	path := socketPath(t)
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cl := newTestClient(t, path, nil)
	want := []uint64{1, 2, 3}
	for _, seq := range want {
		cl.SendReliable(seq, ipc.FrameBatch, seqPayload(seq, 100), 1)
	}
	run(t, cl)
	before := cl.Stats()

	// A descriptor the hostile side tries to push into the sampler.
	bait, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	defer bait.Close()

	rng := rand.New(rand.NewPCG(14, 14))
	const rounds = 40
	for round := range rounds {
		ln.SetDeadline(time.Now().Add(waitTimeout))
		c, err := ln.AcceptUnix()
		if err != nil {
			t.Fatal(err)
		}
		r := ipc.NewReader(c)
		if f, err := r.Next(); err != nil || f.Type != ipc.FrameHello {
			t.Fatalf("round %d: first frame %v, %v; want hello", round, f.Type, err)
		}
		var got []uint64
		for range want {
			f, err := r.Next()
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			got = append(got, payloadSeq(f.Payload))
		}
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: resent %v, want %v", round, got, want)
		}

		garbage := make([]byte, 8+rng.IntN(64))
		if round%10 == 9 {
			garbage = make([]byte, 1<<20)
		}
		for i := range garbage {
			garbage[i] = byte(rng.Uint32())
		}
		if round%4 == 1 {
			// Starts like an ack, then breaks one rule of its header.
			garbage[0] = byte(ipc.FrameAck)
			binary.LittleEndian.PutUint32(garbage[4:], 8)
			garbage[1+rng.IntN(3)] |= 1
		}
		if garbage[0] == byte(ipc.FrameAck) && garbage[1] == 0 && garbage[2] == 0 && garbage[3] == 0 &&
			binary.LittleEndian.Uint32(garbage[4:]) == ipc.AckPayloadSize {
			garbage[1] = 1 // a well-formed ack header is not garbage
		}
		if round%3 == 0 {
			if _, _, err := c.WriteMsgUnix(garbage[:8], syscall.UnixRights(int(bait.Fd())), nil); err != nil {
				t.Fatalf("round %d: send descriptor: %v", round, err)
			}
			garbage = garbage[8:]
		}
		// The client may hang up before reading it all.
		_, _ = c.Write(garbage)
		if _, err := r.Next(); err != io.EOF && !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
			t.Fatalf("round %d: after garbage: %v, want the client to hang up", round, err)
		}
		c.Close()
		waittest.For(t, "the protocol error to be counted", func() bool { return cl.Stats().ProtocolErrors == uint64(round+1) })
	}

	st := cl.Stats()
	if st.AckedSeq != 0 || st.UnackedFrames != len(want) || st.UnackedBytes != before.UnackedBytes || st.LostFrames != 0 {
		t.Errorf("after %d hostile connections: acked %d, %d frames (%d bytes) unacknowledged, %d lost; want 0, %d (%d bytes), 0",
			rounds, st.AckedSeq, st.UnackedFrames, st.UnackedBytes, st.LostFrames, len(want), before.UnackedBytes)
	}
	if st.Connects != rounds+1 && st.Connects != rounds {
		t.Errorf("%d connections, want %d", st.Connects, rounds)
	}
}
