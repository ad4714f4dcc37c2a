package arrow_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	arrowpkg "github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tandem-profiler/tandem/encoder/arrow"
	"github.com/tandem-profiler/tandem/encoder/internal/flushtest"
	"github.com/tandem-profiler/tandem/encoder/internal/testcorpus"
	"github.com/tandem-profiler/tandem/test/parcatest"
)

// mutate decodes an IPC stream, lets change rebuild the schema and
// columns, and encodes the result.
func mutate(t *testing.T, buf []byte, change func(s *arrowpkg.Schema, cols []arrowpkg.Array, n int) (*arrowpkg.Schema, []arrowpkg.Array)) []byte {
	t.Helper()
	r, err := ipc.NewReader(bytes.NewReader(buf))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if !r.Next() {
		t.Fatal(r.Err())
	}
	rec := r.RecordBatch()
	s, cols := change(rec.Schema(), rec.Columns(), int(rec.NumRows()))
	out := array.NewRecordBatch(s, cols, rec.NumRows())
	defer out.Release()
	var w bytes.Buffer
	iw := ipc.NewWriter(&w, ipc.WithSchema(s))
	if err := iw.Write(out); err != nil {
		t.Fatal(err)
	}
	if err := iw.Close(); err != nil {
		t.Fatal(err)
	}
	return w.Bytes()
}

func withMetadata(s *arrowpkg.Schema, md *arrowpkg.Metadata) *arrowpkg.Schema {
	return arrowpkg.NewSchema(s.Fields(), md)
}

// TestServerEnforces checks that the reference decoder rejects what the
// real server rejects, so the round-trip tests mean something.
func TestServerEnforces(t *testing.T) {
	c := testcorpus.Generate(testcorpus.Small())
	f := flushtest.Default(t, c)
	v2, err := arrow.NewV2Encoder(arrow.DefaultConfig(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer v2.Close()
	payloads, err := v2.Encode(f)
	if err != nil {
		t.Fatal(err)
	}
	v1, err := arrow.NewV1Encoder(arrow.DefaultConfig(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer v1.Close()
	xs, err := v1.Encode(f)
	if err != nil {
		t.Fatal(err)
	}
	good := payloads[0]
	v3 := arrowpkg.NewMetadata([]string{"parca_write_schema_version"}, []string{"v3"})
	tests := []struct {
		name string
		buf  []byte
		want string
	}{
		{"no metadata", mutate(t, good, func(s *arrowpkg.Schema, cols []arrowpkg.Array, _ int) (*arrowpkg.Schema, []arrowpkg.Array) {
			return withMetadata(s, nil), cols
		}), "missing schema version"},
		{"unknown version", mutate(t, good, func(s *arrowpkg.Schema, cols []arrowpkg.Array, _ int) (*arrowpkg.Schema, []arrowpkg.Array) {
			return withMetadata(s, &v3), cols
		}), "unsupported schema version"},
		{"missing stacktrace_id", mutate(t, good, func(s *arrowpkg.Schema, cols []arrowpkg.Array, _ int) (*arrowpkg.Schema, []arrowpkg.Array) {
			md := s.Metadata()
			fields := append(append([]arrowpkg.Field(nil), s.Fields()[:2]...), s.Fields()[3:]...)
			return arrowpkg.NewSchema(fields, &md), append(append([]arrowpkg.Array(nil), cols[:2]...), cols[3:]...)
		}), "12 fields"},
		{"binary producer", mutate(t, good, func(s *arrowpkg.Schema, cols []arrowpkg.Array, n int) (*arrowpkg.Schema, []arrowpkg.Array) {
			ends := array.NewInt32Builder(memory.DefaultAllocator)
			ends.Append(int32(n))
			vals := array.NewBinaryBuilder(memory.DefaultAllocator, arrowpkg.BinaryTypes.Binary)
			vals.AppendString("parca_agent")
			ree := array.NewRunEndEncodedArray(ends.NewArray(), vals.NewArray(), n, 0)
			fields := append([]arrowpkg.Field(nil), s.Fields()...)
			fields[4].Type = ree.DataType()
			cols = append([]arrowpkg.Array(nil), cols...)
			cols[4] = ree
			md := s.Metadata()
			return arrowpkg.NewSchema(fields, &md), cols
		}), "column producer"},
		{"v1 sample record alone", xs[0].SampleRecord(), "missing column locations"},
		{"not arrow", []byte("garbage"), "IPC"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parcatest.DecodeV2(tt.buf, memory.DefaultAllocator)
			if err == nil || !errors.Is(err, parcatest.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want InvalidArgument containing %q", err, tt.want)
			}
		})
	}
	// v1: the locations record must have exactly three fields.
	smp, err := parcatest.DecodeV1Samples(xs[0].SampleRecord(), memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	req, err := parcatest.StacktraceRequest(smp.IDs, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	locs, err := xs[0].LocationsFor(req)
	if err != nil {
		t.Fatal(err)
	}
	extra := mutate(t, locs, func(s *arrowpkg.Schema, cols []arrowpkg.Array, _ int) (*arrowpkg.Schema, []arrowpkg.Array) {
		md := s.Metadata()
		return arrowpkg.NewSchema(append(append([]arrowpkg.Field(nil), s.Fields()...), s.Field(1)), &md), append(append([]arrowpkg.Array(nil), cols...), cols[1])
	})
	if _, err := parcatest.DecodeV1Locations(extra, memory.DefaultAllocator); err == nil || !strings.Contains(err.Error(), "want 3") {
		t.Fatalf("locations record with 4 fields: err = %v", err)
	}
	if _, err := parcatest.DecodeV1Samples(good, memory.DefaultAllocator); err == nil {
		t.Fatal("a v2 record was accepted as a v1 sample record")
	}
}
