package ipc_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tandem-profiler/tandem/encoder/ingest"
	"github.com/tandem-profiler/tandem/internal/synth"
	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/schema"
)

// frameList is one connection's frames, as ipcserver.Conn would yield them.
type frameList struct{ frames []ipc.Frame }

func (l *frameList) Next() (ipc.Frame, error) {
	if len(l.frames) == 0 {
		return ipc.Frame{}, io.EOF
	}
	f := l.frames[0]
	l.frames = l.frames[1:]
	return f, nil
}

// summarySink describes every batch by its content, resolved through its
// tables (a layout-2 batch's are its dictionary's).
type summarySink struct{ batches []string }

func (s *summarySink) Batch(sess *ingest.Session, b *schema.Batch) {
	var sum int64
	for _, smp := range b.Samples {
		sum += smp.Value
		for _, fi := range b.Stack(smp.Stack) {
			f := b.Frames[fi]
			sum += int64(f.AddressOrLine) + int64(len(b.String(f.FunctionName)))
		}
	}
	s.batches = append(s.batches, fmt.Sprintf("session %x seq %d: %d samples, sum %d", sess.ID()[0], b.Sequence, len(b.Samples), sum))
}
func (s *summarySink) Loss(*ingest.Session, *schema.LossReport) {}
func (s *summarySink) Executable(_ *ingest.Session, _ *schema.ExecutableNotice, f *os.File) {
	if f != nil {
		f.Close()
	}
}

// connectionFrames returns what a protocol 1.4 sampler of session id
// writes on one new connection for batches [from, to): its hello, then
// each batch preceded by the chunks it needs that the connection has not
// carried yet. want describes those batches as summarySink will.
func connectionFrames(t *testing.T, session byte, hello *schema.Hello, batches []*schema.Batch, from, to int) (frames []ipc.Frame, want []string) {
	t.Helper()
	h := *hello
	h.SessionID[0] = session
	p, err := schema.EncodeHello(&h, nil)
	if err != nil {
		t.Fatal(err)
	}
	frames = append(frames, ipc.Frame{Type: ipc.FrameHello, Payload: p})
	d := synth.NewDictionaries(1) // the sampler's log, replayed from its start
	ref := &summarySink{}
	sess := &ingest.Session{Hello: h}
	for i, b := range batches[:to] {
		chunk, p, err := d.Encode(b)
		if err != nil {
			t.Fatal(err)
		}
		if chunk != nil {
			frames = append(frames, ipc.Frame{Type: ipc.FrameDictionary, Payload: chunk})
		}
		if i < from {
			continue
		}
		frames = append(frames, ipc.Frame{Type: ipc.FrameBatch, Payload: p})
		ref.Batch(sess, b)
	}
	return frames, ref.batches
}

// TestRecordInterleavedConnections: a Recorder (serve's --record) writes
// the frames of every connection into one dump as they arrive. Here two sessions'
// connections interleave frame by frame, and the first session then
// reconnects and resends. The dump replays to every batch of every
// connection with the content it was sent with: each time the recorder
// switches connection it repeats that connection's hello and its
// generation's chunks, and the reader starts a new dictionary at each
// hello.
func TestRecordInterleavedConnections(t *testing.T) {
	cfg := synth.DefaultConfig()
	cfg.Samples, cfg.BatchSize = 1500, 250
	msgs, err := synth.Collect(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hello, batches := synth.Split(msgs)
	n := len(batches)
	a, wantA := connectionFrames(t, 1, hello, batches, 0, n-2)
	b, wantB := connectionFrames(t, 2, hello, batches, 0, n)
	a2, wantA2 := connectionFrames(t, 1, hello, batches, n-4, n) // resends two, adds two

	path := filepath.Join(t.TempDir(), "record.dump")
	logger := slog.New(slog.DiscardHandler)
	rec := newRecorder(t, path, logger)
	// Each connection's frames pass through its tee as serve reads them.
	ta, tb := rec.Tee(&frameList{frames: a}), rec.Tee(&frameList{frames: b})
	for ta != nil || tb != nil {
		for _, tee := range []**ipc.Tee{&ta, &tb} {
			if *tee == nil {
				continue
			}
			if _, err := (*tee).Next(); err == io.EOF {
				*tee = nil
			} else if err != nil {
				t.Fatal(err)
			}
		}
	}
	ta2 := rec.Tee(&frameList{frames: a2})
	for {
		if _, err := ta2.Next(); err == io.EOF {
			break
		}
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err) // recording failed, or the dump did not close
	}

	dr, err := ipc.OpenDump(path)
	if err != nil {
		t.Fatal(err)
	}
	defer dr.Close()
	replayed := &summarySink{}
	tr, err := ingest.NewTracker(replayed, logger, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Serve(context.Background(), dr, nil); err != nil {
		t.Fatalf("replay the recording: %v", err)
	}
	// The reconnection's first two batches are duplicates of session 1's.
	want := map[string]bool{}
	for _, w := range append(append(wantA, wantB...), wantA2...) {
		want[w] = true
	}
	got := map[string]bool{}
	for _, g := range replayed.batches {
		if got[g] {
			t.Errorf("batch replayed twice: %s", g)
		}
		got[g] = true
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("replayed %d distinct batches, want %d:\n%q\nwant\n%q", len(got), len(want), replayed.batches, append(append(wantA, wantB...), wantA2...))
	}
}

// TestRecordFailureIsAnError: when the dump can no longer be written, the
// live frames still pass through, and closing the Recorder reports the
// dump incomplete (so serve exits non-zero).
func TestRecordFailureIsAnError(t *testing.T) {
	msgs, err := synth.Collect(synth.SmallConfig())
	if err != nil {
		t.Fatal(err)
	}
	hello, batches := synth.Split(msgs)
	frames, _ := connectionFrames(t, 1, hello, batches, 0, 2)
	w, err := ipc.CreateDump(filepath.Join(t.TempDir(), "record.dump"))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil { // the dump's file is gone from under the recorder
		t.Fatal(err)
	}
	rec := ipc.NewRecorder(w, slog.New(slog.DiscardHandler))
	tee := rec.Tee(&frameList{frames: frames})
	passed := 0
	for {
		if _, err := tee.Next(); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		passed++
	}
	if passed != len(frames) {
		t.Errorf("%d of %d frames passed through a failed recording", passed, len(frames))
	}
	err = rec.Close()
	if err == nil || !strings.Contains(err.Error(), "incomplete") {
		t.Fatalf("close after a failed recording = %v, want an error saying the dump is incomplete", err)
	}
}

func newRecorder(t *testing.T, path string, logger *slog.Logger) *ipc.Recorder {
	t.Helper()
	w, err := ipc.CreateDump(path)
	if err != nil {
		t.Fatal(err)
	}
	return ipc.NewRecorder(w, logger)
}
