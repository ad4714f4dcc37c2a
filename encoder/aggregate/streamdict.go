package aggregate

import (
	"slices"
	"weak"

	"github.com/tandem-profiler/tandem/schema"
)

// Stream dictionaries (protocol 1.4, docs/session-dictionaries.md).
//
// A layout-2 batch carries no tables of its own: its references are ids in
// the dictionary of the connection (or dump) it came on, which grows
// append-only within a generation. So a dictionary id, once translated to
// an Aggregator id, keeps that translation for as long as neither side
// changes generation: the Aggregator keeps, per dictionary, arrays from
// dictionary ids to its own string, mapping, location and stack ids, filled
// the first time an id is used. A warm sample then costs one array load per
// reference, and nothing re-verifies the frames (the fast paths of
// fastpath.go are for layouts 0 and 1, whose tables are rebuilt per batch).
//
// The arrays are rebuilt lazily, from the dictionary's own tables, when the
// Aggregator compacts (its Generation changes: they hold Aggregator ids) or
// the dictionary starts a new generation (its ids then name other content).
//
// The Aggregator must not keep a connection's dictionary alive: it dies
// with its connection (ingest drops it when Serve returns). So maps are
// keyed by a weak pointer, and dropped at Flush once their dictionary is
// gone or unused for a whole interval; at most maxStreamMaps are kept.

// maxStreamMaps bounds the dictionaries whose maps the Aggregator keeps
// (one per live sampler connection; an encoder serves one node's sampler,
// or a few dumps being replayed).
const maxStreamMaps = 16

// streamMaps translate one dictionary's ids to the Aggregator's. unset
// marks an id not translated yet.
type streamMaps struct {
	dict       weak.Pointer[schema.Dictionary]
	generation uint64 // the dictionary's generation the arrays translate
	aggGen     uint64 // the Aggregator generation their ids belong to
	lastUse    uint64 // Aggregator.streamBatches at the last batch that used them
	lastEpoch  uint32 // flush interval of the last use

	idMaps
}

// idMaps are the index -> Aggregator id maps of one batch's tables, or of
// one dictionary's: a stream's streamMaps, or the Aggregator's per-batch
// scratch for layouts 0 and 1.
type idMaps struct {
	strs, mappings, frames, stacks []uint32 // mappings is 1-based, as Frame.Mapping
}

// truncate empties the maps, keeping their storage.
func (m *idMaps) truncate() {
	m.strs, m.mappings, m.frames, m.stacks = m.strs[:0], m.mappings[:0], m.frames[:0], m.stacks[:0]
}

// cover grows the maps to b's tables, the new entries unset.
func (m *idMaps) cover(b *schema.Batch) {
	m.strs = extendUnset(m.strs, len(b.Strings))
	m.mappings = extendUnset(m.mappings, len(b.Mappings)+1)
	m.frames = extendUnset(m.frames, len(b.Frames))
	m.stacks = extendUnset(m.stacks, len(b.StackEnds))
}

// streamMapsFor returns the maps of b's dictionary, covering every id of
// b's tables. Those are the dictionary's tables as they were when b was
// decoded (DecodeBatchWith), for b's generation: a prefix of what the
// dictionary holds for that generation, since it only appends.
func (a *Aggregator) streamMapsFor(b *schema.Batch) *streamMaps {
	key := weak.Make(b.Dictionary)
	sm, ok := a.streams[key]
	if !ok {
		if len(a.streams) >= maxStreamMaps {
			a.evictStreamMaps()
		}
		sm = &streamMaps{dict: key, generation: b.Generation, aggGen: a.generation}
		a.streams[key] = sm
	}
	if sm.generation != b.Generation || sm.aggGen != a.generation {
		sm.generation, sm.aggGen = b.Generation, a.generation
		sm.truncate()
	}
	a.streamBatches++
	sm.lastUse, sm.lastEpoch = a.streamBatches, a.epoch
	sm.cover(b)
	return sm
}

// extendUnset grows m to n entries, the new ones unset: the cost is the
// dictionary's growth, not its size.
func extendUnset(m []uint32, n int) []uint32 {
	old := len(m)
	if n <= old {
		return m
	}
	m = slices.Grow(m, n-old)[:n]
	for i := old; i < n; i++ {
		m[i] = unset
	}
	return m
}

// evictStreamMaps drops the least recently used maps.
func (a *Aggregator) evictStreamMaps() {
	var oldest *streamMaps
	for _, sm := range a.streams {
		if oldest == nil || sm.lastUse < oldest.lastUse {
			oldest = sm
		}
	}
	if oldest != nil {
		delete(a.streams, oldest.dict)
	}
}

// sweepStreamMaps runs at Flush, with the epoch of the interval that just
// ended: it drops the maps of dictionaries that are gone or were not used
// in it (a live connection sends a batch every second).
func (a *Aggregator) sweepStreamMaps(ended uint32) {
	for k, sm := range a.streams {
		if sm.lastEpoch < ended || k.Value() == nil {
			delete(a.streams, k)
		}
	}
}
