package otlptest

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pprofile"
)

// Frame is one resolved stack frame.
type Frame struct {
	Type     string // profile.frame.type
	Function string // first line's function name, "" when unsymbolized
	File     string
	Line     int64
	Lines    int // number of lines of the location
	// Functions names every line's function, innermost (first line)
	// first, separated by ";" (a string, so that Frame stays comparable).
	Functions string
	Address   uint64
	// Mapping fields; empty for the "no mapping" sentinel.
	MappingFile string
	BuildID     string // process.executable.build_id.gnu, else .go, else .htlhash
	GNUBuildID  string
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
	// TraceID and SpanID are the sample's link (lower-case hex), "" when
	// it has none.
	TraceID, SpanID string
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

// Profile is one resolved profile: its type and its samples.
type Profile struct {
	SampleType, SampleUnit string
	PeriodType, PeriodUnit string
	Period                 int64
	Samples                []Sample
}

// TypeString renders the profile type as "type/unit period_type/period_unit
// period".
func (p *Profile) TypeString() string {
	return fmt.Sprintf("%s/%s %s/%s %d", p.SampleType, p.SampleUnit, p.PeriodType, p.PeriodUnit, p.Period)
}

// Resource is one resolved ResourceProfiles.
type Resource struct {
	Attributes map[string]string
	Profiles   []Profile // of all its scopes, in order
}

// Request is a resolved request, in wire order.
type Request struct {
	Resources []Resource
}

// Samples returns every sample of the request in order.
func (r *Request) Samples() []Sample {
	var out []Sample
	for _, res := range r.Resources {
		for _, p := range res.Profiles {
			out = append(out, p.Samples...)
		}
	}
	return out
}

// Flatten resolves every sample of p through Decode.
func Flatten(p pprofile.Profiles) ([]Sample, error) {
	r, err := Decode(p)
	if err != nil {
		return nil, err
	}
	return r.Samples(), nil
}

// Decode checks p the way a strict receiver would — what the OTLP
// specification and Parca's ingester demand: a dictionary whose tables all
// start with the zero entry, every index in range, attributes with keys and
// values, string values and resource attribute keys inline (neither Parca
// nor Pyroscope resolves string-table references there, and pdata's gRPC
// server hands them on unresolved), every location typed
// (profile.frame.type), resources with a service.name
// and a process.pid and only string or int attributes, one complete sample
// type per profile and no two profiles of one type in a scope, no empty
// profiles, samples with values or timestamps (never a different number of
// each) and timestamps inside their profile's time range, a link table of
// distinct links with both ids set (entry 0 aside) — and
// resolves every sample to plain frames and attributes. It reports the
// first problems found, together.
func Decode(p pprofile.Profiles) (*Request, error) {
	d := &decoder{dict: p.Dictionary()}
	if !d.checkZeroEntries() || !d.checkLinks() {
		return nil, d.err("invalid dictionary")
	}
	req := &Request{}
	for ri, rp := range p.ResourceProfiles().All() {
		res := Resource{Attributes: d.resourceAttributes(ri, rp.Resource().Attributes())}
		for _, sp := range rp.ScopeProfiles().All() {
			seen := map[string]bool{}
			for _, prof := range sp.Profiles().All() {
				pr := d.profile(prof, res.Attributes)
				key := pr.TypeString()
				if seen[key] {
					d.errorf("two profiles of type %s in one scope", key)
				}
				seen[key] = true
				res.Profiles = append(res.Profiles, pr)
			}
		}
		req.Resources = append(req.Resources, res)
	}
	if len(d.errs) > 0 {
		return req, d.err("invalid request")
	}
	return req, nil
}

// decoder resolves indices through one request's dictionary, collecting
// problems instead of stopping at the first.
type decoder struct {
	dict   pprofile.ProfilesDictionary
	errs   []string
	frames map[int32]Frame
}

func (d *decoder) errorf(format string, args ...any) {
	if len(d.errs) < 20 {
		d.errs = append(d.errs, fmt.Sprintf(format, args...))
	}
}

func (d *decoder) err(what string) error {
	msg := what + ":"
	for i, e := range d.errs {
		if i > 0 {
			msg += ";"
		}
		msg += " " + e
	}
	return errors.New(msg)
}

func inRange[T interface{ Len() int }](d *decoder, what string, t T, i int32) bool {
	if i < 0 || int(i) >= t.Len() {
		d.errorf("%s index %d out of range [0,%d)", what, i, t.Len())
		return false
	}
	return true
}

func (d *decoder) checkZeroEntries() bool {
	t := d.dict
	switch {
	case t.StringTable().Len() == 0 || t.StringTable().At(0) != "":
		d.errorf("string table entry 0 must be the empty string")
	case t.MappingTable().Len() == 0 || !t.MappingTable().At(0).Equal(pprofile.NewMapping()):
		d.errorf("mapping 0 is not the zero sentinel")
	case t.FunctionTable().Len() == 0 || !t.FunctionTable().At(0).Equal(pprofile.NewFunction()):
		d.errorf("function 0 is not zero")
	case t.LocationTable().Len() == 0 || !t.LocationTable().At(0).Equal(pprofile.NewLocation()):
		d.errorf("location 0 is not zero")
	case t.LinkTable().Len() == 0 || !t.LinkTable().At(0).Equal(pprofile.NewLink()):
		d.errorf("link 0 is not zero")
	case t.AttributeTable().Len() == 0 || !t.AttributeTable().At(0).Equal(pprofile.NewKeyValueAndUnit()):
		d.errorf("attribute 0 is not zero")
	case t.StackTable().Len() == 0 || t.StackTable().At(0).LocationIndices().Len() != 0:
		d.errorf("stack 0 is not empty")
	}
	for i := 1; i < t.AttributeTable().Len(); i++ {
		kv := t.AttributeTable().At(i)
		if kv.KeyStrindex() == 0 {
			d.errorf("attribute %d has no key", i)
		}
		// Parca rejects a request with an unset value; a value sent as a
		// string_value_strindex reference reads as unset here too (pdata's
		// gRPC server does not resolve it), and Parca and Pyroscope read
		// only string_value, so the label would be lost.
		if kv.Value().Type() == pcommon.ValueTypeEmpty {
			d.errorf("attribute %d has no value (string values must travel inline, not by string-table index)", i)
		}
	}
	return len(d.errs) == 0
}

// checkLinks checks the link table beyond entry 0: both ids set (Parca
// rejects ids that are not 16 and 8 bytes; pdata leaves an empty id out),
// and no link twice (the table is a dictionary).
func (d *decoder) checkLinks() bool {
	t := d.dict.LinkTable()
	seen := make(map[[24]byte]int, t.Len())
	for i := 1; i < t.Len(); i++ {
		l := t.At(i)
		if l.TraceID().IsEmpty() || l.SpanID().IsEmpty() {
			d.errorf("link %d has an empty trace or span id", i)
			continue
		}
		var key [24]byte
		tid, sid := l.TraceID(), l.SpanID()
		copy(key[:16], tid[:])
		copy(key[16:], sid[:])
		if j, dup := seen[key]; dup {
			d.errorf("link %d repeats link %d", i, j)
		}
		seen[key] = i
	}
	return len(d.errs) == 0
}

func (d *decoder) str(i int32) string {
	if !inRange(d, "string", d.dict.StringTable(), i) {
		return ""
	}
	return d.dict.StringTable().At(int(i))
}

// attributes resolves attribute indices to strings (ints in decimal).
func (d *decoder) attributes(what string, idx pcommon.Int32Slice) map[string]string {
	m := make(map[string]string, idx.Len())
	for _, i := range idx.All() {
		if !inRange(d, what+" attribute", d.dict.AttributeTable(), i) {
			continue
		}
		kv := d.dict.AttributeTable().At(int(i))
		k := d.str(kv.KeyStrindex())
		d.checkType(what, k, kv.Value())
		m[k] = valueString(kv.Value())
	}
	return m
}

// intAttributes are the semantic-convention attributes whose values are
// integers.
var intAttributes = map[string]bool{"process.pid": true, "thread.id": true, "cpu.logical_number": true}

// listAttributes are the resource attributes whose type is a string array.
var listAttributes = map[string]bool{"container.image.tags": true}

func (d *decoder) checkType(what, key string, v pcommon.Value) {
	if intAttributes[key] && v.Type() != pcommon.ValueTypeInt {
		d.errorf("%s attribute %q is a %s, want an int", what, key, v.Type())
	}
}

func (d *decoder) resourceAttributes(ri int, attrs pcommon.Map) map[string]string {
	m := make(map[string]string, attrs.Len())
	for k, v := range attrs.All() {
		if k == "" {
			// Also what a key_strindex reference reads as: pdata's gRPC
			// server does not resolve it, Parca rejects the request and
			// Pyroscope loses service.name.
			d.errorf("resource %d: attribute with an empty key (resource attributes must travel inline, not by string-table index)", ri)
		}
		if _, dup := m[k]; dup {
			d.errorf("resource %d: duplicate attribute %q", ri, k)
		}
		if listAttributes[k] {
			// A string array (semantic conventions): flattened as its
			// elements joined by ",".
			if v.Type() != pcommon.ValueTypeSlice {
				d.errorf("resource %d: attribute %q is a %s, want a string array", ri, k, v.Type())
				continue
			}
			var elems []string
			for _, e := range v.Slice().All() {
				if e.Type() != pcommon.ValueTypeStr || e.Str() == "" {
					d.errorf("resource %d: attribute %q holds %s %q, want non-empty strings", ri, k, e.Type(), e.AsString())
				}
				elems = append(elems, e.Str())
			}
			if len(elems) == 0 {
				d.errorf("resource %d: attribute %q is an empty array", ri, k)
			}
			m[k] = strings.Join(elems, ",")
			continue
		}
		if t := v.Type(); t != pcommon.ValueTypeStr && t != pcommon.ValueTypeInt {
			d.errorf("resource %d: attribute %q has type %s", ri, k, t)
		}
		d.checkType("resource", k, v)
		m[k] = valueString(v)
	}
	if m["service.name"] == "" {
		d.errorf("resource %d without service.name: %v", ri, m)
	}
	if _, err := strconv.ParseInt(m["process.pid"], 10, 64); err != nil {
		d.errorf("resource %d without process.pid: %v", ri, m)
	}
	return m
}

func (d *decoder) profile(prof pprofile.Profile, res map[string]string) Profile {
	pr := Profile{
		SampleType: d.str(prof.SampleType().TypeStrindex()),
		SampleUnit: d.str(prof.SampleType().UnitStrindex()),
		PeriodType: d.str(prof.PeriodType().TypeStrindex()),
		PeriodUnit: d.str(prof.PeriodType().UnitStrindex()),
		Period:     prof.Period(),
	}
	if pr.SampleType == "" || pr.SampleUnit == "" || pr.PeriodType == "" || pr.PeriodUnit == "" || pr.Period < 0 {
		d.errorf("profile type %q incomplete", pr.TypeString())
	}
	if prof.Samples().Len() == 0 {
		d.errorf("profile %s without samples", pr.TypeString())
	}
	lo, hi := uint64(prof.Time()), uint64(prof.Time())+prof.DurationNano()
	for si, s := range prof.Samples().All() {
		out := Sample{
			SampleType: pr.SampleType, SampleUnit: pr.SampleUnit,
			PeriodType: pr.PeriodType, PeriodUnit: pr.PeriodUnit, Period: pr.Period,
			Resource:   res,
			Attributes: d.attributes("sample", s.AttributeIndices()),
			Values:     s.Values().AsRaw(),
			Timestamps: s.TimestampsUnixNano().AsRaw(),
		}
		if li := s.LinkIndex(); li != 0 && inRange(d, "link", d.dict.LinkTable(), li) {
			l := d.dict.LinkTable().At(int(li))
			out.TraceID, out.SpanID = l.TraceID().String(), l.SpanID().String()
		}
		switch {
		case len(out.Values) == 0 && len(out.Timestamps) == 0:
			d.errorf("sample %d has neither values nor timestamps", si)
		case len(out.Values) != 0 && len(out.Values) != len(out.Timestamps):
			d.errorf("sample %d has %d values and %d timestamps", si, len(out.Values), len(out.Timestamps))
		}
		for _, t := range out.Timestamps {
			if t < lo || t > hi {
				d.errorf("sample %d: timestamp %d outside the profile's [%d, %d]", si, t, lo, hi)
			}
		}
		if inRange(d, "stack", d.dict.StackTable(), s.StackIndex()) {
			for _, li := range d.dict.StackTable().At(int(s.StackIndex())).LocationIndices().All() {
				out.Frames = append(out.Frames, d.frame(li))
			}
		}
		pr.Samples = append(pr.Samples, out)
	}
	return pr
}

// frame resolves location li, once per request.
func (d *decoder) frame(li int32) Frame {
	if fr, ok := d.frames[li]; ok {
		return fr
	}
	if !inRange(d, "location", d.dict.LocationTable(), li) {
		return Frame{}
	}
	loc := d.dict.LocationTable().At(int(li))
	fr := Frame{Address: loc.Address(), Lines: loc.Lines().Len()}
	la := d.attributes("location", loc.AttributeIndices())
	var typed bool
	if fr.Type, typed = la["profile.frame.type"]; !typed {
		d.errorf("location %d has no profile.frame.type", li)
	}
	if mi := loc.MappingIndex(); mi != 0 && inRange(d, "mapping", d.dict.MappingTable(), mi) {
		m := d.dict.MappingTable().At(int(mi))
		if fr.MappingFile = d.str(m.FilenameStrindex()); fr.MappingFile == "" {
			d.errorf("mapping %d has no file name", mi)
		}
		ma := d.attributes("mapping", m.AttributeIndices())
		fr.GNUBuildID = ma["process.executable.build_id.gnu"]
		fr.GoBuildID = ma["process.executable.build_id.go"]
		fr.BuildID = firstNonEmpty(fr.GNUBuildID, fr.GoBuildID, ma["process.executable.build_id.htlhash"])
	}
	for i := range fr.Lines {
		if fi := loc.Lines().At(i).FunctionIndex(); inRange(d, "function", d.dict.FunctionTable(), fi) {
			if i > 0 {
				fr.Functions += ";"
			}
			fr.Functions += d.str(d.dict.FunctionTable().At(int(fi)).NameStrindex())
		}
	}
	if fr.Lines > 0 {
		ln := loc.Lines().At(0)
		fr.Line = ln.Line()
		if fi := ln.FunctionIndex(); inRange(d, "function", d.dict.FunctionTable(), fi) {
			fn := d.dict.FunctionTable().At(int(fi))
			fr.Function, fr.File = d.str(fn.NameStrindex()), d.str(fn.FilenameStrindex())
		}
	}
	if d.frames == nil {
		d.frames = map[int32]Frame{}
	}
	d.frames[li] = fr
	return fr
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
