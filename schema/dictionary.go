package schema

import (
	"errors"
	"fmt"

	capnp "capnproto.org/go/capnp/v3"

	"github.com/tandem-profiler/tandem/schema/internal/wire"
)

// Per-connection dictionaries (protocol 1.4, docs/ipc-format.md): a
// sampler sends each string, mapping, frame and stack once per connection,
// in DictionaryChunk frames, and layout-2 batches refer to them by id.

// DictionaryChunk extends a connection's dictionary: the payload of one
// FrameDictionary frame. Its references are dictionary ids, its stack ends
// are relative to its own StackFrames.
type DictionaryChunk struct {
	Generation uint64
	// Id of the first new entry of each table; a receiver requires each to
	// equal its current table length. String 0 is "" in every generation,
	// so a generation's first chunk has StringBase 1 and the other bases 0.
	StringBase, MappingBase, FrameBase, StackBase uint32
	Strings                                       []string
	Mappings                                      []Mapping // string fields: dictionary string ids
	Frames                                        []Frame   // string fields: dictionary string ids; Mapping: 1-based dictionary mapping id (0 none)
	StackFrames                                   []uint32  // dictionary frame ids of this chunk's stacks, concatenated, leaf first
	StackEnds                                     []uint32  // ends relative to this chunk's StackFrames
}

// Reset empties the chunk, keeping its allocations.
func (c *DictionaryChunk) Reset() {
	*c = DictionaryChunk{
		Strings:     c.Strings[:0],
		Mappings:    c.Mappings[:0],
		Frames:      c.Frames[:0],
		StackFrames: c.StackFrames[:0],
		StackEnds:   c.StackEnds[:0],
	}
}

// Empty reports whether the chunk adds nothing.
func (c *DictionaryChunk) Empty() bool {
	return len(c.Strings) == 0 && len(c.Mappings) == 0 && len(c.Frames) == 0 && len(c.StackEnds) == 0
}

// Pointer indices of the packed Data fields of wire.DictionaryChunk.
var chunkPtrs = tablePtrs{stringBytes: 0, stringEnds: 1, frames: 3, stackFrames: 4, stackEnds: 5}

// Limits of a receiver's dictionary. A sampler starts a new generation long
// before (sampler.maxDictionaryEntries); these only stop a hostile stream
// from growing an encoder's memory without bound.
const (
	maxDictionaryEntries     = 1 << 22
	maxDictionaryStackFrames = 1 << 25
)

// EncodeDictionaryChunk appends the encoded chunk to dst.
func EncodeDictionaryChunk(c *DictionaryChunk, dst []byte) ([]byte, error) {
	msg, seg, err := newMessage()
	if err != nil {
		return dst, fmt.Errorf("encode dictionary chunk: %w", err)
	}
	if err := encodeChunk(seg, c); err != nil {
		msg.Release()
		return dst, fmt.Errorf("encode dictionary chunk of generation %d: %w", c.Generation, err)
	}
	return finish(msg, dst)
}

func encodeChunk(seg *capnp.Segment, c *DictionaryChunk) error {
	w, err := wire.NewRootDictionaryChunk(seg)
	if err != nil {
		return err
	}
	w.SetGeneration(c.Generation)
	w.SetStringBase(c.StringBase)
	w.SetMappingBase(c.MappingBase)
	w.SetFrameBase(c.FrameBase)
	w.SetStackBase(c.StackBase)
	ml, err := w.NewMappings(int32(len(c.Mappings)))
	if err != nil {
		return err
	}
	fillMappings(ml, c.Mappings)
	return encodeTables(capnp.Struct(w), chunkPtrs, c.Strings, c.Frames, c.StackFrames, c.StackEnds)
}

// DecodeDictionaryChunk decodes a chunk payload into `into`, reusing its
// slices (its strings are new: they never alias the payload or an earlier
// decode). On success the chunk is consistent in itself: every reference is
// below its table's base plus this chunk's entries, and stack ends are
// non-decreasing within its StackFrames. Whether it fits a dictionary is
// Dictionary.Apply's check.
func DecodeDictionaryChunk(payload []byte, into *DictionaryChunk) error {
	into.Reset()
	msg, err := openMessage(payload)
	if err != nil {
		return malformed("dictionary chunk", err)
	}
	w, err := wire.ReadRootDictionaryChunk(msg)
	if err != nil {
		return malformed("dictionary chunk", err)
	}
	into.Generation = w.Generation()
	into.StringBase, into.MappingBase, into.FrameBase, into.StackBase = w.StringBase(), w.MappingBase(), w.FrameBase(), w.StackBase()
	if into.Generation == 0 {
		return malformed("dictionary chunk", errors.New("generation 0: generations start at 1"))
	}
	const what = "dictionary chunk"
	blob, err := w.StringBytes()
	if err != nil {
		return malformed(what+" string bytes", err)
	}
	ends, err := w.StringEnds()
	if err != nil {
		return malformed(what+" string ends", err)
	}
	if into.Strings, err = splitStrings(what, into.StringBase, blob, ends, into.Strings); err != nil {
		return err
	}
	lim, err := into.limits()
	if err != nil {
		return err
	}
	ml, err := w.Mappings()
	if err != nil {
		return malformed(what+" mappings", err)
	}
	if into.Mappings, err = decodeMappingList(what, int(into.MappingBase), ml, len(payload), lim.strings, into.Mappings); err != nil {
		return err
	}
	if lim, err = into.limits(); err != nil {
		return err
	}
	frames, err := w.PackedFrames()
	if err != nil {
		return malformed(what+" frames", err)
	}
	if into.Frames, err = decodeFrameRecords(what, int(into.FrameBase), frames, lim.strings, lim.mappings, into.Frames); err != nil {
		return err
	}
	if lim, err = into.limits(); err != nil {
		return err
	}
	sf, err := w.PackedStackFrames()
	if err != nil {
		return malformed(what+" stack frames", err)
	}
	se, err := w.PackedStackEnds()
	if err != nil {
		return malformed(what+" stack ends", err)
	}
	into.StackFrames, into.StackEnds, err = decodeStackRecords(what, int(into.StackBase), sf, se, lim.frames, into.StackFrames, into.StackEnds)
	if err != nil {
		return err
	}
	if err := into.checkLastEnd(); err != nil {
		return err
	}
	_, err = into.limits()
	return err
}

// checkLastEnd requires the chunk's last stack to end at the end of its
// StackFrames, so that a dictionary's StackFrames are exactly its stacks,
// concatenated.
func (c *DictionaryChunk) checkLastEnd() error {
	n := len(c.StackEnds)
	last := uint32(0)
	if n > 0 {
		last = c.StackEnds[n-1]
	}
	if int64(last) != int64(len(c.StackFrames)) {
		return malformed("dictionary chunk stack ends", fmt.Errorf("the last of %d stacks ends at %d, the chunk has %d frame entries", n, last, len(c.StackFrames)))
	}
	return nil
}

// chunkLimits are the table lengths of a dictionary after a chunk.
type chunkLimits struct{ strings, mappings, frames, stacks uint32 }

// limits returns the table lengths after the chunk (its bases plus its
// entries), or an error when one passes the dictionary limits.
func (c *DictionaryChunk) limits() (chunkLimits, error) {
	var l chunkLimits
	for _, t := range []struct {
		name string
		base uint32
		n    int
		dst  *uint32
	}{
		{"strings", c.StringBase, len(c.Strings), &l.strings},
		{"mappings", c.MappingBase, len(c.Mappings), &l.mappings},
		{"frames", c.FrameBase, len(c.Frames), &l.frames},
		{"stacks", c.StackBase, len(c.StackEnds), &l.stacks},
	} {
		total := int64(t.base) + int64(t.n)
		if total > maxDictionaryEntries {
			return l, malformed("dictionary chunk", fmt.Errorf("%s would reach %d entries (base %d + %d), the limit is %d",
				t.name, total, t.base, t.n, maxDictionaryEntries))
		}
		*t.dst = uint32(total)
	}
	return l, nil
}

// check validates every reference of the chunk against the table lengths
// after it (lim) and its stack ends against its own StackFrames.
func (c *DictionaryChunk) check(lim chunkLimits) error {
	const what = "dictionary chunk"
	for i := range c.Mappings {
		if err := checkMapping(what, int(c.MappingBase)+i, &c.Mappings[i], lim.strings); err != nil {
			return err
		}
	}
	for i := range c.Frames {
		if err := checkFrame(what, int(c.FrameBase)+i, &c.Frames[i], lim.strings, lim.mappings); err != nil {
			return err
		}
	}
	for i, v := range c.StackFrames {
		if v >= lim.frames {
			return malformed(what+" stack frames", fmt.Errorf("entry %d references frame %d of %d", i, v, lim.frames))
		}
	}
	prev := uint32(0)
	for i, v := range c.StackEnds {
		if v < prev || int64(v) > int64(len(c.StackFrames)) {
			return malformed(what+" stack ends", fmt.Errorf("stack %d ends at %d (previous %d, %d frame entries)", int(c.StackBase)+i, v, prev, len(c.StackFrames)))
		}
		prev = v
	}
	return c.checkLastEnd()
}

// Dictionary is what a receiver holds for one connection or dump: the
// strings, mappings, frames and stacks its DictionaryChunk frames defined.
// It is append-only within a generation (entries never change once added,
// so slices handed out stay valid); a new generation replaces the tables
// with fresh slices (it never truncates and reuses them). The zero value
// is an empty dictionary of no generation, ready for a generation's first
// chunk. A Dictionary is not safe for concurrent use.
type Dictionary struct {
	Generation  uint64
	Strings     []string // Strings[0] == ""
	Mappings    []Mapping
	Frames      []Frame
	StackFrames []uint32 // absolute frame ids
	StackEnds   []uint32 // absolute ends, same representation as Batch
}

// Apply validates c and appends it to d. The chunk must either continue
// d's generation, its bases equal to d's table lengths, or start a higher
// generation with bases (1, 0, 0, 0), which replaces all of d's tables.
// Every reference must be below the table lengths after the chunk. On error
// d is unchanged; the error wraps ErrMalformed and names what was expected.
func (d *Dictionary) Apply(c *DictionaryChunk) error {
	if c.Generation == 0 {
		return malformed("dictionary chunk", errors.New("generation 0: generations start at 1"))
	}
	if c.Generation < d.Generation {
		return malformed("dictionary chunk", fmt.Errorf("generation %d after generation %d: generations never go backwards on a connection or in a dump", c.Generation, d.Generation))
	}
	fresh := c.Generation > d.Generation
	want := chunkLimits{1, 0, 0, 0}
	if !fresh {
		want = chunkLimits{uint32(len(d.Strings)), uint32(len(d.Mappings)), uint32(len(d.Frames)), uint32(len(d.StackEnds))}
	}
	if c.StringBase != want.strings || c.MappingBase != want.mappings || c.FrameBase != want.frames || c.StackBase != want.stacks {
		state := fmt.Sprintf("the dictionary's table lengths in generation %d", d.Generation)
		if fresh {
			state = fmt.Sprintf("the start of generation %d", c.Generation)
		}
		return malformed("dictionary chunk", fmt.Errorf("generation %d chunk starts at (strings %d, mappings %d, frames %d, stacks %d), want (%d, %d, %d, %d), %s: a chunk was lost or sent twice",
			c.Generation, c.StringBase, c.MappingBase, c.FrameBase, c.StackBase, want.strings, want.mappings, want.frames, want.stacks, state))
	}
	lim, err := c.limits()
	if err != nil {
		return err
	}
	if err := c.check(lim); err != nil {
		return err
	}
	stackFrameBase := len(d.StackFrames)
	if fresh {
		stackFrameBase = 0
	}
	if int64(stackFrameBase)+int64(len(c.StackFrames)) > maxDictionaryStackFrames {
		return malformed("dictionary chunk", fmt.Errorf("stack frames would reach %d entries, the limit is %d", stackFrameBase+len(c.StackFrames), maxDictionaryStackFrames))
	}
	if fresh {
		// Fresh slices: batches decoded against the old generation keep
		// theirs.
		*d = Dictionary{Generation: c.Generation, Strings: make([]string, 1, 1+len(c.Strings))}
	}
	d.Strings = append(d.Strings, c.Strings...)
	d.Mappings = append(d.Mappings, c.Mappings...)
	d.Frames = append(d.Frames, c.Frames...)
	d.StackFrames = append(d.StackFrames, c.StackFrames...)
	for _, e := range c.StackEnds {
		d.StackEnds = append(d.StackEnds, uint32(stackFrameBase)+e)
	}
	return nil
}

// EncodeDictionaryBatch appends b encoded in layout 2 (protocol 1.4) to
// dst: its sequence, b.Generation, processes and samples, whose string and
// stack references are ids of the dictionary that generation's chunks
// define. b's own tables (Strings, Mappings, Frames, StackFrames,
// StackEnds) are not written.
func EncodeDictionaryBatch(b *Batch, dst []byte) ([]byte, error) {
	msg, seg, err := newMessage()
	if err != nil {
		return dst, fmt.Errorf("encode batch: %w", err)
	}
	if err := encodeDictionaryBatch(seg, b); err != nil {
		msg.Release()
		return dst, fmt.Errorf("encode batch %d: %w", b.Sequence, err)
	}
	return finish(msg, dst)
}

func encodeDictionaryBatch(seg *capnp.Segment, b *Batch) error {
	w, err := wire.NewRootBatch(seg)
	if err != nil {
		return err
	}
	w.SetSequence(b.Sequence)
	w.SetLayout(layoutDictionary)
	w.SetGeneration(b.Generation)
	return encodeProcessesSamples(capnp.Struct(w), b)
}

// batchTablePtrs are the pointer fields of wire.Batch that a layout-2
// batch leaves empty: strings, mappings, frames, stackFrames, stackEnds,
// processes and samples (the lists of layout 0), stringBytes, stringEnds,
// packedFrames, packedStackFrames and packedStackEnds.
var batchTablePtrs = []struct {
	ptr  uint16
	name string
}{
	{0, "strings"}, {1, "mappings"}, {2, "frames"}, {3, "stackFrames"}, {4, "stackEnds"},
	{5, "processes"}, {6, "samples"}, {ptrStringBytes, "stringBytes"}, {ptrStringEnds, "stringEnds"},
	{ptrPackedFrames, "packedFrames"}, {ptrPackedStackFrames, "packedStackFrames"}, {ptrPackedStackEnds, "packedStackEnds"},
}

// decodeDictionaryBatch decodes the rest of a layout-2 batch against dict.
func decodeDictionaryBatch(w wire.Batch, dict *Dictionary, into *Batch) error {
	gen := w.Generation()
	if dict == nil {
		return malformed("batch", fmt.Errorf("layout 2 (protocol 1.4, dictionary generation %d) refers to its connection's dictionary: decode it with DecodeBatchWith and the dictionary the connection's FrameDictionary chunks built", gen))
	}
	if gen != dict.Generation || gen == 0 {
		return malformed("batch", fmt.Errorf("batch of dictionary generation %d, the connection's dictionary is at generation %d: the chunks a batch needs come before it", gen, dict.Generation))
	}
	st := capnp.Struct(w)
	for _, p := range batchTablePtrs {
		ptr, err := st.Ptr(p.ptr)
		if err != nil {
			return malformed("batch", err)
		}
		if ptr.List().Len() > 0 {
			return malformed("batch", fmt.Errorf("layout 2 batch carries a %s table of its own: its tables are the dictionary's", p.name))
		}
	}
	ns, nm, nf, nsf, nst := len(dict.Strings), len(dict.Mappings), len(dict.Frames), len(dict.StackFrames), len(dict.StackEnds)
	if ns == 0 {
		return malformed("batch", errors.New("the dictionary has no string 0"))
	}
	// Full slice expressions: appending to the batch's tables must never
	// write into the dictionary's spare capacity.
	into.Dictionary, into.Generation = dict, gen
	into.Strings, into.Mappings, into.Frames = dict.Strings[:ns:ns], dict.Mappings[:nm:nm], dict.Frames[:nf:nf]
	into.StackFrames, into.StackEnds = dict.StackFrames[:nsf:nsf], dict.StackEnds[:nst:nst]
	if err := decodeProcessesPacked(w, uint32(ns), into); err != nil {
		return err
	}
	return decodeSamplesPacked(w, uint32(ns), uint32(nst), into)
}
