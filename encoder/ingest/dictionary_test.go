package ingest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tandem-profiler/tandem/internal/synth"
	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/schema"
)

// dictStream is a synthetic session as a protocol 1.4 sampler sends it:
// per batch, the dictionary chunk it introduces (if any) and the batch in
// layout 2, plus the same batch in layout 1 to compare against.
type dictStream struct {
	hello   *schema.Hello
	chunks  []*ipc.Frame // chunks[i]: the chunk batch i introduced, nil when none
	batches []ipc.Frame  // layout 2
	seqs    []uint64     // the batches' sequences
	samples []int        // and sample counts
	want    []string     // contentSink lines of the layout-1 batches
}

// newDictStream returns the stream of a 2,000-sample session in batches of
// 250, built once per test binary and shared (read only).
func newDictStream(t *testing.T) *dictStream {
	t.Helper()
	sharedStream.once.Do(func() { sharedStream.s, sharedStream.err = buildDictStream(2000) })
	if sharedStream.err != nil {
		t.Fatal(sharedStream.err)
	}
	return sharedStream.s
}

var sharedStream struct {
	once sync.Once
	s    *dictStream
	err  error
}

func buildDictStream(samples int) (*dictStream, error) {
	cfg := synth.DefaultConfig()
	cfg.Samples, cfg.BatchSize = samples, 250
	msgs, err := synth.Collect(cfg)
	if err != nil {
		return nil, err
	}
	hello, batches := synth.Split(msgs)
	d := synth.NewDictionaries(1)
	s := &dictStream{hello: hello}
	ref := &contentSink{}
	for _, b := range batches {
		ref.Batch(nil, b)
		chunk, p, err := d.Encode(b)
		if err != nil {
			return nil, err
		}
		var cf *ipc.Frame
		if chunk != nil {
			cf = &ipc.Frame{Type: ipc.FrameDictionary, Payload: chunk}
		}
		s.chunks = append(s.chunks, cf)
		s.batches = append(s.batches, ipc.Frame{Type: ipc.FrameBatch, Payload: p})
		s.seqs = append(s.seqs, b.Sequence)
		s.samples = append(s.samples, len(b.Samples))
	}
	s.want = ref.batches
	if len(s.batches) < 6 {
		return nil, fmt.Errorf("%d batches: too few for the test", len(s.batches))
	}
	return s, nil
}

// connection returns what a connection's client writes after its hello
// when it sends batches [from, to) (0-based) having written, on this
// connection, none of the generation's chunks yet: the chunks up to the
// last batch it sends, each before the first batch that needs it.
func (s *dictStream) connection(t *testing.T, session byte, from, to int) []ipc.Frame {
	out := []ipc.Frame{hello(t, schema.MajorVersion, session)}
	next := 0 // chunks written on this connection
	for i := from; i < to; i++ {
		for ; next <= i; next++ {
			if c := s.chunks[next]; c != nil {
				out = append(out, *c)
			}
		}
		out = append(out, s.batches[i])
	}
	return out
}

// TestEncoderRestartWithDictionaries: a sampler's first connection
// delivers batches 1-4 to one encoder, which exports only 1-2 before it
// dies. A new encoder process (a new Tracker) receives the sampler's
// reconnect: the hello, the generation's chunks again (the new
// connection's cursor starts at 0), the resent batches 3-4 and new ones.
// Every batch reaches the Sink once, with the content it was sent with,
// and nothing is counted lost or duplicated.
func TestEncoderRestartWithDictionaries(t *testing.T) {
	s := newDictStream(t)
	n := len(s.batches)

	first := &contentSink{}
	tr1 := newTracker(t, first, nil, nil)
	if err := tr1.Serve(context.Background(), &frames{list: s.connection(t, 7, 0, 4)}, &acks{}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(first.batches, s.want[:4]) {
		t.Fatalf("first encoder saw\n%q\nwant\n%q", first.batches, s.want[:4])
	}

	reg := prometheus.NewRegistry()
	second := &contentSink{}
	tr2 := newTracker(t, second, nil, reg)
	a := &acks{}
	src := s.connection(t, 7, 2, n) // batches 1-2 were acknowledged, 3.. are resent
	src = append(src, goodbye(t))
	if err := tr2.Serve(context.Background(), &frames{list: src}, a); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(second.batches, s.want[2:]) {
		t.Fatalf("restarted encoder saw\n%q\nwant\n%q", second.batches, s.want[2:])
	}
	for name, c := range map[string]prometheus.Collector{
		"duplicates": tr2.metrics.duplicates, "gaps": tr2.metrics.gaps, "malformed": tr2.metrics.malformed,
	} {
		if v := testutil.ToFloat64(c); v != 0 {
			t.Errorf("restarted encoder counted %v %s, want 0", v, name)
		}
	}
	if got, want := testutil.ToFloat64(tr2.metrics.frames.WithLabelValues("batch")), float64(n-2); got != want {
		t.Errorf("batch frames = %v, want %v", got, want)
	}
	if testutil.ToFloat64(tr2.metrics.frames.WithLabelValues("dictionary")) == 0 {
		t.Error("no dictionary frames counted")
	}
}

// TestReconnectAppliesChunksBeforeDuplicates: the same encoder, a new
// connection. The resent batches are duplicates and dropped, but the
// chunks before them are applied, or the first new batch, which needs
// them, would not decode.
func TestReconnectAppliesChunksBeforeDuplicates(t *testing.T) {
	s := newDictStream(t)
	n := len(s.batches)
	sink := &contentSink{}
	reg := prometheus.NewRegistry()
	tr := newTracker(t, sink, nil, reg)
	if err := tr.Serve(context.Background(), &frames{list: s.connection(t, 3, 0, 4)}, &acks{}); err != nil {
		t.Fatal(err)
	}
	// Nothing was acknowledged: the sampler resends everything.
	if err := tr.Serve(context.Background(), &frames{list: s.connection(t, 3, 0, n)}, &acks{}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(sink.batches, s.want) {
		t.Fatalf("sink saw\n%q\nwant\n%q", sink.batches, s.want)
	}
	if v := testutil.ToFloat64(tr.metrics.duplicates); v != 4 {
		t.Errorf("duplicates = %v, want 4", v)
	}
}

// TestServeDictionaryErrors: a chunk that does not continue the stream's
// dictionary, and a layout-2 batch whose chunks did not come first, are
// malformed streams, reported with what was expected.
func TestServeDictionaryErrors(t *testing.T) {
	s := newDictStream(t)
	chunk := func(t *testing.T, c *schema.DictionaryChunk) ipc.Frame {
		t.Helper()
		p, err := schema.EncodeDictionaryChunk(c, nil)
		if err != nil {
			t.Fatal(err)
		}
		return ipc.Frame{Type: ipc.FrameDictionary, Payload: p}
	}
	h := hello(t, schema.MajorVersion, 1)
	tests := []struct {
		name    string
		frames  func(t *testing.T) []ipc.Frame
		wantErr []string
	}{
		{"batch without its chunks", func(t *testing.T) []ipc.Frame {
			return []ipc.Frame{h, s.batches[0]}
		}, []string{"read batch", "generation 1", "dictionary is at generation 0"}},
		{"a chunk lost", func(t *testing.T) []ipc.Frame {
			return []ipc.Frame{h, *s.chunks[0], *s.chunks[2]}
		}, []string{"apply dictionary chunk", "want ("}},
		{"a chunk sent twice", func(t *testing.T) []ipc.Frame {
			return []ipc.Frame{h, *s.chunks[0], *s.chunks[0]}
		}, []string{"apply dictionary chunk", "want (", "a chunk was lost or sent twice"}},
		{"a later batch before its chunk", func(t *testing.T) []ipc.Frame {
			return []ipc.Frame{h, *s.chunks[0], s.batches[0], s.batches[1]}
		}, []string{"read batch"}},
		{"a new generation not from the start", func(t *testing.T) []ipc.Frame {
			return []ipc.Frame{h, *s.chunks[0], chunk(t, &schema.DictionaryChunk{Generation: 2, StringBase: 5, Strings: []string{"x"}})}
		}, []string{"apply dictionary chunk", "generation 2", "want (1, 0, 0, 0)"}},
		{"a stale generation", func(t *testing.T) []ipc.Frame {
			return []ipc.Frame{h, chunk(t, &schema.DictionaryChunk{Generation: 3, StringBase: 1, Strings: []string{"x"}}), *s.chunks[0]}
		}, []string{"apply dictionary chunk", "generation 1 after generation 3"}},
		{"a batch of an old generation", func(t *testing.T) []ipc.Frame {
			return []ipc.Frame{h, *s.chunks[0], chunk(t, &schema.DictionaryChunk{Generation: 2, StringBase: 1, Strings: []string{"x"}}), s.batches[0]}
		}, []string{"read batch", "generation 1", "at generation 2"}},
		{"garbage chunk", func(t *testing.T) []ipc.Frame {
			return []ipc.Frame{h, {Type: ipc.FrameDictionary, Payload: []byte("not capnp")}}
		}, []string{"read dictionary chunk"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sink := &contentSink{}
			tr := newTracker(t, sink, nil, nil)
			err := tr.Serve(context.Background(), &frames{list: tt.frames(t)}, nil)
			if err == nil {
				t.Fatal("Serve: no error")
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Serve error = %v, want it to contain %q", err, w)
				}
			}
			if !errors.Is(err, schema.ErrMalformed) {
				t.Errorf("Serve error = %v, want errors.Is schema.ErrMalformed", err)
			}
			if v := testutil.ToFloat64(tr.metrics.malformed); v != 1 {
				t.Errorf("malformed frames = %v, want 1", v)
			}
			if len(sink.batches) > 1 {
				t.Errorf("sink saw %d batches", len(sink.batches))
			}
		})
	}
}

// TestDictionaryPerStream: each Serve call starts with an empty
// dictionary, so a connection cannot use another's chunks (two
// connections of one session, one after the other).
func TestDictionaryPerStream(t *testing.T) {
	s := newDictStream(t)
	tr := newTracker(t, &contentSink{}, nil, nil)
	if err := tr.Serve(context.Background(), &frames{list: s.connection(t, 1, 0, 2)}, nil); err != nil {
		t.Fatal(err)
	}
	// A second connection that skips the preamble.
	second := []ipc.Frame{hello(t, schema.MajorVersion, 1), s.batches[2]}
	if s.chunks[2] != nil {
		second = []ipc.Frame{hello(t, schema.MajorVersion, 1), *s.chunks[2], s.batches[2]}
	}
	err := tr.Serve(context.Background(), &frames{list: second}, nil)
	if err == nil || !errors.Is(err, schema.ErrMalformed) {
		t.Fatalf("second connection without the preamble: %v, want a malformed-stream error", err)
	}
}

// TestHelloStartsNewDictionary: an encoder's --record dump holds several
// connections one after another, each behind its hello: here a session's
// first connection, its reconnection (the generation's chunks again from
// the start, then the resends) and another session's connection. One
// Serve reads them all; each hello starts an empty dictionary, so every
// connection's chunks apply and every batch decodes.
func TestHelloStartsNewDictionary(t *testing.T) {
	s := newDictStream(t)
	n := len(s.batches)
	var dump []ipc.Frame
	dump = append(dump, s.connection(t, 4, 0, 3)...)
	dump = append(dump, s.connection(t, 4, 1, n)...) // batches 2-3 resent
	dump = append(dump, s.connection(t, 5, 0, 2)...)
	sink := &contentSink{}
	reg := prometheus.NewRegistry()
	tr := newTracker(t, sink, nil, reg)
	if err := tr.Serve(context.Background(), &frames{list: dump}, nil); err != nil {
		t.Fatalf("one dump of three connections: %v", err)
	}
	want := append(append([]string(nil), s.want...), s.want[:2]...)
	if !reflect.DeepEqual(sink.batches, want) {
		t.Fatalf("sink saw\n%q\nwant\n%q", sink.batches, want)
	}
	if v := testutil.ToFloat64(tr.metrics.duplicates); v != 2 {
		t.Errorf("duplicates = %v, want 2 (the resent batches)", v)
	}
	if v := testutil.ToFloat64(tr.metrics.malformed); v != 0 {
		t.Errorf("malformed = %v, want 0", v)
	}
}
