package otlp

import (
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pprofile"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
	"github.com/tandem-profiler/tandem/schema"
)

// dictionary is the Encoder's state for a request's dictionary tables:
// which Flush ids the request uses, and their indices in it.
type dictionary struct {
	strs, maps, funcs, locs, stacks marks
	strTable, extraTable            []string
	extraStrs                       map[string]int32
	nmarked                         int      // Flush strings marked this epoch
	stackList, locList, funcList    []uint32 // ids in request index order (index i+1)
	locOrder                        []uint32 // numberLocations' scratch
	refHist                         []int32
	htlhash                         []string // per mapping id, for generation
}

// marks assigns request-local indices to Flush ids, once per Encode.
// An id's epoch and index share a cache line: marking reads one and writes
// the other.
type marks []mark

type mark struct {
	epoch uint32
	idx   int32
}

func (m *marks) grow(n int) {
	if len(*m) < n {
		*m = append(*m, make(marks, n-len(*m))...)
	}
}

// str returns the string-table index of a string that is not a Flush
// string (attribute keys, sample type names). Such strings follow the
// Flush strings, whose number markStacks knows before their order is
// chosen.
func (e *Encoder) str(s string) int32 {
	if s == "" {
		return 0
	}
	if i, ok := e.extraStrs[s]; ok {
		return i
	}
	i := int32(1 + e.nmarked + len(e.extraTable))
	e.extraTable = append(e.extraTable, s)
	e.extraStrs[s] = i
	return i
}

func (e *Encoder) markString(id uint32) {
	if id != 0 && e.strs[id].epoch != e.epoch {
		e.strs[id].epoch, e.strs[id].idx = e.epoch, 0
		e.nmarked++
	}
}

// placeString gives a marked Flush string the next string-table index.
func (e *Encoder) placeString(f *aggregate.Flush, id uint32) {
	if id != 0 && e.strs[id].idx == 0 {
		e.strs[id].idx = int32(len(e.strTable))
		e.strTable = append(e.strTable, f.Strings[id])
	}
}

// buildStringTable writes the string table: "", the mapping files in
// mapping order, the function names in function order, then their files
// (so that a program's names sit together, as its functions do); Encode
// appends the extra strings.
func (e *Encoder) buildStringTable(f *aggregate.Flush) {
	e.strTable = append(e.strTable[:0], "")
	for id := 1; id < len(f.Mappings); id++ {
		if e.maps[id].epoch == e.epoch {
			e.placeString(f, mappingFile(&f.Mappings[id]))
		}
	}
	for _, fn := range e.funcList {
		e.placeString(f, f.Functions[fn].Name)
	}
	for _, fn := range e.funcList {
		e.placeString(f, f.Functions[fn].File)
	}
	e.strs[0].idx = 0
}

// markStacks walks the samples in the order they are written and gives
// each stack it meets the next stack index, so that stacks used by one
// resource sit together in the table. It marks every location, mapping,
// function and string those stacks reach, lists the locations in order of
// first appearance and counts how many stacks reference each.
func (e *Encoder) markStacks(f *aggregate.Flush) {
	e.stackList = e.stackList[:0]
	e.locList = e.locList[:0]
	e.stacks[0].idx = 0
	for _, row := range e.order {
		id := f.Samples[row].Stack
		if id == 0 || e.stacks[id].epoch == e.epoch {
			continue
		}
		e.stacks[id].epoch = e.epoch
		e.stackList = append(e.stackList, id)
		e.stacks[id].idx = int32(len(e.stackList))
		for _, l := range f.Stack(id) {
			// Until numberLocations, a location's idx counts the stacks
			// that reference it.
			lm := &e.locs[l]
			if lm.epoch == e.epoch {
				lm.idx++
				continue
			}
			lm.epoch, lm.idx = e.epoch, 1
			e.locList = append(e.locList, l)
			loc := &f.Locations[l]
			if m := loc.Mapping; m != 0 && e.maps[m].epoch != e.epoch {
				e.maps[m].epoch = e.epoch
				e.markString(mappingFile(&f.Mappings[m]))
			}
			if fn := loc.Function; fn != 0 && e.funcs[fn].epoch != e.epoch {
				e.markFunction(f, fn)
			}
			for _, ln := range f.NativeLines(l) {
				if e.funcs[ln.Function].epoch != e.epoch {
					e.markFunction(f, ln.Function)
				}
			}
		}
	}
}

// markFunction marks a function and its strings; writeLocations numbers it.
func (e *Encoder) markFunction(f *aggregate.Flush, fn uint32) {
	e.funcs[fn].epoch, e.funcs[fn].idx = e.epoch, 0
	e.markString(f.Functions[fn].Name)
	e.markString(f.Functions[fn].File)
}

// oneByteIndices is how many table indices (1..127) fit a one-byte varint.
const oneByteIndices = 127

// numberLocations gives the locations referenced by the most stacks the
// one-byte indices 1..127 and the rest the following indices, each group in
// order of first appearance. Stacks are lists of location indices, the
// largest table of a request; this shrinks it by about a tenth, and the
// first-appearance order keeps the locations of one resource's stacks
// together, which gzip finds. Both are linear: a histogram of reference
// counts gives the threshold instead of a sort.
func (e *Encoder) numberLocations() {
	list, locs := e.locList, e.locs
	if len(list) <= oneByteIndices {
		for i, l := range list {
			locs[l].idx = int32(i + 1)
		}
		return
	}
	maxRefs := int32(0)
	for _, l := range list {
		maxRefs = max(maxRefs, locs[l].idx)
	}
	e.refHist = slices.Grow(e.refHist[:0], int(maxRefs)+1)[:maxRefs+1]
	hist := e.refHist
	clear(hist)
	for _, l := range list {
		hist[locs[l].idx]++
	}
	// Locations with more than t references are all in the top group;
	// room more of those with exactly t join it, first come first.
	t, above := maxRefs, int32(0)
	for t > 0 && above+hist[t] < oneByteIndices {
		above += hist[t]
		t--
	}
	room := oneByteIndices - above
	// Indices are stored negated until every location has one, so that
	// they cannot be mistaken for reference counts.
	next := int32(1)
	for _, l := range list {
		if c := locs[l].idx; c > t || c == t && room > 0 {
			if c == t {
				room--
			}
			locs[l].idx = -next
			next++
		}
	}
	for _, l := range list {
		if locs[l].idx > 0 {
			locs[l].idx = -next
			next++
		}
	}
	// locList in index order, for writeLocations.
	e.locOrder = slices.Grow(e.locOrder[:0], len(list))[:len(list)]
	for _, l := range list {
		locs[l].idx = -locs[l].idx
		e.locOrder[locs[l].idx-1] = l
	}
	e.locList, e.locOrder = e.locOrder, list
}

func mappingFile(m *aggregate.Mapping) uint32 {
	if m.FileName != 0 {
		return m.FileName
	}
	return m.Path
}

// assign gives every marked id 1..n-1 the next request index, in id order.
func (e *Encoder) assign(m *marks, n int) int32 {
	next := int32(1)
	for id := 1; id < n; id++ {
		if (*m)[id].epoch == e.epoch {
			(*m)[id].idx = next
			next++
		}
	}
	return next
}

func (e *Encoder) writeMappings(f *aggregate.Flush, t pprofile.MappingSlice, n int32) {
	t.EnsureCapacity(int(n))
	s := at(t, 0)
	s.SetMemoryStart(0)
	s.SetMemoryLimit(0)
	s.SetFileOffset(0)
	s.SetFilenameStrindex(0)
	s.AttributeIndices().FromRaw(nil)
	for id := 1; id < len(f.Mappings); id++ {
		if e.maps[id].epoch != e.epoch {
			continue
		}
		m := &f.Mappings[id]
		pm := at(t, int(e.maps[id].idx))
		pm.SetMemoryStart(m.Start)
		pm.SetMemoryLimit(m.End)
		pm.SetFileOffset(m.FileOffset)
		pm.SetFilenameStrindex(e.strs[mappingFile(m)].idx)
		attrs := e.i32[:0]
		// .gnu holds the executable key when it is a GNU build id, and
		// the file id key too when symbols are uploaded under it.
		if key := f.ExecutableKey(m); key.Kind == schema.KeyGNUBuildID || (e.cfg.FileIDAsGNUBuildID && key.Kind == schema.KeyFileID) {
			attrs = append(attrs, e.strAttrIndex(AttrBuildIDGNU, key.String()))
		}
		if m.GoBuildID != 0 {
			attrs = append(attrs, e.strAttrIndex(AttrBuildIDGo, f.Strings[m.GoBuildID]))
		}
		if !m.FileID.IsZero() {
			attrs = append(attrs, e.strAttrIndex(AttrBuildIDHtlhash, e.fileIDHex(f, uint32(id))))
		}
		e.i32 = attrs
		pm.AttributeIndices().FromRaw(attrs)
	}
	truncate(t, int(n))
}

func (e *Encoder) fileIDHex(f *aggregate.Flush, id uint32) string {
	for len(e.htlhash) <= int(id) {
		e.htlhash = append(e.htlhash, "")
	}
	if e.htlhash[id] == "" {
		e.htlhash[id] = f.Mappings[id].FileID.Hex()
	}
	return e.htlhash[id]
}

// writeFunctions writes the functions in the order writeLocations
// numbered them.
func (e *Encoder) writeFunctions(f *aggregate.Flush, t pprofile.FunctionSlice) {
	n := len(e.funcList) + 1
	t.EnsureCapacity(n)
	s := at(t, 0)
	s.SetNameStrindex(0)
	s.SetSystemNameStrindex(0)
	s.SetFilenameStrindex(0)
	s.SetStartLine(0)
	for i, id := range e.funcList {
		fn := &f.Functions[id]
		pf := at(t, i+1)
		pf.SetNameStrindex(e.strs[fn.Name].idx)
		pf.SetSystemNameStrindex(0)
		pf.SetFilenameStrindex(e.strs[fn.File].idx)
		pf.SetStartLine(0)
	}
	truncate(t, n)
}

// writeLocations writes the locations in numberLocations' order and numbers
// their functions in order of first use.
func (e *Encoder) writeLocations(f *aggregate.Flush, t pprofile.LocationSlice) {
	n := len(e.locList) + 1
	t.EnsureCapacity(n)
	s := at(t, 0)
	s.SetMappingIndex(0)
	s.SetAddress(0)
	truncate(s.Lines(), 0)
	s.AttributeIndices().FromRaw(nil)
	e.funcList = e.funcList[:0]
	for i, id := range e.locList {
		l := &f.Locations[id]
		pl := at(t, i+1)
		mi := int32(0)
		if l.Mapping != 0 {
			mi = e.maps[l.Mapping].idx
		}
		pl.SetMappingIndex(mi)
		pl.SetAddress(l.Address)
		lines := pl.Lines()
		if native := f.NativeLines(id); len(native) > 0 { // named by the encoder's symbolizer
			truncate(lines, len(native))
			for i, ln := range native {
				line := at(lines, i)
				line.SetFunctionIndex(e.functionIndex(ln.Function))
				line.SetLine(int64(ln.Line))
				line.SetColumn(0)
			}
		} else if l.Function != 0 || l.Line != 0 {
			line := at(lines, 0)
			truncate(lines, 1)
			fi := int32(0)
			if fn := l.Function; fn != 0 {
				fi = e.functionIndex(fn)
			}
			line.SetFunctionIndex(fi)
			line.SetLine(int64(l.Line))
			line.SetColumn(int64(l.Column))
		} else {
			truncate(lines, 0)
		}
		attrs := append(e.i32[:0], e.frameTypeAttr(l))
		e.i32 = attrs
		pl.AttributeIndices().FromRaw(attrs)
	}
	truncate(t, n)
}

// functionIndex numbers a marked function on first use.
func (e *Encoder) functionIndex(fn uint32) int32 {
	if e.funcs[fn].idx == 0 {
		e.funcList = append(e.funcList, fn)
		e.funcs[fn].idx = int32(len(e.funcList))
	}
	return e.funcs[fn].idx
}

// writeStacks writes the stacks in markStacks' order.
func (e *Encoder) writeStacks(f *aggregate.Flush, t pprofile.StackSlice) {
	n := len(e.stackList) + 1
	t.EnsureCapacity(n)
	at(t, 0).LocationIndices().FromRaw(nil)
	for i, id := range e.stackList {
		idx := e.i32[:0]
		for _, l := range f.Stack(id) {
			idx = append(idx, e.locs[l].idx)
		}
		e.i32 = idx
		at(t, i+1).LocationIndices().FromRaw(idx)
	}
	truncate(t, n)
}

// writeLinks writes the flush's link table as the request's: entry 0 the
// zero link, then each distinct (trace id, span id) in the order the
// flush's samples first named them, so Sample.Link is the link_index.
func (e *Encoder) writeLinks(f *aggregate.Flush, t pprofile.LinkSlice) {
	n := max(len(f.Links), 1)
	t.EnsureCapacity(n)
	zero := at(t, 0)
	zero.SetTraceID(pcommon.TraceID{})
	zero.SetSpanID(pcommon.SpanID{})
	for i := 1; i < len(f.Links); i++ {
		l := at(t, i)
		l.SetTraceID(f.Links[i].TraceID)
		l.SetSpanID(f.Links[i].SpanID)
	}
	truncate(t, n)
}
