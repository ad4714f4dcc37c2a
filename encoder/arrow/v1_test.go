package arrow_test

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tandem-profiler/tandem/encoder/arrow"
	"github.com/tandem-profiler/tandem/encoder/internal/flushtest"
	"github.com/tandem-profiler/tandem/encoder/internal/testcorpus"
	"github.com/tandem-profiler/tandem/test/parcatest"
)

// exchange plays the server's side of one Write exchange in memory.
func exchange(t *testing.T, x *arrow.Exchange, mem memory.Allocator) []parcatest.Row {
	t.Helper()
	if comp, err := parcatest.Compression(x.SampleRecord()); err != nil || comp != "none" {
		t.Fatalf("sample record compression %q (%v), want none", comp, err)
	}
	smp, err := parcatest.DecodeV1Samples(x.SampleRecord(), mem)
	if err != nil {
		t.Fatal(err)
	}
	req, err := parcatest.StacktraceRequest(smp.IDs, mem)
	if err != nil {
		t.Fatal(err)
	}
	locs, err := x.LocationsFor(req)
	if err != nil {
		t.Fatal(err)
	}
	stacks, err := parcatest.DecodeV1Locations(locs, mem)
	if err != nil {
		t.Fatal(err)
	}
	if len(stacks) != len(smp.IDs) {
		t.Fatalf("%d stacks for %d requested ids", len(stacks), len(smp.IDs))
	}
	for i := range smp.Rows {
		st, ok := stacks[string(smp.Rows[i].StackID[:])]
		if !ok {
			t.Fatalf("no locations for %x", smp.Rows[i].StackID)
		}
		smp.Rows[i].Stack = st
	}
	return smp.Rows
}

func TestV1RoundTrip(t *testing.T) {
	c := testcorpus.Generate(testcorpus.Small())
	f := flushtest.Default(t, c)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	for _, limit := range []int{0, 64 << 10} {
		cfg := arrow.DefaultConfig()
		cfg.MaxMessageBytes = limit
		e, err := arrow.NewV1Encoder(cfg, nil, mem)
		if err != nil {
			t.Fatal(err)
		}
		xs, err := e.Encode(f)
		if err != nil {
			t.Fatal(err)
		}
		if limit == 0 && len(xs) != 1 || limit > 0 && len(xs) < 2 {
			t.Errorf("limit %d: %d exchanges", limit, len(xs))
		}
		var got []parcatest.Row
		for _, x := range xs {
			if limit > 0 && len(x.SampleRecord())+64 > limit {
				t.Errorf("sample record of %d bytes over the limit", len(x.SampleRecord()))
			}
			got = append(got, exchange(t, x, mem)...)
		}
		e.Close()
		checkRows(t, parcatest.Expected(stream(c), "v1", nil), got)
	}
}

func TestV1UnknownID(t *testing.T) {
	c := testcorpus.Generate(testcorpus.Small())
	f := flushtest.Default(t, c)
	e, err := arrow.NewV1Encoder(arrow.DefaultConfig(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	xs, err := e.Encode(f)
	if err != nil {
		t.Fatal(err)
	}
	req, err := parcatest.StacktraceRequest([][]byte{make([]byte, 16)}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := xs[0].LocationsFor(req); err == nil {
		t.Fatal("LocationsFor accepted an id that was never sent")
	}
}
