package ipcserver

import (
	"bytes"
	"testing"

	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/test/waittest"
)

// TestDictionaryChunksPerConnection runs the dictionary cursor (protocol
// 1.4) over a real socket: each connection gets the chunks a batch needs
// before the batch, in order, once; a chunk larger than the socket buffer
// arrives whole; after a reconnection the resent batch comes after the
// whole generation again.
func TestDictionaryChunksPerConnection(t *testing.T) {
	s := startServer(t, Config{})
	cl := newTestClient(t, s.Addr().String(), nil)
	log := ipc.NewDictionaryLog(1)
	big := bytes.Repeat([]byte("dictionary chunk larger than a socket buffer "), (4<<20)/45)
	small := []byte("second chunk")
	if n, err := log.Append(big); err != nil || n != 1 {
		t.Fatalf("Append = %d, %v", n, err)
	}
	cl.SendReliableWith(1, ipc.FrameBatch, seqPayload(1, 50), 1, ipc.DictionaryRef{Log: log, Chunks: 1})
	if _, err := log.Append(small); err != nil {
		t.Fatal(err)
	}
	cl.SendReliableWith(2, ipc.FrameBatch, seqPayload(2, 50), 1, ipc.DictionaryRef{Log: log, Chunks: 2})
	cl.SendReliable(3, ipc.FrameLoss, seqPayload(3, 20), 0)
	run(t, cl)

	conn := accept(t, s)
	expectFrame(t, conn, ipc.FrameHello, []byte("hello"))
	expectFrame(t, conn, ipc.FrameDictionary, big)
	expectFrame(t, conn, ipc.FrameBatch, seqPayload(1, 50))
	expectFrame(t, conn, ipc.FrameDictionary, small)
	expectFrame(t, conn, ipc.FrameBatch, seqPayload(2, 50))
	expectFrame(t, conn, ipc.FrameLoss, seqPayload(3, 20))
	if err := conn.Ack(1); err != nil {
		t.Fatal(err)
	}
	waittest.For(t, "ack 1", func() bool { return cl.Stats().AckedSeq == 1 })
	conn.Close()

	conn = accept(t, s)
	expectFrame(t, conn, ipc.FrameHello, []byte("hello"))
	expectFrame(t, conn, ipc.FrameDictionary, big)
	expectFrame(t, conn, ipc.FrameDictionary, small)
	expectFrame(t, conn, ipc.FrameBatch, seqPayload(2, 50))
	expectFrame(t, conn, ipc.FrameLoss, seqPayload(3, 20))
	if err := conn.Ack(3); err != nil {
		t.Fatal(err)
	}
	waittest.For(t, "ack 3", func() bool { st := cl.Stats(); return st.AckedSeq == 3 && st.UnackedFrames == 0 })
	if st := cl.Stats(); st.DictionaryBytes != 0 || st.UnackedBytes != 0 {
		t.Errorf("after every ack: %d dictionary bytes, %d unacked bytes; want 0: no frame needs the log", st.DictionaryBytes, st.UnackedBytes)
	}
}
