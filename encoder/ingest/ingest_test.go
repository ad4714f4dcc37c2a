package ingest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/schema"
)

// frames is a Source over prepared frames.
type frames struct {
	list []ipc.Frame
	i    int
}

func (f *frames) Next() (ipc.Frame, error) {
	if f.i == len(f.list) {
		return ipc.Frame{}, io.EOF
	}
	f.i++
	return f.list[f.i-1], nil
}

type recordingSink struct {
	seqs   []uint64
	losses []schema.LossReport
	files  []*os.File
}

func (s *recordingSink) Batch(_ *Session, b *schema.Batch) { s.seqs = append(s.seqs, b.Sequence) }
func (s *recordingSink) Loss(_ *Session, r *schema.LossReport) {
	s.losses = append(s.losses, *r)
}
func (s *recordingSink) Executable(_ *Session, _ *schema.ExecutableNotice, f *os.File) {
	s.files = append(s.files, f)
}

type acks struct{ got []uint64 }

func (a *acks) Ack(seq uint64) error { a.got = append(a.got, seq); return nil }

func hello(t *testing.T, major uint16, session byte) ipc.Frame {
	t.Helper()
	p, err := schema.EncodeHello(&schema.Hello{MajorVersion: major, MinorVersion: 3, SessionID: [16]byte{session}, NodeName: "n"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ipc.Frame{Type: ipc.FrameHello, Payload: p}
}

func batch(t *testing.T, seq uint64) ipc.Frame {
	t.Helper()
	bb := schema.NewBatchBuilder()
	f := bb.Frame(schema.Frame{Kind: schema.FrameNative, AddressOrLine: seq})
	bb.AddSample(schema.Sample{Process: bb.Process(schema.Process{PID: 1}), Stack: bb.Stack([]uint32{f}), Value: 1})
	b := bb.Batch()
	b.Sequence = seq
	p, err := schema.EncodeBatch(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ipc.Frame{Type: ipc.FrameBatch, Payload: p}
}

func loss(t *testing.T, seq uint64) ipc.Frame {
	t.Helper()
	p, err := schema.EncodeLossReport(&schema.LossReport{Sequence: seq, Losses: []schema.Loss{{Stage: schema.LossSamplerQueue, Samples: 5}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ipc.Frame{Type: ipc.FrameLoss, Payload: p}
}

func goodbye(t *testing.T) ipc.Frame {
	t.Helper()
	p, err := schema.EncodeGoodbye(&schema.Goodbye{Reason: "done"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ipc.Frame{Type: ipc.FrameGoodbye, Payload: p}
}

func TestServeErrors(t *testing.T) {
	tests := []struct {
		name    string
		frames  func(t *testing.T) []ipc.Frame
		wantErr string
		is      error
	}{
		{"batch before hello", func(t *testing.T) []ipc.Frame { return []ipc.Frame{batch(t, 1)} }, "want a hello first", nil},
		{"newer major", func(t *testing.T) []ipc.Frame { return []ipc.Frame{hello(t, schema.MajorVersion+1, 1)} },
			fmt.Sprintf("protocol version 2.3 is newer than this build's %d.%d: run an encoder and sampler of the same major version", schema.MajorVersion, schema.MinorVersion), ipc.ErrVersionMismatch},
		{"garbage batch", func(t *testing.T) []ipc.Frame {
			return []ipc.Frame{hello(t, schema.MajorVersion, 1), {Type: ipc.FrameBatch, Payload: []byte("not capnp")}}
		}, "read batch", schema.ErrMalformed},
		{"garbage hello", func(t *testing.T) []ipc.Frame { return []ipc.Frame{{Type: ipc.FrameHello, Payload: []byte{1, 2, 3}}} }, "read hello", schema.ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := newTracker(t, &recordingSink{}, nil, nil)
			err := tr.Serve(context.Background(), &frames{list: tt.frames(t)}, nil)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Serve error = %v, want it to contain %q", err, tt.wantErr)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Fatalf("Serve error = %v, want errors.Is %v", err, tt.is)
			}
		})
	}
}

// TestResendIsDeduplicated replays what a reconnecting sampler does: the
// second connection resends what the first delivered but was not acked.
func TestResendIsDeduplicated(t *testing.T) {
	sink := &recordingSink{}
	tr := newTracker(t, sink, nil, nil)
	a1 := &acks{}
	first := &frames{list: []ipc.Frame{hello(t, schema.MajorVersion, 9), batch(t, 1), batch(t, 2), loss(t, 3), batch(t, 4)}}
	if err := tr.Serve(context.Background(), first, a1); err != nil {
		t.Fatal(err)
	}
	// A flush covering 1..4 is exported while the sampler is away.
	seqs := tr.Cut(func() {})
	if seqs[[16]byte{9}] != 4 {
		t.Fatalf("Cut = %v, want session 9 at 4", seqs)
	}
	tr.Ack(seqs, time.Hour)
	if len(a1.got) != 0 {
		t.Fatalf("acked %v on a closed connection", a1.got)
	}

	a2 := &acks{}
	second := &frames{list: []ipc.Frame{hello(t, schema.MajorVersion, 9), batch(t, 2), loss(t, 3), batch(t, 4), batch(t, 6), goodbye(t)}}
	if err := tr.Serve(context.Background(), second, a2); err != nil {
		t.Fatal(err)
	}
	if want := []uint64{1, 2, 4, 6}; !equal(sink.seqs, want) {
		t.Errorf("sink saw batches %v, want %v", sink.seqs, want)
	}
	if len(sink.losses) != 1 {
		t.Errorf("sink saw %d loss reports, want 1", len(sink.losses))
	}
	// The resumed session is told at once what is already exported.
	if want := []uint64{4}; !equal(a2.got, want) {
		t.Errorf("acks on reconnect %v, want %v", a2.got, want)
	}
}

// hookFrames calls hook before returning frame i.
type hookFrames struct {
	frames
	hook func(i int)
}

func (h *hookFrames) Next() (ipc.Frame, error) {
	h.hook(h.i)
	return h.frames.Next()
}

// TestAckGoesToCurrentConnection flushes while the sampler is connected:
// the acknowledgement covers exactly what was handed over before the cut.
func TestAckGoesToCurrentConnection(t *testing.T) {
	tr := newTracker(t, &recordingSink{}, nil, nil)
	a := &acks{}
	src := &hookFrames{frames: frames{list: []ipc.Frame{hello(t, schema.MajorVersion, 1), batch(t, 1), batch(t, 2), batch(t, 3)}}}
	src.hook = func(i int) {
		if i == 3 { // batches 1 and 2 delivered, 3 not yet
			tr.Ack(tr.Cut(func() {}), time.Hour)
		}
	}
	if err := tr.Serve(context.Background(), src, a); err != nil {
		t.Fatal(err)
	}
	if want := []uint64{2}; !equal(a.got, want) {
		t.Fatalf("acks %v, want %v", a.got, want)
	}
	// Nothing new: a second cut acknowledges nothing more.
	tr.Ack(tr.Cut(func() {}), time.Hour)
	if want := []uint64{2}; !equal(a.got, want) {
		t.Fatalf("acks after the connection closed %v, want %v", a.got, want)
	}
}

func TestExecutableDescriptorReachesSink(t *testing.T) {
	sink := &recordingSink{}
	tr := newTracker(t, sink, nil, nil)
	f, err := os.Create(filepath.Join(t.TempDir(), "exe"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	p, _ := schema.EncodeExecutableNotice(&schema.ExecutableNotice{FileName: "exe", HasDescriptor: true}, nil)
	src := &frames{list: []ipc.Frame{hello(t, schema.MajorVersion, 1), {Type: ipc.FrameExecutable, Payload: p, File: f}}}
	if err := tr.Serve(context.Background(), src, nil); err != nil {
		t.Fatal(err)
	}
	if len(sink.files) != 1 || sink.files[0] != f {
		t.Fatalf("sink got %v, want the descriptor", sink.files)
	}
}

func equal(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// newTracker is NewTracker, failing t when it fails.
func newTracker(t testing.TB, sink Sink, logger *slog.Logger, reg prometheus.Registerer) *Tracker {
	t.Helper()
	tr, err := NewTracker(sink, logger, reg)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// A second Tracker on the registry of the first is an error, not a panic.
func TestNewTrackerRegistersOnce(t *testing.T) {
	reg := prometheus.NewRegistry()
	newTracker(t, &recordingSink{}, nil, reg)
	if _, err := NewTracker(&recordingSink{}, nil, reg); err == nil || !strings.Contains(err.Error(), "register ingest metrics") {
		t.Errorf("second NewTracker on one registry: %v, want a registration error", err)
	}
}

// TestEndedWithoutGoodbye: a live connection whose sampler goes away
// without its goodbye is counted, with the last sequence acknowledged to
// its session, and logged once at WARN; a goodbye, a dump, an encoder
// that is stopping and a stream the encoder refused are not.
func TestEndedWithoutGoodbye(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tail   func(t *testing.T) []ipc.Frame // after hello, batches 1 and 2 (1 acknowledged)
		dump   bool
		stop   bool // the encoder stops before the stream ends
		want   float64
		errMsg string
	}{
		{"sampler gone", func(*testing.T) []ipc.Frame { return nil }, false, false, 1, ""},
		{"goodbye", func(t *testing.T) []ipc.Frame { return []ipc.Frame{goodbye(t)} }, false, false, 0, ""},
		{"dump", func(*testing.T) []ipc.Frame { return nil }, true, false, 0, ""},
		{"encoder stopping", func(*testing.T) []ipc.Frame { return nil }, false, true, 0, ""},
		{"malformed", func(*testing.T) []ipc.Frame { return []ipc.Frame{{Type: ipc.FrameBatch, Payload: []byte("x")}} }, false, false, 0, "read batch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs strings.Builder
			tr := newTracker(t, &recordingSink{}, slog.New(slog.NewTextHandler(&logs, nil)), nil)
			list := append([]ipc.Frame{hello(t, schema.MajorVersion, 7), batch(t, 1), batch(t, 2)}, tc.tail(t)...)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			src := &hookFrames{frames: frames{list: list}}
			src.hook = func(i int) {
				if i == 2 { // batch 1 handed over: exported and acknowledged
					tr.Ack(tr.Cut(func() {}), time.Hour)
				}
				if i == len(list) && tc.stop {
					cancel()
				}
			}
			var acker Acker = &acks{}
			if tc.dump {
				acker = nil
			}
			err := tr.Serve(ctx, src, acker)
			if (err == nil) != (tc.errMsg == "") || err != nil && !strings.Contains(err.Error(), tc.errMsg) {
				t.Fatalf("Serve: %v, want an error containing %q", err, tc.errMsg)
			}
			if got := testutil.ToFloat64(tr.metrics.noGoodbye); got != tc.want {
				t.Errorf("tandem_encoder_ingest_sessions_ended_without_goodbye_total = %v, want %v", got, tc.want)
			}
			warns := strings.Count(logs.String(), "level=WARN msg=\"sampler went away without its goodbye")
			if want := int(tc.want); warns != want {
				t.Errorf("%d WARN lines about the missing goodbye, want %d; logs:\n%s", warns, want, logs.String())
			}
			if tc.want == 0 {
				return
			}
			if got := testutil.ToFloat64(tr.metrics.noGoodbyeAcked.WithLabelValues("n")); got != 1 {
				t.Errorf("tandem_encoder_ingest_ended_without_goodbye_acked_sequence{node=n} = %v, want 1", got)
			}
			if !strings.Contains(logs.String(), "last_acked_sequence=1 received_sequence=2") {
				t.Errorf("the WARN line does not name the last acknowledged (1) and received (2) sequences:\n%s", logs.String())
			}
		})
	}
}
