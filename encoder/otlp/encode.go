package otlp

import (
	"errors"
	"sync"
	"unsafe"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pprofile"
	"go.opentelemetry.io/collector/pdata/pprofile/pprofileotlp"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
)

// SchemaURL is the semantic-conventions schema the attribute names follow
// (the one the upstream tracer declares).
const SchemaURL = "https://opentelemetry.io/schemas/1.37.0"

// Attribute names. See the package documentation.
const (
	AttrServiceName     = aggregate.AttrServiceName // process attributes: encoder.ProcessFields
	AttrProcessPID      = aggregate.AttrProcessPID
	AttrExecutableName  = aggregate.AttrExecutableName
	AttrExecutablePath  = aggregate.AttrExecutablePath
	AttrContainerID     = aggregate.AttrContainerID
	AttrHostName        = aggregate.AttrHostName
	AttrSystemdUnit     = aggregate.AttrSystemdUnit
	AttrEnvVarPrefix    = aggregate.AttrEnvVarPrefix
	AttrThreadID        = "thread.id"
	AttrThreadName      = "thread.name"
	AttrCPU             = "cpu.logical_number"
	AttrLabelPrefix     = "process.context.label."
	AttrFrameType       = "profile.frame.type"
	AttrBuildIDGNU      = "process.executable.build_id.gnu"
	AttrBuildIDGo       = "process.executable.build_id.go"
	AttrBuildIDHtlhash  = "process.executable.build_id.htlhash"
	defaultScopeName    = "tandem"
	maxRecycledRequests = 2
)

// Config holds the encoder's knobs.
type Config struct {
	// ScopeName and ScopeVersion name the instrumentation scope of every
	// profile. Parca names profile types after the scope name.
	ScopeName    string
	ScopeVersion string
	// FileIDAsGNUBuildID puts the FileID hex into
	// process.executable.build_id.gnu on mappings whose executable has no
	// GNU build id. Parca's OTLP ingestion looks symbols up only by that
	// attribute, and the debuginfo uploader stores such executables under
	// their FileID hex; without this they cannot be symbolized. Off by
	// default: other backends take the attribute at its word.
	FileIDAsGNUBuildID bool

	_ struct{}
}

// DefaultConfig returns the default configuration.
func DefaultConfig() Config { return Config{ScopeName: defaultScopeName} }

// Validate reports every problem with the configuration.
func (c Config) Validate() error {
	if c.ScopeName == "" {
		return errors.New("scope name must not be empty")
	}
	return nil
}

// Encoder turns Flushes into export requests. See the package
// documentation for reuse and concurrency.
type Encoder struct {
	cfg Config

	mu   sync.Mutex
	free []pprofile.Profiles

	epoch          uint32 // of the current Encode, for marks
	generation     uint64
	haveGeneration bool
	i32            []int32 // scratch

	dictionary  // dictionary.go: the request's strings, mappings, functions, locations, stacks
	attributes  // attributes.go: the attribute table
	sampleOrder // order.go: the order of samples and profiles
	resources   // resources.go: the resources and their attributes
}

// NewEncoder returns an Encoder.
func NewEncoder(cfg Config) (*Encoder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Encoder{
		cfg:        cfg,
		dictionary: dictionary{extraStrs: make(map[string]int32)},
		attributes: attributes{strAttr: make(map[strAttrKey]int32), labelKeys: make(map[uint32]string)},
		resources:  resources{setKeys: make(map[setKey]string)},
	}, nil
}

// Encode converts f into an export request. f is only read. The request is
// the caller's; handing it back with Release when it has been sent lets the
// next Encode reuse its memory.
func Encode(f *aggregate.Flush, cfg Config) (pprofileotlp.ExportRequest, error) {
	e, err := NewEncoder(cfg)
	if err != nil {
		return pprofileotlp.ExportRequest{}, err
	}
	return e.Encode(f), nil
}

// Release gives a request returned by Encode back for reuse. The caller
// must be done with it (an export has returned) and must not use it again.
func (e *Encoder) Release(req pprofileotlp.ExportRequest) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.free) < maxRecycledRequests {
		e.free = append(e.free, req.Profiles())
	}
}

func (e *Encoder) take() pprofile.Profiles {
	e.mu.Lock()
	defer e.mu.Unlock()
	if n := len(e.free); n > 0 {
		p := e.free[n-1]
		e.free = e.free[:n-1]
		return p
	}
	return pprofile.NewProfiles()
}

// at returns element i of a pdata slice, appending it when i == Len.
func at[T any, S interface {
	Len() int
	At(int) T
	AppendEmpty() T
}](s S, i int) T {
	if i < s.Len() {
		return s.At(i)
	}
	return s.AppendEmpty()
}

// truncate drops the elements from n on.
func truncate[T any, S interface {
	Len() int
	RemoveIf(func(T) bool)
}](s S, n int) {
	if s.Len() <= n {
		return
	}
	i := 0
	s.RemoveIf(func(T) bool {
		i++
		return i > n
	})
}

func (e *Encoder) beginGeneration(f *aggregate.Flush) {
	if e.haveGeneration && e.generation == f.Generation {
		return
	}
	e.generation, e.haveGeneration = f.Generation, true
	e.htlhash = e.htlhash[:0]
	clear(e.setKeys)
	clear(e.labelKeys)
}

// Encode converts f into an export request. See the package documentation.
//
// The order of dictionaries and samples, chosen for size after gzip:
//
//   - Resources are written grouped by executable, then container, then
//     pid, so processes of one program sit together (their attributes and
//     stacks repeat).
//   - Within a profile, samples are grouped by thread, in flush order
//     otherwise (their attribute lists repeat).
//   - Stacks are numbered as the samples that use them are written, so one
//     program's stacks sit together.
//   - The 127 locations most stacks reference get the one-byte indices;
//     the rest follow in order of first appearance in the stack table.
//     Functions are numbered as the location table first names them.
//   - The string table holds the mapping files, then the function names in
//     function order, then their files, then attribute keys and type names.
//   - The attribute table starts with the CPUs and frame types, the
//     attributes every sample and location carries.
//
// It is built with counting sorts and histograms, no comparison sort of
// samples (docs/benchmarks/encoding.md has what it cost and saved).
func (e *Encoder) Encode(f *aggregate.Flush) pprofileotlp.ExportRequest {
	p := e.take()
	e.epoch++
	if e.epoch == 0 { // wrapped: forget every mark
		for _, m := range []*marks{&e.strs, &e.maps, &e.funcs, &e.locs, &e.stacks, &e.cpuAttr, &e.threadAttr} {
			clear(*m)
		}
		clear(e.frameAttrEpoch[:])
		e.epoch = 1
	}
	e.beginGeneration(f)
	e.strs.grow(len(f.Strings))
	e.maps.grow(len(f.Mappings))
	e.funcs.grow(len(f.Functions))
	e.locs.grow(len(f.Locations))
	e.stacks.grow(f.NumStacks())
	e.threadAttr.grow(len(f.Strings))
	clear(e.extraStrs)
	e.extraTable = e.extraTable[:0]
	e.nmarked = 0
	clear(e.strAttr)

	e.sortSamples(f)
	e.markStacks(f)
	e.numberLocations()

	dict := p.Dictionary()
	e.attrs = dict.AttributeTable()
	e.nattrs = 0
	e.putSentinelAttr()
	// The attributes every sample and every location names come first, so
	// that their indices are one-byte varints: CPUs (in order of first use),
	// then frame types (as writeLocations meets them).
	for _, cpu := range e.cpuList {
		e.cpuAttr[cpu].idx = e.putInt(e.str(AttrCPU), int64(cpu))
	}

	mappings := e.assign(&e.maps, len(f.Mappings))
	e.writeLocations(f, dict.LocationTable())
	e.buildStringTable(f)
	e.writeMappings(f, dict.MappingTable(), mappings)
	e.writeFunctions(f, dict.FunctionTable())
	e.writeStacks(f, dict.StackTable())
	e.writeLinks(f, dict.LinkTable())

	e.writeResources(f, p.ResourceProfiles())

	truncate(e.attrs, e.nattrs)
	e.strTable = append(e.strTable, e.extraTable...)
	dict.StringTable().FromRaw(e.strTable)
	return pprofileotlp.NewExportRequestFromProfiles(p)
}

func (e *Encoder) writeProfile(f *aggregate.Flush, prof pprofile.Profile, st *aggregate.SampleType, rows []int32) {
	prof.SampleType().SetTypeStrindex(e.str(st.Type))
	prof.SampleType().SetUnitStrindex(e.str(st.Unit))
	prof.PeriodType().SetTypeStrindex(e.str(st.PeriodType))
	prof.PeriodType().SetUnitStrindex(e.str(st.PeriodUnit))
	prof.SetPeriod(st.Period)
	prof.SetTime(pcommon.Timestamp(f.StartUnixNano))
	prof.SetDurationNano(uint64(f.EndUnixNano - f.StartUnixNano))
	counted := st.Unit == "count"
	samples := prof.Samples()
	samples.EnsureCapacity(len(rows))
	for i, row := range rows {
		fs := &f.Samples[row]
		s := at(samples, i)
		s.SetStackIndex(e.stacks[fs.Stack].idx)
		s.SetLinkIndex(int32(fs.Link))
		attrs := append(e.i32[:0], e.tidAttrIndex(f, row))
		if fs.ThreadName != 0 {
			attrs = append(attrs, e.threadAttrIndex(f, fs.ThreadName))
		}
		attrs = append(attrs, e.cpuAttrIndex(fs.CPU))
		if fs.Labels != 0 {
			for _, kv := range f.LabelSet(fs.Labels) {
				attrs = append(attrs, e.labelAttrIndex(f, kv))
			}
		}
		e.i32 = attrs
		s.AttributeIndices().FromRaw(attrs)
		s.TimestampsUnixNano().FromRaw(asUint64(fs.Timestamps))
		if counted && fs.AllOnes() {
			s.Values().FromRaw(nil)
		} else {
			s.Values().FromRaw(fs.Values)
		}
	}
	truncate(samples, len(rows))
}

// asUint64 views Unix-nanosecond timestamps (never negative in practice) as
// the fixed64 values OTLP carries, without copying.
func asUint64(s []int64) []uint64 {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*uint64)(unsafe.Pointer(&s[0])), len(s))
}
