package pprofout

import (
	"github.com/google/pprof/profile"

	"github.com/tandem-profiler/tandem/encoder"
)

// Label keys.
const (
	LabelPID        = "pid"
	LabelTID        = "tid"
	LabelCPU        = "cpu"
	LabelComm       = "comm"
	LabelThreadName = "thread_name"
)

// Profile converts f into a pprof profile holding the samples of the
// interval. f is only read.
func Profile(f *encoder.Flush) *profile.Profile {
	p := &profile.Profile{
		TimeNanos:     f.StartUnixNano,
		DurationNanos: f.EndUnixNano - f.StartUnixNano,
	}

	// Sample types, in order of first appearance.
	typeIndex := map[[2]string]int{}
	sampleType := make([]int, len(f.Samples))
	for i := range f.Samples {
		s := &f.Samples[i]
		st := encoder.SampleTypeOf(s.Origin, s.FrequencyHz)
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
		file := f.Strings[fm.Path]
		if file == "" {
			file = f.Strings[fm.FileName]
		}
		buildID := f.Strings[fm.GNUBuildID]
		if buildID == "" {
			buildID = f.Strings[fm.GoBuildID]
		}
		if buildID == "" && !fm.FileID.IsZero() {
			buildID = fm.FileID.Hex()
		}
		m := &profile.Mapping{
			ID:      uint64(len(p.Mapping) + 1),
			Start:   fm.Start,
			Limit:   fm.End,
			Offset:  fm.FileOffset,
			File:    file,
			BuildID: buildID,
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
			SystemName: f.Strings[ff.Name],
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
		if fl.Function != 0 {
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
		}
		ps.Value[sampleType[i]] = s.Total()
		labels := map[string][]string{}
		if comm := f.Strings[r.Comm]; comm != "" {
			labels[LabelComm] = []string{comm}
		}
		if name := f.Strings[s.ThreadName]; name != "" {
			labels[LabelThreadName] = []string{name}
		}
		for _, kv := range f.LabelSet(s.Labels) {
			k := f.Strings[kv.Key]
			labels[k] = append(labels[k], f.Strings[kv.Value])
		}
		if len(labels) > 0 {
			ps.Label = labels
		}
		for _, l := range f.Stack(s.Stack) {
			ps.Location = append(ps.Location, location(l))
		}
		p.Sample = append(p.Sample, ps)
	}
	return p
}
