package arrow_test

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
	"github.com/tandem-profiler/tandem/encoder/arrow"
	"github.com/tandem-profiler/tandem/encoder/output"
	"github.com/tandem-profiler/tandem/schema"
	"github.com/tandem-profiler/tandem/test/parcatest"
)

// nativeFlush is one sample of one native frame in "app" that the
// encoder's symbolizer named: main.work line 42, into which main.inlined
// (line 7) was inlined.
func nativeFlush() *aggregate.Flush {
	return &aggregate.Flush{
		StartUnixNano: 1, EndUnixNano: 10, Generation: 1,
		Strings:        []string{"", "app", "main.work", "main.inlined", "main.c"},
		Mappings:       []aggregate.Mapping{{}, {FileName: 1, Start: 0x1000, End: 0x9000}},
		Functions:      []aggregate.Function{{}, {Name: 2, File: 4}, {Name: 3}},
		Locations:      []aggregate.Location{{}, {Address: 0x1234, Mapping: 1, Kind: schema.FrameNative}},
		StackLocations: []uint32{1},
		StackEnds:      []uint32{0, 1},
		LabelEnds:      []uint32{0},
		Resources:      []aggregate.Resource{{PID: 42}},
		// Inlined calls first, the function the address is in last.
		NativeLineTable: []aggregate.Line{{Function: 2, Line: 7}, {Function: 1, Line: 42}},
		NativeLineEnds:  []uint32{0, 2},
		Samples: []aggregate.Sample{{Stack: 1, Origin: schema.OriginCPUSampling, FrequencyHz: 19, TID: 42,
			Timestamps: []int64{5}, Values: []int64{1}}},
		Events: 1,
	}
}

// TestNativeNames: with --symbolize-native=on (NameLocations, the Arrow
// outputs' Transform) a native frame the encoder named carries its
// outermost function and line in both record versions; with auto (no
// Transform) it carries no line, so that Parca symbolizes it. The same
// encoder sees the unnamed flush first, then the named one of the same
// dictionary Generation, as when the aggregator names a location late
// (its executable arrived after its first flush): nothing cached may keep
// the unnamed frame.
func TestNativeNames(t *testing.T) {
	f := nativeFlush()
	named, _, err := output.NameLocations(f)
	if err != nil {
		t.Fatal(err)
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	v1, err := arrow.NewV1Encoder(arrow.DefaultConfig(), nil, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer v1.Close()
	v2, err := arrow.NewV2Encoder(arrow.DefaultConfig(), nil, mem)
	if err != nil {
		t.Fatal(err)
	}
	defer v2.Close()
	encode := map[string]func(*aggregate.Flush) []parcatest.Row{
		"v1": func(f *aggregate.Flush) []parcatest.Row {
			xs, err := v1.Encode(f)
			if err != nil || len(xs) != 1 {
				t.Fatalf("v1: %d exchanges, %v", len(xs), err)
			}
			return exchange(t, xs[0], mem)
		},
		"v2": func(f *aggregate.Flush) []parcatest.Row {
			bufs, err := v2.Encode(f)
			if err != nil || len(bufs) != 1 {
				t.Fatalf("v2: %d payloads, %v", len(bufs), err)
			}
			rows, err := parcatest.DecodeV2(bufs[0], mem)
			if err != nil {
				t.Fatal(err)
			}
			return rows
		},
	}
	for _, version := range []string{"v1", "v2"} {
		var stackIDs [][16]byte
		for _, c := range []struct {
			mode string
			f    *aggregate.Flush
			want parcatest.Location
		}{
			{"auto", f, parcatest.Location{}},
			{"on", named, parcatest.Location{HasLines: true, Line: 42, Function: "main.work", Filename: "main.c"}},
		} {
			rows := encode[version](c.f)
			if len(rows) != 1 {
				t.Fatalf("%s %s: %d rows, want 1", version, c.mode, len(rows))
			}
			want := c.want
			want.FrameType, want.Address, want.MappingFile = "native", 0x1234, "app"
			want.BuildID = f.ExecutableKey(&f.Mappings[1]).String() // the key its symbols are uploaded under
			if rows[0].Stack != want.String() {
				t.Errorf("%s, --symbolize-native=%s: frame\n%s\nwant\n%s", version, c.mode, rows[0].Stack, want.String())
			}
			stackIDs = append(stackIDs, rows[0].StackID)
		}
		if stackIDs[0] == stackIDs[1] {
			t.Errorf("%s: the named stack kept the unnamed one's id %x", version, stackIDs[0])
		}
	}
}
