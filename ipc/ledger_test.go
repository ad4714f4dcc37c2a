package ipc

import (
	"github.com/tandem-profiler/tandem/internal/counters"

	"strings"
	"testing"
)

// op is one step applied to a ledger: add a frame, (dis)connect, begin
// writing the next frame, or acknowledge.
type op struct {
	do      string // "add", "connect", "disconnect", "next", "ack"
	seq     uint64 // add: the frame's sequence; next: the sequence expected (0: none); ack: the sequence acked
	loss    bool   // add: a FrameLoss rather than a FrameBatch
	size    int    // add: payload bytes
	samples int    // add
	resend  bool   // next: expected resend flag
	err     string // add, ack: expected error text ("" for none)
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

// frameOf is the size of a frame with a payload of n bytes.
func frameOf(n int) int { return HeaderSize + n }

func TestLedger(t *testing.T) {
	const bound = 3 * (HeaderSize + 100) // three 100-byte batches
	tests := []struct {
		name string
		ops  []op
		want ClientStats // the ledger's part of the stats
	}{
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
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLedger(bound, nil)
			for i, o := range tt.ops {
				var err error
				switch o.do {
				case "add":
					typ := FrameBatch
					if o.loss {
						typ = FrameLoss
					}
					err = l.add(o.seq, appendFrame(nil, typ, 0, make([]byte, o.size)), o.samples)
				case "connect":
					l.connect()
				case "disconnect":
					l.disconnect()
				case "next":
					p, resend := l.next()
					switch {
					case o.seq == 0 && p != nil:
						t.Fatalf("op %d: next = %d, want none", i, p.seq)
					case o.seq != 0 && (p == nil || p.seq != o.seq || resend != o.resend):
						t.Fatalf("op %d: next = %+v (resend %v), want %d (resend %v)", i, p, resend, o.seq, o.resend)
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

// TestLedgerUnconfirmedBounded: a server that reads everything and never
// acknowledges costs a bounded record of evicted frames, and the counts
// stay exact when records merge.
func TestLedgerUnconfirmedBounded(t *testing.T) {
	const n = maxUnconfirmed + 200
	l := newLedger(frameOf(16), nil)
	l.connect()
	for seq := uint64(1); seq <= n; seq++ {
		if err := l.add(seq, appendFrame(nil, FrameBatch, 0, make([]byte, 16)), 2); err != nil {
			t.Fatal(err)
		}
		if p, _ := l.next(); p == nil || p.seq != seq {
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
