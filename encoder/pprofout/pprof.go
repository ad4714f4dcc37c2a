package pprofout

import (
	"encoding/hex"
	"strings"

	"github.com/google/pprof/profile"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
)

// Label keys.
const (
	LabelPID        = "pid"
	LabelTID        = "tid"
	LabelCPU        = "cpu"
	LabelComm       = "comm"
	LabelThreadName = "thread_name"
	// LabelTraceID and LabelSpanID carry a sample's trace link, in
	// lower-case hex (32 and 16 digits, as W3C traceparent spells them).
	// span_id is the label Pyroscope's span profiles select by (its Go and
	// Java OpenTelemetry integrations set it), and both are string labels,
	// so `go tool pprof -tagfocus=span_id=<hex>` or `-tagfocus
	// trace_id=<hex>` keeps one span's or one trace's samples.
	LabelTraceID = "trace_id"
	LabelSpanID  = "span_id"
)

// idUnit is the unit of the numeric labels. pprof's decoder drops a
// numeric label whose value and unit are both zero, so without a unit
// cpu 0 (and any other 0) would vanish from the file.
const idUnit = "id"

var idUnits = []string{idUnit}

// systemName is the name pprof may demangle: the name itself when it looks
// mangled (Itanium C++ or Rust v0), else none. pprof rewrites a function
// whose name equals its system name: it demangles it, or, when the name
// merely looks like demangled C++ (it has <>, [] or ::), strips what is
// between brackets, so Python's "<module>" showed as "" (then
// "<unknown>"). With no system name pprof shows the name as written.
func systemName(name string) string {
	if strings.HasPrefix(name, "_Z") || strings.HasPrefix(name, "_R") {
		return name
	}
	return ""
}

// Profile converts f into a pprof profile holding the samples of the
// interval. f is only read.
func Profile(f *aggregate.Flush) *profile.Profile {
	p := &profile.Profile{
		TimeNanos:     f.StartUnixNano,
		DurationNanos: f.EndUnixNano - f.StartUnixNano,
	}

	// Sample types, in order of first appearance.
	typeIndex := map[[2]string]int{}
	sampleType := make([]int, len(f.Samples))
	for i := range f.Samples {
		s := &f.Samples[i]
		st := aggregate.SampleTypeOf(s.Origin, s.FrequencyHz)
		key := [2]string{st.Type, st.Unit}
		idx, ok := typeIndex[key]
		if !ok {
			idx = len(p.SampleType)
			typeIndex[key] = idx
			p.SampleType = append(p.SampleType, &profile.ValueType{Type: st.Type, Unit: st.Unit})
			if p.PeriodType == nil || st.PeriodType == "cpu" && p.PeriodType.Type != "cpu" {
				p.PeriodType = &profile.ValueType{Type: st.PeriodType, Unit: st.PeriodUnit}
				p.Period = st.Period
			}
		}
		sampleType[i] = idx
	}
	if _, ok := typeIndex[[2]string{"samples", "count"}]; ok {
		p.DefaultSampleType = "samples"
	}

	mappings := map[uint32]*profile.Mapping{}
	mapping := func(id uint32) *profile.Mapping {
		if m, ok := mappings[id]; ok {
			return m
		}
		fm := &f.Mappings[id]
		file := f.MappingPath(fm)
		if file == "" {
			file = f.Strings[fm.FileName]
		}
		m := &profile.Mapping{
			ID:      uint64(len(p.Mapping) + 1),
			Start:   fm.Start,
			Limit:   fm.End,
			Offset:  fm.FileOffset,
			File:    file,
			BuildID: f.ExecutableKey(fm).String(),
		}
		p.Mapping = append(p.Mapping, m)
		mappings[id] = m
		return m
	}
	functions := map[uint32]*profile.Function{}
	function := func(id uint32) *profile.Function {
		if fn, ok := functions[id]; ok {
			return fn
		}
		ff := &f.Functions[id]
		fn := &profile.Function{
			ID:         uint64(len(p.Function) + 1),
			Name:       f.Strings[ff.Name],
			SystemName: systemName(f.Strings[ff.Name]),
			Filename:   f.Strings[ff.File],
		}
		p.Function = append(p.Function, fn)
		functions[id] = fn
		return fn
	}
	locations := map[uint32]*profile.Location{}
	location := func(id uint32) *profile.Location {
		if l, ok := locations[id]; ok {
			return l
		}
		fl := &f.Locations[id]
		l := &profile.Location{ID: uint64(len(p.Location) + 1), Address: fl.Address}
		if fl.Mapping != 0 {
			l.Mapping = mapping(fl.Mapping)
		}
		if lines := f.NativeLines(id); len(lines) > 0 { // named by the encoder's symbolizer
			for _, ln := range lines {
				l.Line = append(l.Line, profile.Line{Function: function(ln.Function), Line: int64(ln.Line)})
			}
		} else if fl.Function != 0 {
			l.Line = []profile.Line{{Function: function(fl.Function), Line: int64(fl.Line), Column: int64(fl.Column)}}
		}
		p.Location = append(p.Location, l)
		locations[id] = l
		return l
	}

	for i := range f.Samples {
		s := &f.Samples[i]
		r := &f.Resources[s.Resource]
		ps := &profile.Sample{
			Value: make([]int64, len(p.SampleType)),
			NumLabel: map[string][]int64{
				LabelPID: {int64(r.PID)},
				LabelTID: {int64(s.TID)},
				LabelCPU: {int64(s.CPU)},
			},
			NumUnit: map[string][]string{LabelPID: idUnits, LabelTID: idUnits, LabelCPU: idUnits},
		}
		ps.Value[sampleType[i]] = s.Total()
		labels := map[string][]string{}
		if comm := f.Strings[r.Comm]; comm != "" {
			labels[LabelComm] = []string{comm}
		}
		for k, v := range f.ProcessLabels(r) {
			labels[k] = append(labels[k], v)
		}
		if name := f.Strings[s.ThreadName]; name != "" {
			labels[LabelThreadName] = []string{name}
		}
		for _, kv := range f.LabelSet(s.Labels) {
			k := f.Strings[kv.Key]
			labels[k] = append(labels[k], f.Strings[kv.Value])
		}
		if s.Link != 0 {
			l := &f.Links[s.Link]
			labels[LabelTraceID] = []string{hex.EncodeToString(l.TraceID[:])}
			labels[LabelSpanID] = []string{hex.EncodeToString(l.SpanID[:])}
		}
		if w := f.Workload(r); w != nil { // namespace, pod, container, container_image
			for _, a := range w.Labels {
				if _, taken := labels[a.Key]; !taken {
					labels[a.Key] = []string{a.Value}
				}
			}
		}
		if len(labels) > 0 {
			ps.Label = labels
		}
		for _, l := range f.Stack(s.Stack) {
			ps.Location = append(ps.Location, location(l))
		}
		p.Sample = append(p.Sample, ps)
	}
	markSymbolized(p)
	return p
}

// markSymbolized sets HasFunctions (and HasFilenames, HasLineNumbers) on
// mappings all of whose locations have that information, so that pprof
// does not try to symbolize them again from local files.
func markSymbolized(p *profile.Profile) {
	type has struct{ locs, fn, file, line int }
	seen := map[*profile.Mapping]*has{}
	for _, l := range p.Location {
		if l.Mapping == nil {
			continue
		}
		h := seen[l.Mapping]
		if h == nil {
			h = &has{}
			seen[l.Mapping] = h
		}
		h.locs++
		if len(l.Line) > 0 && l.Line[0].Function != nil {
			ln := l.Line[0]
			h.fn += b2i(ln.Function.Name != "")
			h.file += b2i(ln.Function.Filename != "")
			h.line += b2i(ln.Line > 0)
		}
	}
	for m, h := range seen {
		m.HasFunctions, m.HasFilenames, m.HasLineNumbers = h.fn == h.locs, h.file == h.locs, h.line == h.locs
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
