package ipc

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tandem-profiler/tandem/internal/counters"
)

// op is one step applied to a ledger: add a frame, (dis)connect, begin
// writing the next frame, acknowledge, or append a dictionary chunk.
type op struct {
	do      string // "add", "connect", "disconnect", "next", "ack", "chunk"
	seq     uint64 // add: the frame's sequence; next: the sequence expected (0: none); ack: the sequence acked
	loss    bool   // add: a FrameLoss rather than a FrameBatch
	size    int    // add, chunk: payload bytes
	samples int    // add
	resend  bool   // next: expected resend flag
	err     string // add, ack: expected error text ("" for none)

	gen    uint64   // add: the dictionary generation the frame needs (0: none); chunk: the log appended to
	chunks int      // add: how many chunks of gen it needs
	wrote  []string // next: the chunks expected before the frame, as "g<generation>.<index>"
}

func add(seq uint64, size, samples int) op {
	return op{do: "add", seq: seq, size: size, samples: samples}
}
func addLoss(seq uint64) op            { return op{do: "add", seq: seq, loss: true, size: 8} }
func next(seq uint64) op               { return op{do: "next", seq: seq} }
func resendNext(seq uint64) op         { return op{do: "next", seq: seq, resend: true} }
func ack(seq uint64) op                { return op{do: "ack", seq: seq} }
func badAck(seq uint64, err string) op { return op{do: "ack", seq: seq, err: err} }

var (
	connect    = op{do: "connect"}
	disconnect = op{do: "disconnect"}
)

// chunk appends a 50-byte chunk to generation gen's log.
func chunk(gen uint64) op { return op{do: "chunk", gen: gen, size: 50} }

// addNeeding adds a 100-byte batch of 1 sample that needs chunks chunks of
// generation gen.
func addNeeding(seq, gen uint64, chunks int) op {
	return op{do: "add", seq: seq, size: 100, samples: 1, gen: gen, chunks: chunks}
}

// nextAfter expects batch seq next, after the chunks named in wrote.
func nextAfter(seq uint64, wrote ...string) op { return op{do: "next", seq: seq, wrote: wrote} }

func resendAfter(seq uint64, wrote ...string) op {
	return op{do: "next", seq: seq, resend: true, wrote: wrote}
}

// chunkFrameName returns the name a chunk op wrote into the payload of
// the chunk frame ("g<generation>.<index>", zero-padded).
func chunkFrameName(frame []byte) string {
	return strings.TrimRight(string(frame[FrameOverhead:]), "\x00")
}

// runLedger applies ops to l, with the dictionary logs in logs (created as
// chunks are appended), failing at the first result that differs.
func runLedger(t *testing.T, l *ledger, logs map[uint64]*DictionaryLog, ops []op) {
	t.Helper()
	for i, o := range ops {
		var err error
		switch o.do {
		case "add":
			typ := FrameBatch
			if o.loss {
				typ = FrameLoss
			}
			var ref DictionaryRef
			if o.gen != 0 {
				ref = DictionaryRef{Log: logs[o.gen], Chunks: o.chunks}
				if ref.Log == nil {
					ref.Log = NewDictionaryLog(o.gen) // empty: a bad reference
				}
			}
			err = l.add(o.seq, appendFrame(nil, typ, 0, make([]byte, o.size)), o.samples, ref)
		case "chunk":
			log := logs[o.gen]
			if log == nil {
				log = NewDictionaryLog(o.gen)
				logs[o.gen] = log
			}
			payload := make([]byte, o.size)
			copy(payload, fmt.Sprintf("g%d.%d", o.gen, log.Len()))
			if _, err := log.Append(payload); err != nil {
				t.Fatalf("op %d: %v", i, err)
			}
		case "connect":
			l.connect()
		case "disconnect":
			l.disconnect()
		case "next":
			p, chunks, resend := l.next()
			var wrote []string
			for _, c := range chunks {
				wrote = append(wrote, chunkFrameName(c))
			}
			switch {
			case o.seq == 0 && p != nil:
				t.Fatalf("op %d: next = %d, want none", i, p.seq)
			case o.seq != 0 && (p == nil || p.seq != o.seq || resend != o.resend):
				t.Fatalf("op %d: next = %+v (resend %v), want %d (resend %v)", i, p, resend, o.seq, o.resend)
			case !slices.Equal(wrote, o.wrote):
				t.Fatalf("op %d: next %d writes chunks %q first, want %q", i, o.seq, wrote, o.wrote)
			}
		case "ack":
			err = l.ack(o.seq)
		default:
			t.Fatalf("op %d: unknown op %q", i, o.do)
		}
		if (err == nil) != (o.err == "") || err != nil && !strings.Contains(err.Error(), o.err) {
			t.Fatalf("op %d (%s %d): error %v, want %q", i, o.do, o.seq, err, o.err)
		}
	}
}

// frameOf is the size of a frame with a payload of n bytes.
func frameOf(n int) int { return HeaderSize + n }

func TestLedger(t *testing.T) {
	const bound = 3 * (HeaderSize + 100) // three 100-byte batches
	tests := []ledgerCase{
		{
			name: "kept within the bound",
			ops:  []op{add(1, 100, 2), add(2, 100, 2), add(3, 100, 2)},
			want: ClientStats{UnackedFrames: 3, UnackedBytes: 3 * frameOf(100)},
		},
		{
			name: "oldest evicted unwritten: lost",
			ops:  []op{add(1, 100, 2), add(2, 100, 3), add(3, 100, 4), add(4, 100, 5), add(5, 100, 6)},
			want: ClientStats{UnackedFrames: 3, UnackedBytes: 3 * frameOf(100),
				EvictedFrames: 2, EvictedBytes: 2 * uint64(frameOf(100)), EvictedSamples: 5,
				LostFrames: 2, LostBytes: 2 * uint64(frameOf(100)), LostSamples: 5},
		},
		{
			name: "a batch larger than the bound is lost at once",
			ops:  []op{add(1, 100, 2), add(2, bound, 9)},
			want: ClientStats{UnackedFrames: 1, UnackedBytes: frameOf(100),
				EvictedFrames: 1, EvictedBytes: uint64(frameOf(bound)), EvictedSamples: 9,
				LostFrames: 1, LostBytes: uint64(frameOf(bound)), LostSamples: 9},
		},
		{
			name: "sequences must increase",
			ops: []op{add(5, 100, 1), {do: "add", seq: 5, size: 10, err: "sequence 5 does not increase (last 5)"},
				{do: "add", seq: 4, size: 10, err: "sequence 4 does not increase"}, add(6, 100, 1)},
			want: ClientStats{UnackedFrames: 2, UnackedBytes: 2 * frameOf(100), RejectedFrames: 2},
		},
		{
			name: "loss reports are never evicted, even past the bound",
			ops:  []op{addLoss(1), add(2, 100, 1), add(3, 100, 1), add(4, 100, 1), addLoss(5), addLoss(6)},
			want: ClientStats{UnackedFrames: 5, UnackedBytes: 3*frameOf(8) + 2*frameOf(100), UnackedLossFrames: 3,
				EvictedFrames: 1, EvictedBytes: uint64(frameOf(100)), EvictedSamples: 1,
				LostFrames: 1, LostBytes: uint64(frameOf(100)), LostSamples: 1},
		},
		{
			name: "a batch that does not fit beside the loss reports is lost at once",
			ops:  []op{addLoss(1), add(2, bound-HeaderSize-10, 4)},
			want: ClientStats{UnackedFrames: 1, UnackedBytes: frameOf(8), UnackedLossFrames: 1,
				EvictedFrames: 1, EvictedBytes: uint64(frameOf(bound - HeaderSize - 10)), EvictedSamples: 4,
				LostFrames: 1, LostBytes: uint64(frameOf(bound - HeaderSize - 10)), LostSamples: 4},
		},
		{
			name: "evicted after its write began: unconfirmed, then delivered by the ack",
			ops: []op{connect, add(1, 100, 2), next(1), add(2, 100, 3), next(2), add(3, 100, 4), add(4, 100, 5),
				add(5, 100, 6), ack(2)},
			want: ClientStats{AckedSeq: 2, UnackedFrames: 3, UnackedBytes: 3 * frameOf(100),
				EvictedFrames: 2, EvictedBytes: 2 * uint64(frameOf(100)), EvictedSamples: 5,
				DeliveredEvictedFrames: 2, DeliveredEvictedSamples: 5},
		},
		{
			name: "evicted after its write began: lost when the connection ends",
			ops: []op{connect, add(1, 100, 2), next(1), add(2, 100, 3), add(3, 100, 4), add(4, 100, 5),
				disconnect},
			want: ClientStats{UnackedFrames: 3, UnackedBytes: 3 * frameOf(100),
				EvictedFrames: 1, EvictedBytes: uint64(frameOf(100)), EvictedSamples: 2,
				LostFrames: 1, LostBytes: uint64(frameOf(100)), LostSamples: 2},
		},
		{
			name: "still unconfirmed while connected",
			ops:  []op{connect, add(1, 100, 2), next(1), add(2, 100, 3), add(3, 100, 4), add(4, 100, 5)},
			want: ClientStats{UnackedFrames: 3, UnackedBytes: 3 * frameOf(100),
				EvictedFrames: 1, EvictedBytes: uint64(frameOf(100)), EvictedSamples: 2,
				UnconfirmedFrames: 1, UnconfirmedSamples: 2},
		},
		{
			name: "evicted before its write on the new connection: lost",
			ops: []op{connect, add(1, 100, 2), next(1), disconnect, connect, add(2, 100, 3), add(3, 100, 4),
				add(4, 100, 5)},
			want: ClientStats{UnackedFrames: 3, UnackedBytes: 3 * frameOf(100),
				EvictedFrames: 1, EvictedBytes: uint64(frameOf(100)), EvictedSamples: 2,
				LostFrames: 1, LostBytes: uint64(frameOf(100)), LostSamples: 2},
		},
		{
			name: "a reconnection resends what is unacknowledged, in order",
			ops: []op{connect, add(1, 10, 1), add(2, 10, 1), add(3, 10, 1), next(1), next(2), ack(1), disconnect,
				connect, resendNext(2), next(3), next(0), ack(3)},
			want: ClientStats{AckedSeq: 3, Resent: 1},
		},
		{
			name: "an ack frees frames up to its sequence",
			ops:  []op{connect, add(1, 10, 1), add(2, 10, 1), add(3, 10, 1), next(1), next(2), ack(2), ack(2)},
			want: ClientStats{AckedSeq: 2, UnackedFrames: 1, UnackedBytes: frameOf(10)},
		},
		{
			name: "an ack when nothing was sent",
			ops:  []op{connect, add(1, 10, 1), badAck(1, "server acked sequence 1, but nothing was sent")},
			want: ClientStats{UnackedFrames: 1, UnackedBytes: frameOf(10)},
		},
		{
			name: "an ack beyond the highest sequence sent",
			ops:  []op{connect, add(1, 10, 1), add(2, 10, 1), next(1), badAck(2, "higher than the highest sent 1")},
			want: ClientStats{UnackedFrames: 2, UnackedBytes: 2 * frameOf(10)},
		},
		{
			name: "an ack going backwards",
			ops: []op{connect, add(4, 10, 1), add(7, 10, 1), next(4), next(7), ack(7),
				badAck(4, "server acked sequence 4 after 7: acks went backwards")},
			want: ClientStats{AckedSeq: 7},
		},
		{
			name: "an ack of a sequence written on an earlier connection is valid",
			ops:  []op{connect, add(1, 10, 1), next(1), disconnect, connect, ack(1)},
			want: ClientStats{AckedSeq: 1},
		},
	}
	runLedgerCases(t, bound, tests)
}

// ledgerCase is a sequence of operations on a new ledger and the ledger's
// part of the stats after them.
type ledgerCase struct {
	name string
	ops  []op
	want ClientStats
}

// runLedgerCases runs each case on a new ledger bounded at bound.
func runLedgerCases(t *testing.T, bound int, cases []ledgerCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			l := newLedger(bound, nil)
			runLedger(t, l, map[uint64]*DictionaryLog{}, tt.ops)
			var got ClientStats
			l.stats(&got)
			if got != tt.want {
				t.Errorf("stats\n got %+v\nwant %+v", got, tt.want)
			}
			checkLedgerBalance(t, l, got)
		})
	}
}

// checkLedgerBalance checks the invariants every state keeps: each evicted
// frame is lost, delivered or unconfirmed; the gauges match the state.
func checkLedgerBalance(t *testing.T, l *ledger, st ClientStats) {
	t.Helper()
	if st.EvictedFrames != st.LostFrames+st.DeliveredEvictedFrames+uint64(st.UnconfirmedFrames) ||
		st.EvictedSamples != st.LostSamples+st.DeliveredEvictedSamples+uint64(st.UnconfirmedSamples) {
		t.Errorf("evicted %d frames (%d samples) != lost %d (%d) + delivered %d (%d) + unconfirmed %d (%d)",
			st.EvictedFrames, st.EvictedSamples, st.LostFrames, st.LostSamples,
			st.DeliveredEvictedFrames, st.DeliveredEvictedSamples, st.UnconfirmedFrames, st.UnconfirmedSamples)
	}
	if int(l.c.unackedFrames.Load()) != st.UnackedFrames || int(l.c.unackedBytes.Load()) != st.UnackedBytes ||
		int(l.c.unconfirmedSamples.Load()) != st.UnconfirmedSamples || uint64(l.c.ackedSeq.Load()) != st.AckedSeq {
		t.Errorf("gauges (%v frames, %v bytes, %v unconfirmed samples, acked %v) disagree with the state %+v",
			l.c.unackedFrames.Load(), l.c.unackedBytes.Load(), l.c.unconfirmedSamples.Load(), l.c.ackedSeq.Load(), st)
	}
}

// TestLedgerDictionary checks the per-connection dictionary cursor
// (protocol 1.4): before each batch, a connection gets exactly the chunks
// of the batch's generation it has not had, whatever was evicted,
// acknowledged or written on earlier connections; the resend and eviction
// rules do not change.
func TestLedgerDictionary(t *testing.T) {
	const bound = 3 * (HeaderSize + 100) // three 100-byte batches
	chunkBytes := FrameOverhead + 50
	tests := []ledgerCase{
		{
			name: "a batch evicted before its write: its chunk goes before the next batch",
			ops: []op{chunk(1), addNeeding(1, 1, 1), chunk(1), addNeeding(2, 1, 2), chunk(1), addNeeding(3, 1, 3),
				chunk(1), addNeeding(4, 1, 4), // evicts 1, never written: lost
				connect, nextAfter(2, "g1.0", "g1.1"), nextAfter(3, "g1.2"), nextAfter(4, "g1.3"),
				chunk(1), addNeeding(5, 1, 5), chunk(1), addNeeding(6, 1, 6), chunk(1), addNeeding(7, 1, 7),
				chunk(1), addNeeding(8, 1, 8), // evicts 2, 3, 4 (written, unconfirmed) and 5 (never written)
				nextAfter(6, "g1.4", "g1.5"), nextAfter(7, "g1.6"), nextAfter(8, "g1.7"), nextAfter(0), ack(8)},
			want: ClientStats{AckedSeq: 8, EvictedFrames: 5, EvictedBytes: 5 * uint64(frameOf(100)), EvictedSamples: 5,
				LostFrames: 2, LostBytes: 2 * uint64(frameOf(100)), LostSamples: 2,
				DeliveredEvictedFrames: 3, DeliveredEvictedSamples: 3},
		},
		{
			name: "a reconnection in the middle of a generation writes it again from its first chunk",
			ops: []op{connect, chunk(1), addNeeding(1, 1, 1), nextAfter(1, "g1.0"), chunk(1), addNeeding(2, 1, 2),
				addNeeding(3, 1, 2), // needs no new chunk
				nextAfter(2, "g1.1"), nextAfter(3), ack(1), disconnect,
				connect, resendAfter(2, "g1.0", "g1.1"), resendAfter(3), chunk(1), addNeeding(4, 1, 3), nextAfter(4, "g1.2")},
			want: ClientStats{AckedSeq: 1, UnackedFrames: 3, UnackedBytes: 3 * frameOf(100), Resent: 2,
				DictionaryBytes: 3 * chunkBytes},
		},
		{
			name: "a generation switch with the old generation's batches unacknowledged",
			ops: []op{connect, chunk(1), addNeeding(1, 1, 1), nextAfter(1, "g1.0"), chunk(1), addNeeding(2, 1, 2),
				chunk(2), addNeeding(3, 2, 1), nextAfter(2, "g1.1"), nextAfter(3, "g2.0"), disconnect,
				connect, resendAfter(1, "g1.0"), resendAfter(2, "g1.1"), resendAfter(3, "g2.0"),
				chunk(2), addNeeding(4, 2, 2), nextAfter(4, "g2.1"), ack(2)},
			// Generation 1's log is needed by no kept frame: it is not
			// counted (and the garbage collector frees it).
			want: ClientStats{AckedSeq: 2, UnackedFrames: 2, UnackedBytes: 2 * frameOf(100), Resent: 3,
				EvictedFrames: 1, EvictedBytes: uint64(frameOf(100)), EvictedSamples: 1, // batch 1, by batch 4
				DeliveredEvictedFrames: 1, DeliveredEvictedSamples: 1, DictionaryBytes: 2 * chunkBytes},
		},
		{
			name: "a resend of the old generation after a reconnection starts from its first chunk",
			ops: []op{connect, chunk(1), chunk(1), addNeeding(1, 1, 2), chunk(2), addNeeding(2, 2, 1),
				nextAfter(1, "g1.0", "g1.1"), nextAfter(2, "g2.0"), ack(1), disconnect,
				connect, resendAfter(2, "g2.0")},
			want: ClientStats{AckedSeq: 1, UnackedFrames: 1, UnackedBytes: frameOf(100), Resent: 1, DictionaryBytes: chunkBytes},
		},
		{
			name: "loss reports need no chunks",
			ops: []op{connect, chunk(1), addLoss(1), addNeeding(2, 1, 1), addLoss(3), nextAfter(1), nextAfter(2, "g1.0"), nextAfter(3),
				ack(3)},
			want: ClientStats{AckedSeq: 3},
		},
		{
			name: "a batch evicted at once holds no log",
			ops:  []op{chunk(1), {do: "add", seq: 1, size: bound, samples: 2, gen: 1, chunks: 1}},
			want: ClientStats{EvictedFrames: 1, EvictedBytes: uint64(frameOf(bound)), EvictedSamples: 2,
				LostFrames: 1, LostBytes: uint64(frameOf(bound)), LostSamples: 2},
		},
		{
			name: "bad references are refused",
			ops: []op{chunk(1), chunk(2),
				{do: "add", seq: 1, size: 10, gen: 1, chunks: 2, err: "needs 2 chunks of dictionary generation 1, whose log holds 1"},
				{do: "add", seq: 2, size: 10, gen: 1, chunks: 0, err: "needs 0 chunks"},
				{do: "add", seq: 3, size: 10, gen: 3, chunks: 1, err: "whose log holds 0"},
				addNeeding(4, 2, 1),
				{do: "add", seq: 5, size: 10, gen: 1, chunks: 1, err: "needs dictionary generation 1 after a frame that needed generation 2"},
			},
			want: ClientStats{UnackedFrames: 1, UnackedBytes: frameOf(100), RejectedFrames: 4, DictionaryBytes: chunkBytes},
		},
	}
	runLedgerCases(t, bound, tests)
}

// TestLedgerLargeChunk: a chunk far larger than the resend bound (and a
// socket buffer) is written whole, before its batch, on every connection;
// it never counts against the bound.
func TestLedgerLargeChunk(t *testing.T) {
	log := NewDictionaryLog(1)
	big := make([]byte, 4<<20)
	copy(big, "g1.0")
	if _, err := log.Append(big); err != nil {
		t.Fatal(err)
	}
	l := newLedger(frameOf(100), nil)
	if err := l.add(1, appendFrame(nil, FrameBatch, 0, make([]byte, 100)), 1, DictionaryRef{Log: log, Chunks: 1}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		l.connect()
		p, chunks, _ := l.next()
		if p == nil || p.seq != 1 || len(chunks) != 1 || len(chunks[0]) != FrameOverhead+len(big) || chunkFrameName(chunks[0]) != "g1.0" {
			t.Fatalf("next = %+v after %d chunks; want batch 1 after the whole 4 MiB chunk", p, len(chunks))
		}
		l.disconnect()
	}
	var st ClientStats
	l.stats(&st)
	if st.UnackedBytes != frameOf(100) || st.EvictedFrames != 0 || st.DictionaryBytes != FrameOverhead+len(big) {
		t.Fatalf("stats %+v: the chunk must not count against the bound", st)
	}
	if _, err := log.Append(make([]byte, MaxFrameSize+1)); err == nil {
		t.Fatal("a chunk larger than MaxFrameSize was accepted")
	}
}

// TestLedgerUnconfirmedBounded: a server that reads everything and never
// acknowledges costs a bounded record of evicted frames, and the counts
// stay exact when records merge.
func TestLedgerUnconfirmedBounded(t *testing.T) {
	const n = maxUnconfirmed + 200
	l := newLedger(frameOf(16), nil)
	l.connect()
	for seq := uint64(1); seq <= n; seq++ {
		if err := l.add(seq, appendFrame(nil, FrameBatch, 0, make([]byte, 16)), 2, DictionaryRef{}); err != nil {
			t.Fatal(err)
		}
		if p, _, _ := l.next(); p == nil || p.seq != seq {
			t.Fatalf("next after add %d = %v", seq, p)
		}
	}
	var st ClientStats
	l.stats(&st)
	if len(l.unconfirmed) > maxUnconfirmed || st.UnconfirmedFrames != n-1 || st.UnconfirmedSamples != 2*(n-1) {
		t.Errorf("%d records for %d unconfirmed frames (%d samples); want at most %d records, %d frames",
			len(l.unconfirmed), st.UnconfirmedFrames, st.UnconfirmedSamples, maxUnconfirmed, n-1)
	}
	// An ack inside the merged records retires only whole records up to it.
	if err := l.ack(n / 2); err != nil {
		t.Fatal(err)
	}
	l.stats(&st)
	checkLedgerBalance(t, l, st)
	if st.DeliveredEvictedFrames == 0 || st.DeliveredEvictedFrames > n/2 {
		t.Errorf("after ack %d: %d delivered, want 1..%d", n/2, st.DeliveredEvictedFrames, n/2)
	}
	if err := l.ack(n); err != nil {
		t.Fatal(err)
	}
	l.stats(&st)
	checkLedgerBalance(t, l, st)
	if st.DeliveredEvictedFrames != n-1 || st.UnconfirmedFrames != 0 || st.LostFrames != 0 || !l.drained() {
		t.Errorf("after the last ack: %+v; want %d delivered, none unconfirmed or lost", st, n-1)
	}
}

// TestClientMetricsNames checks the series the Client registers: the
// names the encoder exports (as tandem_sampler_ipc_client_*).
func TestClientMetricsNames(t *testing.T) {
	var set counters.Set
	m, err := newClientMetrics(&set)
	if err != nil {
		t.Fatal(err)
	}
	m.ledger.evictedFrames.Inc()
	m.frameCounter(FrameBatch).Inc()
	m.frameCounter(200).Inc()
	if _, err := newClientMetrics(&set); err == nil {
		t.Error("registering a second client in the same set did not fail")
	}
	values := map[string]float64{}
	for _, s := range set.Snapshot() {
		if !strings.HasPrefix(s.Name, "tandem_ipc_client_") {
			t.Errorf("metric %s lacks the tandem_ipc_client_ prefix", s.Name)
		}
		key := s.Name
		for _, l := range s.Labels {
			key += "{" + l.Name + "=" + l.Value + "}"
		}
		values[key] = s.Value
	}
	for key, want := range map[string]float64{
		"tandem_ipc_client_evicted_frames_total":            1,
		"tandem_ipc_client_lost_samples_total":              0,
		"tandem_ipc_client_evicted_unconfirmed_samples":     0,
		"tandem_ipc_client_frames_sent_total{type=batch}":   1,
		"tandem_ipc_client_frames_sent_total{type=unknown}": 1,
		"tandem_ipc_client_frames_sent_total{type=hello}":   0,
		"tandem_ipc_client_connected":                       0,
	} {
		if got, ok := values[key]; !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", key, got, ok, want)
		}
	}
	if len(values) < 25 {
		t.Errorf("%d series registered", len(values))
	}
}
