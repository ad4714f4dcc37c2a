package schema

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	capnp "capnproto.org/go/capnp/v3"

	"github.com/tandem-profiler/tandem/schema/internal/wire"
)

// sampleChunks splits sampleBatch's tables into the chunks of generation
// gen a sampler could have sent: strings and mappings, then frames, then
// stacks (each chunk refers only to what it or an earlier one defines).
func sampleChunks(t testing.TB, gen uint64) (*Batch, []DictionaryChunk) {
	t.Helper()
	b := sampleBatch(t)
	return b, []DictionaryChunk{
		{Generation: gen, StringBase: 1, Strings: slices.Clone(b.Strings[1:]), Mappings: slices.Clone(b.Mappings)},
		{Generation: gen, StringBase: uint32(len(b.Strings)), MappingBase: uint32(len(b.Mappings)), Frames: slices.Clone(b.Frames)},
		{Generation: gen, StringBase: uint32(len(b.Strings)), MappingBase: uint32(len(b.Mappings)), FrameBase: uint32(len(b.Frames)),
			StackFrames: slices.Clone(b.StackFrames), StackEnds: slices.Clone(b.StackEnds)},
	}
}

// applyAll encodes, decodes and applies every chunk to a new dictionary.
func applyAll(t testing.TB, chunks []DictionaryChunk) *Dictionary {
	t.Helper()
	d := new(Dictionary)
	var c DictionaryChunk
	for i := range chunks {
		data, err := EncodeDictionaryChunk(&chunks[i], nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := DecodeDictionaryChunk(data, &c); err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
		if err := d.Apply(&c); err != nil {
			t.Fatalf("chunk %d: %v", i, err)
		}
	}
	return d
}

func encodeLayout2(t testing.TB, b *Batch) []byte {
	t.Helper()
	data, err := EncodeDictionaryBatch(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestDictionaryBatchRoundTrip(t *testing.T) {
	in, chunks := sampleChunks(t, 3)
	d := applyAll(t, chunks)
	in.Generation = 3
	data := encodeLayout2(t, in)
	var out Batch
	if err := DecodeBatchWith(data, d, &out); err != nil {
		t.Fatal(err)
	}
	if out.Dictionary != d || out.Generation != 3 {
		t.Fatalf("decoded batch names dictionary %p generation %d, want %p 3", out.Dictionary, out.Generation, d)
	}
	want := *in
	want.Dictionary = d
	if !reflect.DeepEqual(want, out) {
		t.Fatalf("round trip mismatch:\n in: %+v\nout: %+v", want, out)
	}
	if got := out.String(out.Frames[out.Stack(out.Samples[0].Stack)[2]].FunctionName); got != "handle" {
		t.Fatalf("leaf-to-root frame 2 function = %q, want handle", got)
	}
	// One chunk with everything builds the same dictionary as three.
	one := []DictionaryChunk{{Generation: 3, StringBase: 1, Strings: in.Strings[1:], Mappings: in.Mappings, Frames: in.Frames,
		StackFrames: in.StackFrames, StackEnds: in.StackEnds}}
	if d1 := applyAll(t, one); !reflect.DeepEqual(d1, d) {
		t.Fatalf("one chunk builds %+v, three build %+v", d1, d)
	}

	// The batch's tables stay what they were while the dictionary grows
	// (same generation) and after it is replaced (a new one).
	kept := out
	more := DictionaryChunk{Generation: 3, StringBase: uint32(len(d.Strings)), MappingBase: uint32(len(d.Mappings)),
		FrameBase: uint32(len(d.Frames)), StackBase: uint32(len(d.StackEnds)), Strings: []string{"later"},
		Frames: []Frame{{Kind: FrameNative, FunctionName: uint32(len(d.Strings))}}, StackFrames: []uint32{uint32(len(d.Frames)), 0}, StackEnds: []uint32{2}}
	if err := d.Apply(&more); err != nil {
		t.Fatal(err)
	}
	if n := len(d.StackEnds); n != len(in.StackEnds)+1 || d.StackEnds[n-1] != uint32(len(in.StackFrames)+2) {
		t.Fatalf("stack ends after a second chunk = %v: want absolute ends", d.StackEnds)
	}
	if err := d.Apply(&DictionaryChunk{Generation: 4, StringBase: 1, Strings: []string{"new"}}); err != nil {
		t.Fatal(err)
	}
	if len(d.Strings) != 2 || d.Strings[1] != "new" || len(d.Frames) != 0 || d.Generation != 4 {
		t.Fatalf("generation 4 dictionary = %+v", d)
	}
	if want.Dictionary = kept.Dictionary; !reflect.DeepEqual(want, kept) {
		t.Fatalf("batch changed as its dictionary grew or was replaced:\n%+v\nwant\n%+v", kept, want)
	}

	// Reusing the Batch for a layout-1 batch must not write into the
	// dictionary (its tables were the dictionary's).
	before := slices.Clone(d.Strings)
	_ = append(out.Strings, "x") // full slice expression: copies
	if err := DecodeBatch(batchEncoders[0].encode(t, sampleBatch(t)), &out); err != nil {
		t.Fatal(err)
	}
	if out.Dictionary != nil || out.Generation != 0 || !reflect.DeepEqual(d.Strings, before) {
		t.Fatalf("layout 1 decode into a layout-2 batch: dictionary %p, generation %d, dictionary strings %q (were %q)",
			out.Dictionary, out.Generation, d.Strings, before)
	}
}

// TestDecodeBatchWithOldLayouts: a dictionary does not change how layouts 0
// and 1 decode.
func TestDecodeBatchWithOldLayouts(t *testing.T) {
	_, chunks := sampleChunks(t, 1)
	d := applyAll(t, chunks)
	for _, enc := range batchEncoders {
		t.Run(enc.name, func(t *testing.T) {
			in := sampleBatch(t)
			var out Batch
			if err := DecodeBatchWith(enc.encode(t, in), d, &out); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*in, out) {
				t.Fatalf("got %+v, want %+v", out, *in)
			}
		})
	}
}

func TestDictionaryApplyRejects(t *testing.T) {
	b, chunks := sampleChunks(t, 2)
	ns, nm, nf, nst := uint32(len(b.Strings)), uint32(len(b.Mappings)), uint32(len(b.Frames)), uint32(len(b.StackEnds))
	next := func(edit func(c *DictionaryChunk)) DictionaryChunk {
		c := DictionaryChunk{Generation: 2, StringBase: ns, MappingBase: nm, FrameBase: nf, StackBase: nst,
			Strings: []string{"s"}, Mappings: []Mapping{{FileName: ns}}, Frames: []Frame{{Mapping: nm + 1, FunctionName: ns}},
			StackFrames: []uint32{nf, 0}, StackEnds: []uint32{2}}
		edit(&c)
		return c
	}
	tests := []struct {
		name  string
		chunk DictionaryChunk
		want  string
	}{
		{"string base behind", next(func(c *DictionaryChunk) { c.StringBase-- }),
			"starts at (strings 18, mappings 2, frames 4, stacks 2), want (19, 2, 4, 2), the dictionary's table lengths in generation 2"},
		{"frame base ahead", next(func(c *DictionaryChunk) { c.FrameBase++ }), "frames 5, stacks 2), want (19, 2, 4, 2)"},
		{"stack base", next(func(c *DictionaryChunk) { c.StackBase = 0 }), "stacks 0), want (19, 2, 4, 2)"},
		{"generation backwards", next(func(c *DictionaryChunk) { c.Generation = 1 }), "generation 1 after generation 2"},
		{"generation 0", next(func(c *DictionaryChunk) { c.Generation = 0 }), "generation 0"},
		{"new generation not at its start", next(func(c *DictionaryChunk) { c.Generation = 3 }), "want (1, 0, 0, 0), the start of generation 3"},
		{"mapping string past the chunk", next(func(c *DictionaryChunk) { c.Mappings[0].Path = ns + 1 }),
			"mapping 2 references a string beyond the 20-entry table"},
		{"frame string past the chunk", next(func(c *DictionaryChunk) { c.Frames[0].SourceFile = ns + 1 }),
			"frame 4 references a string beyond the 20-entry table"},
		{"frame mapping past the chunk", next(func(c *DictionaryChunk) { c.Frames[0].Mapping = nm + 2 }), "frame 4 references mapping 4 of 3"},
		{"stack frame past the chunk", next(func(c *DictionaryChunk) { c.StackFrames[0] = nf + 1 }), "entry 0 references frame 5 of 5"},
		{"stack ends decreasing", next(func(c *DictionaryChunk) { c.StackEnds = []uint32{2, 1} }), "stack 3 ends at 1 (previous 2"},
		{"stack ends past the chunk", next(func(c *DictionaryChunk) { c.StackEnds = []uint32{3} }), "stack 2 ends at 3"},
		{"stack frames left over", next(func(c *DictionaryChunk) { c.StackEnds = []uint32{1} }), "the last of 1 stacks ends at 1, the chunk has 2"},
		{"table too large", next(func(c *DictionaryChunk) {
			*c = DictionaryChunk{Generation: 5, StringBase: 1, Strings: make([]string, maxDictionaryEntries)}
		}),
			"strings would reach"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := applyAll(t, chunks)
			before := *d
			before.Strings = slices.Clone(d.Strings)
			err := d.Apply(&tt.chunk)
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Apply error = %v, want ErrMalformed mentioning %q", err, tt.want)
			}
			if !reflect.DeepEqual(*d, before) {
				t.Fatalf("a refused chunk changed the dictionary:\n%+v\nwas\n%+v", *d, before)
			}
		})
	}
	// The chunk all those are variants of is good.
	d := applyAll(t, chunks)
	good := next(func(*DictionaryChunk) {})
	if err := d.Apply(&good); err != nil {
		t.Fatal(err)
	}
}

// encodeChunkWith encodes c, then lets mutate overwrite fields of the
// message.
func encodeChunkWith(t testing.TB, c *DictionaryChunk, mutate func(w wire.DictionaryChunk) error) []byte {
	t.Helper()
	return encodeMutated(t, func(seg *capnp.Segment) error { return encodeChunk(seg, c) }, wire.ReadRootDictionaryChunk, mutate)
}

func TestDecodeDictionaryChunkRejects(t *testing.T) {
	b, _ := sampleChunks(t, 1)
	all := DictionaryChunk{Generation: 1, StringBase: 1, Strings: b.Strings[1:], Mappings: b.Mappings, Frames: b.Frames,
		StackFrames: b.StackFrames, StackEnds: b.StackEnds}
	set := func(f func(wire.DictionaryChunk, []byte) error, d []byte) func(wire.DictionaryChunk) error {
		return func(w wire.DictionaryChunk) error { return f(w, d) }
	}
	tests := []struct {
		name   string
		mutate func(w wire.DictionaryChunk) error
		want   string
	}{
		{"generation 0", func(w wire.DictionaryChunk) error { w.SetGeneration(0); return nil }, "generation 0"},
		{"string ends ragged", set(wire.DictionaryChunk.SetStringEnds, make([]byte, 5)), "whole number of 4-byte entries"},
		{"string bytes without ends", set(wire.DictionaryChunk.SetStringEnds, nil), "no strings, string bytes hold"},
		{"string ends short of the bytes", set(wire.DictionaryChunk.SetStringEnds, le32(1, 2)), "last string (2) ends at 2"},
		{"frames ragged", set(wire.DictionaryChunk.SetPackedFrames, make([]byte, frameRecordSize+1)), "whole number of 34-byte entries"},
		{"frame string past the chunk", func(w wire.DictionaryChunk) error {
			d, err := w.PackedFrames()
			if err != nil {
				return err
			}
			d = slices.Clone(d)
			d[frameRecordSize+12] = 19 // function name: the chunk ends at string 18
			return w.SetPackedFrames(d)
		}, "frame 1 references a string beyond the 19-entry table"},
		{"mapping past the chunk", func(w wire.DictionaryChunk) error {
			m, err := w.Mappings()
			if err != nil {
				return err
			}
			m.At(1).SetPath(100)
			return nil
		}, "mapping 1 references a string beyond the 19-entry table"},
		{"stack frame past the chunk", set(wire.DictionaryChunk.SetPackedStackFrames, le32(0, 4, 1, 2, 3)), "entry 1 references frame 4 of 4"},
		{"stack frames left over", set(wire.DictionaryChunk.SetPackedStackEnds, le32(3)), "the last of 1 stacks ends at 3, the chunk has 5"},
		{"table too large", func(w wire.DictionaryChunk) error { w.SetFrameBase(maxDictionaryEntries); return nil }, "frames would reach"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := encodeChunkWith(t, &all, tt.mutate)
			var c DictionaryChunk
			err := DecodeDictionaryChunk(data, &c)
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("DecodeDictionaryChunk error = %v, want ErrMalformed mentioning %q", err, tt.want)
			}
		})
	}
	for _, tt := range []struct {
		name string
		data []byte
	}{{"empty", nil}, {"garbage", []byte{0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0}}} {
		var c DictionaryChunk
		if err := DecodeDictionaryChunk(tt.data, &c); !errors.Is(err, ErrMalformed) {
			t.Fatalf("%s: DecodeDictionaryChunk = %v, want ErrMalformed", tt.name, err)
		}
	}
}

func TestDecodeBatchWithRejects(t *testing.T) {
	in, chunks := sampleChunks(t, 2)
	in.Generation = 2
	good := encodeLayout2(t, in)
	withBatch := func(mutate func(w wire.Batch) error) []byte {
		return encodeMutated(t, func(seg *capnp.Segment) error { return encodeDictionaryBatch(seg, in) }, wire.ReadRootBatch, mutate)
	}
	short := applyAll(t, chunks[:2]) // no stacks yet
	tests := []struct {
		name string
		data []byte
		dict *Dictionary
		want string
	}{
		{"no dictionary", good, nil, "decode it with DecodeBatchWith"},
		{"empty dictionary", good, new(Dictionary), "batch of dictionary generation 2, the connection's dictionary is at generation 0"},
		{"older generation", withBatch(func(w wire.Batch) error { w.SetGeneration(1); return nil }), nil, "generation 1"},
		{"other generation", withBatch(func(w wire.Batch) error { w.SetGeneration(1); return nil }), applyAll(t, chunks),
			"batch of dictionary generation 1, the connection's dictionary is at generation 2"},
		{"stack beyond the dictionary", good, short, "stack 0 of 0"},
		{"own string table", withBatch(func(w wire.Batch) error { return w.SetStringBytes([]byte("x")) }), applyAll(t, chunks),
			"carries a stringBytes table of its own"},
		{"own frame list", withBatch(func(w wire.Batch) error { _, err := w.NewFrames(1); return err }), applyAll(t, chunks),
			"carries a frames table of its own"},
		{"process string beyond the dictionary", withBatch(func(w wire.Batch) error {
			d, err := w.PackedProcesses()
			if err != nil {
				return err
			}
			d = slices.Clone(d)
			d[4] = 100
			return w.SetPackedProcesses(d)
		}), applyAll(t, chunks), "process 0 references a string beyond the 19-entry table"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out Batch
			var err error
			if tt.dict == nil {
				err = DecodeBatch(tt.data, &out)
			} else {
				err = DecodeBatchWith(tt.data, tt.dict, &out)
			}
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("decode error = %v, want ErrMalformed mentioning %q", err, tt.want)
			}
		})
	}
}

// chunkFields lists the Data fields of a DictionaryChunk with their
// accessors, in FuzzDecodeDictionaryChunk's argument order.
var chunkFields = []dataField[wire.DictionaryChunk]{
	{wire.DictionaryChunk.StringBytes, wire.DictionaryChunk.SetStringBytes},
	{wire.DictionaryChunk.StringEnds, wire.DictionaryChunk.SetStringEnds},
	{wire.DictionaryChunk.PackedFrames, wire.DictionaryChunk.SetPackedFrames},
	{wire.DictionaryChunk.PackedStackFrames, wire.DictionaryChunk.SetPackedStackFrames},
	{wire.DictionaryChunk.PackedStackEnds, wire.DictionaryChunk.SetPackedStackEnds},
}

// FuzzDecodeDictionaryChunk mutates a chunk's bases and packed tables (its
// mappings stay the seed's). A chunk that decodes re-encodes to the same
// fields and decodes to the same chunk; one that starts a generation
// applies to an empty dictionary, whose every reference then resolves.
func FuzzDecodeDictionaryChunk(f *testing.F) {
	_, chunks := sampleChunks(f, 1)
	for i := range chunks {
		c := &chunks[i]
		data, err := EncodeDictionaryChunk(c, nil)
		if err != nil {
			f.Fatal(err)
		}
		args := readFields(f, data, wire.ReadRootDictionaryChunk, chunkFields)
		f.Add(c.Generation, c.StringBase, c.MappingBase, c.FrameBase, c.StackBase, args[0], args[1], args[2], args[3], args[4])
	}
	f.Fuzz(func(t *testing.T, gen uint64, sb, mb, fb, stb uint32, strBytes, strEnds, frames, stackFrames, stackEnds []byte) {
		_, chunks := sampleChunks(t, 1)
		args := [][]byte{strBytes, strEnds, frames, stackFrames, stackEnds}
		data := encodeChunkWith(t, &chunks[0], func(w wire.DictionaryChunk) error {
			w.SetGeneration(gen)
			w.SetStringBase(sb)
			w.SetMappingBase(mb)
			w.SetFrameBase(fb)
			w.SetStackBase(stb)
			return setFields(w, chunkFields, args)
		})
		var c DictionaryChunk
		if err := DecodeDictionaryChunk(data, &c); err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		again, err := EncodeDictionaryChunk(&c, nil)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		checkFields(t, again, wire.ReadRootDictionaryChunk, chunkFields, args)
		var c2 DictionaryChunk
		if err := DecodeDictionaryChunk(again, &c2); err != nil {
			t.Fatalf("decode re-encoded chunk: %v", err)
		}
		if !reflect.DeepEqual(normalizeChunk(c), normalizeChunk(c2)) {
			t.Fatalf("re-encoded chunk decodes to\n%+v\nwant\n%+v", c2, c)
		}
		if c.StringBase != 1 || c.MappingBase != 0 || c.FrameBase != 0 || c.StackBase != 0 {
			return
		}
		var d Dictionary
		if err := d.Apply(&c); err != nil {
			t.Fatalf("a decoded chunk that starts generation %d does not apply: %v", gen, err)
		}
		walkDictionary(&d)
	})
}

// normalizeChunk makes empty tables nil, as a decode into a fresh chunk
// leaves some of them.
func normalizeChunk(c DictionaryChunk) DictionaryChunk {
	for _, s := range []*[]uint32{&c.StackFrames, &c.StackEnds} {
		if len(*s) == 0 {
			*s = nil
		}
	}
	if len(c.Strings) == 0 {
		c.Strings = nil
	}
	if len(c.Mappings) == 0 {
		c.Mappings = nil
	}
	if len(c.Frames) == 0 {
		c.Frames = nil
	}
	return c
}

// walkDictionary follows every reference of a dictionary: it panics if
// Apply let a bad one through.
func walkDictionary(d *Dictionary) {
	b := Batch{Strings: d.Strings, Mappings: d.Mappings, Frames: d.Frames, StackFrames: d.StackFrames, StackEnds: d.StackEnds}
	for i := range b.NumStacks() {
		for _, fi := range b.Stack(uint32(i)) {
			fr := b.Frames[fi]
			_, _ = b.Strings[fr.FunctionName], b.Strings[fr.SourceFile]
			if fr.Mapping > 0 {
				m := b.Mappings[fr.Mapping-1]
				_, _ = b.Strings[m.FileName], b.Strings[m.Path]
			}
		}
	}
}

// layout2Fields are the Data fields a layout-2 batch carries.
var layout2Fields = []struct {
	get func(wire.Batch) ([]byte, error)
	set func(wire.Batch, []byte) error
}{
	{wire.Batch.PackedProcesses, wire.Batch.SetPackedProcesses},
	{wire.Batch.PackedEnvVars, wire.Batch.SetPackedEnvVars},
	{wire.Batch.PackedSamples, wire.Batch.SetPackedSamples},
	{wire.Batch.PackedLabels, wire.Batch.SetPackedLabels},
	{wire.Batch.PackedLinks, wire.Batch.SetPackedLinks},
}

// FuzzDecodeBatchWith mutates a layout-2 batch's generation, processes and
// samples against a fixed dictionary (generation 1). A batch that decodes
// has every reference in range, and re-encodes to the same fields.
func FuzzDecodeBatchWith(f *testing.F) {
	seed := func(gen uint64, b *Batch) {
		b.Generation = gen
		msg, err := openMessage(encodeLayout2(f, b))
		if err != nil {
			f.Fatal(err)
		}
		w, err := wire.ReadRootBatch(msg)
		if err != nil {
			f.Fatal(err)
		}
		var args [5][]byte
		for i, fd := range layout2Fields {
			d, err := fd.get(w)
			if err != nil {
				f.Fatal(err)
			}
			args[i] = slices.Clone(d)
		}
		f.Add(gen, args[0], args[1], args[2], args[3], args[4])
	}
	seed(1, sampleBatch(f))
	seed(2, sampleBatch(f))
	seed(1, linkedBatch(f))
	seed(1, new(Batch))
	_, chunks := sampleChunks(f, 1)
	dict := applyAll(f, chunks)
	f.Fuzz(func(t *testing.T, gen uint64, procs, env, samples, labels, links []byte) {
		args := [][]byte{procs, env, samples, labels, links}
		msg, seg, err := newMessage()
		if err != nil {
			t.Fatal(err)
		}
		w, err := wire.NewRootBatch(seg)
		if err != nil {
			t.Fatal(err)
		}
		w.SetSequence(5)
		w.SetLayout(layoutDictionary)
		w.SetGeneration(gen)
		for i, fd := range layout2Fields {
			if err := fd.set(w, args[i]); err != nil {
				t.Fatal(err)
			}
		}
		data, err := finish(msg, nil)
		if err != nil {
			t.Fatal(err)
		}
		var b Batch
		if err := DecodeBatchWith(data, dict, &b); err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		walkBatch(&b)
		again := encodeLayout2(t, &b)
		if msg, err = openMessage(again); err != nil {
			t.Fatal(err)
		}
		if w, err = wire.ReadRootBatch(msg); err != nil {
			t.Fatal(err)
		}
		if w.Generation() != gen || w.Layout() != layoutDictionary || w.Sequence() != 5 {
			t.Fatalf("re-encoded as layout %d generation %d sequence %d", w.Layout(), w.Generation(), w.Sequence())
		}
		for i, fd := range layout2Fields {
			if got, _ := fd.get(w); !bytes.Equal(got, args[i]) {
				t.Fatalf("field %d re-encodes to %x, was %x", i, got, args[i])
			}
		}
		var b2 Batch
		if err := DecodeBatchWith(again, dict, &b2); err != nil {
			t.Fatalf("decode re-encoded batch: %v", err)
		}
		if !reflect.DeepEqual(b, b2) {
			t.Fatalf("re-encoded batch decodes to\n%+v\nwant\n%+v", b2, b)
		}
	})
}
