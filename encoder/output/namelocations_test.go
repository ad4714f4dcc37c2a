package output_test

import (
	"testing"
	"time"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
	"github.com/tandem-profiler/tandem/encoder/output"
	"github.com/tandem-profiler/tandem/encoder/symbolize"
	"github.com/tandem-profiler/tandem/schema"
)

type oneName struct{}

func (oneName) Resolve(_ schema.FileID, addr uint64, dst []symbolize.Frame) ([]symbolize.Frame, bool) {
	return append(dst, symbolize.Frame{Function: "inlined"}, symbolize.Frame{Function: "outer", Line: uint32(addr)}), true
}

// TestNameLocations: the Arrow outputs' Transform under
// --symbolize-native=on gives native locations their outermost function,
// and leaves the aggregator's tables alone.
func TestNameLocations(t *testing.T) {
	cfg := aggregate.DefaultConfig()
	cfg.Symbolizer = oneName{}
	a, err := aggregate.NewAggregator(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := schema.NewBatchBuilder()
	m := b.Mapping(schema.Mapping{FileName: b.String("tool"), FileID: schema.FileID{Hi: 1, Lo: 2}, Start: 0x1000, End: 0x2000})
	stack := b.Stack([]uint32{b.Frame(schema.Frame{Kind: schema.FrameNative, AddressOrLine: 0x1234, Mapping: m})})
	b.AddSample(schema.Sample{TimestampUnixNano: 1, Origin: schema.OriginCPUSampling, Value: 1,
		Process: b.Process(schema.Process{PID: 42}), TID: 42, Stack: stack})
	if err := a.Add(&schema.Hello{NodeName: "n"}, b.Batch()); err != nil {
		t.Fatal(err)
	}
	f := a.Flush(time.Unix(1, 0))
	g, release, err := output.NameLocations(f)
	if err != nil || release != nil {
		t.Fatalf("NameLocations: %v, release %v", err, release != nil)
	}
	loc := f.Stack(f.Samples[0].Stack)[0]
	if f.Locations[loc].Function != 0 {
		t.Error("the aggregator's location was modified")
	}
	l := g.Locations[loc]
	if got := g.Strings[g.Functions[l.Function].Name]; got != "outer" || l.Line != 0x1234 {
		t.Errorf("named %q line %#x, want outer at 0x1234", got, l.Line)
	}
}
