package aggregate

import (
	"strings"
	"unicode/utf8"
	"unsafe"
)

// dict is the Aggregator's long-lived, content-keyed dictionary. Tables are
// append-only within a generation, so a Flush can share them by slicing
// (cap = len) while the Aggregator keeps appending. Pruning builds a new
// dict instead of modifying this one.
//
// Liveness is tracked on roots only: stacks, resources, label sets and
// strings used directly by samples (thread names). Mappings, functions,
// locations and the remaining strings live as long as a live root reaches
// them. *Used hold the epoch (flush counter) of the last use.
type dict struct {
	strings   []string
	stringIDs map[string]uint32

	mappings   []Mapping
	mappingIDs map[Mapping]uint32

	functions   []Function
	functionIDs map[Function]uint32

	locations   []Location
	locationIDs map[Location]uint32

	stackLocs []uint32
	stackEnds []uint32
	stackIDs  map[string]uint32

	labelKVs  []KeyValue
	labelEnds []uint32
	labelIDs  map[string]uint32

	resources   []Resource
	resourceIDs map[Resource]uint32

	// Native lines (Config.Symbolizer): lineEnds[i] ends location i's
	// lines in lines; locations past len(lineEnds) are not resolved yet.
	// Compaction does not carry them: the new generation resolves again.
	lines    []Line
	lineEnds []uint32

	stackUsed    []uint32
	labelUsed    []uint32
	resourceUsed []uint32
	stringUsed   []uint32 // only maintained for strings samples use directly
}

func newDict(sizeHint int) *dict {
	d := &dict{
		stringIDs:   make(map[string]uint32, sizeHint),
		mappingIDs:  make(map[Mapping]uint32, 64),
		functionIDs: make(map[Function]uint32, sizeHint),
		locationIDs: make(map[Location]uint32, sizeHint),
		stackIDs:    make(map[string]uint32, sizeHint),
		labelIDs:    make(map[string]uint32),
		resourceIDs: make(map[Resource]uint32),
	}
	// Index 0 sentinels. The zero Mapping and Function carry no
	// information, so content equal to them maps to the sentinel. The zero
	// Location is not keyed: a real frame always gets its own location.
	d.strings = append(d.strings, "")
	d.stringIDs[""] = 0
	d.stringUsed = append(d.stringUsed, 0)
	d.mappings = append(d.mappings, Mapping{})
	d.mappingIDs[Mapping{}] = 0
	d.functions = append(d.functions, Function{})
	d.functionIDs[Function{}] = 0
	d.locations = append(d.locations, Location{})
	d.stackEnds = append(d.stackEnds, 0)
	d.stackIDs[""] = 0
	d.stackUsed = append(d.stackUsed, 0)
	d.labelEnds = append(d.labelEnds, 0)
	d.labelIDs[""] = 0
	d.labelUsed = append(d.labelUsed, 0)
	return d
}

func (d *dict) internString(s string) uint32 {
	if id, ok := d.stringIDs[s]; ok {
		return id
	}
	if !utf8.ValidString(s) {
		// Every string the encoder writes (OTLP, Arrow, pprof, labels)
		// comes from here; protobuf and Arrow strings must be UTF-8, and
		// one bad name would fail a whole export. Workloads choose their
		// names, paths and environment, and ELF symbols are bytes.
		s = escapeInvalidUTF8(s)
		if id, ok := d.stringIDs[s]; ok {
			return id
		}
	}
	// Batch strings may alias a decode buffer; the dictionary keeps its
	// own copy.
	s = strings.Clone(s)
	id := uint32(len(d.strings))
	d.strings = append(d.strings, s)
	d.stringUsed = append(d.stringUsed, 0)
	d.stringIDs[s] = id
	return id
}

func (d *dict) internMapping(m Mapping) uint32 {
	if id, ok := d.mappingIDs[m]; ok {
		return id
	}
	id := uint32(len(d.mappings))
	d.mappings = append(d.mappings, m)
	d.mappingIDs[m] = id
	return id
}

func (d *dict) internFunction(f Function) uint32 {
	if id, ok := d.functionIDs[f]; ok {
		return id
	}
	id := uint32(len(d.functions))
	d.functions = append(d.functions, f)
	d.functionIDs[f] = id
	return id
}

func (d *dict) internLocation(l Location) uint32 {
	if id, ok := d.locationIDs[l]; ok {
		return id
	}
	id := uint32(len(d.locations))
	d.locations = append(d.locations, l)
	d.locationIDs[l] = id
	return id
}

// bytesOf views a slice of fixed-size values as a string, for map lookups
// that must not allocate. The result must not outlive s or be stored.
func bytesOf[T uint32 | KeyValue](s []T) string {
	if len(s) == 0 {
		return ""
	}
	return unsafe.String((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}

func (d *dict) internStack(locs []uint32) uint32 {
	if id, ok := d.stackIDs[bytesOf(locs)]; ok {
		return id
	}
	id := uint32(len(d.stackEnds))
	d.stackLocs = append(d.stackLocs, locs...)
	d.stackEnds = append(d.stackEnds, uint32(len(d.stackLocs)))
	d.stackUsed = append(d.stackUsed, 0)
	d.stackIDs[strings.Clone(bytesOf(locs))] = id
	return id
}

func (d *dict) stack(id uint32) []uint32 {
	start := uint32(0)
	if id > 0 {
		start = d.stackEnds[id-1]
	}
	return d.stackLocs[start:d.stackEnds[id]]
}

func (d *dict) internLabels(kvs []KeyValue) uint32 {
	if id, ok := d.labelIDs[bytesOf(kvs)]; ok {
		return id
	}
	id := uint32(len(d.labelEnds))
	d.labelKVs = append(d.labelKVs, kvs...)
	d.labelEnds = append(d.labelEnds, uint32(len(d.labelKVs)))
	d.labelUsed = append(d.labelUsed, 0)
	d.labelIDs[strings.Clone(bytesOf(kvs))] = id
	return id
}

func (d *dict) labelSet(id uint32) []KeyValue {
	start := uint32(0)
	if id > 0 {
		start = d.labelEnds[id-1]
	}
	return d.labelKVs[start:d.labelEnds[id]]
}

func (d *dict) internResource(r Resource) uint32 {
	if id, ok := d.resourceIDs[r]; ok {
		return id
	}
	id := uint32(len(d.resources))
	d.resources = append(d.resources, r)
	d.resourceUsed = append(d.resourceUsed, 0)
	d.resourceIDs[r] = id
	return id
}

// entries returns the number of roots and how many of them were last used
// before minEpoch.
func (d *dict) staleRoots(minEpoch uint32) (stale, total int) {
	count := func(used []uint32, from int) {
		for _, e := range used[from:] {
			if e < minEpoch {
				stale++
			}
		}
		total += len(used) - from
	}
	count(d.stackUsed, 1)
	count(d.labelUsed, 1)
	count(d.resourceUsed, 0)
	return stale, total
}

// compact returns a new dict holding the roots used at or after minEpoch and
// everything they reach, with their last-use epochs.
func (d *dict) compact(minEpoch uint32) *dict {
	nd := newDict(len(d.locations) / 2)
	strMap := make([]uint32, len(d.strings)) // old id -> new id; 0 = not yet (only "" maps to 0)
	str := func(old uint32) uint32 {
		if old == 0 {
			return 0
		}
		if n := strMap[old]; n != 0 {
			return n
		}
		n := nd.internString(d.strings[old])
		strMap[old] = n
		return n
	}
	mapMap := make([]uint32, len(d.mappings))
	funcMap := make([]uint32, len(d.functions))
	locMap := make([]uint32, len(d.locations))
	var scratch []uint32
	for old := 1; old < len(d.stackEnds); old++ {
		if d.stackUsed[old] < minEpoch {
			continue
		}
		scratch = scratch[:0]
		for _, l := range d.stack(uint32(old)) {
			n := locMap[l]
			if n == 0 {
				loc := d.locations[l]
				if m := loc.Mapping; m != 0 {
					if mapMap[m] == 0 {
						mm := d.mappings[m]
						mm.FileName, mm.Path = str(mm.FileName), str(mm.Path)
						mm.GNUBuildID, mm.GoBuildID = str(mm.GNUBuildID), str(mm.GoBuildID)
						mapMap[m] = nd.internMapping(mm)
					}
					loc.Mapping = mapMap[m]
				}
				if fn := loc.Function; fn != 0 {
					if funcMap[fn] == 0 {
						ff := d.functions[fn]
						funcMap[fn] = nd.internFunction(Function{Name: str(ff.Name), File: str(ff.File)})
					}
					loc.Function = funcMap[fn]
				}
				n = nd.internLocation(loc)
				locMap[l] = n
			}
			scratch = append(scratch, n)
		}
		nd.stackUsed[nd.internStack(scratch)] = d.stackUsed[old]
	}
	labels := func(old uint32) uint32 {
		var kvs []KeyValue
		for _, kv := range d.labelSet(old) {
			kvs = append(kvs, KeyValue{Key: str(kv.Key), Value: str(kv.Value)})
		}
		return nd.internLabels(kvs)
	}
	for old := 1; old < len(d.labelEnds); old++ {
		if d.labelUsed[old] >= minEpoch {
			n := labels(uint32(old))
			nd.labelUsed[n] = max(nd.labelUsed[n], d.labelUsed[old])
		}
	}
	for old, r := range d.resources {
		if d.resourceUsed[old] < minEpoch {
			continue
		}
		for f := range ProcessFields {
			switch v := &r.fields()[f]; ProcessFields[f].Kind {
			case FieldString:
				*v = str(*v)
			case FieldLabelSet:
				*v = labels(*v)
			}
		}
		nd.resourceUsed[nd.internResource(r)] = d.resourceUsed[old]
	}
	for old := 1; old < len(d.strings); old++ {
		if d.stringUsed[old] >= minEpoch {
			n := str(uint32(old))
			nd.stringUsed[n] = d.stringUsed[old]
		}
	}
	return nd
}

// escapeInvalidUTF8 returns s with every byte that is not part of a valid
// UTF-8 sequence written as \xNN: the value stays readable and values that
// differ stay apart. (A name that literally contains "\xff" then looks
// like one with the byte 0xff; for a label that is acceptable.)
func escapeInvalidUTF8(s string) string {
	const hex = "0123456789abcdef"
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteString(`\x`)
			b.WriteByte(hex[s[i]>>4])
			b.WriteByte(hex[s[i]&0xf])
			i++
			continue
		}
		b.WriteString(s[i : i+size])
		i += size
	}
	return b.String()
}
