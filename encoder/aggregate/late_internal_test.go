package aggregate

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tandem-profiler/tandem/encoder/symbolize"
	"github.com/tandem-profiler/tandem/schema"
	"github.com/tandem-profiler/tandem/test/promtest"
)

// filesSymbolizer names address a of a file it has "fn_<a>", and counts
// the lookups of each file.
type filesSymbolizer struct {
	have  map[schema.FileID]bool
	calls map[schema.FileID]int
}

func (s *filesSymbolizer) Resolve(file schema.FileID, addr uint64, dst []symbolize.Frame) ([]symbolize.Frame, bool) {
	s.calls[file]++
	if !s.have[file] {
		return dst, false
	}
	return append(dst, symbolize.Frame{Function: fmt.Sprintf("fn_%x", addr)}), true
}

// nativeBatch has one sample per address, each a one-frame native stack
// in file.
func nativeBatch(file schema.FileID, addrs ...uint64) *schema.Batch {
	b := schema.NewBatchBuilder()
	m := b.Mapping(schema.Mapping{FileName: b.String("exe"), FileID: file, Start: 0x1000, End: 0x2000})
	for _, addr := range addrs {
		stack := b.Stack([]uint32{b.Frame(schema.Frame{Kind: schema.FrameNative, AddressOrLine: addr, Mapping: m})})
		b.AddSample(schema.Sample{TimestampUnixNano: 1, Origin: schema.OriginCPUSampling, Value: 1,
			Process: b.Process(schema.Process{PID: 42}), TID: 42, Stack: stack})
	}
	return b.Batch()
}

// nameOf is what f names the native frame at addr ("" for nothing).
func nameOf(t *testing.T, f *Flush, addr uint64) string {
	t.Helper()
	for id := range f.Locations {
		if f.Locations[id].Address == addr && f.Locations[id].Kind == schema.FrameNative {
			if lines := f.NativeLines(uint32(id)); len(lines) > 0 {
				return f.Strings[f.Functions[lines[0].Function].Name]
			}
			return ""
		}
	}
	t.Fatalf("no location at %#x", addr)
	return ""
}

// TestLateExecutables: a location waits for its own executable only; a
// flush's lines never change after it was taken; the wait is bounded and
// what is given up counted; a dictionary rebuild forgets the waiting and
// resolves again.
func TestLateExecutables(t *testing.T) {
	x, y := schema.FileID{Hi: 1, Lo: 1}, schema.FileID{Hi: 2, Lo: 2}
	hello := &schema.Hello{NodeName: "n"}
	setup := func(t *testing.T) (*Aggregator, *filesSymbolizer, *prometheus.Registry) {
		s := &filesSymbolizer{have: map[schema.FileID]bool{x: true}, calls: map[schema.FileID]int{}}
		cfg := DefaultConfig()
		cfg.Symbolizer = s
		reg := prometheus.NewRegistry()
		a, err := NewAggregator(cfg, reg)
		if err != nil {
			t.Fatal(err)
		}
		return a, s, reg
	}
	add := func(t *testing.T, a *Aggregator, b *schema.Batch) {
		t.Helper()
		if err := a.Add(hello, b); err != nil {
			t.Fatal(err)
		}
	}
	arrive := func(a *Aggregator, s *filesSymbolizer, id schema.FileID) {
		s.have[id] = true
		a.NoteExecutable(&schema.ExecutableNotice{FileID: id, Path: "/exe"})
	}

	t.Run("per executable", func(t *testing.T) {
		a, s, _ := setup(t)
		add(t, a, nativeBatch(x, 0x1100, 0x1200))
		add(t, a, nativeBatch(y, 0x1300, 0x1400))
		first := a.Flush(time.Unix(1, 0))
		if nameOf(t, first, 0x1100) != "fn_1100" || nameOf(t, first, 0x1300) != "" {
			t.Fatal("first flush: x's frames must be named, y's not")
		}
		a.NoteExecutable(&schema.ExecutableNotice{FileID: x}) // x again: nothing waits for it
		a.NoteExecutable(&schema.ExecutableNotice{FileID: schema.FileID{Hi: 3, Lo: 3}})
		add(t, a, nativeBatch(y, 0x1300))
		a.Flush(time.Unix(2, 0))
		if s.calls[x] != 2 || s.calls[y] != 2 {
			t.Fatalf("lookups: x %d, y %d; want 2 each (once per location)", s.calls[x], s.calls[y])
		}
		arrive(a, s, y)
		add(t, a, nativeBatch(y, 0x1300))
		third := a.Flush(time.Unix(3, 0))
		for addr, want := range map[uint64]string{0x1100: "fn_1100", 0x1200: "fn_1200", 0x1300: "fn_1300", 0x1400: "fn_1400"} {
			if got := nameOf(t, third, addr); got != want {
				t.Errorf("after y arrived, %#x: %q, want %q", addr, got, want)
			}
		}
		if nameOf(t, first, 0x1100) != "fn_1100" || nameOf(t, first, 0x1300) != "" || nameOf(t, first, 0x1400) != "" {
			t.Error("an earlier flush changed")
		}
		a.Flush(time.Unix(4, 0))
		if s.calls[y] != 4 {
			t.Errorf("y looked up %d times, want 4: each waiting location once more, then never", s.calls[y])
		}
		if n := a.Stats().LateLocations; n != 0 {
			t.Errorf("%d locations still waiting", n)
		}
	})

	t.Run("bounded", func(t *testing.T) {
		a, s, reg := setup(t)
		addrs := make([]uint64, maxLateLocations+3)
		for i := range addrs {
			addrs[i] = 0x1000 + uint64(i)
		}
		add(t, a, nativeBatch(y, addrs...))
		a.Flush(time.Unix(1, 0))
		if n := a.Stats().LateLocations; n != maxLateLocations {
			t.Errorf("%d waiting, want the bound %d", n, maxLateLocations)
		}
		if got := promtest.Value(t, reg, "tandem_encoder_aggregator_late_locations_not_retried_total"); got != 3 {
			t.Errorf("%v not retried, want 3", got)
		}
		arrive(a, s, y)
		f := a.Flush(time.Unix(2, 0))
		if nameOf(t, f, addrs[0]) == "" || nameOf(t, f, addrs[len(addrs)-1]) != "" {
			t.Error("the first locations must be named, the ones past the bound not")
		}
	})

	t.Run("many arrivals", func(t *testing.T) {
		a, s, _ := setup(t)
		add(t, a, nativeBatch(y, 0x1300))
		a.Flush(time.Unix(1, 0))
		for i := range maxArrivals {
			a.NoteExecutable(&schema.ExecutableNotice{FileID: schema.FileID{Hi: 9, Lo: uint64(i)}})
		}
		arrive(a, s, y) // past maxArrivals: every waiting file is retried
		if f := a.Flush(time.Unix(2, 0)); nameOf(t, f, 0x1300) != "fn_1300" {
			t.Error("not named after more than maxArrivals notices")
		}
	})

	t.Run("rebuild", func(t *testing.T) {
		a, s, _ := setup(t)
		a.minStale = 1
		add(t, a, nativeBatch(y, 0x1300))
		a.Flush(time.Unix(1, 0))
		gen := a.Stats().Generation
		for i := range DefaultDictionaryTTL + 1 { // 0x1300 unused: pruned
			add(t, a, nativeBatch(x, 0x1100))
			a.Flush(time.Unix(int64(2+i), 0))
		}
		if a.Stats().Generation == gen {
			t.Fatal("no rebuild")
		}
		if n := a.Stats().LateLocations; n != 0 {
			t.Errorf("%d waiting after the rebuild, want 0", n)
		}
		arrive(a, s, y)
		add(t, a, nativeBatch(y, 0x1300))
		if f := a.Flush(time.Unix(20, 0)); nameOf(t, f, 0x1300) != "fn_1300" {
			t.Error("not named in the new generation")
		}
	})
}
