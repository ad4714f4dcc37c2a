package arrow

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tandem-profiler/tandem/encoder"
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

type funcKey struct{ name, file string }

// V2Encoder encodes flushes as Arrow v2 sample records, each a complete
// IPC stream (LZ4_FRAME body compression) for one WriteArrow request. It
// is not safe for concurrent use.
type V2Encoder struct {
	base

	// Per-request state.
	stackEpoch []uint32 // per stack id
	stackOff   []int32
	stackLen   []int32
	locEpoch   []uint32 // per location id
	locIdx     []int32
	epoch      uint32
	children   []int32 // location dictionary indices of all stacks

	address                      []uint64
	frameType, mapFile, buildID  strDict
	lineOff, lineSize            []int32
	lineValid                    []bool
	lineNulls                    bool
	line, column                 []uint64
	funcIdx                      []int32
	funcIDs                      map[funcKey]int32
	funcName                     []string
	funcNull                     []bool
	funcFile                     strDict
	funcStart                    []uint64
	offsets, sizes               []int32
	ids                          []byte
	values, times                []int64
	producer, typeCol, unit      strRuns
	periodType, periodUnit, temp strRuns
	period                       numRuns[int64]
	duration                     numRuns[uint64]
	labelCols                    []strRuns
}

// NewV2Encoder returns a v2 encoder. labeler nil means the default
// parca-agent label set; mem nil means the Go allocator.
func NewV2Encoder(cfg Config, labeler Labeler, mem memory.Allocator) (*V2Encoder, error) {
	b, err := newBase(cfg, false, labeler, mem)
	if err != nil {
		return nil, err
	}
	return &V2Encoder{base: b, funcIDs: make(map[funcKey]int32)}, nil
}

// Close releases the encoder's builders.
func (e *V2Encoder) Close() { e.b.close() }

// Encode returns the WriteArrow payloads (IPC streams) of f: one, or more
// when one would exceed Config.MaxMessageBytes. f is only read; it may be
// released once Encode returns. An empty flush gives no payload.
func (e *V2Encoder) Encode(f *encoder.Flush) ([][]byte, error) {
	e.prepare(f)
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

func (e *V2Encoder) nextEpoch(f *encoder.Flush) {
	e.epoch++
	if e.epoch == 0 {
		clear(e.stackEpoch)
		clear(e.locEpoch)
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
	e.frameType.reset()
	e.mapFile.reset()
	e.buildID.reset()
	e.lineOff, e.lineSize, e.lineValid = e.lineOff[:0], e.lineSize[:0], e.lineValid[:0]
	e.lineNulls = false
	e.line, e.column, e.funcIdx = e.line[:0], e.column[:0], e.funcIdx[:0]
	clear(e.funcIDs)
	e.funcName, e.funcNull, e.funcStart = e.funcName[:0], e.funcNull[:0], e.funcStart[:0]
	e.funcFile.reset()
	e.offsets, e.sizes, e.ids = e.offsets[:0], e.sizes[:0], e.ids[:0]
	e.values, e.times = e.values[:0], e.times[:0]
	for _, r := range []*strRuns{&e.producer, &e.typeCol, &e.unit, &e.periodType, &e.periodUnit, &e.temp} {
		r.reset()
	}
	e.period.reset()
	e.duration.reset()
}

// location returns the dictionary index of location id, adding it.
func (e *V2Encoder) location(f *encoder.Flush, id uint32) int32 {
	if e.locEpoch[id] == e.epoch {
		return e.locIdx[id]
	}
	e.locEpoch[id] = e.epoch
	idx := int32(len(e.address))
	e.locIdx[id] = idx
	l := e.frames.resolve(f, id)
	e.address = append(e.address, l.address)
	e.frameType.add(l.frameType, true)
	e.mapFile.add(l.mappingFile, true)
	e.buildID.add(l.buildID, true)
	if !l.hasLine {
		e.lineOff = append(e.lineOff, int32(len(e.line)))
		e.lineSize = append(e.lineSize, 0)
		e.lineValid = append(e.lineValid, false)
		e.lineNulls = true
		return idx
	}
	e.lineOff = append(e.lineOff, int32(len(e.line)))
	e.lineSize = append(e.lineSize, 1)
	e.lineValid = append(e.lineValid, true)
	e.line = append(e.line, l.line)
	e.column = append(e.column, l.column)
	k := funcKey{name: l.function, file: l.filename}
	fi, ok := e.funcIDs[k]
	if !ok {
		fi = int32(len(e.funcName))
		e.funcIDs[k] = fi
		e.funcName = append(e.funcName, l.function)
		e.funcNull = append(e.funcNull, l.function == "")
		e.funcFile.add(l.filename, true)
		e.funcStart = append(e.funcStart, 0)
	}
	e.funcIdx = append(e.funcIdx, fi)
	return idx
}

func (e *V2Encoder) encode(f *encoder.Flush, lo, hi int) ([]byte, error) {
	samples := e.order[lo:hi]
	e.nextEpoch(f)
	e.reset()
	defer e.b.releaseAll()
	rows := e.events(lo, hi)
	e.ids = grow(e.ids, rows*16)[:rows*16]
	row := 0
	for _, si := range samples {
		s := &f.Samples[si]
		n := int32(len(s.Timestamps))
		if e.stackEpoch[s.Stack] != e.epoch {
			e.stackEpoch[s.Stack] = e.epoch
			e.stackOff[s.Stack] = int32(len(e.children))
			for _, l := range f.Stack(s.Stack) {
				e.children = append(e.children, e.location(f, l))
			}
			e.stackLen[s.Stack] = int32(len(e.children)) - e.stackOff[s.Stack]
		}
		id := e.frames.stackID(f, s.Stack)
		off, size := e.stackOff[s.Stack], e.stackLen[s.Stack]
		for range n {
			e.offsets = append(e.offsets, off)
			e.sizes = append(e.sizes, size)
			copy(e.ids[row*16:], id[:])
			row++
		}
		e.values = append(e.values, s.Values...)
		e.times = append(e.times, s.Timestamps...)
		st := &e.sampleType[e.rowType[si]]
		e.producer.add(e.cfg.Producer, false, n)
		e.typeCol.add(st.Type, false, n)
		e.unit.add(st.Unit, false, n)
		e.periodType.add(st.PeriodType, false, n)
		e.periodUnit.add(st.PeriodUnit, false, n)
		e.temp.add(temporalityDelta, false, n)
		e.period.add(st.Period, n)
		e.duration.add(durationNanos, n)
	}
	names := e.labelNames(lo, hi)
	e.labelCols = grow(e.labelCols, len(names))
	e.labelColumns(lo, hi, names, e.labelCols)
	return e.record(names, rows)
}

func (e *V2Encoder) record(names []string, rows int) ([]byte, error) {
	b := e.b
	// Labels.
	lblFields := make([]arrow.Field, len(names))
	lblCols := make([]arrow.Array, len(names))
	for i, name := range names {
		lblFields[i] = arrow.Field{Name: name, Type: reeDictUTF8, Nullable: true}
		lblCols[i] = b.reeDict(&e.labelCols[i], false)
	}
	lblType := arrow.StructOf(lblFields...)
	labels := b.structOf(lblType, rows, lblCols...)

	// Functions, lines, locations, stacks.
	b.view.Reserve(len(e.funcName))
	for i, s := range e.funcName {
		if e.funcNull[i] {
			b.view.AppendNull()
		} else {
			b.view.Append(s)
		}
	}
	sysName := b.own(b.view.NewArray())
	fns := b.structOf(v2FunctionType, len(e.funcName), sysName, b.dict(&e.funcFile, false), b.uint64s(e.funcStart))
	fnDict := b.own(newDict(v2FunctionDict, b.indices(e.funcIdx), fns))
	lineStruct := b.structOf(v2LineType, len(e.line), b.uint64s(e.line), b.uint64s(e.column), fnDict)
	var valid []bool
	if e.lineNulls {
		valid = e.lineValid
	}
	lines := b.listView(v2LinesType, e.lineOff, e.lineSize, valid, lineStruct)
	locs := b.structOf(v2LocationType, len(e.address), b.uint64s(e.address),
		b.dict(&e.frameType, false), b.dict(&e.mapFile, false), b.dict(&e.buildID, false), lines)
	locDict := b.own(newDict(v2LocationDict, b.indices(e.children), locs))
	stacks := b.listView(v2StackType, e.offsets, e.sizes, nil, locDict)

	// Stack ids.
	ids := b.fixed16(e.ids, rows)
	idCol := b.own(newExtension(v2UUID, ids))

	b.i64.AppendValues(e.times, nil)
	tsInt := b.own(b.i64.NewArray())
	ts := b.fromData(retype(tsInt.Data(), v2Timestamp))

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
		labels, stacks, idCol, b.int64s(e.values),
		b.reeString(&e.producer), b.reeString(&e.typeCol), b.reeString(&e.unit),
		b.reeString(&e.periodType), b.reeString(&e.periodUnit), b.reeString(&e.temp),
		reeNum(b, &e.period), reeNum(b, &e.duration), ts,
	}
	rec := newRecord(fields, SchemaV2, cols, rows)
	defer rec.Release()
	return e.write(rec, true)
}
