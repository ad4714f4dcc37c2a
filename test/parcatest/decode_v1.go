package parcatest

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// V1Samples is a decoded v1 sample record: rows without stacks yet, and
// the distinct stacktrace ids in order of first appearance.
type V1Samples struct {
	Rows []Row
	IDs  [][]byte
}

// DecodeV1Samples decodes the first message of a Write stream as the server
// does: only the first record batch, v1 metadata, label columns then the
// 11 fixed columns with their exact types.
func DecodeV1Samples(buf []byte, mem memory.Allocator) (*V1Samples, error) {
	rs, err := readRecords(buf, mem, false)
	if err != nil {
		return nil, err
	}
	defer rs.release()
	s, recs := rs.schema, rs.batches
	if rs.version != "v1" {
		return nil, invalid("Write got a %s sample record", rs.version)
	}
	if len(recs) == 0 {
		return nil, invalid("no record batch")
	}
	nl := s.NumFields() - len(v1Fixed)
	if nl < 0 {
		return nil, invalid("v1 sample record has %d fields", s.NumFields())
	}
	var names []string
	for i := range nl {
		f := s.Field(i)
		if !strings.HasPrefix(f.Name, "labels.") {
			return nil, invalid("column %d %q: label columns come first", i, f.Name)
		}
		if !arrow.TypeEqual(f.Type, rDBin) {
			return nil, invalid("label column %s is %s, want %s", f.Name, f.Type, rDBin)
		}
		names = append(names, f.Name)
	}
	if !slices.IsSorted(names) {
		return nil, invalid("label columns not sorted: %q", names)
	}
	for i, c := range v1Fixed {
		f := s.Field(nl + i)
		if f.Name != c.name || !arrow.TypeEqual(f.Type, c.typ) {
			return nil, invalid("column %d is %s %s, want %s %s", nl+i, f.Name, f.Type, c.name, c.typ)
		}
	}
	rec := recs[0] // the server takes only the first record batch
	n := int(rec.NumRows())
	out := &V1Samples{Rows: make([]Row, n)}
	seen := map[string]bool{}
	values := column(rec, "value").(*array.Int64)
	for i := range n {
		var kvs []string
		for c := range nl {
			if v := reeString(rec.Column(c), i); v != "" {
				kvs = append(kvs, strings.TrimPrefix(names[c], "labels.")+"="+v)
			}
		}
		id := reeString(column(rec, "stacktrace_id"), i)
		if len(id) != 16 {
			return nil, invalid("stacktrace id of %d bytes", len(id))
		}
		if !seen[id] {
			seen[id] = true
			out.IDs = append(out.IDs, []byte(id))
		}
		r := Row{
			Labels:      labelString(kvs),
			Value:       values.Value(i),
			Producer:    reeString(column(rec, "producer"), i),
			Temporality: reeString(column(rec, "temporality"), i),
			Duration:    reeInt(column(rec, "duration"), i),
			Timestamp:   reeInt(column(rec, "timestamp"), i),
			Type: fmt.Sprintf("%s/%s %s/%s %d", reeString(column(rec, "sample_type"), i), reeString(column(rec, "sample_unit"), i),
				reeString(column(rec, "period_type"), i), reeString(column(rec, "period_unit"), i), reeInt(column(rec, "period"), i)),
		}
		copy(r.StackID[:], id)
		out.Rows[i] = r
	}
	return out, nil
}

// StacktraceRequest builds the server's response: an IPC stream with one
// Binary column stacktrace_id and v1 metadata.
func StacktraceRequest(ids [][]byte, mem memory.Allocator) ([]byte, error) {
	b := array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
	defer b.Release()
	b.AppendValues(ids, nil)
	col := b.NewArray()
	defer col.Release()
	md := arrow.NewMetadata([]string{"parca_write_schema_version"}, []string{"v1"})
	schema := arrow.NewSchema([]arrow.Field{{Name: "stacktrace_id", Type: arrow.BinaryTypes.Binary}}, &md)
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, int64(len(ids)))
	defer rec.Release()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(schema), ipc.WithAllocator(mem))
	if err := w.Write(rec); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// DecodeV1Locations decodes the second message: exactly three fields with
// their exact types, v1 metadata; it returns each id's stack string.
func DecodeV1Locations(buf []byte, mem memory.Allocator) (map[string]string, error) {
	rs, err := readRecords(buf, mem, false)
	if err != nil {
		return nil, err
	}
	defer rs.release()
	s, recs := rs.schema, rs.batches
	if rs.version != "v1" {
		return nil, invalid("locations records must be v1, got %s", rs.version)
	}
	if s.NumFields() != 3 {
		return nil, invalid("locations record has %d fields, want 3", s.NumFields())
	}
	want := []struct {
		name string
		typ  arrow.DataType
	}{{"stacktrace_id", arrow.BinaryTypes.Binary}, {"is_complete", arrow.FixedWidthTypes.Boolean}, {"locations", v1Locations}}
	for i, c := range want {
		if f := s.Field(i); f.Name != c.name || !arrow.TypeEqual(f.Type, c.typ) {
			return nil, invalid("locations field %d is %s %s, want %s %s", i, f.Name, f.Type, c.name, c.typ)
		}
	}
	out := map[string]string{}
	for _, rec := range recs {
		ids := rec.Column(0).(*array.Binary)
		list := rec.Column(2).(*array.List)
		locs := list.ListValues().(*array.Struct)
		for i := range int(rec.NumRows()) {
			var frames []string
			if list.IsValid(i) {
				start, end := list.ValueOffsets(i)
				for k := start; k < end; k++ {
					frames = append(frames, v1Location(locs, int(k)).String())
				}
			}
			out[string(ids.Value(i))] = strings.Join(frames, "\n")
		}
	}
	return out, nil
}

func v1Location(locs *array.Struct, i int) Location {
	for _, c := range []int{2, 3, 4} {
		if reeInt(locs.Field(c), i) != 0 {
			panic("mapping start, limit and offset must be 0")
		}
	}
	l := Location{
		Address:     locs.Field(0).(*array.Uint64).Value(i),
		FrameType:   reeString(locs.Field(1), i),
		MappingFile: reeString(locs.Field(5), i),
		BuildID:     reeString(locs.Field(6), i),
	}
	lines := locs.Field(7).(*array.List)
	k, ok := onlyLine(lines, i)
	if !ok {
		return l
	}
	ls := lines.ListValues().(*array.Struct)
	l.HasLines = true
	l.Line = ls.Field(0).(*array.Int64).Value(k)
	l.Column = ls.Field(1).(*array.Uint64).Value(k)
	l.Function = valueString(ls.Field(2), k)
	l.SystemName = valueString(ls.Field(3), k)
	l.Filename = reeString(ls.Field(4), k)
	return l
}
