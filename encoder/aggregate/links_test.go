package aggregate

import (
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tandem-profiler/tandem/schema"
)

// testLink returns a distinct valid link for n.
func testLink(n byte) schema.TraceLink {
	return schema.TraceLink{TraceID: [16]byte{0: 0xa0, 15: n}, SpanID: [8]byte{0: 0xb0, 7: n}}
}

// linkedBatch is one process and one stack; sample i has link links[i]
// (nil: none), all on thread 1 at cpu 0.
func linkedBatch(links []*schema.TraceLink) *schema.Batch {
	b := schema.NewBatchBuilder()
	stack := b.Stack([]uint32{b.Frame(schema.Frame{Kind: schema.FrameNative, AddressOrLine: 0x10})})
	proc := b.Process(schema.Process{PID: 1, Comm: b.String("a")})
	for i, l := range links {
		s := schema.Sample{TimestampUnixNano: int64(100 + i), Origin: schema.OriginCPUSampling, Value: 1, Process: proc, TID: 1, Stack: stack}
		if l == nil {
			b.AddSample(s)
		} else {
			b.AddLinkedSample(s, *l)
		}
	}
	return b.Batch()
}

func addFlush(t *testing.T, a *Aggregator, batches ...*schema.Batch) *Flush {
	t.Helper()
	for _, b := range batches {
		if err := a.Add(&schema.Hello{SamplingFrequencyHz: 19}, b); err != nil {
			t.Fatal(err)
		}
	}
	return a.Flush(time.Unix(0, 1000))
}

// sampleLinks lists, per flush sample, its link and its count.
func sampleLinks(f *Flush) (links []schema.TraceLink, counts []int) {
	for _, s := range f.Samples {
		links = append(links, f.Links[s.Link])
		counts = append(counts, len(s.Timestamps))
	}
	return links, counts
}

// TestLinkTable: the link table holds each distinct link once, in the
// order samples first named it, after the zero entry; samples of
// different links never merge, samples of one link do, and samples
// without a link keep link 0.
func TestLinkTable(t *testing.T) {
	l1, l2, l3 := testLink(1), testLink(2), testLink(3)
	a := newTestAggregator(t)
	f := addFlush(t, a,
		linkedBatch([]*schema.TraceLink{&l2, nil, &l1, &l2}),
		linkedBatch([]*schema.TraceLink{&l3, &l1, nil, &l2}))
	if want := []schema.TraceLink{{}, l2, l1, l3}; !slices.Equal(f.Links, want) {
		t.Fatalf("links %v, want %v", f.Links, want)
	}
	links, counts := sampleLinks(f)
	if wantLinks, wantCounts := []schema.TraceLink{l2, {}, l1, l3}, []int{3, 2, 2, 1}; !slices.Equal(links, wantLinks) || !slices.Equal(counts, wantCounts) {
		t.Errorf("samples: links %v counts %v, want %v %v", links, counts, wantLinks, wantCounts)
	}
	// The next interval starts its own table.
	f2 := addFlush(t, a, linkedBatch([]*schema.TraceLink{&l3}))
	if want := []schema.TraceLink{{}, l3}; !slices.Equal(f2.Links, want) || f2.Samples[0].Link != 1 {
		t.Errorf("second interval: links %v, sample link %d; want %v, 1", f2.Links, f2.Samples[0].Link, want)
	}
	// The first flush is unchanged by the second (its table was copied).
	if f.Links[1] != l2 {
		t.Errorf("first flush's links changed: %v", f.Links)
	}
}

// TestNoLinks: a flush without links has only the zero entry, and every
// sample link 0.
func TestNoLinks(t *testing.T) {
	f := addFlush(t, newTestAggregator(t), linkedBatch([]*schema.TraceLink{nil, nil}))
	if len(f.Links) != 1 || f.Links[0] != (schema.TraceLink{}) || len(f.Samples) != 1 || f.Samples[0].Link != 0 {
		t.Fatalf("links %v, samples %+v", f.Links, f.Samples)
	}
}

// TestLinkBound: past MaxLinksPerFlush distinct links, samples keep their
// stack and lose only the link, counted; links already in the table still
// attach.
func TestLinkBound(t *testing.T) {
	cfg := DefaultConfig()
	cfg.MaxLinksPerFlush = 2
	reg := prometheus.NewRegistry()
	a, err := NewAggregator(cfg, reg)
	if err != nil {
		t.Fatal(err)
	}
	l1, l2, l3, l4 := testLink(1), testLink(2), testLink(3), testLink(4)
	f := addFlush(t, a, linkedBatch([]*schema.TraceLink{&l1, &l2, &l3, &l1, &l4, nil}))
	if want := []schema.TraceLink{{}, l1, l2}; !slices.Equal(f.Links, want) {
		t.Fatalf("links %v, want %v", f.Links, want)
	}
	links, counts := sampleLinks(f)
	if wantLinks, wantCounts := []schema.TraceLink{l1, l2, {}}, []int{2, 1, 3}; !slices.Equal(links, wantLinks) || !slices.Equal(counts, wantCounts) {
		t.Errorf("samples: links %v counts %v, want %v %v", links, counts, wantLinks, wantCounts)
	}
	if f.Events != 6 || f.DroppedLinks != 2 {
		t.Errorf("events %d, dropped links %d; want 6, 2", f.Events, f.DroppedLinks)
	}
	if got := testutil.ToFloat64(a.metrics.linksDropped); got != 2 {
		t.Errorf("links_dropped_samples_total = %v, want 2", got)
	}
	if got := testutil.ToFloat64(a.metrics.linked); got != 5 {
		t.Errorf("linked_samples_total = %v, want 5", got)
	}
	// The bound is per flush.
	if f2 := addFlush(t, a, linkedBatch([]*schema.TraceLink{&l4})); f2.DroppedLinks != 0 || len(f2.Links) != 2 {
		t.Errorf("next flush: links %v, dropped %d", f2.Links, f2.DroppedLinks)
	}
}

func TestLinkRejectsBadIndex(t *testing.T) {
	l1 := testLink(1)
	b := linkedBatch([]*schema.TraceLink{&l1})
	b.Samples[0].Link = 2
	if err := newTestAggregator(t).Add(&schema.Hello{}, b); err == nil {
		t.Fatal("a sample naming link 2 of 1 was accepted")
	}
}

// TestRowKeySize: the link rides in the aggregation key's padding, so
// unlinked samples hash and compare as many bytes as before links.
func TestRowKeySize(t *testing.T) {
	if n := unsafe.Sizeof(rowKey{}); n != 32 {
		t.Errorf("rowKey is %d bytes, want 32", n)
	}
}
