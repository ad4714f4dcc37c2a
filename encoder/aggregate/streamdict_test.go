package aggregate

import (
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
	"weak"

	"github.com/tandem-profiler/tandem/internal/synth"
	"github.com/tandem-profiler/tandem/schema"
)

// referenceBatches is the stream benchmarks' reference corpus at
// 1,000-sample batches (docs/benchmarks/stream.md), generated once per test binary.
// The batches are shared: callers must not modify them (the slice is
// theirs).
func referenceBatches(t testing.TB) (*schema.Hello, []*schema.Batch) {
	t.Helper()
	reference.once.Do(func() {
		cfg := synth.DefaultConfig()
		cfg.BatchSize = 1000
		msgs, err := synth.Collect(cfg)
		if err != nil {
			reference.err = err
			return
		}
		reference.hello, reference.batches = synth.Split(msgs)
	})
	if reference.err != nil {
		t.Fatal(reference.err)
	}
	return reference.hello, slices.Clone(reference.batches)
}

var reference struct {
	once    sync.Once
	hello   *schema.Hello
	batches []*schema.Batch
	err     error
}

// conn is one protocol 1.4 connection: the sampler's side of its
// dictionary and the encoder's (what ingest keeps per Serve).
type conn struct {
	w    *synth.Dictionaries
	dict *schema.Dictionary
}

func newConn(generation uint64) *conn {
	return &conn{w: synth.NewDictionaries(generation), dict: &schema.Dictionary{}}
}

// layout2 returns b as it reaches the Aggregator on c: its chunk applied
// to c's dictionary, then the layout-2 batch with the dictionary's tables.
func (c *conn) layout2(t testing.TB, b *schema.Batch) *schema.Batch {
	t.Helper()
	chunk, out := c.w.Batch(b)
	if chunk != nil {
		if err := c.dict.Apply(chunk); err != nil {
			t.Fatalf("batch %d: apply chunk: %v", b.Sequence, err)
		}
	}
	synth.Attach(out, c.dict)
	return out
}

// flushContent returns what a Flush says, without the Aggregator it came
// from.
func flushContent(f *Flush) Flush {
	v := *f
	v.owner, v.ts, v.vals = nil, nil, nil
	return v
}

// TestLayout2FlushesEqualLayout1 feeds the reference corpus to two
// Aggregators, once with the batches' own tables (layout 1) and once as
// protocol 1.4 sends it (layout 2, against per-connection dictionaries),
// and requires identical Flushes. The stream is spread over two
// connections, one of which starts a new dictionary generation in the
// middle of a flush interval (so that its translations of the old
// generation are still current for the Aggregator), and it is replayed
// twice. With a dictionary TTL of one flush the Aggregator also compacts
// (its own generation changes) while it holds translations of the first
// pass.
func TestLayout2FlushesEqualLayout1(t *testing.T) {
	hello, batches := referenceBatches(t)
	const (
		window   = 3 // batches per flush interval
		switchAt = 8 // connection 0's batches 6 and 8 share an interval
	)
	for _, tt := range []struct {
		name    string
		compact bool
	}{{"default", false}, {"compacting", true}} {
		t.Run(tt.name, func(t *testing.T) {
			newAgg := func() *Aggregator {
				cfg := DefaultConfig()
				if tt.compact {
					cfg.DictionaryTTL = 1
				}
				a, err := NewAggregator(cfg, nil)
				if err != nil {
					t.Fatal(err)
				}
				if tt.compact {
					a.minStale = 1
				}
				return a
			}
			a1, a2 := newAgg(), newAgg()
			conns := []*conn{newConn(1), newConn(1)}
			flushes, generations := 0, map[uint64]bool{}
			for pass := range 2 {
				for i, b := range batches {
					c := conns[i%2]
					if pass == 0 && i == switchAt {
						c.w.NewGeneration(2)
					}
					if err := a1.Add(hello, b); err != nil {
						t.Fatal(err)
					}
					if err := a2.Add(hello, c.layout2(t, b)); err != nil {
						t.Fatalf("pass %d, batch %d as layout 2: %v", pass, i, err)
					}
					if i%window != window-1 && i != len(batches)-1 {
						continue
					}
					now := time.Unix(0, int64(1000*(flushes+1)))
					f1, f2 := a1.Flush(now), a2.Flush(now)
					flushes++
					if f1.Events == 0 {
						t.Fatalf("flush %d is empty", flushes)
					}
					if !reflect.DeepEqual(flushContent(f1), flushContent(f2)) {
						t.Fatalf("pass %d, flush %d (after batch %d): layout 2 flushed\n%s\nlayout 1\n%s", pass, flushes, i, describe(f2), describe(f1))
					}
					generations[f1.Generation] = true
					a1.Release(f1)
					a2.Release(f2)
				}
			}
			if conns[0].dict.Generation != 2 {
				t.Errorf("connection 0 dictionary at generation %d, want 2", conns[0].dict.Generation)
			}
			if tt.compact && len(generations) < 3 {
				t.Errorf("flushes saw Aggregator generations %v: want at least 3 (compactions between them)", generations)
			}
			if !tt.compact && len(generations) != 1 {
				t.Errorf("flushes saw Aggregator generations %v: want no compaction", generations)
			}
			if s1, s2 := a1.Stats(), a2.Stats(); s1 != s2 {
				t.Errorf("stats differ: layout 1 %+v, layout 2 %+v", s1, s2)
			}
		})
	}
}

func describe(f *Flush) string {
	return fmt.Sprintf("generation %d, %d strings, %d mappings, %d functions, %d locations, %d stacks, %d label sets, %d resources, %d samples, %d events",
		f.Generation, len(f.Strings), len(f.Mappings), len(f.Functions), len(f.Locations), len(f.StackEnds),
		len(f.LabelEnds), len(f.Resources), len(f.Samples), f.Events)
}

// TestLayout2RejectsInvalid: a layout-2 batch whose references leave its
// tables (which DecodeBatchWith never produces, but Add takes any batch)
// is rejected like a layout-1 one, and a later valid batch on the same
// dictionary still aggregates.
func TestLayout2RejectsInvalid(t *testing.T) {
	hello, batches := referenceBatches(t)
	a := newTestAggregator(t)
	c := newConn(1)
	b := c.layout2(t, batches[0])
	saved := b.Samples[7].Stack
	b.Samples[7].Stack = uint32(len(b.StackEnds))
	if err := a.Add(hello, b); err == nil {
		t.Fatal("batch with a stack past the dictionary: no error")
	}
	b.Samples[7].Stack = saved
	b.Samples[3].ThreadName = uint32(len(b.Strings)) + 5
	if err := a.Add(hello, b); err == nil {
		t.Fatal("batch with a thread name past the dictionary: no error")
	}
	b.Samples[3].ThreadName = 0
	if err := a.Add(hello, b); err != nil {
		t.Fatal(err)
	}
	if f := a.Flush(time.Now()); f.Events != len(b.Samples) {
		t.Errorf("flushed %d events, want %d", f.Events, len(b.Samples))
	}
}

// TestStreamMapsBounded: the Aggregator keeps the id maps of at most
// maxStreamMaps dictionaries, drops those of dictionaries unused for an
// interval at Flush, and never keeps a dictionary alive (a connection's
// dies when its Serve returns).
func TestStreamMapsBounded(t *testing.T) {
	hello, batches := referenceBatches(t)
	a := newTestAggregator(t)
	var dead []weak.Pointer[schema.Dictionary]
	for i := range 3 * maxStreamMaps {
		c := newConn(1)
		if err := a.Add(hello, c.layout2(t, batches[i%len(batches)])); err != nil {
			t.Fatal(err)
		}
		if len(a.streams) > maxStreamMaps {
			t.Fatalf("after %d connections the Aggregator keeps maps for %d dictionaries, want at most %d", i+1, len(a.streams), maxStreamMaps)
		}
		dead = append(dead, weak.Make(c.dict))
	}
	runtime.GC()
	for i, w := range dead {
		if w.Value() != nil {
			t.Fatalf("dictionary of connection %d still alive after its connection ended", i)
		}
	}
	// A live connection keeps its maps across a flush; the dead ones go.
	live := newConn(1)
	if err := a.Add(hello, live.layout2(t, batches[0])); err != nil {
		t.Fatal(err)
	}
	a.Release(a.Flush(time.Now()))
	if len(a.streams) != 1 {
		t.Errorf("after a flush the Aggregator keeps maps for %d dictionaries, want 1 (the live connection's)", len(a.streams))
	}
	a.Release(a.Flush(time.Now()))
	if len(a.streams) != 0 {
		t.Errorf("after an interval without batches the Aggregator keeps maps for %d dictionaries, want 0", len(a.streams))
	}
	runtime.KeepAlive(live)
}

// TestLayout2AddAllocations: warm layout-2 batches allocate nothing per
// sample (the budget TestAggregatorAddAllocations sets for layout 1).
func TestLayout2AddAllocations(t *testing.T) {
	hello, batches := referenceBatches(t)
	a := newTestAggregator(t)
	c := newConn(1)
	var l2 []*schema.Batch
	samples := 0
	for _, b := range batches {
		l2 = append(l2, c.layout2(t, b))
		samples += len(b.Samples)
	}
	cycle := func() {
		for _, b := range l2 {
			if err := a.Add(hello, b); err != nil {
				t.Fatal(err)
			}
		}
		a.Release(a.Flush(time.Now()))
	}
	cycle()
	cycle()
	allocs := testing.AllocsPerRun(3, cycle)
	if perSample := allocs / float64(samples); perSample > 0.01 {
		t.Errorf("%.0f allocations per cycle of %d samples (%.3f/sample)", allocs, samples, perSample)
	}
}

// TestLayout2BatchesOfTwoGenerations: a layout-2 batch keeps the tables of
// its own generation (DecodeBatchWith's slices) when its dictionary moves
// on to the next. Batches of both generations, interleaved on one
// dictionary, aggregate as their layout-1 originals do.
func TestLayout2BatchesOfTwoGenerations(t *testing.T) {
	hello, batches := referenceBatches(t)
	c := newConn(1)
	old := c.layout2(t, batches[0])
	c.w.NewGeneration(2)
	cur := c.layout2(t, batches[1])
	if old.Dictionary != cur.Dictionary || old.Generation == cur.Generation {
		t.Fatalf("batches of generations %d and %d on dictionaries %p, %p: want one dictionary", old.Generation, cur.Generation, old.Dictionary, cur.Dictionary)
	}
	a1, a2 := newTestAggregator(t), newTestAggregator(t)
	for _, pair := range [][2]*schema.Batch{{batches[0], old}, {batches[1], cur}, {batches[0], old}, {batches[1], cur}} {
		if err := a1.Add(hello, pair[0]); err != nil {
			t.Fatal(err)
		}
		if err := a2.Add(hello, pair[1]); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Unix(0, 1)
	if f1, f2 := a1.Flush(now), a2.Flush(now); !reflect.DeepEqual(flushContent(f1), flushContent(f2)) {
		t.Fatalf("layout 2 flushed\n%s\nlayout 1\n%s", describe(f2), describe(f1))
	}
}
