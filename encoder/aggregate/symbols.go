package aggregate

import (
	"github.com/tandem-profiler/tandem/encoder/symbolize"
	"github.com/tandem-profiler/tandem/schema"
)

// Symbolizer names native frames from their executable and address; it is
// *symbolize.Symbolizer, behind an interface for tests.
type Symbolizer interface {
	// Resolve appends the source frames of the file virtual address addr
	// in the executable file to dst, inlined calls first, and returns it;
	// nothing is appended when the address cannot be named. known is
	// false when the Symbolizer does not have the executable: the
	// location is resolved again when Aggregator.NoteExecutable hears of
	// it.
	Resolve(file schema.FileID, addr uint64, dst []symbolize.Frame) (_ []symbolize.Frame, known bool)
}

// Line is one source line of a symbolized native location: a function
// (id into Flush.Functions) and a line number (0 = unknown).
type Line struct {
	Function uint32
	Line     uint32
}

// NativeLines returns the lines Config.Symbolizer found for location id,
// inlined calls first, the function the address is in last; nil when the
// location was not symbolized (not native, already named by the sampler,
// no symbolizer, or nothing found). The lines belong to the Flush's
// Generation like every other table.
func (f *Flush) NativeLines(id uint32) []Line {
	if int(id) >= len(f.NativeLineEnds) {
		return nil
	}
	start := uint32(0)
	if id > 0 {
		start = f.NativeLineEnds[id-1]
	}
	return f.NativeLineTable[start:f.NativeLineEnds[id]:f.NativeLineEnds[id]]
}

// symbolizeNew resolves the native locations added to the dictionary since
// the last flush, once each: a location is resolved once per dictionary
// generation, never per sample. One whose executable the Symbolizer did
// not have waits for it (late.go). a.mu held.
func (a *Aggregator) symbolizeNew() {
	s := a.cfg.Symbolizer
	if s == nil {
		return
	}
	a.retryLate(s)
	d := a.d
	for id := len(d.lineEnds); id < len(d.locations); id++ {
		l := &d.locations[id]
		if id > 0 && l.Kind == schema.FrameNative && l.Function == 0 && l.Mapping != 0 {
			if m := &d.mappings[l.Mapping]; !m.FileID.IsZero() {
				var known bool
				if d.lines, known = a.resolveLines(s, m.FileID, l.Address, d.lines); !known {
					a.awaitExecutable(m.FileID, uint32(id))
				}
			}
		}
		d.lineEnds = append(d.lineEnds, uint32(len(d.lines)))
	}
}

// resolveLines appends the lines of addr in the executable file to dst,
// its functions interned; known is the Symbolizer's. a.mu held.
func (a *Aggregator) resolveLines(s Symbolizer, file schema.FileID, addr uint64, dst []Line) (_ []Line, known bool) {
	a.frames, known = s.Resolve(file, addr, a.frames[:0])
	d := a.d
	for _, fr := range a.frames {
		fn := d.internFunction(Function{Name: d.internString(fr.Function), File: d.internString(fr.File)})
		if fn == 0 { // a corrupt table named nothing
			continue
		}
		dst = append(dst, Line{Function: fn, Line: fr.Line})
	}
	return dst, known
}
