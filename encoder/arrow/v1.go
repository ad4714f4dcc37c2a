package arrow

import (
	"bytes"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
)

// The v1 locations record (docs/parca-protocols.md §3.3).
var (
	v1LineType = arrow.StructOf(
		arrow.Field{Name: "line", Type: tInt64},
		arrow.Field{Name: "column", Type: tUint64},
		arrow.Field{Name: "function_name", Type: dictBinary},
		arrow.Field{Name: "function_system_name", Type: dictBinary},
		arrow.Field{Name: "function_filename", Type: reeDictBin, Nullable: true},
		arrow.Field{Name: "function_start_line", Type: tInt64},
	)
	v1LinesType    = arrow.ListOf(v1LineType)
	v1LocationType = arrow.StructOf(
		arrow.Field{Name: "address", Type: tUint64},
		arrow.Field{Name: "frame_type", Type: reeDictBin},
		arrow.Field{Name: "mapping_start", Type: reeUint64},
		arrow.Field{Name: "mapping_limit", Type: reeUint64},
		arrow.Field{Name: "mapping_offset", Type: reeUint64},
		arrow.Field{Name: "mapping_file", Type: reeDictBin},
		arrow.Field{Name: "mapping_build_id", Type: reeDictBin, Nullable: true},
		arrow.Field{Name: "lines", Type: v1LinesType, Nullable: true},
	)
	v1LocationsType   = arrow.ListOf(v1LocationType)
	v1LocationsFields = []arrow.Field{
		{Name: "stacktrace_id", Type: tBinary},
		{Name: "is_complete", Type: arrow.FixedWidthTypes.Boolean},
		{Name: "locations", Type: v1LocationsType},
	}
)

// V1Encoder encodes flushes as Arrow v1 Write exchanges. Encode is not
// safe for concurrent use; the exchanges it returns are independent of the
// encoder and of the Flush, and each may be used from another goroutine.
type V1Encoder struct {
	base

	stackEpoch []uint32 // per stack id
	stackSlot  []int32
	locEpoch   []uint32 // per location id
	locSlot    []int32
	epoch      uint32

	ids    strRuns
	values []int64
	times  numRuns[int64]
	typeColumns[int64]
}

// NewV1Encoder returns a v1 encoder. labeler nil means the default
// parca-agent label set; mem nil means the Go allocator. mem must be safe
// for concurrent use when exchanges are answered on other goroutines.
func NewV1Encoder(cfg Config, labeler Labeler, mem memory.Allocator) (*V1Encoder, error) {
	b, err := newBase(cfg, true, labeler, mem)
	if err != nil {
		return nil, err
	}
	return &V1Encoder{base: b}, nil
}

// Close releases the encoder's builders.
func (e *V1Encoder) Close() { e.b.close() }

// Exchange is one Write stream's worth of a flush: the sample record and
// what is needed to answer the server's request for locations. It
// implements export.WriteExchange.
type Exchange struct {
	samples []byte
	mem     memory.Allocator
	slots   map[string]int32 // stack id -> index into stacks
	stacks  []exchangeStack
	refs    []int32 // into locs: the frames of every stack, leaf first
	locs    []location
}

type exchangeStack struct {
	start, end int32 // into Exchange.refs
	complete   bool
}

// SampleRecord returns the v1 sample record (an IPC stream).
func (x *Exchange) SampleRecord() []byte { return x.samples }

// Encode returns the Write exchanges of f: one, or more when one sample
// record would exceed Config.MaxMessageBytes. f is only read; it may be
// released once Encode returns.
func (e *V1Encoder) Encode(f *aggregate.Flush) ([]*Exchange, error) {
	e.prepare(f)
	if len(e.order) == 0 {
		return nil, nil
	}
	return e.exchanges(f)
}

// exchanges encodes e.order in ranges that fit the size limit.
func (e *V1Encoder) exchanges(f *aggregate.Flush) ([]*Exchange, error) {
	var out []*Exchange
	var rec func(lo, hi int) error
	rec = func(lo, hi int) error {
		x, buf, err := e.encode(f, lo, hi)
		if err != nil {
			return err
		}
		if e.cfg.MaxMessageBytes == 0 || len(buf)+ipcOverhead <= e.cfg.MaxMessageBytes {
			x.samples = buf
			out = append(out, x)
			return nil
		}
		if hi-lo == 1 {
			return fmt.Errorf("%w: one sample takes %d bytes, limit %d", ErrTooLarge, len(buf), e.cfg.MaxMessageBytes)
		}
		h := lo + (hi-lo)/2
		if err := rec(lo, h); err != nil {
			return err
		}
		return rec(h, hi)
	}
	if err := rec(0, len(e.order)); err != nil {
		return nil, err
	}
	return out, nil
}

func (e *V1Encoder) nextEpoch(f *aggregate.Flush) {
	e.epoch++
	if e.epoch == 0 {
		clear(e.stackEpoch)
		clear(e.locEpoch)
		e.epoch = 1
	}
	e.stackEpoch = grow(e.stackEpoch, f.NumStacks())
	e.stackSlot = grow(e.stackSlot, f.NumStacks())
	e.locEpoch = grow(e.locEpoch, len(f.Locations))
	e.locSlot = grow(e.locSlot, len(f.Locations))
}

func (e *V1Encoder) encode(f *aggregate.Flush, lo, hi int) (*Exchange, []byte, error) {
	samples := e.order[lo:hi]
	e.nextEpoch(f)
	defer e.b.releaseAll()
	x := &Exchange{mem: e.mem, slots: make(map[string]int32)}
	e.ids.reset()
	e.typeColumns.reset()
	e.times.reset()
	e.values = e.values[:0]
	for _, si := range samples {
		s := &f.Samples[si]
		n := int32(len(s.Timestamps))
		id := e.frames.stackIDString(f, s.Stack)
		if e.stackEpoch[s.Stack] != e.epoch {
			e.stackEpoch[s.Stack] = e.epoch
			st := exchangeStack{start: int32(len(x.refs)), complete: true}
			for _, l := range f.Stack(s.Stack) {
				if e.locEpoch[l] != e.epoch {
					e.locEpoch[l] = e.epoch
					e.locSlot[l] = int32(len(x.locs))
					x.locs = append(x.locs, e.frames.resolve(f, l))
				}
				x.refs = append(x.refs, e.locSlot[l])
				st.complete = st.complete && x.locs[e.locSlot[l]].complete
			}
			st.end = int32(len(x.refs))
			x.slots[id] = int32(len(x.stacks))
			x.stacks = append(x.stacks, st)
		}
		e.ids.add(id, false, n)
		e.values = append(e.values, s.Values...)
		for _, ts := range s.Timestamps {
			e.times.add(ts, 1)
		}
		e.addTypeRun(e.cfg.Producer, &e.sampleType[e.rowType[si]], n)
	}
	names, lcols := e.labelColumns(lo, hi)

	b := e.b
	rows := int(e.times.rows)
	fields := make([]arrow.Field, 0, len(names)+11)
	cols := make([]arrow.Array, 0, len(names)+11)
	for i, name := range names {
		fields = append(fields, arrow.Field{Name: ColumnLabelsPrefix + name, Type: reeDictBin, Nullable: true})
		cols = append(cols, b.reeDict(lcols[i], true))
	}
	fields = append(fields,
		arrow.Field{Name: "stacktrace_id", Type: reeDictBin},
		arrow.Field{Name: "value", Type: tInt64},
		arrow.Field{Name: "producer", Type: reeDictBin},
		arrow.Field{Name: "sample_type", Type: reeDictBin},
		arrow.Field{Name: "sample_unit", Type: reeDictBin},
		arrow.Field{Name: "period_type", Type: reeDictBin},
		arrow.Field{Name: "period_unit", Type: reeDictBin},
		arrow.Field{Name: "temporality", Type: reeDictBin},
		arrow.Field{Name: "period", Type: reeInt64},
		arrow.Field{Name: "duration", Type: reeInt64},
		arrow.Field{Name: "timestamp", Type: reeInt64},
	)
	cols = append(cols,
		b.reeDict(&e.ids, true), b.int64s(e.values),
		b.reeDict(&e.producer, true), b.reeDict(&e.typeCol, true), b.reeDict(&e.unit, true),
		b.reeDict(&e.periodType, true), b.reeDict(&e.periodUnit, true), b.reeDict(&e.temp, true),
		reeNum(b, &e.period), reeNum(b, &e.duration), reeNum(b, &e.times),
	)
	rec := newRecord(fields, SchemaV1, cols, rows)
	defer rec.Release()
	buf, err := e.write(rec, false)
	if err != nil {
		return nil, nil, err
	}
	return x, buf, nil
}

// LocationsFor decodes the server's response record (an IPC stream with a
// Binary stacktrace_id column) and returns the v1 locations record for
// exactly those ids, in that order. An id this exchange did not send is an
// error.
func (x *Exchange) LocationsFor(response []byte) ([]byte, error) {
	r, err := ipc.NewReader(bytes.NewReader(response), ipc.WithAllocator(x.mem))
	if err != nil {
		return nil, fmt.Errorf("read stacktrace id request: %w", err)
	}
	defer r.Release()
	var want []int32
	var ids []string
	for r.Next() {
		rec := r.RecordBatch()
		idx := rec.Schema().FieldIndices("stacktrace_id")
		if len(idx) != 1 {
			return nil, fmt.Errorf("stacktrace id request has no stacktrace_id column")
		}
		col, ok := rec.Column(idx[0]).(*array.Binary)
		if !ok {
			return nil, fmt.Errorf("stacktrace id request: stacktrace_id is %s, want binary", rec.Column(idx[0]).DataType())
		}
		for i := range col.Len() {
			id := col.ValueString(i)
			slot, ok := x.slots[id]
			if !ok {
				return nil, fmt.Errorf("server asked for stacktrace id %x, which was not sent", id)
			}
			want = append(want, slot)
			ids = append(ids, id)
		}
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("read stacktrace id request: %w", err)
	}
	return x.locations(ids, want)
}

func (x *Exchange) locations(ids []string, stacks []int32) ([]byte, error) {
	b := newBuilder(x.mem)
	defer b.close()
	var (
		complete                    []bool
		stackOff                    = []int32{0}
		stackValid                  []bool
		address                     []uint64
		frameType, mapFile, buildID strRuns
		zero                        numRuns[uint64]
		lineOff                     = []int32{0}
		lineValid                   []bool
		line, startLine             []int64
		column                      []uint64
		fnName, sysName             strDict
		filename                    strRuns
		nLocs, nLines               int32
	)
	for _, r := range []*strRuns{&frameType, &mapFile, &buildID, &filename} {
		r.reset()
	}
	fnName.reset()
	sysName.reset()
	for _, si := range stacks {
		st := &x.stacks[si]
		complete = append(complete, st.complete)
		stackValid = append(stackValid, st.end > st.start)
		for _, li := range x.refs[st.start:st.end] {
			l := &x.locs[li]
			address = append(address, l.address)
			frameType.add(l.frameType, false, 1)
			mapFile.add(l.mappingFile, false, 1) // "" rather than null: the server reads it unchecked
			buildID.add(l.buildID, true, 1)
			nLocs++
			if l.hasLine {
				line = append(line, int64(l.line))
				column = append(column, l.column)
				fnName.add(l.function, false)
				sysName.add("", false)
				filename.add(l.filename, true, 1)
				startLine = append(startLine, 0)
				nLines++
			}
			lineOff = append(lineOff, nLines)
			lineValid = append(lineValid, l.hasLine)
		}
		stackOff = append(stackOff, nLocs)
	}
	if nLocs > 0 {
		zero.add(0, nLocs)
	}
	lines := b.structOf(v1LineType, int(nLines), b.int64s(line), b.uint64s(column),
		b.dict(&fnName, true), b.dict(&sysName, true), b.reeDict(&filename, true), b.int64s(startLine))
	zeros := func() arrow.Array { return reeNum(b, &zero) }
	locs := b.structOf(v1LocationType, int(nLocs), b.uint64s(address), b.reeDict(&frameType, true),
		zeros(), zeros(), zeros(), b.reeDict(&mapFile, true), b.reeDict(&buildID, true),
		b.list(v1LinesType, lineOff, lineValid, lines))
	locations := b.list(v1LocationsType, stackOff, stackValid, locs)
	idCol := b.binaries(ids)
	b.bools.AppendValues(complete, nil)
	completeCol := b.own(b.bools.NewArray())
	rec := newRecord(v1LocationsFields, SchemaV1, []arrow.Array{idCol, completeCol, locations}, len(ids))
	defer rec.Release()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(rec.Schema()), ipc.WithAllocator(x.mem))
	if err := w.Write(rec); err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("write locations record: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("close locations record: %w", err)
	}
	return buf.Bytes(), nil
}
