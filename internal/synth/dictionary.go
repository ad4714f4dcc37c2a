package synth

import (
	"encoding/binary"
	"fmt"

	"github.com/tandem-profiler/tandem/schema"
)

// Dictionaries rewrites batches that carry their own tables (layouts 0 and
// 1, what Generate emits) the way a protocol 1.4 sampler sends them on one
// connection: each batch's new strings, mappings, frames and stacks as one
// dictionary chunk, and the batch itself as layout 2 (its processes and
// samples, referring to dictionary ids). It is a reference for tests and
// benchmarks, written for clarity, not speed; the sampler has its own.
type Dictionaries struct {
	chunk  schema.DictionaryChunk // the generation and next ids; entries of the chunk being built
	strs   map[string]uint32
	maps   map[schema.Mapping]uint32 // 1-based, as Frame.Mapping
	frames map[schema.Frame]uint32
	stacks map[string]uint32
	key    []byte
}

// NewDictionaries returns an empty dictionary of the given generation.
func NewDictionaries(generation uint64) *Dictionaries {
	d := &Dictionaries{}
	d.NewGeneration(generation)
	return d
}

// NewGeneration forgets every entry and starts generation g: the next
// chunk starts at the first ids again.
func (d *Dictionaries) NewGeneration(g uint64) {
	d.chunk = schema.DictionaryChunk{Generation: g, StringBase: 1}
	d.strs = map[string]uint32{"": 0}
	d.maps = map[schema.Mapping]uint32{}
	d.frames = map[schema.Frame]uint32{}
	d.stacks = map[string]uint32{}
}

// Batch returns the chunk of the entries b introduces (nil when it
// introduces none) and b as a layout-2 batch: Sequence, Generation,
// Processes and Samples set, no tables and no Dictionary (DecodeBatchWith
// or the caller attaches them). b is not modified.
func (d *Dictionaries) Batch(b *schema.Batch) (*schema.DictionaryChunk, *schema.Batch) {
	c := &d.chunk
	c.Strings, c.Mappings, c.Frames, c.StackFrames, c.StackEnds = nil, nil, nil, nil, nil
	out := &schema.Batch{Sequence: b.Sequence, Generation: c.Generation}
	str := func(i uint32) uint32 {
		s := b.Strings[i]
		id, ok := d.strs[s]
		if !ok {
			id = uint32(len(d.strs))
			d.strs[s] = id
			c.Strings = append(c.Strings, s)
		}
		return id
	}
	kvs := func(in []schema.KeyValue) []schema.KeyValue {
		if in == nil {
			return nil
		}
		o := make([]schema.KeyValue, len(in))
		for i, kv := range in {
			o[i] = schema.KeyValue{Key: str(kv.Key), Value: str(kv.Value)}
		}
		return o
	}
	mapIDs := make([]uint32, len(b.Mappings)+1)
	for i, m := range b.Mappings {
		m.FileName, m.Path, m.GNUBuildID, m.GoBuildID = str(m.FileName), str(m.Path), str(m.GNUBuildID), str(m.GoBuildID)
		id, ok := d.maps[m]
		if !ok {
			id = uint32(len(d.maps)) + 1
			d.maps[m] = id
			c.Mappings = append(c.Mappings, m)
		}
		mapIDs[i+1] = id
	}
	frameIDs := make([]uint32, len(b.Frames))
	for i, f := range b.Frames {
		f.Mapping, f.FunctionName, f.SourceFile = mapIDs[f.Mapping], str(f.FunctionName), str(f.SourceFile)
		id, ok := d.frames[f]
		if !ok {
			id = uint32(len(d.frames))
			d.frames[f] = id
			c.Frames = append(c.Frames, f)
		}
		frameIDs[i] = id
	}
	stackIDs := make([]uint32, b.NumStacks())
	for i := range stackIDs {
		d.key = d.key[:0]
		for _, fi := range b.Stack(uint32(i)) {
			d.key = binary.LittleEndian.AppendUint32(d.key, frameIDs[fi])
		}
		id, ok := d.stacks[string(d.key)]
		if !ok {
			id = uint32(len(d.stacks))
			d.stacks[string(d.key)] = id
			for _, fi := range b.Stack(uint32(i)) {
				c.StackFrames = append(c.StackFrames, frameIDs[fi])
			}
			c.StackEnds = append(c.StackEnds, uint32(len(c.StackFrames)))
		}
		stackIDs[i] = id
	}
	for _, p := range b.Processes {
		p.Comm, p.ExecutablePath, p.ContainerID = str(p.Comm), str(p.ExecutablePath), str(p.ContainerID)
		p.SystemdUnit, p.ServiceName, p.EnvVars = str(p.SystemdUnit), str(p.ServiceName), kvs(p.EnvVars)
		out.Processes = append(out.Processes, p)
	}
	for _, s := range b.Samples {
		s.ThreadName, s.Stack, s.Labels = str(s.ThreadName), stackIDs[s.Stack], kvs(s.Labels)
		out.Samples = append(out.Samples, s)
	}
	out.Links = append(out.Links, b.Links...)

	var chunk *schema.DictionaryChunk
	if len(c.Strings)+len(c.Mappings)+len(c.Frames)+len(c.StackEnds) > 0 {
		cp := *c
		chunk = &cp
	}
	c.StringBase += uint32(len(c.Strings))
	c.MappingBase += uint32(len(c.Mappings))
	c.FrameBase += uint32(len(c.Frames))
	c.StackBase += uint32(len(c.StackEnds))
	return chunk, out
}

// Encode is Batch with both results encoded as a protocol 1.4 sampler
// writes them on its connection: the FrameDictionary payload of the
// entries b introduces (nil when it introduces none), then the FrameBatch
// payload of b in layout 2.
func (d *Dictionaries) Encode(b *schema.Batch) (chunk, batch []byte, err error) {
	c, l2 := d.Batch(b)
	if c != nil {
		if chunk, err = schema.EncodeDictionaryChunk(c, nil); err != nil {
			return nil, nil, fmt.Errorf("encode the dictionary chunk of batch %d: %w", b.Sequence, err)
		}
	}
	if batch, err = schema.EncodeDictionaryBatch(l2, nil); err != nil {
		return nil, nil, fmt.Errorf("encode batch %d in layout 2: %w", b.Sequence, err)
	}
	return chunk, batch, nil
}

// Attach gives a layout-2 batch its dictionary's tables, as DecodeBatchWith
// leaves a decoded one.
func Attach(b *schema.Batch, dict *schema.Dictionary) {
	b.Dictionary = dict
	b.Strings, b.Mappings, b.Frames = dict.Strings, dict.Mappings, dict.Frames
	b.StackFrames, b.StackEnds = dict.StackFrames, dict.StackEnds
}
