package symbolize

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// A reader of Go's pclntab (runtime/symtab.go's layout, Go 1.18 and
// later), reading the section from the file as it goes: a table keeps only
// its function table (8 bytes per function) in memory and reads the rest
// (a function's header, its pc-value tables, names) with ReadAt when a
// location is resolved, once per location. Every offset is checked against
// the sub-table it indexes; a corrupt table yields fewer or wrong names,
// never a read outside the section, and a file that shrank or whose
// descriptor was closed yields no name.

const (
	pcHeaderMagic118 = 0xfffffff0 // Go 1.18, 1.19
	pcHeaderMagic120 = 0xfffffff1 // Go 1.20 and later

	pcdataInlTreeIndex = 2 // runtime's _PCDATA_InlTreeIndex
	funcdataInlTree    = 3 // runtime's _FUNCDATA_InlTree
	inlinedCallSize    = 16
	maxInlineDepth     = 64
	// maxNameBytes bounds one function or file name read from the table.
	maxNameBytes = 64 << 10
)

// region is a byte range of the file: a sub-table of the pclntab.
type region struct {
	r    io.ReaderAt
	base int64  // file offset of byte 0
	n    uint64 // length
}

// sub returns the region from off to its end; false when off is past it.
func (g region) sub(off uint64) (region, bool) {
	if off > g.n {
		return region{}, false
	}
	return region{r: g.r, base: g.base + int64(off), n: g.n - off}, true
}

// read returns the n bytes at off; false when they are not all inside
// the region or cannot be read.
func (g region) read(off uint64, n int) ([]byte, bool) {
	if off > g.n || uint64(n) > g.n-off {
		return nil, false
	}
	b := make([]byte, n)
	return b, g.readAt(b, off)
}

// readAt fills b from off; false when b does not fit inside the region
// or cannot be read.
func (g region) readAt(b []byte, off uint64) bool {
	if off > g.n || uint64(len(b)) > g.n-off {
		return false
	}
	_, err := g.r.ReadAt(b, g.base+int64(off))
	return err == nil
}

// upTo returns up to n bytes at off (fewer at the region's end).
func (g region) upTo(off uint64, n int) ([]byte, bool) {
	if off >= g.n {
		return nil, false
	}
	return g.read(off, int(min(uint64(n), g.n-off)))
}

func (g region) u32(off uint64, bo binary.ByteOrder) (uint32, bool) {
	b, ok := g.read(off, 4)
	if !ok {
		return 0, false
	}
	return bo.Uint32(b), true
}

// cString returns the NUL-terminated string at off (at most maxNameBytes).
func (g region) cString(off uint64) string {
	for n := 256; ; n *= 4 {
		b, ok := g.upTo(off, n)
		if !ok {
			return ""
		}
		if i := bytes.IndexByte(b, 0); i >= 0 {
			return string(b[:i])
		}
		if len(b) < n || n >= maxNameBytes {
			return string(b)
		}
	}
}

// byteReader reads a region forward in chunks, for varint streams.
type byteReader struct {
	g   region
	off uint64
	buf []byte
}

func (r *byteReader) ReadByte() (byte, error) {
	if len(r.buf) == 0 {
		b, ok := r.g.upTo(r.off, 256)
		if !ok || len(b) == 0 {
			return 0, io.ErrUnexpectedEOF
		}
		r.buf, r.off = b, r.off+uint64(len(b))
	}
	c := r.buf[0]
	r.buf = r.buf[1:]
	return c, nil
}

type pclntab struct {
	all     region // the whole section
	bo      binary.ByteOrder
	version int // 118 or 120
	minLC   uint32
	nfunc   int
	// ftab is the function table (nfunc+1 entries of entry offset and
	// _func offset), the one part kept in memory: every lookup and every
	// ELF symbol check binary-searches it.
	ftab      []byte
	textStart uint64
	// Sub-tables, each from its offset to the end of the section.
	funcnames, cutab, filetab, pctab, functab region
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
	if err := l.check(s); err != nil {
		return nil, err
	}
	p, err := parsePclntab(l.r, int64(s.Offset), s.Size, l.f.ByteOrder)
	if err != nil {
		return nil, err
	}
	p.addr = s.Addr
	if p.textStart == 0 { // PIE: filled by a relocation at load time
		if text := l.f.Section(".text"); text != nil {
			p.textStart = text.Addr
		}
	}
	return p, nil
}

// parsePclntab reads the header and function table of the pclntab of size
// bytes at file offset base of r.
func parsePclntab(r io.ReaderAt, base int64, size uint64, bo binary.ByteOrder) (*pclntab, error) {
	all := region{r: r, base: base, n: size}
	head, ok := all.upTo(0, 8+8*8)
	if !ok || len(head) < 8 {
		return nil, fmt.Errorf("%d bytes: too short for a header", size)
	}
	p := &pclntab{all: all, bo: bo}
	switch m := bo.Uint32(head); m {
	case pcHeaderMagic118:
		p.version = 118
	case pcHeaderMagic120:
		p.version = 120
	default:
		return nil, fmt.Errorf("magic %#x: not a Go 1.18+ pclntab (older Go is named from .symtab)", m)
	}
	p.minLC = uint32(head[6])
	ptr := int(head[7])
	if ptr != 4 && ptr != 8 || p.minLC == 0 {
		return nil, fmt.Errorf("pointer size %d, instruction quantum %d: corrupt header", ptr, p.minLC)
	}
	if len(head) < 8+8*ptr {
		return nil, fmt.Errorf("%d bytes: too short for a header", size)
	}
	word := func(i int) uint64 {
		if ptr == 4 {
			return uint64(bo.Uint32(head[8+4*i:]))
		}
		return bo.Uint64(head[8+8*i:])
	}
	nfunc := word(0)
	p.textStart = word(2) // Go 1.26 and later leave it 0
	p.funcnameOffset = word(3)
	var errs []error
	for i, dst := range []*region{&p.funcnames, &p.cutab, &p.filetab, &p.pctab, &p.functab} {
		off := word(3 + i)
		g, ok := all.sub(off)
		if !ok {
			errs = append(errs, fmt.Errorf("table offset %d beyond the %d-byte pclntab", off, size))
		}
		*dst = g
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if nfunc >= p.functab.n/8 { // nfunc+1 entries of 8 bytes
		return nil, fmt.Errorf("%d functions do not fit the %d-byte function table", nfunc, p.functab.n)
	}
	p.nfunc = int(nfunc)
	if p.ftab, ok = p.functab.read(0, 8*(p.nfunc+1)); !ok {
		return nil, fmt.Errorf("read the function table (%d functions)", nfunc)
	}
	return p, nil
}

// entry returns the entry offset (from textStart) and _func offset of
// function i (i == nfunc: the end of the text).
func (p *pclntab) entry(i int) (entryOff, funcOff uint32) {
	return p.bo.Uint32(p.ftab[8*i:]), p.bo.Uint32(p.ftab[8*i+4:])
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

// has reports whether addr is in a Go function.
func (p *pclntab) has(addr uint64) bool {
	_, ok := p.find(addr)
	return ok
}

// fn is a decoded _func, with the one pcdata and funcdata entry read.
type fn struct {
	entry                  uint64
	nameOff                uint32
	pcfile, pcln, cuOffset uint32
	inlIndex, inlTree      uint32 // pcdata[pcdataInlTreeIndex], funcdata[funcdataInlTree]
	hasInl                 bool   // both exist
}

func (p *pclntab) fn(i int) (fn, bool) {
	_, off := p.entry(i)
	fixed := 44
	if p.version == 118 {
		fixed = 40 // no startLine
	}
	b, ok := p.functab.read(uint64(off), fixed)
	if !ok {
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
	rest := uint64(off) + uint64(fixed)
	if rest > p.functab.n || npcdata*4 > p.functab.n-rest {
		return fn{}, false
	}
	if npcdata > pcdataInlTreeIndex && nfuncdata > funcdataInlTree {
		ix, ok1 := p.functab.u32(rest+4*pcdataInlTreeIndex, p.bo)
		tree, ok2 := p.functab.u32(rest+4*npcdata+4*funcdataInlTree, p.bo)
		f.inlIndex, f.inlTree, f.hasInl = ix, tree, ok1 && ok2
	}
	return f, true
}

// value evaluates the pc-value table at off (in pctab) for pc, as the
// runtime's pcvalue does; false when the table is absent or ends first.
func (p *pclntab) value(off uint32, entry, pc uint64) (int32, bool) {
	if off == 0 || uint64(off) >= p.pctab.n {
		return -1, false
	}
	r := &byteReader{g: p.pctab, off: uint64(off)}
	val, cur := int32(-1), entry
	for first := true; ; first = false {
		uv, err := binary.ReadUvarint(r)
		if err != nil || uv > 1<<32-1 {
			return -1, false
		}
		if uv == 0 && !first {
			return -1, false
		}
		if uv&1 != 0 {
			val += int32(^(uint32(uv) >> 1))
		} else {
			val += int32(uint32(uv) >> 1)
		}
		d, err := binary.ReadUvarint(r)
		if err != nil || d > 1<<32-1 {
			return -1, false
		}
		cur += d * uint64(p.minLC)
		if pc < cur {
			return val, true
		}
	}
}

func (p *pclntab) funcName(off uint32) string { return p.funcnames.cString(uint64(off)) }

// fileLine returns the file and line of pc in f.
func (p *pclntab) fileLine(f *fn, pc uint64) (string, uint32) {
	var file string
	if n, ok := p.value(f.pcfile, f.entry, pc); ok && n >= 0 {
		i := uint64(f.cuOffset) + uint64(n)
		if i < p.cutab.n/4 {
			if off, ok := p.cutab.u32(4*i, p.bo); ok && off != ^uint32(0) {
				file = p.filetab.cString(uint64(off))
			}
		}
	}
	line, ok := p.value(f.pcln, f.entry, pc)
	if !ok || line < 0 {
		line = 0
	}
	return file, uint32(line)
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
	if p.gofunc != 0 && f.hasInl && f.inlTree != ^uint32(0) {
		var ic [inlinedCallSize]byte
		for depth := 0; depth < maxInlineDepth; depth++ {
			ix, ok := p.value(f.inlIndex, f.entry, pc)
			if !ok || ix < 0 {
				break
			}
			if !p.readInline(ic[:], inl, p.gofunc+uint64(f.inlTree)+uint64(ix)*inlinedCallSize) {
				break
			}
			file, line := p.fileLine(&f, pc)
			dst = append(dst, Frame{Function: p.funcName(p.bo.Uint32(ic[4:])), File: file, Line: line})
			parent := int64(int32(p.bo.Uint32(ic[8:])))
			if parent < 0 {
				break
			}
			pc = f.entry + uint64(parent)
		}
	}
	file, line := p.fileLine(&f, pc)
	return append(dst, Frame{Function: p.funcName(f.nameOff), File: file, Line: line}), true
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
	if addr >= p.addr && addr-p.addr < p.all.n {
		return p.all.readAt(b, addr-p.addr)
	}
	return inl != nil && inl.readAt(b, addr)
}
