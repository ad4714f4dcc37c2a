package arrow_test

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tandem-profiler/tandem/encoder/arrow"
	"github.com/tandem-profiler/tandem/encoder/internal/flushtest"
	"github.com/tandem-profiler/tandem/encoder/internal/testcorpus"
	"github.com/tandem-profiler/tandem/internal/synth"
	"github.com/tandem-profiler/tandem/schema"
	"github.com/tandem-profiler/tandem/test/parcatest"
)

// TestV2LinksLeftOut: the Arrow records of a flush whose every sample has
// a trace link are the records of the same samples without links (the
// decision in the package doc): every sample is written, with the same
// labels, and no link shows up as a label.
func TestV2LinksLeftOut(t *testing.T) {
	c := testcorpus.Generate(testcorpus.Small())
	linked := *c
	linked.Batches = make([]*schema.Batch, len(c.Batches))
	for i, b := range c.Batches {
		linked.Batches[i] = synth.Linked(b, 4)
	}
	f := flushtest.Default(t, &linked)
	if len(f.Links) < 2 {
		t.Fatal("the linked corpus has no links")
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	e, err := arrow.NewV2Encoder(arrow.DefaultConfig(), nil, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	bufs, err := e.Encode(f)
	if err != nil {
		t.Fatal(err)
	}
	var got []parcatest.Row
	for _, b := range bufs {
		rows, err := parcatest.DecodeV2(b, mem)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, rows...)
	}
	checkRows(t, parcatest.Expected(stream(c), "v2", nil), got)
}
