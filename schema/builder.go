package schema

import (
	"encoding/binary"
)

// BatchBuilder assembles a Batch, de-duplicating strings, mappings, frames,
// stacks and processes within the batch. It is not safe for concurrent use.
// Reset keeps the allocations for the next batch.
type BatchBuilder struct {
	batch     Batch
	strings   map[string]uint32
	mappings  map[Mapping]uint32
	frames    map[Frame]uint32
	stacks    map[string]uint32
	processes map[uint32]uint32
	keyBuf    []byte
}

// NewBatchBuilder returns an empty builder.
func NewBatchBuilder() *BatchBuilder {
	b := &BatchBuilder{
		strings:   make(map[string]uint32),
		mappings:  make(map[Mapping]uint32),
		frames:    make(map[Frame]uint32),
		stacks:    make(map[string]uint32),
		processes: make(map[uint32]uint32),
	}
	b.Reset()
	return b
}

// Reset empties the builder for a new batch.
func (b *BatchBuilder) Reset() {
	b.batch.Reset()
	b.batch.Strings = append(b.batch.Strings, "")
	clear(b.strings)
	clear(b.mappings)
	clear(b.frames)
	clear(b.stacks)
	clear(b.processes)
}

// String interns s and returns its index; "" is always 0.
func (b *BatchBuilder) String(s string) uint32 {
	if s == "" {
		return 0
	}
	if i, ok := b.strings[s]; ok {
		return i
	}
	i := uint32(len(b.batch.Strings))
	b.batch.Strings = append(b.batch.Strings, s)
	b.strings[s] = i
	return i
}

// Mapping interns m and returns its 1-based index (the Frame.Mapping value).
func (b *BatchBuilder) Mapping(m Mapping) uint32 {
	if i, ok := b.mappings[m]; ok {
		return i
	}
	b.batch.Mappings = append(b.batch.Mappings, m)
	i := uint32(len(b.batch.Mappings))
	b.mappings[m] = i
	return i
}

// Frame interns f and returns its index.
func (b *BatchBuilder) Frame(f Frame) uint32 {
	if i, ok := b.frames[f]; ok {
		return i
	}
	i := uint32(len(b.batch.Frames))
	b.batch.Frames = append(b.batch.Frames, f)
	b.frames[f] = i
	return i
}

// Stack interns a stack given as frame indices, leaf first, and returns its
// index.
func (b *BatchBuilder) Stack(frames []uint32) uint32 {
	b.keyBuf = b.keyBuf[:0]
	for _, f := range frames {
		b.keyBuf = binary.LittleEndian.AppendUint32(b.keyBuf, f)
	}
	if i, ok := b.stacks[string(b.keyBuf)]; ok {
		return i
	}
	i := uint32(len(b.batch.StackEnds))
	b.batch.StackFrames = append(b.batch.StackFrames, frames...)
	b.batch.StackEnds = append(b.batch.StackEnds, uint32(len(b.batch.StackFrames)))
	b.stacks[string(b.keyBuf)] = i
	return i
}

// Process adds p unless a process with the same PID is already in the batch,
// and returns its index.
func (b *BatchBuilder) Process(p Process) uint32 {
	if i, ok := b.processes[p.PID]; ok {
		return i
	}
	i := uint32(len(b.batch.Processes))
	b.batch.Processes = append(b.batch.Processes, p)
	b.processes[p.PID] = i
	return i
}

// AddSample appends a sample whose indices came from this builder.
func (b *BatchBuilder) AddSample(s Sample) {
	b.batch.Samples = append(b.batch.Samples, s)
}

// AddLinkedSample appends a sample with its trace link (s.Link is
// overwritten), or without one when the link is not valid.
func (b *BatchBuilder) AddLinkedSample(s Sample, l TraceLink) {
	s.Link = 0
	if l.IsValid() {
		b.batch.Links = append(b.batch.Links, l)
		s.Link = uint32(len(b.batch.Links))
	}
	b.batch.Samples = append(b.batch.Samples, s)
}

// Samples returns the number of samples added since the last Reset.
func (b *BatchBuilder) Samples() int { return len(b.batch.Samples) }

// Batch returns the batch being built. It stays valid until Reset; the
// caller sets Sequence.
func (b *BatchBuilder) Batch() *Batch { return &b.batch }
