package arrow

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
)

// The v2 schema (docs/parca-protocols.md §3.4).
var (
	v2FunctionType = arrow.StructOf(
		arrow.Field{Name: "system_name", Type: arrow.BinaryTypes.StringView, Nullable: true},
		arrow.Field{Name: "filename", Type: dictUTF8, Nullable: true},
		arrow.Field{Name: "start_line", Type: tUint64},
	)
	v2FunctionDict = &arrow.DictionaryType{IndexType: tUint32, ValueType: v2FunctionType}
	v2LineType     = arrow.StructOf(
		arrow.Field{Name: "line", Type: tUint64},
		arrow.Field{Name: "column", Type: tUint64},
		arrow.Field{Name: "function", Type: v2FunctionDict},
	)
	v2LinesType    = arrow.ListViewOf(v2LineType)
	v2LocationType = arrow.StructOf(
		arrow.Field{Name: "address", Type: tUint64},
		arrow.Field{Name: "frame_type", Type: dictUTF8, Nullable: true},
		arrow.Field{Name: "mapping_file", Type: dictUTF8, Nullable: true},
		arrow.Field{Name: "mapping_build_id", Type: dictUTF8, Nullable: true},
		arrow.Field{Name: "lines", Type: v2LinesType, Nullable: true},
	)
	v2LocationDict = &arrow.DictionaryType{IndexType: tUint32, ValueType: v2LocationType}
	v2StackType    = arrow.ListViewOf(v2LocationDict)
	v2Timestamp    = &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}
	v2UUID         = newUUIDType()
)

// V2Encoder encodes flushes as Arrow v2 sample records, each a complete
// IPC stream (LZ4_FRAME body compression) for one WriteArrow request. It
// is not safe for concurrent use.
type V2Encoder struct {
	base
	cache v2Cache

	// Per-request state.
	stackEpoch []uint32 // per stack id
	stackOff   []int32
	stackLen   []int32
	locEpoch   []uint32 // per location id
	locIdx     []int32
	epoch      uint32
	children   []int32 // location dictionary indices of all stacks

	address                     []uint64
	frameType, mapFile, buildID idDict
	lineOff, lineSize           []int32
	lineValid                   []bool
	lineNulls                   bool
	line, column                []uint64
	funcs                       idDict // rows: the function of each line
	funcFile                    idDict
	funcStart                   []uint64
	strs                        []string
	typeColumns[uint64]
}

// NewV2Encoder returns a v2 encoder. labeler nil means the default
// parca-agent label set; mem nil means the Go allocator.
func NewV2Encoder(cfg Config, labeler Labeler, mem memory.Allocator) (*V2Encoder, error) {
	b, err := newBase(cfg, false, labeler, mem)
	if err != nil {
		return nil, err
	}
	return &V2Encoder{base: b}, nil
}

// Close releases the encoder's builders.
func (e *V2Encoder) Close() { e.b.close() }

// Encode returns the WriteArrow payloads (IPC streams) of f: one, or more
// when one would exceed Config.MaxMessageBytes. f is only read; it may be
// released once Encode returns. An empty flush gives no payload.
func (e *V2Encoder) Encode(f *aggregate.Flush) ([][]byte, error) {
	e.prepare(f)
	e.cache.begin(&e.frames)
	if len(e.order) == 0 {
		return nil, nil
	}
	return e.split(0, len(e.order), func(lo, hi int) ([]byte, error) { return e.encode(f, lo, hi) }, nil)
}

func grow[T any](s []T, n int) []T {
	for len(s) < n {
		s = append(s, *new(T))
	}
	return s
}

func (e *V2Encoder) nextEpoch(f *aggregate.Flush) {
	e.epoch++
	if e.epoch == 0 {
		clear(e.stackEpoch)
		clear(e.locEpoch)
		for _, d := range []*idDict{&e.frameType, &e.mapFile, &e.buildID, &e.funcs, &e.funcFile} {
			d.clearEpochs()
		}
		e.epoch = 1
	}
	e.stackEpoch = grow(e.stackEpoch, f.NumStacks())
	e.stackOff = grow(e.stackOff, f.NumStacks())
	e.stackLen = grow(e.stackLen, f.NumStacks())
	e.locEpoch = grow(e.locEpoch, len(f.Locations))
	e.locIdx = grow(e.locIdx, len(f.Locations))
}

func (e *V2Encoder) reset() {
	e.children = e.children[:0]
	e.address = e.address[:0]
	for _, d := range []*idDict{&e.frameType, &e.mapFile, &e.buildID, &e.funcs, &e.funcFile} {
		d.reset()
	}
	e.lineOff, e.lineSize, e.lineValid = e.lineOff[:0], e.lineSize[:0], e.lineValid[:0]
	e.lineNulls = false
	e.line, e.column = e.line[:0], e.column[:0]
	e.typeColumns.reset()
}

// location adds location id, new in this request, to the location
// dictionary and returns its index.
func (e *V2Encoder) location(f *aggregate.Flush, id uint32) int32 {
	e.locEpoch[id] = e.epoch
	idx := int32(len(e.address))
	e.locIdx[id] = idx
	l := e.cache.loc(f, &e.frames, id)
	e.address = append(e.address, l.address)
	e.frameType.addString(l.frameType, e.epoch)
	e.mapFile.addString(l.mapFile, e.epoch)
	e.buildID.addString(l.buildID, e.epoch)
	e.lineOff = append(e.lineOff, int32(len(e.line)))
	if l.fn < 0 {
		e.lineSize = append(e.lineSize, 0)
		e.lineValid = append(e.lineValid, false)
		e.lineNulls = true
		return idx
	}
	e.lineSize = append(e.lineSize, 1)
	e.lineValid = append(e.lineValid, true)
	e.line = append(e.line, l.line)
	e.column = append(e.column, l.column)
	e.funcs.rows = append(e.funcs.rows, e.funcs.indexOf(l.fn, e.epoch))
	return idx
}

// rowColumns are the columns with one value per row, written straight
// into Arrow buffers.
type rowColumns struct {
	offsets, sizes []int32
	ids            []byte
	values, times  []int64
	arrays         [5]arrow.Array // offsets, sizes, ids, values, times
}

func (e *V2Encoder) encode(f *aggregate.Flush, lo, hi int) ([]byte, error) {
	samples := e.order[lo:hi]
	e.nextEpoch(f)
	e.reset()
	defer e.b.releaseAll()
	rows := e.events(lo, hi)
	b := e.b
	var rc rowColumns
	rc.arrays[0], rc.offsets = b.int32Buffer(rows)
	rc.arrays[1], rc.sizes = b.int32Buffer(rows)
	rc.arrays[2], rc.ids = b.fixed16Buffer(rows)
	rc.arrays[3], rc.values = b.int64Buffer(tInt64, rows)
	rc.arrays[4], rc.times = b.int64Buffer(v2Timestamp, rows)
	row := 0
	curType, pending := int32(-1), int32(0)
	for _, si := range samples {
		s := &f.Samples[si]
		n := len(s.Timestamps)
		// Within a record each location enters the location dictionary
		// once (and each function, by name and file, its own), and the
		// rows of one stack share one ListView offset and size.
		if e.stackEpoch[s.Stack] != e.epoch {
			e.stackEpoch[s.Stack] = e.epoch
			e.stackOff[s.Stack] = int32(len(e.children))
			for _, l := range f.Stack(s.Stack) {
				idx := e.locIdx[l]
				if e.locEpoch[l] != e.epoch {
					idx = e.location(f, l)
				}
				e.children = append(e.children, idx)
			}
			e.stackLen[s.Stack] = int32(len(e.children)) - e.stackOff[s.Stack]
		}
		id := e.frames.stackID(f, s.Stack)
		off, size := e.stackOff[s.Stack], e.stackLen[s.Stack]
		end := row + n
		for r := row; r < end; r++ {
			rc.offsets[r] = off
			rc.sizes[r] = size
			*(*[16]byte)(rc.ids[r*16:]) = id
		}
		if n == 1 { // the usual case: no memmove call for one value
			rc.values[row] = s.Values[0]
			rc.times[row] = s.Timestamps[0]
		} else {
			copy(rc.values[row:end], s.Values)
			copy(rc.times[row:end], s.Timestamps)
		}
		row = end
		// Rows are grouped by sample type: the per-type columns get one
		// add per group, not per sample.
		if t := e.rowType[si]; t != curType {
			if pending > 0 {
				e.addTypeRun(e.cfg.Producer, &e.sampleType[curType], pending)
			}
			curType, pending = t, 0
		}
		pending += int32(n)
	}
	if pending > 0 {
		e.addTypeRun(e.cfg.Producer, &e.sampleType[curType], pending)
	}
	names, lcols := e.labelColumns(lo, hi)
	return e.record(names, lcols, rows, &rc)
}

// dict builds the dictionary array of d, whose ids are strings of e.cache.
func (e *V2Encoder) dict(d *idDict) arrow.Array {
	e.strs = d.strings(&e.cache, e.strs)
	return e.b.dictOf(d.rows, e.strs, false)
}

func (e *V2Encoder) record(names []string, lcols []*strRuns, rows int, rc *rowColumns) ([]byte, error) {
	b := e.b
	// Labels.
	lblFields := make([]arrow.Field, len(names))
	lblCols := make([]arrow.Array, len(names))
	for i, name := range names {
		lblFields[i] = arrow.Field{Name: name, Type: reeDictUTF8, Nullable: true}
		lblCols[i] = b.reeDict(lcols[i], false)
	}
	lblType := arrow.StructOf(lblFields...)
	labels := b.structOf(lblType, rows, lblCols...)

	// Functions, lines, locations, stacks.
	nfn := len(e.funcs.vals)
	b.view.Reserve(nfn)
	e.funcStart = grow(e.funcStart, nfn)[:nfn]
	for _, id := range e.funcs.vals {
		fn := e.cache.fns[id]
		if fn.name == 0 {
			b.view.AppendNull()
		} else {
			b.view.Append(e.cache.strs[fn.name])
		}
		e.funcFile.addString(fn.file, e.epoch)
	}
	sysName := b.own(b.view.NewArray())
	fns := b.structOf(v2FunctionType, nfn, sysName, e.dict(&e.funcFile), b.uint64s(e.funcStart))
	fnDict := b.own(newDict(v2FunctionDict, b.indices(e.funcs.rows), fns))
	lineStruct := b.structOf(v2LineType, len(e.line), b.uint64s(e.line), b.uint64s(e.column), fnDict)
	var valid []bool
	if e.lineNulls {
		valid = e.lineValid
	}
	lines := b.listView(v2LinesType, e.lineOff, e.lineSize, valid, lineStruct)
	locs := b.structOf(v2LocationType, len(e.address), b.uint64s(e.address),
		e.dict(&e.frameType), e.dict(&e.mapFile), e.dict(&e.buildID), lines)
	locDict := b.own(newDict(v2LocationDict, b.indices(e.children), locs))
	stacks := b.listViewOf(v2StackType, rows, rc.arrays[0], rc.arrays[1], locDict)

	// Stack ids.
	idCol := b.own(newExtension(v2UUID, rc.arrays[2]))

	fields := []arrow.Field{
		{Name: "labels", Type: lblType},
		{Name: "stacktrace", Type: v2StackType, Nullable: true},
		{Name: "stacktrace_id", Type: v2UUID},
		{Name: "value", Type: tInt64},
		{Name: "producer", Type: reeUTF8},
		{Name: "sample_type", Type: reeUTF8},
		{Name: "sample_unit", Type: reeUTF8},
		{Name: "period_type", Type: reeUTF8},
		{Name: "period_unit", Type: reeUTF8},
		{Name: "temporality", Type: reeUTF8, Nullable: true},
		{Name: "period", Type: reeInt64},
		{Name: "duration", Type: reeUint64},
		{Name: "timestamp", Type: v2Timestamp},
	}
	cols := []arrow.Array{
		labels, stacks, idCol, rc.arrays[3],
		b.reeString(&e.producer), b.reeString(&e.typeCol), b.reeString(&e.unit),
		b.reeString(&e.periodType), b.reeString(&e.periodUnit), b.reeString(&e.temp),
		reeNum(b, &e.period), reeNum(b, &e.duration), rc.arrays[4],
	}
	rec := newRecord(fields, SchemaV2, cols, rows)
	defer rec.Release()
	return e.write(rec, true)
}
