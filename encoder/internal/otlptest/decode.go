// Package otlptest checks OTLP/profiles requests the way a strict receiver
// would and resolves them back to content, for the encoder's tests. It is
// imported only by _test.go files.
package otlptest

import (
	"fmt"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pprofile"

	"github.com/tandem-profiler/tandem/encoder/internal/testcorpus"
	"github.com/tandem-profiler/tandem/schema"
)

// Resource is a decoded resource's attributes.
type Resource struct {
	Attrs map[string]any // string or int64 values
}

// Result is a decoded request.
type Result struct {
	Events    []testcorpus.Event
	Resources []Resource
	// ProfileTypes lists "type/unit period_type/period_unit period" of every
	// Profile, in order.
	ProfileTypes []string
}

var frameKinds = func() map[string]schema.FrameKind {
	m := map[string]schema.FrameKind{}
	for k := schema.FrameKind(0); k <= schema.FrameLuaJIT; k++ {
		if _, ok := m[k.String()]; !ok {
			m[k.String()] = k
		}
	}
	return m
}()

type checker struct {
	errs []string
}

func (c *checker) errorf(format string, args ...any) {
	if len(c.errs) < 20 {
		c.errs = append(c.errs, fmt.Sprintf(format, args...))
	}
}

func inRange[T interface{ Len() int }](c *checker, what string, t T, i int32) bool {
	if i < 0 || int(i) >= t.Len() {
		c.errorf("%s index %d out of range [0, %d)", what, i, t.Len())
		return false
	}
	return true
}

// Decode validates p as Parca's OTLP ingester and the specification demand
// (dictionary present with zero-valued entry 0 in every table, indices in
// range, one sample type per profile with a period type, samples with
// timestamps inside the profile's time range, unique resource attribute
// keys) and resolves every observation back to content. It returns an error
// listing the first problems found.
func Decode(p pprofile.Profiles) (*Result, error) {
	c := &checker{}
	d := p.Dictionary()
	strs := d.StringTable()
	str := func(i int32) string {
		if !inRange(c, "string", strs, i) {
			return ""
		}
		return strs.At(int(i))
	}
	// Every table has a zero-valued entry 0.
	switch {
	case strs.Len() == 0 || strs.At(0) != "":
		c.errorf("string_table[0] is not \"\"")
	case d.MappingTable().Len() == 0 || !d.MappingTable().At(0).Equal(pprofile.NewMapping()):
		c.errorf("mapping_table[0] is not the zero mapping")
	case d.FunctionTable().Len() == 0 || !d.FunctionTable().At(0).Equal(pprofile.NewFunction()):
		c.errorf("function_table[0] is not zero")
	case d.LocationTable().Len() == 0 || !d.LocationTable().At(0).Equal(pprofile.NewLocation()):
		c.errorf("location_table[0] is not zero")
	case d.LinkTable().Len() == 0 || !d.LinkTable().At(0).Equal(pprofile.NewLink()):
		c.errorf("link_table[0] is not zero")
	case d.AttributeTable().Len() == 0 || !d.AttributeTable().At(0).Equal(pprofile.NewKeyValueAndUnit()):
		c.errorf("attribute_table[0] is not zero")
	case d.StackTable().Len() == 0 || d.StackTable().At(0).LocationIndices().Len() != 0:
		c.errorf("stack_table[0] is not empty")
	}
	if len(c.errs) > 0 {
		return nil, fmt.Errorf("invalid dictionary: %s", strings.Join(c.errs, "; "))
	}

	attrs := d.AttributeTable()
	attr := func(i int32) (string, pcommon.Value, bool) {
		if !inRange(c, "attribute", attrs, i) {
			return "", pcommon.NewValueEmpty(), false
		}
		kv := attrs.At(int(i))
		return str(kv.KeyStrindex()), kv.Value(), true
	}
	for i := 1; i < attrs.Len(); i++ {
		if attrs.At(i).KeyStrindex() == 0 {
			c.errorf("attribute %d has no key", i)
		}
	}

	frame := func(li int32) testcorpus.Frame {
		if !inRange(c, "location", d.LocationTable(), li) {
			return testcorpus.Frame{}
		}
		loc := d.LocationTable().At(int(li))
		fr := testcorpus.Frame{Address: loc.Address()}
		kindSeen := false
		for _, ai := range loc.AttributeIndices().All() {
			k, v, ok := attr(ai)
			if ok && k == "profile.frame.type" {
				kindSeen = true
				if v.Str() == "abort-marker" {
					fr.Kind, fr.Error = schema.FrameUnknown, true
				} else if kind, ok := frameKinds[v.Str()]; ok {
					fr.Kind = kind
				} else {
					c.errorf("unknown frame type %q", v.Str())
				}
			}
		}
		if !kindSeen {
			c.errorf("location %d has no profile.frame.type", li)
		}
		if mi := loc.MappingIndex(); mi != 0 && inRange(c, "mapping", d.MappingTable(), mi) {
			m := d.MappingTable().At(int(mi))
			fr.MappingFile = str(m.FilenameStrindex())
			if fr.MappingFile == "" {
				c.errorf("mapping %d has no file name", mi)
			}
			for _, ai := range m.AttributeIndices().All() {
				if k, v, ok := attr(ai); ok && k == "process.executable.build_id.gnu" {
					fr.MappingBuildID = v.Str()
				}
			}
		}
		switch loc.Lines().Len() {
		case 0:
		case 1:
			line := loc.Lines().At(0)
			fr.Line = uint32(line.Line())
			if fi := line.FunctionIndex(); fi != 0 && inRange(c, "function", d.FunctionTable(), fi) {
				fn := d.FunctionTable().At(int(fi))
				fr.Function, fr.File = str(fn.NameStrindex()), str(fn.FilenameStrindex())
			}
		default:
			c.errorf("location %d has %d lines", li, loc.Lines().Len())
		}
		return fr
	}
	stackCache := map[int32]string{}
	stack := func(si int32) string {
		if s, ok := stackCache[si]; ok {
			return s
		}
		if !inRange(c, "stack", d.StackTable(), si) {
			return ""
		}
		var frames []testcorpus.Frame
		for _, li := range d.StackTable().At(int(si)).LocationIndices().All() {
			frames = append(frames, frame(li))
		}
		s := testcorpus.StackString(frames)
		stackCache[si] = s
		return s
	}

	res := &Result{}
	for _, rp := range p.ResourceProfiles().All() {
		r := Resource{Attrs: map[string]any{}}
		for k, v := range rp.Resource().Attributes().All() {
			if k == "" {
				c.errorf("resource attribute with an empty key")
			}
			if _, dup := r.Attrs[k]; dup {
				c.errorf("duplicate resource attribute %q", k)
			}
			switch v.Type() {
			case pcommon.ValueTypeInt:
				r.Attrs[k] = v.Int()
			case pcommon.ValueTypeStr:
				r.Attrs[k] = v.Str()
			default:
				c.errorf("resource attribute %q has type %s", k, v.Type())
			}
		}
		res.Resources = append(res.Resources, r)
		if name, _ := r.Attrs["service.name"].(string); name == "" {
			c.errorf("resource without service.name: %v", r.Attrs)
		}
		pid, ok := r.Attrs["process.pid"].(int64)
		if !ok {
			c.errorf("resource without process.pid: %v", r.Attrs)
		}
		for _, sp := range rp.ScopeProfiles().All() {
			seen := map[string]bool{}
			for _, prof := range sp.Profiles().All() {
				typ, unit := str(prof.SampleType().TypeStrindex()), str(prof.SampleType().UnitStrindex())
				ptyp, punit := str(prof.PeriodType().TypeStrindex()), str(prof.PeriodType().UnitStrindex())
				key := fmt.Sprintf("%s/%s %s/%s %d", typ, unit, ptyp, punit, prof.Period())
				res.ProfileTypes = append(res.ProfileTypes, key)
				if seen[key] {
					c.errorf("two profiles of type %s in one scope", key)
				}
				seen[key] = true
				if typ == "" || unit == "" || ptyp == "" || punit == "" || prof.Period() < 0 {
					c.errorf("profile type %q incomplete", key)
				}
				if prof.Samples().Len() == 0 {
					c.errorf("profile %s without samples", key)
				}
				var origin schema.Origin
				switch {
				case typ == "samples":
					origin = schema.OriginCPUSampling
				case typ == "wallclock":
					origin = schema.OriginOffCPU
				case typ == "events":
					origin = schema.OriginProbe
				case strings.HasPrefix(typ, "unknown_origin_"):
					n, err := strconv.Atoi(strings.TrimPrefix(typ, "unknown_origin_"))
					if err != nil {
						c.errorf("bad type %q", typ)
					}
					origin = schema.Origin(n)
				default:
					c.errorf("unexpected sample type %q", typ)
				}
				lo, hi := uint64(prof.Time()), uint64(prof.Time())+prof.DurationNano()
				for _, s := range prof.Samples().All() {
					ev := testcorpus.Event{PID: uint32(pid), Origin: origin, Stack: stack(s.StackIndex())}
					if s.LinkIndex() != 0 {
						c.errorf("unexpected link %d", s.LinkIndex())
					}
					var labels [][2]string
					for _, ai := range s.AttributeIndices().All() {
						k, v, ok := attr(ai)
						if !ok {
							continue
						}
						switch {
						case k == "thread.id":
							ev.TID = uint32(v.Int())
						case k == "thread.name":
							ev.ThreadName = v.Str()
						case k == "cpu.logical_number":
							ev.CPU = uint32(v.Int())
						case strings.HasPrefix(k, "process.context.label."):
							labels = append(labels, [2]string{strings.TrimPrefix(k, "process.context.label."), v.Str()})
						default:
							c.errorf("unexpected sample attribute %q", k)
						}
					}
					ev.Labels = testcorpus.LabelString(labels)
					ts, vals := s.TimestampsUnixNano(), s.Values()
					if ts.Len() == 0 && vals.Len() == 0 {
						c.errorf("sample with neither values nor timestamps")
					}
					if vals.Len() != 0 && vals.Len() != ts.Len() {
						c.errorf("sample with %d values and %d timestamps", vals.Len(), ts.Len())
						continue
					}
					for i, t := range ts.All() {
						if t < lo || t > hi {
							c.errorf("timestamp %d outside [%d, %d]", t, lo, hi)
						}
						e := ev
						e.TimestampNS = int64(t)
						e.Value = 1
						if vals.Len() > 0 {
							e.Value = vals.At(i)
						}
						res.Events = append(res.Events, e)
					}
				}
			}
		}
	}
	if len(c.errs) > 0 {
		return res, fmt.Errorf("invalid request: %s", strings.Join(c.errs, "; "))
	}
	return res, nil
}
