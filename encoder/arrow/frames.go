package arrow

import (
	"crypto/sha256"
	"encoding/binary"
	"path"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
	"github.com/tandem-profiler/tandem/schema"
)

// Strings of the per-frame-type conventions (docs/parca-protocols.md §3.6).
const (
	mappingKernel     = "[kernel.kallsyms]"
	mappingUnknown    = "UNKNOWN"
	mappingAbort      = "agent-internal-error-frame"
	frameTypeAbort    = "abort-marker"
	functionAborted   = "aborted"
	functionUnknown   = "UNKNOWN"
	sourceUnreported  = "UNREPORTED"
	sourceUnknown     = "UNKNOWN"
	kernelDefaultFile = "vmlinux"
)

// location is a Flush location as Parca's Arrow records carry it. Empty
// strings stand for null.
type location struct {
	address     uint64
	frameType   string
	mappingFile string
	buildID     string
	hasLine     bool
	line        uint64
	column      uint64
	function    string // v1 function_name, v2 function.system_name
	filename    string
	// complete is false when the frame could not be resolved (a native
	// frame without a mapping): v1's is_complete.
	complete bool
}

// frameCache resolves Flush locations and stack ids, caching what depends
// only on the Flush's dictionary Generation and on the names of its
// locations: the aggregator names a native location late, within a
// generation, when its executable arrives after its first flush (and the
// Arrow output's Transform copies the name into Location.Function), so a
// location whose function or line changed drops what was cached.
type frameCache struct {
	v1         bool
	generation uint64
	valid      bool
	// epoch counts the resets, so that v2Cache follows them.
	epoch uint64
	// names holds each location's Function and Line when cached.
	names     []uint64
	buildIDs  []string   // per mapping id: "" = not computed (or none)
	buildDone []bool     // per mapping id
	stackIDs  [][16]byte // per stack id
	stackStrs []string   // per stack id, "" until needed
	stackDone []bool
	hashBuf   []byte
}

func (c *frameCache) begin(f *aggregate.Flush) {
	if c.valid && c.generation == f.Generation && !c.renamed(f) {
		return
	}
	c.valid, c.generation = true, f.Generation
	c.epoch++
	c.names = c.names[:0]
	for i := range f.Locations {
		c.names = append(c.names, locName(&f.Locations[i]))
	}
	c.buildIDs = c.buildIDs[:0]
	c.buildDone = c.buildDone[:0]
	c.stackIDs = c.stackIDs[:0]
	c.stackStrs = c.stackStrs[:0]
	c.stackDone = c.stackDone[:0]
}

func locName(l *aggregate.Location) uint64 {
	return uint64(l.Function)<<32 | uint64(l.Line)
}

// renamed reports whether a location cached got another function or line
// (a late-named native frame); locations new to the dictionary are not
// cached yet and are noted. A rename is rare (once per late executable),
// so it drops the whole cache.
func (c *frameCache) renamed(f *aggregate.Flush) bool {
	n := min(len(c.names), len(f.Locations))
	for i := range n {
		if c.names[i] != locName(&f.Locations[i]) {
			return true
		}
	}
	for i := n; i < len(f.Locations); i++ {
		c.names = append(c.names, locName(&f.Locations[i]))
	}
	return false
}

// stackIDString returns stackID as a 16-byte string, cached.
func (c *frameCache) stackIDString(f *aggregate.Flush, s uint32) string {
	id := c.stackID(f, s)
	if c.stackStrs[s] == "" {
		c.stackStrs[s] = string(id[:])
	}
	return c.stackStrs[s]
}

// buildID returns the executable key of mapping m (Flush.ExecutableKey),
// "" for none: the key its symbols are uploaded under.
func (c *frameCache) buildID(f *aggregate.Flush, m uint32) string {
	for len(c.buildDone) <= int(m) {
		c.buildDone = append(c.buildDone, false)
		c.buildIDs = append(c.buildIDs, "")
	}
	if !c.buildDone[m] {
		c.buildIDs[m] = f.ExecutableKey(&f.Mappings[m]).String()
		c.buildDone[m] = true
	}
	return c.buildIDs[m]
}

// mappingBase returns the base name of a mapping's file.
func mappingBase(f *aggregate.Flush, m *aggregate.Mapping) string {
	if m.FileName != 0 {
		return f.Strings[m.FileName]
	}
	if p := f.Strings[m.Path]; p != "" {
		return path.Base(p)
	}
	return ""
}

// resolve applies the per-frame-type conventions to location id.
func (c *frameCache) resolve(f *aggregate.Flush, id uint32) location {
	l := &f.Locations[id]
	out := location{address: l.Address, frameType: l.FrameType(), complete: true}
	var fn *aggregate.Function
	if l.Function != 0 {
		fn = &f.Functions[l.Function]
	}
	switch {
	case l.Error && l.Kind == schema.FrameUnknown:
		out.frameType = frameTypeAbort
		out.mappingFile = mappingAbort
		out.hasLine = true
		out.function = functionAborted
	case l.Kind == schema.FrameNative:
		if l.Mapping == 0 {
			out.mappingFile = mappingUnknown
			out.complete = false
			break
		}
		out.mappingFile = mappingBase(f, &f.Mappings[l.Mapping])
		if out.mappingFile == "" {
			out.mappingFile = mappingUnknown
		}
		out.buildID = c.buildID(f, l.Mapping)
		// Named by the encoder (--symbolize-native=on: the Arrow output's
		// Transform sets the outermost function and line); unnamed, it
		// carries no line, which asks Parca to symbolize it.
		if fn != nil && fn.Name != 0 {
			out.hasLine = true
			out.line = uint64(l.Line)
			out.function = f.Strings[fn.Name]
			out.filename = sourceUnknown // an empty path crashes the backend
			if fn.File != 0 {
				out.filename = f.Strings[fn.File]
			}
		}
	case l.Kind == schema.FrameKernel:
		out.mappingFile = mappingKernel
		out.hasLine = true
		out.line = uint64(l.Line)
		if c.v1 {
			out.column = uint64(l.Column)
		}
		out.function = functionUnknown
		if fn != nil && fn.Name != 0 {
			out.function = f.Strings[fn.Name]
		}
		switch {
		case fn != nil && fn.File != 0:
			out.filename = f.Strings[fn.File]
		case l.Mapping != 0 && f.Mappings[l.Mapping].FileName != 0:
			out.filename = f.Strings[f.Mappings[l.Mapping].FileName]
		default:
			out.filename = kernelDefaultFile
		}
	default: // interpreted (and Go symbolized by the sampler)
		// Named already, so not looked up: the interpreter's key only
		// when it is a GNU build id, as before.
		if l.Mapping != 0 && f.ExecutableKey(&f.Mappings[l.Mapping]).Kind == schema.KeyGNUBuildID {
			out.buildID = c.buildID(f, l.Mapping)
		}
		out.hasLine = true
		out.line = uint64(l.Line)
		out.column = uint64(l.Column)
		out.function, out.filename = sourceUnreported, sourceUnreported
		if fn != nil {
			if fn.Name != 0 {
				out.function = f.Strings[fn.Name]
			}
			out.filename = sourceUnknown // an empty path crashes the backend
			if fn.File != 0 {
				out.filename = f.Strings[fn.File]
			}
		}
	}
	return out
}

// stackID returns Tandem's 128-bit id of stack s: a hash of the full
// content of every frame (kind, error bit, address, mapping, function,
// file, line, column), never a tracer hash.
func (c *frameCache) stackID(f *aggregate.Flush, s uint32) [16]byte {
	for len(c.stackDone) <= int(s) {
		c.stackDone = append(c.stackDone, false)
		c.stackIDs = append(c.stackIDs, [16]byte{})
		c.stackStrs = append(c.stackStrs, "")
	}
	if c.stackDone[s] {
		return c.stackIDs[s]
	}
	b := c.hashBuf[:0]
	str := func(id uint32) {
		v := f.Strings[id]
		b = binary.AppendUvarint(b, uint64(len(v)))
		b = append(b, v...)
	}
	for _, lid := range f.Stack(s) {
		l := &f.Locations[lid]
		flags := byte(l.Kind) << 1
		if l.Error {
			flags |= 1
		}
		b = append(b, flags)
		b = binary.LittleEndian.AppendUint64(b, l.Address)
		b = binary.LittleEndian.AppendUint32(b, l.Line)
		b = binary.LittleEndian.AppendUint32(b, l.Column)
		if l.Mapping != 0 {
			m := &f.Mappings[l.Mapping]
			b = append(b, 1)
			str(m.FileName)
			str(m.Path)
			str(m.GNUBuildID)
			str(m.GoBuildID)
			b = binary.LittleEndian.AppendUint64(b, m.FileID.Hi)
			b = binary.LittleEndian.AppendUint64(b, m.FileID.Lo)
			b = binary.LittleEndian.AppendUint64(b, m.Start)
			b = binary.LittleEndian.AppendUint64(b, m.End)
			b = binary.LittleEndian.AppendUint64(b, m.FileOffset)
		} else {
			b = append(b, 0)
		}
		if l.Function != 0 {
			fn := &f.Functions[l.Function]
			b = append(b, 1)
			str(fn.Name)
			str(fn.File)
		} else {
			b = append(b, 0)
		}
	}
	c.hashBuf = b
	sum := sha256.Sum256(b)
	copy(c.stackIDs[s][:], sum[:16])
	c.stackDone[s] = true
	return c.stackIDs[s]
}
