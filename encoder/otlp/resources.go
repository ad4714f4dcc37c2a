package otlp

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pprofile"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
)

// resources is the Encoder's state for a request's resources.
type resources struct {
	resKVs            []resAttr
	resOrder, resRank []int32
	setKeys           map[setKey]string // a label set entry's attribute, for generation
	procVals          []aggregate.ProcessValue
}

// setKey names a label set entry's attribute: the field's prefix and the
// entry's key (string id).
type setKey struct {
	prefix string
	key    uint32
}

type resAttr struct {
	key    string
	str    string
	num    int64
	isNum  bool
	isList bool // a string array of one element, str
}

// writeResources emits one ResourceProfiles per resource with samples and
// one Profile per sample type within it, in sortSamples' order.
func (e *Encoder) writeResources(f *aggregate.Flush, rps pprofile.ResourceProfilesSlice) {
	if len(f.Samples) == 0 {
		truncate(rps, 0)
		return
	}
	nt := len(e.types)
	bs, order := e.bucketStart, e.order
	rpPos := 0
	for r := range f.Resources { // r is a rank
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
		e.writeResourceAttrs(f, &f.Resources[e.resOrder[r]], rp.Resource().Attributes())
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

func (e *Encoder) writeResourceAttrs(f *aggregate.Flush, r *aggregate.Resource, m pcommon.Map) {
	kvs := e.resKVs[:0]
	kvs = append(kvs, resAttr{key: AttrServiceName, str: f.ServiceName(r)})
	if name := f.ExecutableName(r); name != "" {
		kvs = append(kvs, resAttr{key: AttrExecutableName, str: name})
	}
	e.procVals = f.AppendProcessValues(e.procVals[:0], r, func(pf *aggregate.ProcessField) string { return pf.Attr })
	for i := range e.procVals {
		v := &e.procVals[i]
		switch v.Kind {
		case aggregate.FieldNumber:
			kvs = append(kvs, resAttr{key: v.Name, num: int64(v.Num), isNum: true})
		case aggregate.FieldString:
			if v.Value != "" {
				kvs = append(kvs, resAttr{key: v.Name, str: v.Value})
			}
		case aggregate.FieldLabelSet:
			key, ok := e.setKeys[setKey{v.Name, v.Key}]
			if !ok {
				key = v.FullName(f)
				e.setKeys[setKey{v.Name, v.Key}] = key
			}
			kvs = append(kvs, resAttr{key: key, str: v.Value})
		}
	}
	if w := f.Workload(r); w != nil { // Kubernetes (encoder/kube)
		for _, a := range w.Attributes {
			kvs = append(kvs, resAttr{key: a.Key, str: a.Value})
		}
		for _, a := range w.ListAttributes {
			kvs = append(kvs, resAttr{key: a.Key, str: a.Value, isList: true})
		}
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
		case kv.isList:
			if !ok || v.Type() != pcommon.ValueTypeSlice || v.Slice().Len() != 1 || v.Slice().At(0).Str() != kv.str {
				m.PutEmptySlice(kv.key).AppendEmpty().SetStr(kv.str)
			}
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
