package sampler

import (
	"encoding/binary"

	"github.com/tandem-profiler/tandem/schema"
)

// Caps of one dictionary generation (protocol 1.4). At either, the batcher
// starts the next generation with empty tables, so the root process's
// dictionary is bounded: about two generations' chunks (the current one,
// and the previous one while its batches wait for acknowledgement) plus
// the resend buffer. The receiver's own limits (schema) are 4 times these.
const (
	maxDictionaryBytes   = 8 << 20 // encoded chunks of a generation
	maxDictionaryEntries = 1 << 20 // strings, mappings, frames or stacks
)

// sessionDict is the batcher's dictionary of one generation: what every
// string, mapping, frame and stack it defined maps to, and the entries new
// since the last flush, which become that batch's chunk. Chunks are sent
// once per generation; ipc writes them again on every connection.
type sessionDict struct {
	maxBytes, maxEntries int // the caps (tests lower them)

	gen    uint64
	chunks int // chunks sent in this generation
	bytes  int // their encoded size

	strings  map[string]uint32
	mappings map[schema.Mapping]uint32 // 1-based, as Frame.Mapping
	frames   map[schema.Frame]uint32
	stacks   map[string]uint32 // frame ids, little-endian, leaf first
	keyBuf   []byte

	// chunk holds the entries defined since the last flush; its bases are
	// the table lengths before them.
	chunk schema.DictionaryChunk
}

func newSessionDict() *sessionDict {
	d := &sessionDict{
		maxBytes:   maxDictionaryBytes,
		maxEntries: maxDictionaryEntries,
		strings:    make(map[string]uint32),
		mappings:   make(map[schema.Mapping]uint32),
		frames:     make(map[schema.Frame]uint32),
		stacks:     make(map[string]uint32),
	}
	d.newGeneration()
	return d
}

// newGeneration starts the next generation with empty tables. The maps are cleared,
// not reallocated: a generation's peak size is the next one's likely size.
func (d *sessionDict) newGeneration() {
	d.gen++
	d.chunks, d.bytes = 0, 0
	clear(d.strings)
	clear(d.mappings)
	clear(d.frames)
	clear(d.stacks)
	d.chunk.Reset()
	d.chunk.Generation, d.chunk.StringBase = d.gen, 1
}

// lens returns the table lengths, the entries of the pending chunk
// included.
func (d *sessionDict) lens() (strs, maps, frames, stacks uint32) {
	c := &d.chunk
	return c.StringBase + uint32(len(c.Strings)), c.MappingBase + uint32(len(c.Mappings)),
		c.FrameBase + uint32(len(c.Frames)), c.StackBase + uint32(len(c.StackEnds))
}

// String returns the id of s, defining it if new; "" is always 0. The
// second result reports a new entry.
func (d *sessionDict) String(s string) (uint32, bool) {
	if s == "" {
		return 0, false
	}
	if i, ok := d.strings[s]; ok {
		return i, false
	}
	i := d.chunk.StringBase + uint32(len(d.chunk.Strings))
	d.chunk.Strings = append(d.chunk.Strings, s)
	d.strings[s] = i
	return i, true
}

// Mapping returns the 1-based id of m (string fields already ids).
func (d *sessionDict) Mapping(m schema.Mapping) (uint32, bool) {
	if i, ok := d.mappings[m]; ok {
		return i, false
	}
	d.chunk.Mappings = append(d.chunk.Mappings, m)
	i := d.chunk.MappingBase + uint32(len(d.chunk.Mappings))
	d.mappings[m] = i
	return i, true
}

// Frame returns the id of f (string and mapping fields already ids).
func (d *sessionDict) Frame(f schema.Frame) (uint32, bool) {
	if i, ok := d.frames[f]; ok {
		return i, false
	}
	i := d.chunk.FrameBase + uint32(len(d.chunk.Frames))
	d.chunk.Frames = append(d.chunk.Frames, f)
	d.frames[f] = i
	return i, true
}

// Stack returns the id of the stack of frame ids, leaf first.
func (d *sessionDict) Stack(frames []uint32) (uint32, bool) {
	d.keyBuf = d.keyBuf[:0]
	for _, f := range frames {
		d.keyBuf = binary.LittleEndian.AppendUint32(d.keyBuf, f)
	}
	if i, ok := d.stacks[string(d.keyBuf)]; ok {
		return i, false
	}
	c := &d.chunk
	i := c.StackBase + uint32(len(c.StackEnds))
	c.StackFrames = append(c.StackFrames, frames...)
	c.StackEnds = append(c.StackEnds, uint32(len(c.StackFrames)))
	d.stacks[string(d.keyBuf)] = i
	return i, true
}

// sent records that the pending chunk, of n encoded bytes, went to the
// sink: the next chunk starts after it.
func (d *sessionDict) sent(n int) {
	d.chunks++
	d.bytes += n
	strs, maps, frames, stacks := d.lens()
	d.chunk.Reset()
	d.chunk.Generation = d.gen
	d.chunk.StringBase, d.chunk.MappingBase, d.chunk.FrameBase, d.chunk.StackBase = strs, maps, frames, stacks
}

// full reports whether the generation reached a cap.
func (d *sessionDict) full() bool {
	strs, maps, frames, stacks := d.lens()
	return d.bytes >= d.maxBytes || int(max(strs, maps, frames, stacks)) >= d.maxEntries
}
