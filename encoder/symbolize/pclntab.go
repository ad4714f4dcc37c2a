package symbolize

import (
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"sync/atomic"
)

// A reader of Go's pclntab (runtime/symtab.go's layout, Go 1.18 and
// later), working on the section's bytes in place: the table costs the
// section and nothing per function. Every offset is checked against the
// slice it indexes; a corrupt table yields fewer or wrong names, never a
// read outside the section.

const (
	pcHeaderMagic118 = 0xfffffff0 // Go 1.18, 1.19
	pcHeaderMagic120 = 0xfffffff1 // Go 1.20 and later

	pcdataInlTreeIndex = 2 // runtime's _PCDATA_InlTreeIndex
	funcdataInlTree    = 3 // runtime's _FUNCDATA_InlTree
	inlinedCallSize    = 16
	maxInlineDepth     = 64
)

type pclntab struct {
	data      []byte      // the section: mapped from the file, or read
	faulted   atomic.Bool // the mapping faulted (file truncated): find nothing
	bo        binary.ByteOrder
	version   int // 118 or 120
	minLC     uint32
	nfunc     int
	textStart uint64
	// Sub-tables, each data[offset:].
	funcnames, cutab, filetab, pctab, functab []byte
	gofunc                                    uint64 // address of go:func.*; 0 = unknown
	addr                                      uint64 // virtual address of the pcHeader
	funcnameOffset                            uint64
}

// pclntab reads the Go pclntab; nil, nil for a file without one.
func (l *loader) pclntab() (*pclntab, error) {
	s := l.f.Section(".gopclntab")
	if s == nil {
		return nil, nil // not a Go binary (or a PIE one: its pclntab has no section)
	}
	data, mapping, err := l.mapped(s)
	if err != nil {
		return nil, err
	}
	p, err := parsePclntab(data, l.f.ByteOrder)
	if err != nil {
		if mapping != nil {
			unmap(mapping)
		}
		return nil, err
	}
	if mapping != nil {
		// Unmapped once nothing can read it: lookups keep p alive
		// (runtime.KeepAlive) and copy the names they return.
		runtime.AddCleanup(p, unmap, mapping)
	}
	p.addr = s.Addr
	if p.textStart == 0 { // PIE: filled by a relocation at load time
		if text := l.f.Section(".text"); text != nil {
			p.textStart = text.Addr
		}
	}
	return p, nil
}

func parsePclntab(data []byte, bo binary.ByteOrder) (*pclntab, error) {
	if len(data) < 8 {
		return nil, fmt.Errorf("%d bytes: too short for a header", len(data))
	}
	p := &pclntab{data: data, bo: bo}
	switch m := bo.Uint32(data); m {
	case pcHeaderMagic118:
		p.version = 118
	case pcHeaderMagic120:
		p.version = 120
	default:
		return nil, fmt.Errorf("magic %#x: not a Go 1.18+ pclntab (older Go is named from .symtab)", m)
	}
	p.minLC = uint32(data[6])
	ptr := int(data[7])
	if ptr != 4 && ptr != 8 || p.minLC == 0 {
		return nil, fmt.Errorf("pointer size %d, instruction quantum %d: corrupt header", ptr, p.minLC)
	}
	if len(data) < 8+8*ptr {
		return nil, fmt.Errorf("%d bytes: too short for a header", len(data))
	}
	word := func(i int) uint64 {
		if ptr == 4 {
			return uint64(bo.Uint32(data[8+4*i:]))
		}
		return bo.Uint64(data[8+8*i:])
	}
	nfunc := word(0)
	p.textStart = word(2) // Go 1.26 and later leave it 0
	p.funcnameOffset = word(3)
	sub := func(i int) ([]byte, error) {
		off := word(i)
		if off > uint64(len(data)) {
			return nil, fmt.Errorf("table offset %d beyond the %d-byte pclntab", off, len(data))
		}
		return data[off:], nil
	}
	var errs []error
	for i, dst := range []*[]byte{&p.funcnames, &p.cutab, &p.filetab, &p.pctab, &p.functab} {
		var err error
		*dst, err = sub(3 + i)
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if nfunc >= uint64(len(p.functab))/8 { // nfunc+1 entries of 8 bytes
		return nil, fmt.Errorf("%d functions do not fit the %d-byte function table", nfunc, len(p.functab))
	}
	p.nfunc = int(nfunc)
	return p, nil
}

// entry returns the entry offset (from textStart) and _func offset of
// function i (i == nfunc: the end of the text).
func (p *pclntab) entry(i int) (entryOff, funcOff uint32) {
	return p.bo.Uint32(p.functab[8*i:]), p.bo.Uint32(p.functab[8*i+4:])
}

// find returns the index of the function holding addr.
func (p *pclntab) find(addr uint64) (int, bool) {
	if p.nfunc == 0 || addr < p.textStart {
		return 0, false
	}
	off := addr - p.textStart
	if end, _ := p.entry(p.nfunc); off >= uint64(end) {
		return 0, false
	}
	lo, hi := 0, p.nfunc // first function whose entry is > off
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if e, _ := p.entry(m); uint64(e) <= off {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 {
		return 0, false
	}
	return lo - 1, true
}

// safeLookup is lookup with a fault in a mapped pclntab (the file was
// truncated under the mapping) turned into "not found", then and for
// every later lookup in p.
func (p *pclntab) safeLookup(addr uint64, inl *sectionBytes, dst []Frame) (out []Frame, ok bool) {
	if p.faulted.Load() {
		return dst, false
	}
	n := len(dst)
	defer func() {
		if r := recover(); r != nil {
			if !isFault(r) {
				panic(r)
			}
			p.faulted.Store(true)
			out, ok = dst[:n], false
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	out, ok = p.lookup(addr, inl, dst)
	runtime.KeepAlive(p)
	return out, ok
}

// isFault reports whether a recovered value is a memory fault (the
// runtime's error under debug.SetPanicOnFault has an Addr method).
func isFault(r any) bool {
	_, ok := r.(interface{ Addr() uintptr })
	return ok
}

// has reports whether addr is in a Go function.
func (p *pclntab) has(addr uint64) bool {
	_, ok := p.find(addr)
	return ok
}

// fn is a decoded _func.
type fn struct {
	entry                  uint64
	nameOff                uint32
	pcfile, pcln, cuOffset uint32
	pcdata, funcdata       []byte // npcdata / nfuncdata uint32s
}

func (p *pclntab) fn(i int) (fn, bool) {
	_, off := p.entry(i)
	if uint64(off) >= uint64(len(p.functab)) {
		return fn{}, false
	}
	b := p.functab[off:]
	fixed := 44
	if p.version == 118 {
		fixed = 40 // no startLine
	}
	if len(b) < fixed {
		return fn{}, false
	}
	u := func(o int) uint32 { return p.bo.Uint32(b[o:]) }
	f := fn{
		entry:    p.textStart + uint64(u(0)),
		nameOff:  u(4),
		pcfile:   u(20),
		pcln:     u(24),
		cuOffset: u(32),
	}
	npcdata, nfuncdata := uint64(u(28)), uint64(b[fixed-1])
	rest := b[fixed:]
	if npcdata*4 > uint64(len(rest)) {
		return fn{}, false
	}
	f.pcdata = rest[:npcdata*4]
	rest = rest[npcdata*4:]
	if nfuncdata*4 <= uint64(len(rest)) {
		f.funcdata = rest[:nfuncdata*4]
	}
	return f, true
}

// value evaluates the pc-value table at off (in pctab) for pc, as the
// runtime's pcvalue does; false when the table is absent or ends first.
func (p *pclntab) value(off uint32, entry, pc uint64) (int32, bool) {
	if off == 0 || uint64(off) >= uint64(len(p.pctab)) {
		return -1, false
	}
	b := p.pctab[off:]
	val, cur := int32(-1), entry
	for first := true; ; first = false {
		uv, n := binary.Uvarint(b)
		if n <= 0 || uv > 1<<32-1 {
			return -1, false
		}
		b = b[n:]
		if uv == 0 && !first {
			return -1, false
		}
		if uv&1 != 0 {
			val += int32(^(uint32(uv) >> 1))
		} else {
			val += int32(uint32(uv) >> 1)
		}
		d, n := binary.Uvarint(b)
		if n <= 0 || d > 1<<32-1 {
			return -1, false
		}
		b = b[n:]
		cur += d * uint64(p.minLC)
		if pc < cur {
			return val, true
		}
	}
}

func (p *pclntab) funcName(off uint32) string { return cString(p.funcnames, off) }

// fileLine returns the file and line of pc in f.
func (p *pclntab) fileLine(f *fn, pc uint64) (string, uint32) {
	var file string
	if n, ok := p.value(f.pcfile, f.entry, pc); ok && n >= 0 {
		i := uint64(f.cuOffset) + uint64(n)
		if i < uint64(len(p.cutab))/4 {
			if off := p.bo.Uint32(p.cutab[4*i:]); off != ^uint32(0) {
				file = cString(p.filetab, off)
			}
		}
	}
	line, ok := p.value(f.pcln, f.entry, pc)
	if !ok || line < 0 {
		line = 0
	}
	return file, uint32(line)
}

func u32At(b []byte, i int, bo binary.ByteOrder) (uint32, bool) {
	if i < 0 || 4*i+4 > len(b) {
		return 0, false
	}
	return bo.Uint32(b[4*i:]), true
}

// lookup appends the frames of addr, inlined calls first; false when addr
// is in no Go function.
func (p *pclntab) lookup(addr uint64, inl *sectionBytes, dst []Frame) ([]Frame, bool) {
	i, ok := p.find(addr)
	if !ok {
		return dst, false
	}
	f, ok := p.fn(i)
	if !ok {
		return dst, false
	}
	pc := addr
	if p.gofunc != 0 {
		treeOff, ok1 := u32At(f.funcdata, funcdataInlTree, p.bo)
		idxTab, ok2 := u32At(f.pcdata, pcdataInlTreeIndex, p.bo)
		if ok1 && ok2 && treeOff != ^uint32(0) {
			var ic [inlinedCallSize]byte
			for depth := 0; depth < maxInlineDepth; depth++ {
				ix, ok := p.value(idxTab, f.entry, pc)
				if !ok || ix < 0 {
					break
				}
				if !p.readInline(ic[:], inl, p.gofunc+uint64(treeOff)+uint64(ix)*inlinedCallSize) {
					break
				}
				file, line := p.fileLine(&f, pc)
				dst = append(dst, Frame{Function: strings.Clone(p.funcName(p.bo.Uint32(ic[4:]))), File: strings.Clone(file), Line: line})
				parent := int64(int32(p.bo.Uint32(ic[8:])))
				if parent < 0 {
					break
				}
				pc = f.entry + uint64(parent)
			}
		}
	}
	file, line := p.fileLine(&f, pc)
	// Copies: the names must outlive the table (and its mapping), and
	// must not pin a whole pclntab in the heap after the table is evicted.
	return append(dst, Frame{Function: strings.Clone(p.funcName(f.nameOff)), File: strings.Clone(file), Line: line}), true
}

// Word indexes in runtime.moduledata (Go 1.20 and later; the layout up to
// gofunc has not changed since).
const (
	moduledataFuncnametab = 1
	moduledataText        = 22
	moduledataGofunc      = 40
	moduledataWords       = 41
)

// moduledataGofunc finds runtime.firstmoduledata (in .go.module or
// .noptrdata: its first
// word points at the pcHeader, its second at the function name table) and
// returns its gofunc field, the base of the inline trees, for binaries
// without a symbol table. It also corrects the text start when the header
// has none. 0 when not found.
func (l *loader) moduledataGofunc(p *pclntab) uint64 {
	if p.addr == 0 {
		return 0
	}
	// Go 1.26 puts it in a section of its own.
	for _, name := range []string{".go.module", ".noptrdata"} {
		if s := l.f.Section(name); s != nil {
			if gofunc := l.findModuledata(s, p); gofunc != 0 {
				return gofunc
			}
		}
	}
	return 0
}

func (l *loader) findModuledata(s *elf.Section, p *pclntab) uint64 {
	data, err := l.scratch(s)
	if err != nil {
		return 0
	}
	ptr := 8
	if l.f.Class == elf.ELFCLASS32 {
		ptr = 4
	}
	word := func(b []byte, i int) uint64 {
		if ptr == 4 {
			return uint64(l.f.ByteOrder.Uint32(b[4*i:]))
		}
		return l.f.ByteOrder.Uint64(b[8*i:])
	}
	for off := 0; off+moduledataWords*ptr <= len(data); off += ptr {
		b := data[off:]
		if word(b, 0) != p.addr || word(b, moduledataFuncnametab) != p.addr+p.funcnameOffset {
			continue
		}
		if text := word(b, moduledataText); text != 0 {
			p.textStart = text
		}
		return word(b, moduledataGofunc)
	}
	return 0
}

// readInline reads an inlinedCall at addr: from the pclntab itself when
// the go:func.* symbol lies inside it (Go 1.26 and later), else from the file.
func (p *pclntab) readInline(b []byte, inl *sectionBytes, addr uint64) bool {
	if addr >= p.addr && addr-p.addr < uint64(len(p.data)) {
		off := addr - p.addr
		if uint64(len(b)) > uint64(len(p.data))-off {
			return false
		}
		copy(b, p.data[off:])
		return true
	}
	return inl != nil && inl.readAt(b, addr)
}
