package arrow_test

import (
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
	"github.com/tandem-profiler/tandem/encoder/arrow"
	"github.com/tandem-profiler/tandem/encoder/internal/flushtest"
	"github.com/tandem-profiler/tandem/encoder/internal/testcorpus"
	"github.com/tandem-profiler/tandem/encoder/labels"
	"github.com/tandem-profiler/tandem/test/parcatest"
)

func stream(c *testcorpus.Corpus) parcatest.Stream {
	return parcatest.Stream{Hello: c.Hello, Batches: c.Batches}
}

// newLabeler is the Labeler the encoder ships, parca-agent's label pipeline.
func newLabeler(t *testing.T, cfg labels.Config) *labels.Labeler {
	t.Helper()
	l, err := labels.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func checkRows(t *testing.T, want, got []parcatest.Row) {
	t.Helper()
	if diff := parcatest.Diff(want, got, 5); diff != nil {
		t.Fatalf("records differ from the input:\n%s", strings.Join(diff, "\n"))
	}
	if err := parcatest.CheckStackIDs(got); err != nil {
		t.Fatal(err)
	}
}

func TestV2RoundTrip(t *testing.T) {
	c := testcorpus.Generate(testcorpus.Small())
	f := flushtest.Default(t, c)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	ext := map[string]string{"cluster": "eu-1", "node": "ignored"}
	e, err := arrow.NewV2Encoder(arrow.DefaultConfig(), newLabeler(t, labels.Config{ExternalLabels: ext}), mem)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for range 2 { // the second run reuses every buffer
		bufs, err := e.Encode(f)
		if err != nil {
			t.Fatal(err)
		}
		if len(bufs) != 1 {
			t.Fatalf("%d payloads, want 1", len(bufs))
		}
		comp, err := parcatest.Compression(bufs[0])
		if err != nil || comp != "lz4" {
			t.Fatalf("IPC compression %q (%v), want lz4", comp, err)
		}
		got, err := parcatest.DecodeV2(bufs[0], mem)
		if err != nil {
			t.Fatal(err)
		}
		checkRows(t, parcatest.Expected(stream(c), "v2", ext), got)
		if err := parcatest.CheckV2Dedupe(bufs[0], mem); err != nil {
			t.Fatal(err)
		}
	}
}

func TestV2Split(t *testing.T) {
	c := testcorpus.Generate(testcorpus.Small())
	f := flushtest.Default(t, c)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	cfg := arrow.DefaultConfig()
	cfg.MaxMessageBytes = 40 << 10
	e, err := arrow.NewV2Encoder(cfg, nil, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	bufs, err := e.Encode(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(bufs) < 2 {
		t.Fatalf("%d payloads under a %d-byte limit, want several", len(bufs), cfg.MaxMessageBytes)
	}
	var got []parcatest.Row
	for _, b := range bufs {
		if len(b)+64 > cfg.MaxMessageBytes {
			t.Errorf("payload of %d bytes exceeds the limit", len(b))
		}
		rows, err := parcatest.DecodeV2(b, mem)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, rows...)
	}
	checkRows(t, parcatest.Expected(stream(c), "v2", nil), got)
}

// dropOdd drops the samples of odd thread ids, as a relabel rule would.
type dropOdd struct{ arrow.Labeler }

func (d dropOdd) Labels(dst []arrow.Label, f *aggregate.Flush, s *aggregate.Sample) ([]arrow.Label, bool) {
	if s.TID%2 == 1 {
		return dst, false
	}
	return d.Labeler.Labels(dst, f, s)
}

func TestLabelerDrops(t *testing.T) {
	c := testcorpus.Generate(testcorpus.Small())
	f := flushtest.Default(t, c)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	e, err := arrow.NewV2Encoder(arrow.DefaultConfig(), dropOdd{newLabeler(t, labels.Config{})}, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	bufs, err := e.Encode(f)
	if err != nil {
		t.Fatal(err)
	}
	got, err := parcatest.DecodeV2(bufs[0], mem)
	if err != nil {
		t.Fatal(err)
	}
	var want []parcatest.Row
	for _, r := range parcatest.Expected(stream(c), "v2", nil) {
		if !strings.Contains(r.Labels+",", "thread_id=") {
			t.Fatal("expected row without thread_id")
		}
		tid := r.Labels[strings.Index(r.Labels, "thread_id=")+len("thread_id="):]
		tid, _, _ = strings.Cut(tid, ",")
		if (tid[len(tid)-1]-'0')%2 == 0 {
			want = append(want, r)
		}
	}
	if len(want) == 0 || len(want) == len(parcatest.Expected(stream(c), "v2", nil)) {
		t.Fatalf("%d rows kept: the test drops nothing or everything", len(want))
	}
	checkRows(t, want, got)
}
