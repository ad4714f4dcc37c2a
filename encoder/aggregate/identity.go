package aggregate

import (
	"strconv"
	"unsafe"

	"github.com/tandem-profiler/tandem/schema"
)

// OpenTelemetry resource attribute names of a process: ProcessFields' Attr
// column, and the two derived from its fields (service.name, the
// executable's basename).
const (
	AttrServiceName    = "service.name"
	AttrProcessPID     = "process.pid"
	AttrExecutableName = "process.executable.name"
	AttrExecutablePath = "process.executable.path"
	AttrContainerID    = "container.id"
	AttrHostName       = "host.name"
	AttrSystemdUnit    = "systemd.unit"
	AttrEnvVarPrefix   = "process.environment_variable."
)

// FieldKind says what a Resource field holds.
type FieldKind uint8

// Field kinds.
const (
	// FieldString is a string id (Flush.Strings).
	FieldString FieldKind = iota
	// FieldNumber is a number (the pid).
	FieldNumber
	// FieldLabelSet is a label set id (Flush.LabelSet); its names are the
	// set's keys, each after the field's prefixes.
	FieldLabelSet
)

// ProcessField is one field of a process's identity (Resource) and every
// name it is written under. ProcessFields lists them; it drives the
// resource ids (a process with another value of any field is another
// resource), compaction, the labels (pprof's, Parca's and the __meta_*
// ones offered to relabelling) and the OTLP resource attributes, so a
// field added to Resource and to the table is carried everywhere
// (TestProcessFields fails when one is missing from it; the fast path,
// which names the fields for speed, is checked by
// TestFastPathSeesEveryField).
type ProcessField struct {
	// Name is the Resource field's Go name.
	Name string
	Kind FieldKind
	// Attr is the OpenTelemetry resource attribute (for a label set, the
	// prefix of each key); "" writes none.
	Attr string
	// Label is the name in ProcessLabels, which outputs that write all
	// they know about a process use (pprof files); a prefix for a label
	// set; "" writes none.
	Label string
	// Meta is the __meta_* label offered to relabelling (parca-agent's
	// name; a prefix for a label set); "" offers none.
	Meta string
	// Plain is the label Parca's outputs write before relabelling
	// (parca-agent's base set); "" writes none.
	Plain string

	// proc is the value's index among the leading uint32 fields of a
	// batch's Process (a string index for a string, the number for a
	// number), or noProc; batchSet gives a label set's entries. Neither:
	// the value is the session's, not the process's (the node name, from
	// Hello).
	proc     int8
	batchSet func(p *schema.Process) []schema.KeyValue
}

// noProc: the value is not one of a Process's uint32 fields.
const noProc = -1

// FromSession reports whether the value is the session's (Hello), not the
// batch process's.
func (pf *ProcessField) FromSession() bool { return pf.proc == noProc && pf.batchSet == nil }

// ProcessFields is the table of a process's fields, in Resource's order.
var ProcessFields = [...]ProcessField{
	{Name: "PID", Kind: FieldNumber, Attr: AttrProcessPID, Meta: "__meta_process_pid", proc: 0},
	{Name: "Comm", Kind: FieldString, Meta: "__meta_process_comm", Plain: "comm", proc: 1},
	{Name: "ExecutablePath", Kind: FieldString, Attr: AttrExecutablePath, Label: LabelExecutable,
		Meta: "__meta_process_executable_path", proc: 2},
	{Name: "ContainerID", Kind: FieldString, Attr: AttrContainerID, Label: LabelContainerID,
		Meta: "__meta_process_container_id", proc: 3},
	{Name: "SystemdUnit", Kind: FieldString, Attr: AttrSystemdUnit, Label: LabelSystemdUnit,
		Meta: "__meta_process_systemd_unit", proc: 4},
	// The APM service name; service.name itself is derived (ServiceName).
	{Name: "ServiceName", Kind: FieldString, Label: LabelServiceName, Meta: "__meta_process_service_name", proc: 5},
	{Name: "NodeName", Kind: FieldString, Attr: AttrHostName, Label: LabelNode, Plain: LabelNode, proc: noProc},
	{Name: "EnvVars", Kind: FieldLabelSet, Attr: AttrEnvVarPrefix, Label: LabelEnvPrefix, Meta: "__meta_env_var_", proc: noProc,
		batchSet: func(p *schema.Process) []schema.KeyValue { return p.EnvVars }},
}

// Every Resource field is a uint32, one per row of ProcessFields, in its
// order (TestProcessFields), so Field can index them: these fail to
// compile when the sizes differ.
var (
	_ [unsafe.Sizeof(Resource{}) - 4*uintptr(len(ProcessFields))]struct{}
	_ [4*uintptr(len(ProcessFields)) - unsafe.Sizeof(Resource{})]struct{}
)

// Field returns the value of ProcessFields[i] in r: a string id, a number
// or a label set id, as its Kind says.
func (r *Resource) Field(i int) uint32 { return r.fields()[i] }

func (r *Resource) fields() *[len(ProcessFields)]uint32 {
	return (*[len(ProcessFields)]uint32)(unsafe.Pointer(r))
}

// procWords views the leading uint32 fields of a batch's Process (the
// proc column's indices; TestProcessFields checks their offsets).
func procWords(p *schema.Process) *[6]uint32 { return (*[6]uint32)(unsafe.Pointer(p)) }

// batchValue returns ProcessFields[i]'s value in batch process p (proc
// must not be noProc).
func batchValue(p *schema.Process, i int) uint32 { return procWords(p)[ProcessFields[i].proc] }

// ProcessValue is one value of a process under one of its names.
type ProcessValue struct {
	// Name is the name a column gives the field; for a label set entry,
	// the prefix of its name (FullName).
	Name  string
	Kind  FieldKind // of the field it comes from
	Key   uint32    // a label set entry's key (string id)
	Value string    // a string's value or a label set entry's
	Num   uint32    // a number's value
}

// FullName returns the value's name: a label set entry's key after the
// field's prefix.
func (v *ProcessValue) FullName(f *Flush) string {
	if v.Kind == FieldLabelSet {
		return v.Name + f.Strings[v.Key]
	}
	return v.Name
}

// String returns the value as a string (a number in decimal).
func (v *ProcessValue) String() string {
	if v.Kind == FieldNumber {
		return strconv.FormatUint(uint64(v.Num), 10)
	}
	return v.Value
}

// AppendProcessValues appends the values of resource r under the names
// column picks from each of ProcessFields (a field it gives no name is
// skipped), in the table's order: one per string or number, one per entry
// of a label set. Empty values are appended too.
func (f *Flush) AppendProcessValues(dst []ProcessValue, r *Resource, column func(*ProcessField) string) []ProcessValue {
	for i := range ProcessFields {
		pf := &ProcessFields[i]
		name := column(pf)
		if name == "" {
			continue
		}
		id := r.Field(i)
		switch pf.Kind {
		case FieldString:
			dst = append(dst, ProcessValue{Name: name, Kind: FieldString, Value: f.Strings[id]})
		case FieldNumber:
			dst = append(dst, ProcessValue{Name: name, Kind: FieldNumber, Num: id})
		case FieldLabelSet:
			for _, kv := range f.LabelSet(id) {
				dst = append(dst, ProcessValue{Name: name, Kind: FieldLabelSet, Key: kv.Key, Value: f.Strings[kv.Value]})
			}
		}
	}
	return dst
}
