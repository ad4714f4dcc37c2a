package otlptest

import (
	"fmt"
	"strconv"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pprofile"
)

// Frame is one resolved stack frame.
type Frame struct {
	Type     string // profile.frame.type
	Function string // first line's function name, "" when unsymbolized
	File     string
	Line     int64
	Address  uint64
	// Mapping fields; empty for the "no mapping" sentinel.
	MappingFile string
	BuildID     string // process.executable.build_id.gnu, else .go, else .htlhash
	GoBuildID   string
}

// Sample is one resolved sample.
type Sample struct {
	SampleType, SampleUnit string
	PeriodType, PeriodUnit string
	Period                 int64
	Resource               map[string]string // resource attributes, as strings
	Attributes             map[string]string // sample attributes, as strings
	Frames                 []Frame           // leaf first
	Values                 []int64
	Timestamps             []uint64
}

// Total returns the sum of the sample's values, or the number of its
// timestamps when it has no values.
func (s *Sample) Total() int64 {
	if len(s.Values) == 0 {
		return int64(len(s.Timestamps))
	}
	var t int64
	for _, v := range s.Values {
		t += v
	}
	return t
}

// Flatten resolves every sample of p. It fails on any dictionary invariant
// violation or out-of-range index.
func Flatten(p pprofile.Profiles) ([]Sample, error) {
	d := p.Dictionary()
	strs := d.StringTable()
	if strs.Len() == 0 || strs.At(0) != "" {
		return nil, fmt.Errorf("string table entry 0 must be the empty string")
	}
	str := func(i int32) (string, error) {
		if i < 0 || int(i) >= strs.Len() {
			return "", fmt.Errorf("string index %d out of range [0,%d)", i, strs.Len())
		}
		return strs.At(int(i)), nil
	}
	maps := d.MappingTable()
	if maps.Len() == 0 {
		return nil, fmt.Errorf("mapping table is empty: entry 0 must be the no-mapping sentinel")
	}
	if m := maps.At(0); m.FilenameStrindex() != 0 || m.MemoryStart() != 0 || m.MemoryLimit() != 0 || m.AttributeIndices().Len() != 0 {
		return nil, fmt.Errorf("mapping 0 is not the zero sentinel")
	}
	attrs := d.AttributeTable()
	attr := func(i int32) (string, string, error) {
		if i < 0 || int(i) >= attrs.Len() {
			return "", "", fmt.Errorf("attribute index %d out of range [0,%d)", i, attrs.Len())
		}
		kv := attrs.At(int(i))
		k, err := str(kv.KeyStrindex())
		if err != nil {
			return "", "", err
		}
		return k, valueString(kv.Value()), nil
	}
	attrMap := func(idx pcommon.Int32Slice) (map[string]string, error) {
		m := make(map[string]string, idx.Len())
		for _, i := range idx.All() {
			k, v, err := attr(i)
			if err != nil {
				return nil, err
			}
			m[k] = v
		}
		return m, nil
	}
	locs, funcs, stacks := d.LocationTable(), d.FunctionTable(), d.StackTable()

	var out []Sample
	for _, rp := range p.ResourceProfiles().All() {
		res := make(map[string]string)
		for k, v := range rp.Resource().Attributes().All() {
			res[k] = valueString(v)
		}
		for _, sp := range rp.ScopeProfiles().All() {
			for _, prof := range sp.Profiles().All() {
				st, err := str(prof.SampleType().TypeStrindex())
				if err != nil {
					return nil, err
				}
				su, err := str(prof.SampleType().UnitStrindex())
				if err != nil {
					return nil, err
				}
				pt, _ := str(prof.PeriodType().TypeStrindex())
				pu, _ := str(prof.PeriodType().UnitStrindex())
				for si, s := range prof.Samples().All() {
					fs := Sample{SampleType: st, SampleUnit: su, PeriodType: pt, PeriodUnit: pu, Period: prof.Period(),
						Resource: res, Values: s.Values().AsRaw(), Timestamps: s.TimestampsUnixNano().AsRaw()}
					if fs.Attributes, err = attrMap(s.AttributeIndices()); err != nil {
						return nil, fmt.Errorf("sample %d: %w", si, err)
					}
					sti := s.StackIndex()
					if sti < 0 || int(sti) >= stacks.Len() {
						return nil, fmt.Errorf("sample %d: stack index %d out of range [0,%d)", si, sti, stacks.Len())
					}
					for _, li := range stacks.At(int(sti)).LocationIndices().All() {
						if li < 0 || int(li) >= locs.Len() {
							return nil, fmt.Errorf("sample %d: location index %d out of range [0,%d)", si, li, locs.Len())
						}
						loc := locs.At(int(li))
						fr := Frame{Address: loc.Address()}
						la, err := attrMap(loc.AttributeIndices())
						if err != nil {
							return nil, fmt.Errorf("location %d: %w", li, err)
						}
						fr.Type = la["profile.frame.type"]
						mi := loc.MappingIndex()
						if mi < 0 || int(mi) >= maps.Len() {
							return nil, fmt.Errorf("location %d: mapping index %d out of range [0,%d)", li, mi, maps.Len())
						}
						if mi > 0 {
							m := maps.At(int(mi))
							if fr.MappingFile, err = str(m.FilenameStrindex()); err != nil {
								return nil, err
							}
							ma, err := attrMap(m.AttributeIndices())
							if err != nil {
								return nil, fmt.Errorf("mapping %d: %w", mi, err)
							}
							fr.GoBuildID = ma["process.executable.build_id.go"]
							fr.BuildID = firstNonEmpty(ma["process.executable.build_id.gnu"], fr.GoBuildID, ma["process.executable.build_id.htlhash"])
						}
						if loc.Lines().Len() > 0 {
							ln := loc.Lines().At(0)
							fi := ln.FunctionIndex()
							if fi < 0 || int(fi) >= funcs.Len() {
								return nil, fmt.Errorf("location %d: function index %d out of range [0,%d)", li, fi, funcs.Len())
							}
							fn := funcs.At(int(fi))
							if fr.Function, err = str(fn.NameStrindex()); err != nil {
								return nil, err
							}
							if fr.File, err = str(fn.FilenameStrindex()); err != nil {
								return nil, err
							}
							fr.Line = ln.Line()
						}
						fs.Frames = append(fs.Frames, fr)
					}
					out = append(out, fs)
				}
			}
		}
	}
	return out, nil
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

func valueString(v pcommon.Value) string {
	switch v.Type() {
	case pcommon.ValueTypeStr:
		return v.Str()
	case pcommon.ValueTypeInt:
		return strconv.FormatInt(v.Int(), 10)
	default:
		return v.AsString()
	}
}
