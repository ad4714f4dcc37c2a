package otlp

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pprofile"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
)

// attributes is the Encoder's state for a request's attribute table.
type attributes struct {
	attrs               pprofile.KeyValueAndUnitSlice
	nattrs              int
	tidAttr             []int32 // by tidDense; 0 = not yet written
	strAttr             map[strAttrKey]int32
	cpuAttr, threadAttr marks
	frameAttr           [512]int32
	frameAttrEpoch      [512]uint32
	labelKeys           map[uint32]string // per string id, for generation
}

type strAttrKey struct {
	key int32
	val string
}

// The attribute table. Entries are written in order of first use; an entry
// already holding the same content (from a recycled request) is left alone,
// which avoids pcommon.Value's allocation.

// nextAttr returns the table's next entry, with key.
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

func (e *Encoder) frameTypeAttr(l *aggregate.Location) int32 {
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

// tidAttrIndex returns the thread.id attribute of sample row, written on
// first use.
func (e *Encoder) tidAttrIndex(f *aggregate.Flush, row int32) int32 {
	d := e.rowThread[row]
	if e.tidAttr[d] == 0 {
		e.tidAttr[d] = e.putInt(e.str(AttrThreadID), int64(f.Samples[row].TID))
	}
	return e.tidAttr[d]
}

// cpuAttrIndex returns the attribute of a CPU that sortSamples listed.
func (e *Encoder) cpuAttrIndex(cpu uint32) int32 { return e.cpuAttr[cpu].idx }

func (e *Encoder) threadAttrIndex(f *aggregate.Flush, name uint32) int32 {
	if e.threadAttr[name].epoch != e.epoch {
		e.threadAttr[name].epoch = e.epoch
		e.threadAttr[name].idx = e.putStr(e.str(AttrThreadName), f.Strings[name])
	}
	return e.threadAttr[name].idx
}

func (e *Encoder) labelAttrIndex(f *aggregate.Flush, kv aggregate.KeyValue) int32 {
	key, ok := e.labelKeys[kv.Key]
	if !ok {
		key = AttrLabelPrefix + f.Strings[kv.Key]
		e.labelKeys[kv.Key] = key
	}
	return e.strAttrIndex(key, f.Strings[kv.Value])
}
