package otlp

import (
	"errors"
	"slices"
	"sync"
	"unsafe"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pprofile"
	"go.opentelemetry.io/collector/pdata/pprofile/pprofileotlp"

	"github.com/tandem-profiler/tandem/encoder"
	"github.com/tandem-profiler/tandem/schema"
)

// SchemaURL is the semantic-conventions schema the attribute names follow
// (the one the upstream tracer declares).
const SchemaURL = "https://opentelemetry.io/schemas/1.37.0"

// Attribute names. See the package documentation.
const (
	AttrServiceName     = "service.name"
	AttrProcessPID      = "process.pid"
	AttrExecutableName  = "process.executable.name"
	AttrExecutablePath  = "process.executable.path"
	AttrContainerID     = "container.id"
	AttrHostName        = "host.name"
	AttrSystemdUnit     = "systemd.unit"
	AttrEnvVarPrefix    = "process.environment_variable."
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

// marks assigns request-local indices to Flush ids, once per Encode.
type marks struct {
	epoch []uint32
	idx   []int32
}

func (m *marks) grow(n int) {
	for len(m.epoch) < n {
		m.epoch = append(m.epoch, 0)
		m.idx = append(m.idx, 0)
	}
}

type typeKey struct {
	origin schema.Origin
	hz     uint32
}

type strAttrKey struct {
	key int32
	val string
}

type resAttr struct {
	key   string
	str   string
	num   int64
	isNum bool
}

// Encoder turns Flushes into export requests. See the package
// documentation for reuse and concurrency.
type Encoder struct {
	cfg Config

	mu   sync.Mutex
	free []pprofile.Profiles

	epoch                           uint32
	strs, maps, funcs, locs, stacks marks
	strTable                        []string
	extraStrs                       map[string]int32
	attrs                           pprofile.KeyValueAndUnitSlice
	nattrs                          int
	tidAttr                         map[uint32]int32
	strAttr                         map[strAttrKey]int32
	cpuAttr, threadAttr             marks
	frameAttr                       [512]int32
	frameAttrEpoch                  [512]uint32
	i32                             []int32
	resKVs                          []resAttr
	types                           []typeKey
	rowType                         []int32
	bucketStart                     []int32
	order                           []int32
	generation                      uint64
	haveGeneration                  bool
	htlhash                         []string          // per mapping id, for generation
	envKeys, labelKeys              map[uint32]string // per string id, for generation
	sampleTypes                     []encoder.SampleType
}

// NewEncoder returns an Encoder.
func NewEncoder(cfg Config) (*Encoder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Encoder{
		cfg:       cfg,
		extraStrs: make(map[string]int32),
		tidAttr:   make(map[uint32]int32),
		strAttr:   make(map[strAttrKey]int32),
		envKeys:   make(map[uint32]string),
		labelKeys: make(map[uint32]string),
	}, nil
}

// Encode converts f into an export request. f is only read. The request is
// the caller's; handing it back with Release when it has been sent lets the
// next Encode reuse its memory.
func Encode(f *encoder.Flush, cfg Config) (pprofileotlp.ExportRequest, error) {
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

// str returns the string-table index of a string that is not a Flush
// string (attribute keys, sample type names).
func (e *Encoder) str(s string) int32 {
	if s == "" {
		return 0
	}
	if i, ok := e.extraStrs[s]; ok {
		return i
	}
	i := int32(len(e.strTable))
	e.strTable = append(e.strTable, s)
	e.extraStrs[s] = i
	return i
}

func (e *Encoder) markString(id uint32) {
	if id != 0 && e.strs.epoch[id] != e.epoch {
		e.strs.epoch[id] = e.epoch
	}
}

func (e *Encoder) markStack(f *encoder.Flush, id uint32) {
	if id == 0 || e.stacks.epoch[id] == e.epoch {
		return
	}
	e.stacks.epoch[id] = e.epoch
	for _, l := range f.Stack(id) {
		if e.locs.epoch[l] == e.epoch {
			continue
		}
		e.locs.epoch[l] = e.epoch
		loc := &f.Locations[l]
		if m := loc.Mapping; m != 0 && e.maps.epoch[m] != e.epoch {
			e.maps.epoch[m] = e.epoch
			mm := &f.Mappings[m]
			e.markString(mappingFile(mm))
		}
		if fn := loc.Function; fn != 0 && e.funcs.epoch[fn] != e.epoch {
			e.markFunction(f, fn)
		}
		for _, ln := range f.NativeLines(l) {
			if e.funcs.epoch[ln.Function] != e.epoch {
				e.markFunction(f, ln.Function)
			}
		}
	}
}

func (e *Encoder) markFunction(f *encoder.Flush, fn uint32) {
	e.funcs.epoch[fn] = e.epoch
	e.markString(f.Functions[fn].Name)
	e.markString(f.Functions[fn].File)
}

func mappingFile(m *encoder.Mapping) uint32 {
	if m.FileName != 0 {
		return m.FileName
	}
	return m.Path
}

// assign gives every marked id 1..n-1 the next request index, in id order.
func (e *Encoder) assign(m *marks, n int) int32 {
	next := int32(1)
	for id := 1; id < n; id++ {
		if m.epoch[id] == e.epoch {
			m.idx[id] = next
			next++
		}
	}
	return next
}

func (e *Encoder) beginGeneration(f *encoder.Flush) {
	if e.haveGeneration && e.generation == f.Generation {
		return
	}
	e.generation, e.haveGeneration = f.Generation, true
	e.htlhash = e.htlhash[:0]
	clear(e.envKeys)
	clear(e.labelKeys)
}

// Encode converts f into an export request. See the package documentation.
func (e *Encoder) Encode(f *encoder.Flush) pprofileotlp.ExportRequest {
	p := e.take()
	e.epoch++
	if e.epoch == 0 { // wrapped: forget every mark
		for _, m := range []*marks{&e.strs, &e.maps, &e.funcs, &e.locs, &e.stacks, &e.cpuAttr, &e.threadAttr} {
			clear(m.epoch)
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
	clear(e.tidAttr)
	clear(e.strAttr)

	for i := range f.Samples {
		e.markStack(f, f.Samples[i].Stack)
	}

	// String table: "", the marked Flush strings in id order, then the
	// extra strings as they are needed.
	e.strTable = append(e.strTable[:0], "")
	for id := 1; id < len(f.Strings); id++ {
		if e.strs.epoch[id] == e.epoch {
			e.strs.idx[id] = int32(len(e.strTable))
			e.strTable = append(e.strTable, f.Strings[id])
		}
	}
	e.strs.idx[0] = 0

	dict := p.Dictionary()
	e.attrs = dict.AttributeTable()
	e.nattrs = 0
	e.putSentinelAttr()

	e.writeMappings(f, dict.MappingTable())
	e.writeFunctions(f, dict.FunctionTable())
	e.writeLocations(f, dict.LocationTable())
	e.writeStacks(f, dict.StackTable())
	links := dict.LinkTable()
	at(links, 0)
	truncate(links, 1)

	e.writeResources(f, p.ResourceProfiles())

	truncate(e.attrs, e.nattrs)
	dict.StringTable().FromRaw(e.strTable)
	return pprofileotlp.NewExportRequestFromProfiles(p)
}

func (e *Encoder) writeMappings(f *encoder.Flush, t pprofile.MappingSlice) {
	n := e.assign(&e.maps, len(f.Mappings))
	t.EnsureCapacity(int(n))
	s := at(t, 0)
	s.SetMemoryStart(0)
	s.SetMemoryLimit(0)
	s.SetFileOffset(0)
	s.SetFilenameStrindex(0)
	s.AttributeIndices().FromRaw(nil)
	for id := 1; id < len(f.Mappings); id++ {
		if e.maps.epoch[id] != e.epoch {
			continue
		}
		m := &f.Mappings[id]
		pm := at(t, int(e.maps.idx[id]))
		pm.SetMemoryStart(m.Start)
		pm.SetMemoryLimit(m.End)
		pm.SetFileOffset(m.FileOffset)
		pm.SetFilenameStrindex(e.strs.idx[mappingFile(m)])
		attrs := e.i32[:0]
		switch {
		case m.GNUBuildID != 0:
			attrs = append(attrs, e.strAttrIndex(AttrBuildIDGNU, f.Strings[m.GNUBuildID]))
		case e.cfg.FileIDAsGNUBuildID && !m.FileID.IsZero():
			attrs = append(attrs, e.strAttrIndex(AttrBuildIDGNU, e.fileIDHex(f, uint32(id))))
		}
		if m.GoBuildID != 0 {
			attrs = append(attrs, e.strAttrIndex(AttrBuildIDGo, f.Strings[m.GoBuildID]))
		}
		if !m.FileID.IsZero() {
			attrs = append(attrs, e.strAttrIndex(AttrBuildIDHtlhash, e.fileIDHex(f, uint32(id))))
		}
		e.i32 = attrs
		pm.AttributeIndices().FromRaw(attrs)
	}
	truncate(t, int(n))
}

func (e *Encoder) fileIDHex(f *encoder.Flush, id uint32) string {
	for len(e.htlhash) <= int(id) {
		e.htlhash = append(e.htlhash, "")
	}
	if e.htlhash[id] == "" {
		e.htlhash[id] = f.Mappings[id].FileID.Hex()
	}
	return e.htlhash[id]
}

func (e *Encoder) writeFunctions(f *encoder.Flush, t pprofile.FunctionSlice) {
	n := e.assign(&e.funcs, len(f.Functions))
	t.EnsureCapacity(int(n))
	s := at(t, 0)
	s.SetNameStrindex(0)
	s.SetSystemNameStrindex(0)
	s.SetFilenameStrindex(0)
	s.SetStartLine(0)
	for id := 1; id < len(f.Functions); id++ {
		if e.funcs.epoch[id] != e.epoch {
			continue
		}
		fn := &f.Functions[id]
		pf := at(t, int(e.funcs.idx[id]))
		pf.SetNameStrindex(e.strs.idx[fn.Name])
		pf.SetSystemNameStrindex(0)
		pf.SetFilenameStrindex(e.strs.idx[fn.File])
		pf.SetStartLine(0)
	}
	truncate(t, int(n))
}

func (e *Encoder) writeLocations(f *encoder.Flush, t pprofile.LocationSlice) {
	n := e.assign(&e.locs, len(f.Locations))
	t.EnsureCapacity(int(n))
	s := at(t, 0)
	s.SetMappingIndex(0)
	s.SetAddress(0)
	truncate(s.Lines(), 0)
	s.AttributeIndices().FromRaw(nil)
	for id := 1; id < len(f.Locations); id++ {
		if e.locs.epoch[id] != e.epoch {
			continue
		}
		l := &f.Locations[id]
		pl := at(t, int(e.locs.idx[id]))
		mi := int32(0)
		if l.Mapping != 0 {
			mi = e.maps.idx[l.Mapping]
		}
		pl.SetMappingIndex(mi)
		pl.SetAddress(l.Address)
		lines := pl.Lines()
		if native := f.NativeLines(uint32(id)); len(native) > 0 { // named by the encoder's symbolizer
			truncate(lines, len(native))
			for i, ln := range native {
				line := at(lines, i)
				line.SetFunctionIndex(e.funcs.idx[ln.Function])
				line.SetLine(int64(ln.Line))
				line.SetColumn(0)
			}
		} else if l.Function != 0 || l.Line != 0 {
			line := at(lines, 0)
			truncate(lines, 1)
			fi := int32(0)
			if l.Function != 0 {
				fi = e.funcs.idx[l.Function]
			}
			line.SetFunctionIndex(fi)
			line.SetLine(int64(l.Line))
			line.SetColumn(int64(l.Column))
		} else {
			truncate(lines, 0)
		}
		attrs := append(e.i32[:0], e.frameTypeAttr(l))
		e.i32 = attrs
		pl.AttributeIndices().FromRaw(attrs)
	}
	truncate(t, int(n))
}

func (e *Encoder) writeStacks(f *encoder.Flush, t pprofile.StackSlice) {
	n := e.assign(&e.stacks, f.NumStacks())
	e.stacks.idx[0] = 0
	t.EnsureCapacity(int(n))
	at(t, 0).LocationIndices().FromRaw(nil)
	for id := 1; id < f.NumStacks(); id++ {
		if e.stacks.epoch[id] != e.epoch {
			continue
		}
		idx := e.i32[:0]
		for _, l := range f.Stack(uint32(id)) {
			idx = append(idx, e.locs.idx[l])
		}
		e.i32 = idx
		at(t, int(e.stacks.idx[id])).LocationIndices().FromRaw(idx)
	}
	truncate(t, int(n))
}

// Attribute table. Entries are written in order of first use; an entry
// already holding the same content (from a recycled request) is left alone,
// which avoids pcommon.Value's allocation.

func (e *Encoder) nextAttr(key int32) pprofile.KeyValueAndUnit {
	kv := at(e.attrs, e.nattrs)
	e.nattrs++
	if kv.KeyStrindex() != key {
		kv.SetKeyStrindex(key)
	}
	if kv.UnitStrindex() != 0 {
		kv.SetUnitStrindex(0)
	}
	return kv
}

func (e *Encoder) putSentinelAttr() {
	kv := e.nextAttr(0)
	if kv.Value().Type() != pcommon.ValueTypeEmpty {
		pcommon.NewValueEmpty().CopyTo(kv.Value())
	}
}

func (e *Encoder) putInt(key int32, v int64) int32 {
	idx := int32(e.nattrs)
	val := e.nextAttr(key).Value()
	if val.Type() != pcommon.ValueTypeInt || val.Int() != v {
		val.SetInt(v)
	}
	return idx
}

func (e *Encoder) putStr(key int32, v string) int32 {
	idx := int32(e.nattrs)
	val := e.nextAttr(key).Value()
	if val.Type() != pcommon.ValueTypeStr || val.Str() != v {
		val.SetStr(v)
	}
	return idx
}

func (e *Encoder) strAttrIndex(key, val string) int32 {
	k := strAttrKey{key: e.str(key), val: val}
	if i, ok := e.strAttr[k]; ok {
		return i
	}
	i := e.putStr(k.key, val)
	e.strAttr[k] = i
	return i
}

func (e *Encoder) frameTypeAttr(l *encoder.Location) int32 {
	slot := int(l.Kind) << 1
	if l.Error {
		slot |= 1
	}
	if e.frameAttrEpoch[slot] != e.epoch {
		e.frameAttrEpoch[slot] = e.epoch
		e.frameAttr[slot] = e.strAttrIndex(AttrFrameType, l.FrameType())
	}
	return e.frameAttr[slot]
}

func (e *Encoder) tidAttrIndex(tid uint32) int32 {
	if i, ok := e.tidAttr[tid]; ok {
		return i
	}
	i := e.putInt(e.str(AttrThreadID), int64(tid))
	e.tidAttr[tid] = i
	return i
}

func (e *Encoder) cpuAttrIndex(cpu uint32) int32 {
	e.cpuAttr.grow(int(cpu) + 1)
	if e.cpuAttr.epoch[cpu] != e.epoch {
		e.cpuAttr.epoch[cpu] = e.epoch
		e.cpuAttr.idx[cpu] = e.putInt(e.str(AttrCPU), int64(cpu))
	}
	return e.cpuAttr.idx[cpu]
}

func (e *Encoder) threadAttrIndex(f *encoder.Flush, name uint32) int32 {
	if e.threadAttr.epoch[name] != e.epoch {
		e.threadAttr.epoch[name] = e.epoch
		e.threadAttr.idx[name] = e.putStr(e.str(AttrThreadName), f.Strings[name])
	}
	return e.threadAttr.idx[name]
}

func (e *Encoder) labelAttrIndex(f *encoder.Flush, kv encoder.KeyValue) int32 {
	key, ok := e.labelKeys[kv.Key]
	if !ok {
		key = AttrLabelPrefix + f.Strings[kv.Key]
		e.labelKeys[kv.Key] = key
	}
	return e.strAttrIndex(key, f.Strings[kv.Value])
}

// writeResources emits one ResourceProfiles per resource with samples and
// one Profile per sample type within it.
func (e *Encoder) writeResources(f *encoder.Flush, rps pprofile.ResourceProfilesSlice) {
	if len(f.Samples) == 0 {
		truncate(rps, 0)
		return
	}
	// Sample types present, and each sample's.
	e.types = e.types[:0]
	e.sampleTypes = e.sampleTypes[:0]
	e.rowType = e.rowType[:0]
	for i := range f.Samples {
		s := &f.Samples[i]
		k := typeKey{origin: s.Origin, hz: s.FrequencyHz}
		t := -1
		for j := range e.types {
			if e.types[j] == k {
				t = j
				break
			}
		}
		if t < 0 {
			t = len(e.types)
			e.types = append(e.types, k)
			e.sampleTypes = append(e.sampleTypes, encoder.SampleTypeOf(k.origin, k.hz))
		}
		e.rowType = append(e.rowType, int32(t))
	}
	nt := len(e.types)
	// Counting sort of samples by (resource, type), keeping flush order.
	nb := len(f.Resources)*nt + 1
	e.bucketStart = slices.Grow(e.bucketStart[:0], nb)[:nb]
	bs := e.bucketStart
	clear(bs)
	for i := range f.Samples {
		bs[int(f.Samples[i].Resource)*nt+int(e.rowType[i])+1]++
	}
	for b := 1; b < nb; b++ {
		bs[b] += bs[b-1]
	}
	e.order = slices.Grow(e.order[:0], len(f.Samples))[:len(f.Samples)]
	order := e.order
	for i := range f.Samples {
		b := int(f.Samples[i].Resource)*nt + int(e.rowType[i])
		order[bs[b]] = int32(i)
		bs[b]++
	}
	// bs[b] is now the end of bucket b; bucket b starts where b-1 ends.

	rpPos := 0
	for r := range f.Resources {
		first := 0
		if r*nt > 0 {
			first = int(bs[r*nt-1])
		}
		if int(bs[r*nt+nt-1]) == first {
			continue
		}
		rp := at(rps, rpPos)
		rpPos++
		if rp.SchemaUrl() != SchemaURL {
			rp.SetSchemaUrl(SchemaURL)
		}
		e.writeResourceAttrs(f, &f.Resources[r], rp.Resource().Attributes())
		sps := rp.ScopeProfiles()
		sp := at(sps, 0)
		truncate(sps, 1)
		if sp.SchemaUrl() != SchemaURL {
			sp.SetSchemaUrl(SchemaURL)
		}
		if sp.Scope().Name() != e.cfg.ScopeName {
			sp.Scope().SetName(e.cfg.ScopeName)
		}
		if sp.Scope().Version() != e.cfg.ScopeVersion {
			sp.Scope().SetVersion(e.cfg.ScopeVersion)
		}
		profs := sp.Profiles()
		pPos := 0
		for t := range nt {
			b := r*nt + t
			start := 0
			if b > 0 {
				start = int(bs[b-1])
			}
			end := int(bs[b])
			if start == end {
				continue
			}
			prof := at(profs, pPos)
			pPos++
			e.writeProfile(f, prof, &e.sampleTypes[t], order[start:end])
		}
		truncate(profs, pPos)
	}
	truncate(rps, rpPos)
}

func (e *Encoder) writeProfile(f *encoder.Flush, prof pprofile.Profile, st *encoder.SampleType, rows []int32) {
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
		s.SetStackIndex(e.stacks.idx[fs.Stack])
		s.SetLinkIndex(0)
		attrs := append(e.i32[:0], e.tidAttrIndex(fs.TID))
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

func (e *Encoder) writeResourceAttrs(f *encoder.Flush, r *encoder.Resource, m pcommon.Map) {
	kvs := e.resKVs[:0]
	kvs = append(kvs,
		resAttr{key: AttrServiceName, str: f.ServiceName(r)},
		resAttr{key: AttrProcessPID, num: int64(r.PID), isNum: true})
	if name := f.ExecutableName(r); name != "" {
		kvs = append(kvs, resAttr{key: AttrExecutableName, str: name})
	}
	opt := func(key string, id uint32) {
		if id != 0 {
			kvs = append(kvs, resAttr{key: key, str: f.Strings[id]})
		}
	}
	opt(AttrExecutablePath, r.ExecutablePath)
	opt(AttrContainerID, r.ContainerID)
	opt(AttrHostName, r.NodeName)
	opt(AttrSystemdUnit, r.SystemdUnit)
	for _, kv := range f.LabelSet(r.EnvVars) {
		key, ok := e.envKeys[kv.Key]
		if !ok {
			key = AttrEnvVarPrefix + f.Strings[kv.Key]
			e.envKeys[kv.Key] = key
		}
		kvs = append(kvs, resAttr{key: key, str: f.Strings[kv.Value]})
	}
	e.resKVs = kvs
	syncMap(m, kvs)
}

// syncMap makes m hold exactly kvs, touching (and so allocating for) only
// entries that differ.
func syncMap(m pcommon.Map, kvs []resAttr) {
	for i := range kvs {
		kv := &kvs[i]
		v, ok := m.Get(kv.key)
		switch {
		case !ok && kv.isNum:
			m.PutInt(kv.key, kv.num)
		case !ok:
			m.PutStr(kv.key, kv.str)
		case kv.isNum && (v.Type() != pcommon.ValueTypeInt || v.Int() != kv.num):
			v.SetInt(kv.num)
		case !kv.isNum && (v.Type() != pcommon.ValueTypeStr || v.Str() != kv.str):
			v.SetStr(kv.str)
		}
	}
	if m.Len() > len(kvs) {
		m.RemoveIf(func(k string, _ pcommon.Value) bool {
			for i := range kvs {
				if kvs[i].key == k {
					return false
				}
			}
			return true
		})
	}
}
