package arrow

import "github.com/tandem-profiler/tandem/encoder/aggregate"

// v2Loc is a location as the v2 record carries it, its strings interned in
// a v2Cache (string id 0 is "", which the record writes as null).
type v2Loc struct {
	address, line, column       uint64
	frameType, mapFile, buildID int32
	fn                          int32 // function id; -1 = no line
}

// v2Func is a function of the v2 record: interned name and file.
type v2Func struct{ name, file int32 }

// v2Cache resolves Flush locations for the v2 record once per dictionary
// Generation (and again after a late-named location, see frameCache): it interns every string the record writes and every (name,
// file) function, so that building a request's dictionaries is a matter of
// small-integer ids (see idDict) instead of hashing strings again for every
// request.
type v2Cache struct {
	epoch   uint64 // frameCache.epoch cached for
	valid   bool
	locs    []v2Loc
	locDone []bool
	strs    []string // by string id; strs[0] = ""
	strIDs  map[string]int32
	fns     []v2Func
	fnIDs   map[v2Func]int32
}

// begin follows frames, begun for the flush: a new generation or a renamed
// location resets both.
func (c *v2Cache) begin(frames *frameCache) {
	if c.valid && c.epoch == frames.epoch {
		return
	}
	c.valid, c.epoch = true, frames.epoch
	c.locs = c.locs[:0]
	c.locDone = c.locDone[:0]
	clear(c.strs)
	c.strs = append(c.strs[:0], "")
	if c.strIDs == nil {
		c.strIDs = make(map[string]int32)
		c.fnIDs = make(map[v2Func]int32)
	}
	clear(c.strIDs)
	clear(c.fnIDs)
	c.fns = c.fns[:0]
}

func (c *v2Cache) str(s string) int32 {
	if s == "" {
		return 0
	}
	id, ok := c.strIDs[s]
	if !ok {
		id = int32(len(c.strs))
		c.strs = append(c.strs, s)
		c.strIDs[s] = id
	}
	return id
}

// loc returns location id of f resolved by frames.
func (c *v2Cache) loc(f *aggregate.Flush, frames *frameCache, id uint32) *v2Loc {
	if int(id) < len(c.locDone) && c.locDone[id] {
		return &c.locs[id]
	}
	c.locs = grow(c.locs, int(id)+1)
	c.locDone = grow(c.locDone, int(id)+1)
	l := frames.resolve(f, id)
	v := v2Loc{
		address:   l.address,
		frameType: c.str(l.frameType),
		mapFile:   c.str(l.mappingFile),
		buildID:   c.str(l.buildID),
		fn:        -1,
	}
	if l.hasLine {
		v.line, v.column = l.line, l.column
		k := v2Func{name: c.str(l.function), file: c.str(l.filename)}
		fi, ok := c.fnIDs[k]
		if !ok {
			fi = int32(len(c.fns))
			c.fns = append(c.fns, k)
			c.fnIDs[k] = fi
		}
		v.fn = fi
	}
	c.locs[id] = v
	c.locDone[id] = true
	return &c.locs[id]
}

// idDict accumulates a dictionary-encoded column of one request over
// v2Cache ids: one dictionary index per row (-1 = null), the dictionary
// holding the ids in order of first use. Membership is an epoch-stamped
// array indexed by id, so no hashing.
type idDict struct {
	epoch []uint32 // per id: the request that last added it
	index []int32  // per id: its dictionary index in that request
	vals  []int32  // ids, in dictionary order
	rows  []int32
}

func (d *idDict) reset() {
	d.vals = d.vals[:0]
	d.rows = d.rows[:0]
}

// clearEpochs forgets every id (the encoder's epoch wrapped around).
func (d *idDict) clearEpochs() { clear(d.epoch) }

// indexOf returns the dictionary index of id in request epoch, adding it.
func (d *idDict) indexOf(id int32, epoch uint32) int32 {
	if int(id) >= len(d.epoch) {
		d.epoch = grow(d.epoch, int(id)+1)
		d.index = grow(d.index, int(id)+1)
	}
	if d.epoch[id] == epoch {
		return d.index[id]
	}
	d.epoch[id] = epoch
	i := int32(len(d.vals))
	d.index[id] = i
	d.vals = append(d.vals, id)
	return i
}

// addString appends a row for string id s; 0 ("") is null.
func (d *idDict) addString(s int32, epoch uint32) {
	if s == 0 {
		d.rows = append(d.rows, -1)
		return
	}
	d.rows = append(d.rows, d.indexOf(s, epoch))
}

// strings returns the dictionary's values as strings of c, in dst.
func (d *idDict) strings(c *v2Cache, dst []string) []string {
	dst = dst[:0]
	for _, id := range d.vals {
		dst = append(dst, c.strs[id])
	}
	return dst
}
