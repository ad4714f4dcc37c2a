package aggregate

import (
	"math/bits"

	"github.com/tandem-profiler/tandem/schema"
)

// Cross-batch fast paths.
//
// Batch-local tables are rebuilt by the sampler for every batch, so a batch
// of 500 samples typically carries thousands of frames the dictionaries
// already hold. Translating each through the content-keyed maps (strings,
// mapping, function, location) costs several map lookups per frame. The fast
// paths below instead guess the dictionary entry from a cheap weak hash
// (stacks) or the pid (processes) and then verify the guess by comparing
// content exactly, field by field and string by string. A wrong guess (a
// weak-hash collision, a reused pid) only costs the slow path; it can never
// produce a wrong id. The caches hold dictionary ids, so they are cleared
// when the dictionary is rebuilt.
//
// All of this is for batch layouts 0 and 1 (samplers of protocol 1.3 and
// older). A layout-2 batch refers to its connection's dictionary, whose ids
// keep their content, so its translations are kept instead and never
// re-verified (streamdict.go).

// mix folds v into h (a multiply-xorshift step, not cryptographic).
func mix(h, v uint64) uint64 {
	h ^= v
	h *= 0x9e3779b97f4a7c15
	return h ^ h>>29
}

// weakFrameHash hashes a batch frame by its numeric content, the lengths of
// its strings and its mapping's file id and range: everything but string
// bytes. It validates the frame's indices.
func (a *Aggregator) weakFrameHash(b *schema.Batch, fi uint32) (uint64, error) {
	if int(fi) >= len(b.Frames) {
		return 0, invalid("frame %d of %d", fi, len(b.Frames))
	}
	if h := a.frameHash[fi]; h != 0 {
		return h, nil
	}
	f := &b.Frames[fi]
	if int(f.FunctionName) >= len(b.Strings) || int(f.SourceFile) >= len(b.Strings) {
		return 0, invalid("frame %d names strings %d, %d of %d", fi, f.FunctionName, f.SourceFile, len(b.Strings))
	}
	h := mix(f.AddressOrLine, uint64(f.SourceLine)<<32|uint64(f.SourceColumn))
	v := uint64(f.Kind)<<1 | uint64(len(b.Strings[f.FunctionName]))<<16 | uint64(len(b.Strings[f.SourceFile]))<<40
	if f.Error {
		v |= 1
	}
	h = mix(h, v)
	if f.Mapping != 0 {
		if int(f.Mapping) > len(b.Mappings) {
			return 0, invalid("frame %d: mapping %d of %d", fi, f.Mapping, len(b.Mappings))
		}
		m := &b.Mappings[f.Mapping-1]
		h = mix(h, m.FileID.Hi^m.FileID.Lo^m.Start)
	}
	h |= 1 // 0 means "not computed"
	a.frameHash[fi] = h
	return h, nil
}

// fastStack returns the dictionary id of batch stack frames when the stack
// cache's guess verifies, with its weak hash for the slow path to record.
func (a *Aggregator) fastStack(b *schema.Batch, frames []uint32) (id uint32, h uint64, ok bool, err error) {
	// The frame hashes are mixed already: combining them with a rotate
	// and xor (order-sensitive) keeps the per-frame dependency chain to a
	// cycle or two; one mix at the end spreads the result.
	for _, fi := range frames {
		// The cached hash inline; weakFrameHash computes (and validates)
		// a frame's first.
		var fh uint64
		if int(fi) < len(a.frameHash) {
			fh = a.frameHash[fi]
		}
		if fh == 0 {
			if fh, err = a.weakFrameHash(b, fi); err != nil {
				return 0, 0, false, err
			}
		}
		h = bits.RotateLeft64(h, 7) ^ fh
	}
	h = mix(h, uint64(len(frames)))
	id, ok = a.stackCache[h]
	if !ok {
		return 0, h, false, nil
	}
	locs := a.d.stack(id)
	if len(locs) != len(frames) {
		return 0, h, false, nil
	}
	for i, fi := range frames {
		l := locs[i]
		if v := a.frameMap[fi]; v != unset {
			if v != l {
				return 0, h, false, nil
			}
			continue
		}
		if !a.sameFrame(b, fi, l) {
			return 0, h, false, nil
		}
		a.frameMap[fi] = l
	}
	return id, h, true, nil
}

// sameFrame reports whether batch frame fi (indices already validated by
// weakFrameHash) has the content of dictionary location l.
func (a *Aggregator) sameFrame(b *schema.Batch, fi, l uint32) bool {
	f := &b.Frames[fi]
	loc := &a.d.locations[l]
	if loc.Address != f.AddressOrLine || loc.Kind != f.Kind || loc.Error != f.Error ||
		loc.Line != f.SourceLine || loc.Column != f.SourceColumn {
		return false
	}
	switch {
	case f.Mapping == 0:
		if loc.Mapping != 0 {
			return false
		}
	case a.mapMap[f.Mapping] != unset:
		if a.mapMap[f.Mapping] != loc.Mapping {
			return false
		}
	default:
		if loc.Mapping == 0 || !a.sameMapping(b, &b.Mappings[f.Mapping-1], &a.d.mappings[loc.Mapping]) {
			return false
		}
		a.mapMap[f.Mapping] = loc.Mapping
	}
	if loc.Function == 0 {
		return b.Strings[f.FunctionName] == "" && b.Strings[f.SourceFile] == ""
	}
	fn := &a.d.functions[loc.Function]
	return a.sameString(b, f.FunctionName, fn.Name) && a.sameString(b, f.SourceFile, fn.File)
}

// sameMapping compares a batch mapping with a dictionary mapping.
func (a *Aggregator) sameMapping(b *schema.Batch, bm *schema.Mapping, m *Mapping) bool {
	if bm.FileID != m.FileID || bm.Start != m.Start || bm.End != m.End || bm.FileOffset != m.FileOffset {
		return false
	}
	return a.sameString(b, bm.FileName, m.FileName) && a.sameString(b, bm.Path, m.Path) &&
		a.sameString(b, bm.GNUBuildID, m.GNUBuildID) && a.sameString(b, bm.GoBuildID, m.GoBuildID)
}

// sameString compares batch string i with dictionary string id; an index
// out of range compares unequal (the slow path reports it). A batch string
// found equal is remembered as that dictionary string (strMap: the
// dictionary holds each content once), so the many frames naming the same
// file or function compare ids, not bytes.
func (a *Aggregator) sameString(b *schema.Batch, i, id uint32) bool {
	if int(i) >= len(a.strMap) {
		return false
	}
	if m := a.strMap[i]; m != unset {
		return m == id
	}
	if b.Strings[i] != a.d.strings[id] {
		return false
	}
	a.strMap[i] = id
	return true
}

// fastResource returns the dictionary id of batch process p when the
// resource last seen with its pid has the same content. It names each of
// ProcessFields instead of looping over the table: it runs about once per
// sample of a layout-2 stream, and the loop doubled its cost.
// TestFastPathSeesEveryField fails when a field is missing here.
func (a *Aggregator) fastResource(b *schema.Batch, p *schema.Process, node uint32) (uint32, bool) {
	id, ok := a.procCache[p.PID]
	if !ok {
		return 0, false
	}
	r := &a.d.resources[id]
	if r.PID != p.PID || r.NodeName != node ||
		!a.sameString(b, p.Comm, r.Comm) || !a.sameString(b, p.ExecutablePath, r.ExecutablePath) ||
		!a.sameString(b, p.ContainerID, r.ContainerID) || !a.sameString(b, p.SystemdUnit, r.SystemdUnit) ||
		!a.sameString(b, p.ServiceName, r.ServiceName) {
		return 0, false
	}
	env := a.d.labelSet(r.EnvVars)
	if len(env) != len(p.EnvVars) {
		return 0, false
	}
	for _, kv := range p.EnvVars {
		found := false
		for _, e := range env {
			if a.sameString(b, kv.Key, e.Key) && a.sameString(b, kv.Value, e.Value) {
				found = true
				break
			}
		}
		if !found {
			return 0, false
		}
	}
	return id, true
}
