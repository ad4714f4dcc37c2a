package arrow

import (
	"reflect"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
)

// uuidType is the canonical arrow.uuid extension (FixedSizeBinary(16),
// empty extension metadata). It is Tandem's own minimal definition so the
// encoder does not link arrow-go's extensions package (and its Parquet
// dependencies); on the wire it is the same field metadata, and a reader
// that registered arrow-go's extensions (as the Parca server does) decodes
// it as its UUIDType.
type uuidType struct{ arrow.ExtensionBase }

func newUUIDType() *uuidType {
	return &uuidType{ExtensionBase: arrow.ExtensionBase{Storage: &arrow.FixedSizeBinaryType{ByteWidth: 16}}}
}

func (*uuidType) ArrayType() reflect.Type { return reflect.TypeOf(uuidArray{}) }
func (*uuidType) ExtensionName() string   { return "arrow.uuid" }
func (*uuidType) Serialize() string       { return "" }
func (*uuidType) Deserialize(storage arrow.DataType, _ string) (arrow.ExtensionType, error) {
	return newUUIDType(), nil
}
func (t *uuidType) ExtensionEquals(o arrow.ExtensionType) bool {
	return o.ExtensionName() == t.ExtensionName()
}

type uuidArray struct{ array.ExtensionArrayBase }

// Types shared by both schemas.
var (
	tUTF8       = arrow.BinaryTypes.String
	tBinary     = arrow.BinaryTypes.Binary
	tInt32      = arrow.PrimitiveTypes.Int32
	tUint32     = arrow.PrimitiveTypes.Uint32
	tInt64      = arrow.PrimitiveTypes.Int64
	tUint64     = arrow.PrimitiveTypes.Uint64
	tFixed16    = &arrow.FixedSizeBinaryType{ByteWidth: 16}
	dictUTF8    = &arrow.DictionaryType{IndexType: tUint32, ValueType: tUTF8}
	dictBinary  = &arrow.DictionaryType{IndexType: tUint32, ValueType: tBinary}
	reeUTF8     = arrow.RunEndEncodedOf(tInt32, tUTF8)
	reeDictUTF8 = arrow.RunEndEncodedOf(tInt32, dictUTF8)
	reeDictBin  = arrow.RunEndEncodedOf(tInt32, dictBinary)
	reeInt64    = arrow.RunEndEncodedOf(tInt32, tInt64)
	reeUint64   = arrow.RunEndEncodedOf(tInt32, tUint64)
)

// strDict accumulates a dictionary-encoded string column (one index per
// row, -1 = null) with content-keyed de-duplication. Label values are
// mostly shared strings (the Flush's, the labeler's caches), so a small
// direct-mapped cache keyed by the string's address and length is tried
// before hashing its content: the same address and length are the same
// string.
type strDict struct {
	idx   []int32
	dict  []string
	ids   map[string]int32
	cache *[ptrCacheSize]ptrEntry
}

const (
	ptrCacheBits = 10
	ptrCacheSize = 1 << ptrCacheBits
)

type ptrEntry struct {
	p    uintptr
	n, i int32
}

func (d *strDict) reset() {
	d.idx = d.idx[:0]
	clear(d.dict) // drop references
	d.dict = d.dict[:0]
	if d.ids == nil {
		d.ids = make(map[string]int32)
		d.cache = new([ptrCacheSize]ptrEntry)
	}
	clear(d.ids)
	clear(d.cache[:])
}

func (d *strDict) id(s string) int32 {
	p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
	// Multiplicative hashing keeps the low address bits: small strings
	// often sit a byte or two apart (strconv's table of small numbers).
	slot := &d.cache[(uint64(p)*0x9e3779b97f4a7c15)>>(64-ptrCacheBits)]
	if slot.p == p && p != 0 && int(slot.n) == len(s) {
		return slot.i
	}
	i, ok := d.ids[s]
	if !ok {
		i = int32(len(d.dict))
		d.dict = append(d.dict, s)
		d.ids[s] = i
	}
	slot.p, slot.n, slot.i = p, int32(len(s)), i
	return i
}

// add appends a row; "" is null when nullEmpty.
func (d *strDict) add(s string, nullEmpty bool) {
	if s == "" && nullEmpty {
		d.idx = append(d.idx, -1)
		return
	}
	d.idx = append(d.idx, d.id(s))
}

// strRuns accumulates a run-end encoded string column; values are
// dictionary indices as in strDict (-1 = null).
type strRuns struct {
	strDict
	ends []int32
	rows int32
	last string // the last run's value ("" when null)
	// lastP and lastN are last's address and length; lastN is -1 when
	// there is no run.
	lastP *byte
	lastN int
}

func (r *strRuns) reset() {
	r.strDict.reset()
	r.ends = r.ends[:0]
	r.rows = 0
	r.last, r.lastP, r.lastN = "", nil, -1
}

// sameString reports whether a and b are equal, testing their addresses
// before their bytes.
func sameString(a, b string) bool {
	return len(a) == len(b) && (unsafe.StringData(a) == unsafe.StringData(b) || a == b)
}

// add appends n rows of s ("" = null when nullEmpty). A column passes the
// same nullEmpty on every call.
func (r *strRuns) add(s string, nullEmpty bool, n int32) {
	if !r.extend(s, n) {
		r.rows += n
		r.addSlow(s, nullEmpty)
	}
}

// extend adds n rows to the last run when s is its very string (same
// address and length), the usual case; it inlines.
func (r *strRuns) extend(s string, n int32) bool {
	if len(s) != r.lastN || unsafe.StringData(s) != r.lastP {
		return false
	}
	r.rows += n
	r.ends[len(r.ends)-1] = r.rows
	return true
}

// addSlow ends add: the last run's value by content, else a new run
// (r.rows already counts it).
func (r *strRuns) addSlow(s string, nullEmpty bool) {
	k := len(r.ends)
	if k > 0 && s == r.last {
		// Extend the last run without a dictionary lookup.
		r.ends[k-1] = r.rows
		return
	}
	v := int32(-1)
	if s != "" || !nullEmpty {
		v = r.id(s)
	}
	r.last, r.lastP, r.lastN = s, unsafe.StringData(s), len(s)
	r.idx = append(r.idx, v)
	r.ends = append(r.ends, r.rows)
}

// numRuns accumulates a run-end encoded 64-bit column.
type numRuns[T int64 | uint64] struct {
	vals []T
	ends []int32
	rows int32
}

func (r *numRuns[T]) reset() {
	r.vals = r.vals[:0]
	r.ends = r.ends[:0]
	r.rows = 0
}

func (r *numRuns[T]) add(v T, n int32) {
	r.rows += n
	if k := len(r.ends); k > 0 && r.vals[k-1] == v {
		r.ends[k-1] = r.rows
		return
	}
	r.vals = append(r.vals, v)
	r.ends = append(r.ends, r.rows)
}

// builder builds arrays with one allocator and remembers everything it
// made, so a whole record is released at once.
type builder struct {
	mem   memory.Allocator
	owned []arrow.Array
	data  []arrow.ArrayData
	bufs  []*memory.Buffer

	i32   *array.Int32Builder
	i64   *array.Int64Builder
	u64   *array.Uint64Builder
	str   *array.StringBuilder
	bin   *array.BinaryBuilder
	view  *array.StringViewBuilder
	bools *array.BooleanBuilder
}

func newBuilder(mem memory.Allocator) *builder {
	return &builder{
		mem:   mem,
		i32:   array.NewInt32Builder(mem),
		i64:   array.NewInt64Builder(mem),
		u64:   array.NewUint64Builder(mem),
		str:   array.NewStringBuilder(mem),
		bin:   array.NewBinaryBuilder(mem, tBinary),
		view:  array.NewStringViewBuilder(mem),
		bools: array.NewBooleanBuilder(mem),
	}
}

// releaseAll releases every array the builder made since the last call.
func (b *builder) releaseAll() {
	for _, a := range b.owned {
		a.Release()
	}
	for _, d := range b.data {
		d.Release()
	}
	for _, buf := range b.bufs {
		buf.Release()
	}
	clear(b.owned)
	clear(b.data)
	clear(b.bufs)
	b.owned = b.owned[:0]
	b.data = b.data[:0]
	b.bufs = b.bufs[:0]
}

// close releases the builders themselves.
func (b *builder) close() {
	b.releaseAll()
	b.i32.Release()
	b.i64.Release()
	b.u64.Release()
	b.str.Release()
	b.bin.Release()
	b.view.Release()
	b.bools.Release()
}

func (b *builder) own(a arrow.Array) arrow.Array {
	b.owned = append(b.owned, a)
	return a
}

func (b *builder) int32s(v []int32) arrow.Array {
	b.i32.AppendValues(v, nil)
	return b.own(b.i32.NewArray())
}

func (b *builder) int64s(v []int64) arrow.Array {
	b.i64.AppendValues(v, nil)
	return b.own(b.i64.NewArray())
}

func (b *builder) uint64s(v []uint64) arrow.Array {
	b.u64.AppendValues(v, nil)
	return b.own(b.u64.NewArray())
}

// indices builds Uint32 dictionary indices; -1 is null (index 0).
func (b *builder) indices(idx []int32) arrow.Array {
	n := len(idx)
	a, raw := b.fixedWidth(tUint32, n, 4)
	vals := arrow.Uint32Traits.CastFromBytes(raw)
	nulls := 0
	for i, x := range idx {
		if x < 0 {
			nulls++ // the value stays 0
		} else {
			vals[i] = uint32(x)
		}
	}
	if nulls == 0 {
		return a
	}
	bitmap := b.buffer(bitmapLen(n))
	bm := bitmap.Bytes()
	for i, x := range idx {
		if x >= 0 {
			bitutil.SetBit(bm, i)
		}
	}
	return b.fromData(array.NewData(tUint32, n, []*memory.Buffer{bitmap, a.Data().Buffers()[1]}, nil, nulls, 0))
}

// bitmapLen is the length of the validity bitmap of n values that an
// Arrow builder would have made (a power of two of bits) once the IPC
// writer truncated it to 64-byte padding: the same bytes on the wire as
// before the indices were written by hand.
func bitmapLen(n int) int {
	const minBuilderCapacity = 32 // arrow-go's
	return min(bitutil.CeilByte(max(bitutil.NextPowerOf2(n), minBuilderCapacity))/8, int(bitutil.BytesForBits(int64(n))+63)&^63)
}

func (b *builder) strings(v []string) arrow.Array {
	b.str.AppendValues(v, nil)
	return b.own(b.str.NewArray())
}

func (b *builder) binaries(v []string) arrow.Array {
	b.bin.Reserve(len(v))
	for _, s := range v {
		b.bin.AppendString(s)
	}
	return b.own(b.bin.NewArray())
}

// dict builds a dictionary array of d's rows (Utf8 or Binary values).
func (b *builder) dict(d *strDict, binary bool) arrow.Array {
	return b.dictOf(d.idx, d.dict, binary)
}

func (b *builder) dictOf(idx []int32, dict []string, binary bool) arrow.Array {
	ind := b.indices(idx)
	if binary {
		return b.own(array.NewDictionaryArray(dictBinary, ind, b.binaries(dict)))
	}
	return b.own(array.NewDictionaryArray(dictUTF8, ind, b.strings(dict)))
}

// runs builds REE<Int32, values>.
func (b *builder) runs(ends []int32, values arrow.Array, rows int32) arrow.Array {
	return b.own(array.NewRunEndEncodedArray(b.int32s(ends), values, int(rows), 0))
}

// reeDict builds REE<Int32, Dictionary<Uint32, Utf8|Binary>>.
func (b *builder) reeDict(r *strRuns, binary bool) arrow.Array {
	return b.runs(r.ends, b.dictOf(r.idx, r.dict, binary), r.rows)
}

// reeString builds REE<Int32, Utf8>.
func (b *builder) reeString(r *strRuns) arrow.Array {
	b.str.Reserve(len(r.idx))
	for _, i := range r.idx {
		if i < 0 {
			b.str.AppendNull()
		} else {
			b.str.Append(r.dict[i])
		}
	}
	return b.runs(r.ends, b.own(b.str.NewArray()), r.rows)
}

func reeNum[T int64 | uint64](b *builder, r *numRuns[T]) arrow.Array {
	var vals arrow.Array
	switch v := any(r.vals).(type) {
	case []int64:
		vals = b.int64s(v)
	case []uint64:
		vals = b.uint64s(v)
	}
	return b.runs(r.ends, vals, r.rows)
}

// fromData wraps data built by hand.
func (b *builder) fromData(d arrow.ArrayData) arrow.Array {
	b.data = append(b.data, d)
	return b.own(array.MakeFromData(d))
}

// validity returns the validity bitmap of valid and its null count, or no
// bitmap when valid is nil (every row valid).
func (b *builder) validity(valid []bool) (*memory.Buffer, int) {
	if valid == nil {
		return nil, 0
	}
	b.bools.AppendValues(valid, nil)
	bm := b.own(b.bools.NewArray())
	nulls := 0
	for _, v := range valid {
		if !v {
			nulls++
		}
	}
	return bm.Data().Buffers()[1], nulls
}

// listView builds a ListView of child from offsets and sizes, with a
// validity bitmap only when valid is not nil.
func (b *builder) listView(t arrow.DataType, offsets, sizes []int32, valid []bool, child arrow.Array) arrow.Array {
	off := b.int32s(offsets)
	sz := b.int32s(sizes)
	bitmap, nulls := b.validity(valid)
	return b.fromData(array.NewData(t, len(offsets),
		[]*memory.Buffer{bitmap, off.Data().Buffers()[1], sz.Data().Buffers()[1]},
		[]arrow.ArrayData{child.Data()}, nulls, 0))
}

// list builds a List of child from offsets (len rows+1).
func (b *builder) list(t arrow.DataType, offsets []int32, valid []bool, child arrow.Array) arrow.Array {
	off := b.int32s(offsets)
	bitmap, nulls := b.validity(valid)
	return b.fromData(array.NewData(t, len(offsets)-1,
		[]*memory.Buffer{bitmap, off.Data().Buffers()[1]},
		[]arrow.ArrayData{child.Data()}, nulls, 0))
}

// structOf builds a non-null struct of rows rows.
func (b *builder) structOf(t *arrow.StructType, rows int, cols ...arrow.Array) arrow.Array {
	children := make([]arrow.ArrayData, len(cols))
	for i, c := range cols {
		children[i] = c.Data()
	}
	return b.fromData(array.NewData(t, rows, []*memory.Buffer{nil}, children, 0, 0))
}

// buffer returns a zeroed buffer of n bytes from the builder's allocator,
// released with the builder's arrays.
func (b *builder) buffer(n int) *memory.Buffer {
	buf := memory.NewResizableBuffer(b.mem)
	buf.Resize(n)
	b.bufs = append(b.bufs, buf)
	return buf
}

// fixedWidth returns an array of rows values of type t (no nulls) backed
// by a new buffer of rows*width bytes, for the caller to fill.
func (b *builder) fixedWidth(t arrow.DataType, rows, width int) (arrow.Array, []byte) {
	buf := b.buffer(rows * width)
	return b.fromData(array.NewData(t, rows, []*memory.Buffer{nil, buf}, nil, 0, 0)), buf.Bytes()
}

// int32Buffer returns an Int32 array of rows values and its values, for
// the caller to fill before the array is used.
func (b *builder) int32Buffer(rows int) (arrow.Array, []int32) {
	a, raw := b.fixedWidth(tInt32, rows, 4)
	return a, arrow.Int32Traits.CastFromBytes(raw)
}

// int64Buffer returns an array of type t (Int64 layout) of rows values
// and its values, for the caller to fill before the array is used.
func (b *builder) int64Buffer(t arrow.DataType, rows int) (arrow.Array, []int64) {
	a, raw := b.fixedWidth(t, rows, 8)
	return a, arrow.Int64Traits.CastFromBytes(raw)
}

// fixed16Buffer returns a FixedSizeBinary(16) array of rows values and
// its bytes, for the caller to fill before the array is used.
func (b *builder) fixed16Buffer(rows int) (arrow.Array, []byte) {
	return b.fixedWidth(tFixed16, rows, 16)
}

// listViewOf builds a ListView (no nulls) of child from Int32 offsets and
// sizes arrays.
func (b *builder) listViewOf(t arrow.DataType, rows int, offsets, sizes, child arrow.Array) arrow.Array {
	return b.fromData(array.NewData(t, rows,
		[]*memory.Buffer{nil, offsets.Data().Buffers()[1], sizes.Data().Buffers()[1]},
		[]arrow.ArrayData{child.Data()}, 0, 0))
}

func newDict(t *arrow.DictionaryType, indices, dict arrow.Array) arrow.Array {
	return array.NewDictionaryArray(t, indices, dict)
}

func newExtension(t arrow.ExtensionType, storage arrow.Array) arrow.Array {
	return array.NewExtensionArrayWithStorage(t, storage)
}

// typeColumns are the run-length columns that repeat each row's sample
// type, the same in both schemas except for duration's type (v1 Int64,
// v2 Uint64).
type typeColumns[D int64 | uint64] struct {
	producer, typeCol, unit      strRuns
	periodType, periodUnit, temp strRuns
	period                       numRuns[int64]
	duration                     numRuns[D]
}

// addTypeRun appends n rows of sample type st from producer.
func (c *typeColumns[D]) addTypeRun(producer string, st *aggregate.SampleType, n int32) {
	c.producer.add(producer, false, n)
	c.typeCol.add(st.Type, false, n)
	c.unit.add(st.Unit, false, n)
	c.periodType.add(st.PeriodType, false, n)
	c.periodUnit.add(st.PeriodUnit, false, n)
	c.temp.add(temporalityDelta, false, n)
	c.period.add(st.Period, n)
	c.duration.add(durationNanos, n)
}

func (c *typeColumns[D]) reset() {
	for _, r := range []*strRuns{&c.producer, &c.typeCol, &c.unit, &c.periodType, &c.periodUnit, &c.temp} {
		r.reset()
	}
	c.period.reset()
	c.duration.reset()
}
