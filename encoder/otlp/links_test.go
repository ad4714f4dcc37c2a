package otlp_test

import (
	"encoding/hex"
	"testing"
	"time"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
	"github.com/tandem-profiler/tandem/encoder/internal/flushtest"
	"github.com/tandem-profiler/tandem/schema"
	"github.com/tandem-profiler/tandem/test/otlptest"
)

// linkFlush flushes one batch of two processes: pid 1's samples carry
// links[i] (nil: none), pid 2 has one sample without a link.
func linkFlush(t *testing.T, links []*schema.TraceLink) *aggregate.Flush {
	t.Helper()
	b := schema.NewBatchBuilder()
	m := b.Mapping(schema.Mapping{FileName: b.String("app")})
	stack := b.Stack([]uint32{b.Frame(schema.Frame{Kind: schema.FrameNative, AddressOrLine: 0x10, Mapping: m})})
	p1 := b.Process(schema.Process{PID: 1, Comm: b.String("linked")})
	p2 := b.Process(schema.Process{PID: 2, Comm: b.String("other")})
	for i, l := range links {
		s := schema.Sample{TimestampUnixNano: int64(100 + i), Origin: schema.OriginCPUSampling, Value: 1, Process: p1, TID: 1, Stack: stack}
		if l == nil {
			b.AddSample(s)
		} else {
			b.AddLinkedSample(s, *l)
		}
	}
	b.AddSample(schema.Sample{TimestampUnixNano: 150, Origin: schema.OriginCPUSampling, Value: 1, Process: p2, TID: 2, Stack: stack})
	a := flushtest.NewAggregator(t, aggregate.DefaultConfig())
	if err := a.Add(&schema.Hello{SamplingFrequencyHz: 19}, b.Batch()); err != nil {
		t.Fatal(err)
	}
	return a.Flush(time.Unix(0, 1000))
}

// TestEncodeLinks: the request's link table is the flush's (entry 0 the
// zero link, then each link once, first-seen order), every linked sample
// names its own as link_index, and samples without a link name 0; the
// strict decoder (distinct, complete links) accepts it.
func TestEncodeLinks(t *testing.T) {
	l1 := schema.TraceLink{TraceID: [16]byte{0x4b, 15: 1}, SpanID: [8]byte{0xaa, 7: 1}}
	l2 := schema.TraceLink{TraceID: [16]byte{0x4b, 15: 2}, SpanID: [8]byte{0xaa, 7: 2}}
	f := linkFlush(t, []*schema.TraceLink{&l2, &l1, nil, &l2})
	req := newEncoder(t).Encode(f)
	links := req.Profiles().Dictionary().LinkTable()
	if links.Len() != 3 {
		t.Fatalf("link table of %d entries, want 3 (zero, l2, l1)", links.Len())
	}
	for i, want := range []schema.TraceLink{{}, l2, l1} {
		if l := links.At(i); [16]byte(l.TraceID()) != want.TraceID || [8]byte(l.SpanID()) != want.SpanID {
			t.Errorf("link %d = %s/%s, want %x/%x", i, l.TraceID(), l.SpanID(), want.TraceID, want.SpanID)
		}
	}
	samples, err := otlptest.Flatten(req.Profiles())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{} // pid/trace/span -> count
	for _, s := range samples {
		got[s.Resource["process.pid"]+"/"+s.TraceID+"/"+s.SpanID] += s.Total()
	}
	key := func(pid string, l schema.TraceLink) string {
		return pid + "/" + hex.EncodeToString(l.TraceID[:]) + "/" + hex.EncodeToString(l.SpanID[:])
	}
	want := map[string]int64{key("1", l2): 2, key("1", l1): 1, "1//": 1, "2//": 1}
	if len(got) != len(want) {
		t.Errorf("samples by pid and link %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %d samples, want %d (all: %v)", k, got[k], v, got)
		}
	}

	// Reused for a flush without links, the encoder writes only the zero
	// link again.
	e := newEncoder(t)
	e.Release(e.Encode(f))
	req = e.Encode(linkFlush(t, []*schema.TraceLink{nil}))
	if n := req.Profiles().Dictionary().LinkTable().Len(); n != 1 {
		t.Errorf("link table of %d entries for a flush without links, want 1", n)
	}
	if _, err := otlptest.Flatten(req.Profiles()); err != nil {
		t.Fatal(err)
	}
}

// TestEncodeLimitedLinks: a flush split to fit the message size gives each
// request the links of its own samples only (each once, after the zero
// link), and the split requests carry every sample's link as the whole
// request does.
func TestEncodeLimitedLinks(t *testing.T) {
	var links []*schema.TraceLink
	for i := range 200 {
		l := schema.TraceLink{TraceID: [16]byte{0x4b, 14: byte(i >> 8), 15: byte(i)}, SpanID: [8]byte{0xaa, 7: byte(i)}}
		links = append(links, &l, nil)
	}
	f := linkFlush(t, links)
	e := newEncoder(t)
	whole, size := encodeWhole(t, e, f)
	byLink := func(samples []otlptest.Sample) map[string]int64 {
		out := map[string]int64{}
		for _, s := range samples {
			out[s.Resource["process.pid"]+"/"+s.TraceID+"/"+s.SpanID] += s.Total()
		}
		return out
	}
	wholeSamples, err := otlptest.Flatten(whole.Profiles())
	if err != nil {
		t.Fatal(err)
	}
	want := byLink(wholeSamples)
	e.Release(whole)

	reqs, err := e.EncodeLimited(f, size/4)
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) < 4 {
		t.Fatalf("%d requests under a limit of a quarter of the whole, want at least 4", len(reqs))
	}
	var all []otlptest.Sample
	tables := 0
	for _, r := range reqs {
		samples, err := otlptest.Flatten(r.Profiles())
		if err != nil {
			t.Fatal(err)
		}
		used := map[string]bool{}
		for _, s := range samples {
			if s.TraceID != "" {
				used[s.TraceID+"/"+s.SpanID] = true
			}
		}
		if n := r.Profiles().Dictionary().LinkTable().Len(); n != len(used)+1 {
			t.Errorf("a request's link table has %d entries for %d links its samples use, want %d", n, len(used), len(used)+1)
		}
		tables += r.Profiles().Dictionary().LinkTable().Len() - 1
		all = append(all, samples...)
		e.Release(r)
	}
	if got := byLink(all); len(got) != len(want) {
		t.Errorf("split: %d distinct pid/link pairs, whole: %d", len(got), len(want))
	} else {
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: %d samples split, %d whole", k, got[k], v)
			}
		}
	}
	if tables != 200 {
		t.Errorf("the split requests' link tables hold %d links together, want the flush's 200 once each", tables)
	}
	// The flush itself is untouched: its samples still name its own table.
	if len(f.Links) != 201 {
		t.Errorf("the flush's link table changed: %d entries", len(f.Links))
	}
}
