package aggregate

import (
	"reflect"
	"testing"

	"github.com/tandem-profiler/tandem/schema"
)

// TestProcessFields fails when a Resource field is missing from
// ProcessFields (a new field would otherwise be left out of the ids, the
// fast path, compaction, labels or attributes, silently), and when a row
// reads another field than it names, of the process or of the resource.
func TestProcessFields(t *testing.T) {
	rt := reflect.TypeFor[Resource]()
	if rt.NumField() != len(ProcessFields) {
		t.Errorf("Resource has %d fields, ProcessFields %d rows", rt.NumField(), len(ProcessFields))
	}
	pt := reflect.TypeFor[schema.Process]()
	for i := range min(rt.NumField(), len(ProcessFields)) {
		pf, field := &ProcessFields[i], rt.Field(i)
		if pf.Name != field.Name {
			t.Errorf("row %d is %s, Resource field %d is %s (same order, please)", i, pf.Name, i, field.Name)
			continue
		}
		if field.Type.Kind() != reflect.Uint32 || field.Offset != uintptr(4*i) {
			t.Errorf("Resource.%s: %s at offset %d; Field wants a uint32 at %d", field.Name, field.Type, field.Offset, 4*i)
		}
		var r Resource
		reflect.ValueOf(&r).Elem().Field(i).SetUint(7)
		if r.Field(i) != 7 {
			t.Errorf("%s: the row reads another Resource field", pf.Name)
		}
		if pf.Attr == "" && pf.Label == "" && pf.Meta == "" && pf.Plain == "" {
			t.Errorf("%s: no name at all: it is never written", pf.Name)
		}
		pfield, inProc := pt.FieldByName(pf.Name)
		if word := inProc && pfield.Type.Kind() == reflect.Uint32; word != (pf.proc != noProc) {
			t.Errorf("%s: the batch's Process has it as a uint32: %v; the row reads it from there: %v", pf.Name, word, pf.proc != noProc)
			continue
		}
		if pf.proc != noProc && (pfield.Offset != uintptr(4*pf.proc) || int(pf.proc) >= len(procWords(&schema.Process{}))) {
			t.Errorf("%s: Process field at offset %d, the row reads word %d", pf.Name, pfield.Offset, pf.proc)
		}
		if pf.FromSession() {
			if inProc {
				t.Errorf("%s: the batch's Process has it, but the row takes it from the session", pf.Name)
			}
			continue
		}
		var p schema.Process
		pv := reflect.ValueOf(&p).Elem().FieldByName(pf.Name)
		switch pf.Kind {
		case FieldString, FieldNumber:
			pv.SetUint(9)
			if batchValue(&p, i) != 9 {
				t.Errorf("%s: the row reads another Process field", pf.Name)
			}
		case FieldLabelSet:
			pv.Set(reflect.ValueOf([]schema.KeyValue{{Key: 1, Value: 2}}))
			if len(pf.batchSet(&p)) != 1 {
				t.Errorf("%s: the row reads another Process field", pf.Name)
			}
		}
	}
}

// TestProcessValues: the values of each column, label set entries named
// by their key.
func TestProcessValues(t *testing.T) {
	f := &Flush{
		Strings:   []string{"", "app", "/usr/bin/app", "node-1", "LANG", "C"},
		LabelKVs:  []KeyValue{{Key: 4, Value: 5}},
		LabelEnds: []uint32{0, 1},
	}
	r := &Resource{PID: 42, Comm: 1, ExecutablePath: 2, NodeName: 3, EnvVars: 1}
	got := map[string]string{}
	for _, v := range f.AppendProcessValues(nil, r, func(pf *ProcessField) string { return pf.Meta }) {
		got[v.FullName(f)] = v.String()
	}
	want := map[string]string{
		"__meta_process_pid": "42", "__meta_process_comm": "app", "__meta_process_executable_path": "/usr/bin/app",
		"__meta_process_container_id": "", "__meta_process_systemd_unit": "", "__meta_process_service_name": "",
		"__meta_env_var_LANG": "C",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("meta values = %v, want %v", got, want)
	}
}

// TestFastPathSeesEveryField: a process that differs from the one last seen
// with its pid in any one field of ProcessFields is another resource. The
// fast path names the fields one by one (for speed); this fails when it
// misses one, which would give the process its old identity.
func TestFastPathSeesEveryField(t *testing.T) {
	for i := range ProcessFields {
		pf := &ProcessFields[i]
		t.Run(pf.Name, func(t *testing.T) {
			a := newTestAggregator(t)
			for round, value := range []string{"one", "two"} {
				b := schema.NewBatchBuilder()
				p := schema.Process{PID: 7, Comm: b.String("app"), EnvVars: []schema.KeyValue{{Key: b.String("K"), Value: b.String("v")}}}
				hello := &schema.Hello{NodeName: "node"}
				if pf.FromSession() {
					reflect.ValueOf(hello).Elem().FieldByName(pf.Name).SetString(value)
				} else {
					v := reflect.ValueOf(&p).Elem().FieldByName(pf.Name)
					switch pf.Kind {
					case FieldNumber:
						v.SetUint(uint64(10 + round))
					case FieldString:
						v.SetUint(uint64(b.String(value)))
					case FieldLabelSet:
						v.Set(reflect.ValueOf([]schema.KeyValue{{Key: b.String("K"), Value: b.String(value)}}))
					}
				}
				stack := b.Stack([]uint32{b.Frame(schema.Frame{Kind: schema.FrameNative, AddressOrLine: 0x10})})
				b.AddSample(schema.Sample{TimestampUnixNano: 1, Origin: schema.OriginCPUSampling, Value: 1,
					Process: b.Process(p), TID: 7, Stack: stack})
				if err := a.Add(hello, b.Batch()); err != nil {
					t.Fatal(err)
				}
			}
			if got := a.Stats().Resources; got != 2 {
				t.Errorf("%d resources after two processes that differ in %s, want 2", got, pf.Name)
			}
		})
	}
}
