package parcatest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	_ "github.com/apache/arrow-go/v18/arrow/extensions" // canonical extensions, as the server links them
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// ErrInvalid marks what the real server rejects with InvalidArgument.
var ErrInvalid = errors.New("invalid argument")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// Location is one decoded frame.
type Location struct {
	Address     uint64
	FrameType   string // "" = null
	MappingFile string
	BuildID     string
	HasLines    bool
	Line        int64
	Column      uint64
	Function    string // v1 function_name, v2 system_name
	SystemName  string // v1 function_system_name
	Filename    string
}

func (l Location) String() string {
	return fmt.Sprintf("%s|%#x|%s|%s|%t|%d|%d|%s|%s|%s", l.FrameType, l.Address, l.MappingFile, l.BuildID,
		l.HasLines, l.Line, l.Column, l.Function, l.SystemName, l.Filename)
}

// Row is one decoded sample row.
type Row struct {
	Labels      string // sorted name=value joined by ","
	StackID     [16]byte
	Stack       string // Location strings joined by "\n", leaf first
	Value       int64
	Producer    string
	Type        string // sample_type/sample_unit period_type/period_unit period
	Temporality string
	Duration    int64
	Timestamp   int64
}

// Key renders everything but the stack id.
func (r Row) Key() string {
	return fmt.Sprintf("ts=%d value=%d producer=%s type=%s temporality=%s duration=%d labels=%s stack=\n%s",
		r.Timestamp, r.Value, r.Producer, r.Type, r.Temporality, r.Duration, r.Labels, r.Stack)
}

// Expected types, written from docs/parca-protocols.md §3 independently
// of encoder/arrow.
var (
	u32       = arrow.PrimitiveTypes.Uint32
	i32       = arrow.PrimitiveTypes.Int32
	dUTF8     = &arrow.DictionaryType{IndexType: u32, ValueType: arrow.BinaryTypes.String}
	dBin      = &arrow.DictionaryType{IndexType: u32, ValueType: arrow.BinaryTypes.Binary}
	rUTF8     = arrow.RunEndEncodedOf(i32, arrow.BinaryTypes.String)
	rDUTF8    = arrow.RunEndEncodedOf(i32, dUTF8)
	rDBin     = arrow.RunEndEncodedOf(i32, dBin)
	rI64      = arrow.RunEndEncodedOf(i32, arrow.PrimitiveTypes.Int64)
	rU64      = arrow.RunEndEncodedOf(i32, arrow.PrimitiveTypes.Uint64)
	v2Func    = arrow.StructOf(arrow.Field{Name: "system_name", Type: arrow.BinaryTypes.StringView, Nullable: true}, arrow.Field{Name: "filename", Type: dUTF8, Nullable: true}, arrow.Field{Name: "start_line", Type: arrow.PrimitiveTypes.Uint64})
	v2Line    = arrow.StructOf(arrow.Field{Name: "line", Type: arrow.PrimitiveTypes.Uint64}, arrow.Field{Name: "column", Type: arrow.PrimitiveTypes.Uint64}, arrow.Field{Name: "function", Type: &arrow.DictionaryType{IndexType: u32, ValueType: v2Func}})
	v2Loc     = arrow.StructOf(arrow.Field{Name: "address", Type: arrow.PrimitiveTypes.Uint64}, arrow.Field{Name: "frame_type", Type: dUTF8, Nullable: true}, arrow.Field{Name: "mapping_file", Type: dUTF8, Nullable: true}, arrow.Field{Name: "mapping_build_id", Type: dUTF8, Nullable: true}, arrow.Field{Name: "lines", Type: arrow.ListViewOf(v2Line), Nullable: true})
	v2Stack   = arrow.ListViewOf(&arrow.DictionaryType{IndexType: u32, ValueType: v2Loc})
	v2Columns = []struct {
		name string
		typ  arrow.DataType
	}{
		{"labels", nil}, {"stacktrace", v2Stack}, {"stacktrace_id", nil}, {"value", arrow.PrimitiveTypes.Int64},
		{"producer", rUTF8}, {"sample_type", rUTF8}, {"sample_unit", rUTF8}, {"period_type", rUTF8},
		{"period_unit", rUTF8}, {"temporality", rUTF8}, {"period", rI64}, {"duration", rU64},
		{"timestamp", &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}},
	}
	v1Fixed = []struct {
		name string
		typ  arrow.DataType
	}{
		{"stacktrace_id", rDBin}, {"value", arrow.PrimitiveTypes.Int64}, {"producer", rDBin},
		{"sample_type", rDBin}, {"sample_unit", rDBin}, {"period_type", rDBin}, {"period_unit", rDBin},
		{"temporality", rDBin}, {"period", rI64}, {"duration", rI64}, {"timestamp", rI64},
	}
	v1Line = arrow.StructOf(
		arrow.Field{Name: "line", Type: arrow.PrimitiveTypes.Int64},
		arrow.Field{Name: "column", Type: arrow.PrimitiveTypes.Uint64},
		arrow.Field{Name: "function_name", Type: dBin},
		arrow.Field{Name: "function_system_name", Type: dBin},
		arrow.Field{Name: "function_filename", Type: rDBin, Nullable: true},
		arrow.Field{Name: "function_start_line", Type: arrow.PrimitiveTypes.Int64},
	)
	v1Loc = arrow.StructOf(
		arrow.Field{Name: "address", Type: arrow.PrimitiveTypes.Uint64},
		arrow.Field{Name: "frame_type", Type: rDBin},
		arrow.Field{Name: "mapping_start", Type: rU64},
		arrow.Field{Name: "mapping_limit", Type: rU64},
		arrow.Field{Name: "mapping_offset", Type: rU64},
		arrow.Field{Name: "mapping_file", Type: rDBin},
		arrow.Field{Name: "mapping_build_id", Type: rDBin, Nullable: true},
		arrow.Field{Name: "lines", Type: arrow.ListOf(v1Line), Nullable: true},
	)
	v1Locations = arrow.ListOf(v1Loc)
)

// records is a decoded IPC stream: its schema, its record batches and the
// parca_write_schema_version of its metadata.
type records struct {
	schema  *arrow.Schema
	batches []arrow.RecordBatch
	version string
}

func (r *records) release() {
	for _, b := range r.batches {
		b.Release()
	}
}

// readRecords reads the IPC stream in buf; the caller releases the result.
// The schema version is checked unless the stream has none and
// allowUnversioned is set.
func readRecords(buf []byte, mem memory.Allocator, allowUnversioned bool) (*records, error) {
	r, err := ipc.NewReader(bytes.NewReader(buf), ipc.WithAllocator(mem))
	if err != nil {
		return nil, invalid("open IPC stream: %v", err)
	}
	defer r.Release()
	out := &records{schema: r.Schema()}
	for r.Next() {
		rec := r.RecordBatch()
		rec.Retain()
		out.batches = append(out.batches, rec)
	}
	if err := r.Err(); err != nil {
		out.release()
		return nil, invalid("read IPC stream: %v", err)
	}
	if _, ok := out.schema.Metadata().GetValue("parca_write_schema_version"); ok || !allowUnversioned {
		if out.version, err = schemaVersion(out.schema); err != nil {
			out.release()
			return nil, err
		}
	}
	return out, nil
}

func schemaVersion(s *arrow.Schema) (string, error) {
	v, ok := s.Metadata().GetValue("parca_write_schema_version")
	if !ok {
		return "", invalid("missing schema version in metadata")
	}
	if v != "v1" && v != "v2" {
		return "", invalid("unsupported schema version %q", v)
	}
	return v, nil
}

func hasField(s *arrow.Schema, name string) bool { return len(s.FieldIndices(name)) > 0 }

func column(rec arrow.RecordBatch, name string) arrow.Array {
	idx := rec.Schema().FieldIndices(name)
	if len(idx) == 0 {
		return nil
	}
	return rec.Column(idx[0])
}

// reeString returns the value of row i of a REE<Int32, Utf8|Dict<Uint32, Utf8|Binary>>; null or "" is "".
func reeString(a arrow.Array, i int) string {
	ree := a.(*array.RunEndEncoded)
	p := ree.GetPhysicalIndex(i)
	return valueString(ree.Values(), p)
}

func valueString(v arrow.Array, p int) string {
	if v.IsNull(p) {
		return ""
	}
	switch v := v.(type) {
	case *array.String:
		return v.Value(p)
	case *array.Binary:
		return string(v.Value(p))
	case *array.StringView:
		return v.Value(p)
	case *array.Dictionary:
		return valueString(v.Dictionary(), v.GetValueIndex(p))
	}
	panic(fmt.Sprintf("unexpected array %T", v))
}

func reeInt(a arrow.Array, i int) int64 {
	ree := a.(*array.RunEndEncoded)
	p := ree.GetPhysicalIndex(i)
	switch v := ree.Values().(type) {
	case *array.Int64:
		return v.Value(p)
	case *array.Uint64:
		return int64(v.Value(p))
	}
	panic(fmt.Sprintf("unexpected REE values %T", ree.Values()))
}

func labelString(kvs []string) string {
	slices.Sort(kvs)
	return strings.Join(kvs, ",")
}

// DecodeV2 decodes a WriteArrow payload as the server does, enforcing the
// v2 sample schema exactly.
func DecodeV2(buf []byte, mem memory.Allocator) ([]Row, error) {
	rs, err := readRecords(buf, mem, true)
	if err != nil {
		return nil, err
	}
	defer rs.release()
	if !hasField(rs.schema, "value") {
		return nil, invalid("record is neither a sample record (value) nor a locations record")
	}
	if rs.version == "" {
		// The server checks the columns before the version.
		return nil, invalid("missing schema version in metadata")
	}
	if rs.version != "v2" {
		return nil, invalid("missing column locations: a %s sample record cannot be written alone", rs.version)
	}
	if err := checkV2Schema(rs.schema); err != nil {
		return nil, err
	}
	var rows []Row
	for _, rec := range rs.batches {
		rows = append(rows, decodeV2Record(rec)...)
	}
	return rows, nil
}

func checkV2Schema(s *arrow.Schema) error {
	if s.NumFields() != len(v2Columns) {
		return invalid("v2 sample record has %d fields, want %d", s.NumFields(), len(v2Columns))
	}
	for i, c := range v2Columns {
		f := s.Field(i)
		if f.Name != c.name {
			return invalid("field %d is %q, want %q", i, f.Name, c.name)
		}
		switch c.name {
		case "labels":
			st, ok := f.Type.(*arrow.StructType)
			if !ok {
				return invalid("labels is %s, want a struct", f.Type)
			}
			names := []string{}
			for _, lf := range st.Fields() {
				if !arrow.TypeEqual(lf.Type, rDUTF8) || !lf.Nullable {
					return invalid("label %q is %s (nullable %t), want nullable %s", lf.Name, lf.Type, lf.Nullable, rDUTF8)
				}
				names = append(names, lf.Name)
			}
			if !slices.IsSorted(names) {
				return invalid("label columns not sorted: %q", names)
			}
		case "stacktrace_id":
			ext, ok := f.Type.(arrow.ExtensionType)
			if !ok || ext.ExtensionName() != "arrow.uuid" || !arrow.TypeEqual(ext.StorageType(), &arrow.FixedSizeBinaryType{ByteWidth: 16}) {
				return invalid("stacktrace_id is %s, want extension arrow.uuid", f.Type)
			}
		default:
			if !arrow.TypeEqual(f.Type, c.typ, arrow.CheckMetadata()) {
				return invalid("column %s is %s, want %s", c.name, f.Type, c.typ)
			}
		}
		if wantNull := c.name == "stacktrace" || c.name == "temporality"; f.Nullable != wantNull {
			return invalid("column %s nullable %t, want %t", c.name, f.Nullable, wantNull)
		}
	}
	return nil
}

func decodeV2Record(rec arrow.RecordBatch) []Row {
	n := int(rec.NumRows())
	labels := column(rec, "labels").(*array.Struct)
	lt := labels.DataType().(*arrow.StructType)
	stacks := column(rec, "stacktrace").(*array.ListView)
	ids := column(rec, "stacktrace_id").(array.ExtensionArray).Storage().(*array.FixedSizeBinary)
	values := column(rec, "value").(*array.Int64)
	ts := column(rec, "timestamp").(*array.Timestamp)
	locDict := stacks.ListValues().(*array.Dictionary)
	locs := locDict.Dictionary().(*array.Struct)
	rows := make([]Row, n)
	for i := range n {
		var kvs []string
		for c := range labels.NumField() {
			if v := reeString(labels.Field(c), i); v != "" {
				kvs = append(kvs, lt.Field(c).Name+"="+v)
			}
		}
		var frames []string
		if stacks.IsValid(i) {
			start, end := stacks.ValueOffsets(i)
			for k := start; k < end; k++ {
				frames = append(frames, v2Location(locs, locDict.GetValueIndex(int(k))).String())
			}
		}
		r := Row{
			Labels:      labelString(kvs),
			Stack:       strings.Join(frames, "\n"),
			Value:       values.Value(i),
			Producer:    reeString(column(rec, "producer"), i),
			Temporality: reeString(column(rec, "temporality"), i),
			Duration:    reeInt(column(rec, "duration"), i),
			Timestamp:   int64(ts.Value(i)),
			Type: fmt.Sprintf("%s/%s %s/%s %d", reeString(column(rec, "sample_type"), i), reeString(column(rec, "sample_unit"), i),
				reeString(column(rec, "period_type"), i), reeString(column(rec, "period_unit"), i), reeInt(column(rec, "period"), i)),
		}
		copy(r.StackID[:], ids.Value(i))
		rows[i] = r
	}
	return rows
}

// onlyLine returns the index of location i's line among the lines'
// values, or false when it has none. Tandem writes at most one line per
// location; more is a test failure.
func onlyLine(lines interface {
	IsNull(int) bool
	ValueOffsets(int) (int64, int64)
}, i int) (int, bool) {
	if lines.IsNull(i) {
		return 0, false
	}
	start, end := lines.ValueOffsets(i)
	if end-start != 1 {
		panic(fmt.Sprintf("location %d has %d lines", i, end-start))
	}
	return int(start), true
}

func v2Location(locs *array.Struct, i int) Location {
	l := Location{
		Address:     locs.Field(0).(*array.Uint64).Value(i),
		FrameType:   valueString(locs.Field(1), i),
		MappingFile: valueString(locs.Field(2), i),
		BuildID:     valueString(locs.Field(3), i),
	}
	lines := locs.Field(4).(*array.ListView)
	k, ok := onlyLine(lines, i)
	if !ok {
		return l
	}
	ls := lines.ListValues().(*array.Struct)
	l.HasLines = true
	l.Line = int64(ls.Field(0).(*array.Uint64).Value(k))
	l.Column = ls.Field(1).(*array.Uint64).Value(k)
	fd := ls.Field(2).(*array.Dictionary)
	fns := fd.Dictionary().(*array.Struct)
	fi := fd.GetValueIndex(k)
	l.Function = valueString(fns.Field(0), fi)
	l.Filename = valueString(fns.Field(1), fi)
	return l
}

// CheckV2Dedupe checks the in-batch de-duplication parca-agent's records
// have: rows with the same stacktrace id share one ListView offset and
// size, and the location and function dictionaries hold no entry twice.
func CheckV2Dedupe(buf []byte, mem memory.Allocator) error {
	rs, err := readRecords(buf, mem, false)
	if err != nil {
		return err
	}
	defer rs.release()
	for _, rec := range rs.batches {
		stacks := column(rec, "stacktrace").(*array.ListView)
		ids := column(rec, "stacktrace_id").(array.ExtensionArray).Storage().(*array.FixedSizeBinary)
		views := map[string][2]int64{}
		for i := range int(rec.NumRows()) {
			start, end := stacks.ValueOffsets(i)
			id := string(ids.Value(i))
			if v, ok := views[id]; ok && v != [2]int64{start, end} {
				return fmt.Errorf("row %d: stack %x at [%d,%d), earlier at %v", i, id, start, end, v)
			}
			views[id] = [2]int64{start, end}
		}
		locs := stacks.ListValues().(*array.Dictionary).Dictionary().(*array.Struct)
		seen := map[string]int{}
		for i := range locs.Len() {
			k := v2Location(locs, i).String()
			if j, ok := seen[k]; ok {
				return fmt.Errorf("location dictionary entries %d and %d are both %s", j, i, k)
			}
			seen[k] = i
		}
		lines := locs.Field(4).(*array.ListView).ListValues().(*array.Struct)
		fns := lines.Field(2).(*array.Dictionary).Dictionary().(*array.Struct)
		seenFn := map[string]int{}
		for i := range fns.Len() {
			k := valueString(fns.Field(0), i) + "\x00" + valueString(fns.Field(1), i)
			if j, ok := seenFn[k]; ok {
				return fmt.Errorf("function dictionary entries %d and %d are both %q", j, i, k)
			}
			seenFn[k] = i
		}
	}
	return nil
}
