package debuginfo

import (
	"bufio"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// ErrNotELF is returned by Strip for input that is not an ELF file.
var ErrNotELF = errors.New("not an ELF file")

// ErrNothingToKeep is returned by Strip when the file has no section worth
// uploading (no symbols, debug info, Go tables, relocations or notes).
var ErrNothingToKeep = errors.New("no debug, symbol, Go, relocation or note section")

// KeepSection reports whether Strip keeps the contents of a section: what
// parca-agent's stripper keeps (docs/parca-protocols.md §2.5), so that
// Parca's server can symbolize the upload. That is DWARF (.debug_*,
// .zdebug_*), symbol and string tables, Go's tables (.gopclntab,
// .gosymtab, .go.buildinfo, also under .data.rel.ro), relocation and PLT
// sections (SHT_RELA, SHT_REL, .plt, .plt.got, .rela.plt, .rela.dyn),
// .comment and notes (which hold the GNU and Go build ids).
//
// The relocations matter even without DWARF: Parca's symbol-table liner
// names PLT stubs (name@plt) from .rela.plt and gives up on the whole file
// when it cannot read it, and debug/elf applies .rela.debug_* when it
// reads the DWARF of relocatable files. Every other section keeps its
// header but becomes SHT_NOBITS, so .text and data are not uploaded.
func KeepSection(name string, typ elf.SectionType) bool {
	switch typ {
	case elf.SHT_NULL, elf.SHT_NOBITS:
		return false
	case elf.SHT_SYMTAB, elf.SHT_DYNSYM, elf.SHT_STRTAB, elf.SHT_NOTE, elf.SHT_SYMTAB_SHNDX,
		elf.SHT_RELA, elf.SHT_REL:
		return true
	}
	if strings.HasPrefix(name, ".debug_") || strings.HasPrefix(name, ".zdebug_") {
		return true
	}
	switch name {
	case ".symtab", ".dynsym", ".strtab", ".dynstr", ".shstrtab",
		".gopclntab", ".gosymtab", ".go.buildinfo", ".note.go.buildid",
		".data.rel.ro.gopclntab", ".data.rel.ro.gosymtab",
		".plt", ".plt.got", ".rela.plt", ".rela.dyn", ".comment":
		return true
	}
	return false
}

// StripStats describes one Strip.
type StripStats struct {
	InputSize  int64 // bytes of the input file
	OutputSize int64 // bytes written
	Kept       int   // sections whose contents were copied
	Dropped    int   // sections turned into SHT_NOBITS
}

// maxSectionAlign is the largest alignment Strip preserves between kept
// sections (a page): congruence modulo it keeps every smaller alignment.
const maxSectionAlign = 4096

// Raw header sizes (ELF specification).
const (
	ehdr32Size, ehdr64Size = 52, 64
	phdr32Size, phdr64Size = 32, 56
	shdr32Size, shdr64Size = 40, 64
)

type rawSection struct {
	name                   string
	nameOff                uint32
	typ                    uint32
	flags, addr, off, size uint64
	link, info             uint32
	align, entsize         uint64
	keep                   bool
	newOff                 uint64
}

// Strip writes to w an ELF file with the ELF header of r, its PT_LOAD and
// PT_NOTE program headers, every section header, and the contents of the
// sections KeepSection accepts; every other section becomes SHT_NOBITS (its
// size and address stay, so symbols still resolve). Sections are copied
// byte for byte (compressed DWARF stays compressed). Kept sections keep
// their offsets modulo a page, so runs of adjacent sections (and the notes
// a PT_NOTE segment spans) keep their exact layout; PT_NOTE headers point
// at the copied notes.
//
// PT_LOAD headers are copied unchanged, as in separate debug files
// (objcopy --only-keep-debug): their offsets describe the original file,
// which is what a symbolizer needs to turn a process mapping (start,
// offset) into symbol addresses (Parca's server computes the base from
// them; with no PT_LOAD it would not adjust addresses at all).
//
// r is untrusted: malformed input yields an error, never a panic, and the
// output is never larger than the input plus a few pages.
func Strip(w io.Writer, r io.ReaderAt, size int64) (StripStats, error) {
	st := StripStats{InputSize: size}
	l, err := readLayout(r, size)
	if err != nil {
		return st, err
	}
	order, shoff, err := l.place(&st, size)
	if err != nil {
		return st, err
	}
	l.moveNotes()
	st.OutputSize, err = l.write(w, r, order, shoff)
	return st, err
}

// elfLayout is a file's headers as Strip reads them, then lays out the
// output.
type elfLayout struct {
	is64                         bool
	bo                           binary.ByteOrder
	ehdr                         []byte
	ehdrSize, phdrSize, shdrSize int
	secs                         []rawSection // every section header, raw
	shstrndx                     int
	progs                        []elf.ProgHeader // PT_LOAD and non-empty PT_NOTE, in order
}

// readLayout reads the ELF header, the raw section headers (marking the
// sections to keep) and the program headers to keep.
func readLayout(r io.ReaderAt, size int64) (*elfLayout, error) {
	f, err := elf.NewFile(io.NewSectionReader(r, 0, size))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNotELF, err)
	}
	l := &elfLayout{is64: f.Class == elf.ELFCLASS64, bo: f.ByteOrder}
	bo := l.bo
	l.ehdrSize, l.phdrSize, l.shdrSize = ehdr32Size, phdr32Size, shdr32Size
	if l.is64 {
		l.ehdrSize, l.phdrSize, l.shdrSize = ehdr64Size, phdr64Size, shdr64Size
	}
	l.ehdr = make([]byte, l.ehdrSize)
	if _, err := r.ReadAt(l.ehdr, 0); err != nil {
		return nil, fmt.Errorf("read ELF header: %w", err)
	}
	var shoff uint64
	var shentsize, shstrndxRaw uint16
	if l.is64 {
		shoff = bo.Uint64(l.ehdr[40:])
		shentsize, shstrndxRaw = bo.Uint16(l.ehdr[58:]), bo.Uint16(l.ehdr[62:])
	} else {
		shoff = uint64(bo.Uint32(l.ehdr[32:]))
		shentsize, shstrndxRaw = bo.Uint16(l.ehdr[46:]), bo.Uint16(l.ehdr[50:])
	}
	n := len(f.Sections)
	if n == 0 || shoff == 0 {
		return nil, fmt.Errorf("%w: no section headers", ErrNothingToKeep)
	}
	if int(shentsize) != l.shdrSize {
		return nil, fmt.Errorf("%w: section header size %d, want %d", ErrNotELF, shentsize, l.shdrSize)
	}
	if shoff > uint64(size) || uint64(n)*uint64(l.shdrSize) > uint64(size)-shoff {
		return nil, fmt.Errorf("%w: section headers past the end of the file", ErrNotELF)
	}
	if err := l.readSections(r, size, f, shoff); err != nil {
		return nil, err
	}
	l.shstrndx = int(shstrndxRaw)
	if shstrndxRaw == uint16(elf.SHN_XINDEX) {
		l.shstrndx = int(l.secs[0].link)
	}
	if l.shstrndx > 0 && l.shstrndx < n && l.secs[l.shstrndx].typ != uint32(elf.SHT_NOBITS) && l.secs[l.shstrndx].size > 0 {
		s := &l.secs[l.shstrndx]
		if s.off > uint64(size) || s.size > uint64(size)-s.off {
			return nil, fmt.Errorf("%w: section name table lies past the end of the file", ErrNotELF)
		}
		s.keep = true
	}
	// Program headers kept, in their original order: PT_LOAD as is,
	// PT_NOTE moved with its notes (moveNotes).
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD || p.Type == elf.PT_NOTE && p.Filesz > 0 {
			l.progs = append(l.progs, p.ProgHeader)
		}
	}
	return l, nil
}

// readSections reads the raw section headers, exactly as in the file
// (debug/elf reports the uncompressed size of compressed sections; the
// copy needs the raw one), and marks those KeepSection accepts.
func (l *elfLayout) readSections(r io.ReaderAt, size int64, f *elf.File, shoff uint64) error {
	bo := l.bo
	l.secs = make([]rawSection, len(f.Sections))
	buf := make([]byte, l.shdrSize)
	for i := range l.secs {
		if _, err := r.ReadAt(buf, int64(shoff)+int64(i*l.shdrSize)); err != nil {
			return fmt.Errorf("read section header %d: %w", i, err)
		}
		s := &l.secs[i]
		s.name = f.Sections[i].Name
		if l.is64 {
			s.nameOff, s.typ = bo.Uint32(buf[0:]), bo.Uint32(buf[4:])
			s.flags, s.addr, s.off, s.size = bo.Uint64(buf[8:]), bo.Uint64(buf[16:]), bo.Uint64(buf[24:]), bo.Uint64(buf[32:])
			s.link, s.info = bo.Uint32(buf[40:]), bo.Uint32(buf[44:])
			s.align, s.entsize = bo.Uint64(buf[48:]), bo.Uint64(buf[56:])
		} else {
			s.nameOff, s.typ = bo.Uint32(buf[0:]), bo.Uint32(buf[4:])
			s.flags, s.addr, s.off, s.size = uint64(bo.Uint32(buf[8:])), uint64(bo.Uint32(buf[12:])), uint64(bo.Uint32(buf[16:])), uint64(bo.Uint32(buf[20:]))
			s.link, s.info = bo.Uint32(buf[24:]), bo.Uint32(buf[28:])
			s.align, s.entsize = uint64(bo.Uint32(buf[32:])), uint64(bo.Uint32(buf[36:]))
		}
		if i == 0 {
			continue // the null section (or extended numbering): copied as is
		}
		s.keep = KeepSection(s.name, elf.SectionType(s.typ)) && s.size > 0
		if s.keep && (s.off > uint64(size) || s.size > uint64(size)-s.off) {
			return fmt.Errorf("%w: section %d (%q) lies past the end of the file", ErrNotELF, i, s.name)
		}
	}
	return nil
}

// place lays the output out: header, program headers, kept sections in
// file order (each at the lowest offset congruent to its old one modulo
// the alignment), then the section header table, whose offset it returns
// with the sections in file order. It counts the kept and dropped
// sections in st.
func (l *elfLayout) place(st *StripStats, size int64) (order []int, shoff uint64, err error) {
	secs, n := l.secs, len(l.secs)
	align := uint64(8)
	for i := range secs {
		if secs[i].keep {
			a := secs[i].align
			if a > maxSectionAlign {
				a = maxSectionAlign
			}
			for align < a {
				align <<= 1
			}
		}
	}
	order = make([]int, 0, n)
	for i := 1; i < n; i++ {
		order = append(order, i)
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case secs[a].off < secs[b].off:
			return -1
		case secs[a].off > secs[b].off:
			return 1
		}
		return 0
	})
	start := uint64(l.ehdrSize) + uint64(len(l.progs))*uint64(l.phdrSize)
	cur := start
	var keptBytes uint64
	for _, i := range order {
		s := &secs[i]
		if !s.keep {
			continue
		}
		s.newOff = cur + (s.off-cur%align+align)%align
		if s.newOff < cur { // overflow guard; cannot happen for sane sizes
			return nil, 0, fmt.Errorf("%w: section offsets overflow", ErrNotELF)
		}
		cur = s.newOff + s.size
		keptBytes += s.size
		st.Kept++
	}
	// Dropped sections point at where they would have been.
	last := start
	for _, i := range order {
		s := &secs[i]
		if s.keep {
			last = s.newOff + s.size
			continue
		}
		if s.typ != uint32(elf.SHT_NULL) {
			s.newOff = last
			if s.typ != uint32(elf.SHT_NOBITS) && s.size > 0 {
				st.Dropped++
			}
		}
	}
	if st.Kept == 0 || (st.Kept == 1 && l.shstrndx > 0 && l.shstrndx < n && secs[l.shstrndx].keep) {
		return nil, 0, ErrNothingToKeep
	}
	// Overlapping sections would be copied once each: refuse output
	// (beyond alignment padding) larger than the input.
	if keptBytes > uint64(size) || cur > 2*uint64(size)+1<<20 {
		return nil, 0, fmt.Errorf("%w: sections overlap (%d bytes to keep from a %d-byte file)", ErrNotELF, keptBytes, size)
	}
	return order, (cur + 7) &^ 7, nil
}

// moveNotes moves PT_NOTE segments with the section that holds their
// start, and keeps them only when every section they overlap moved by the
// same amount (so the segment's bytes are still contiguous).
func (l *elfLayout) moveNotes() {
	kept := l.progs[:0]
	for _, p := range l.progs {
		if p.Type == elf.PT_LOAD {
			kept = append(kept, p)
			continue
		}
		if shift, ok := noteShift(l.secs, p); ok {
			p.Off = uint64(int64(p.Off) + shift)
			kept = append(kept, p)
		}
	}
	l.progs = kept
}

// write writes the output as place laid it out and returns its size.
func (l *elfLayout) write(w io.Writer, r io.ReaderAt, order []int, shoff uint64) (int64, error) {
	bo, ehdr := l.bo, l.ehdr
	phoff := uint64(l.ehdrSize)
	if len(l.progs) == 0 {
		phoff = 0
	}
	// ELF header: the original with the program and section header
	// tables moved.
	if l.is64 {
		bo.PutUint64(ehdr[32:], phoff)
		bo.PutUint64(ehdr[40:], shoff)
		bo.PutUint16(ehdr[52:], ehdr64Size)
		bo.PutUint16(ehdr[54:], phdr64Size)
		bo.PutUint16(ehdr[56:], uint16(len(l.progs)))
	} else {
		bo.PutUint32(ehdr[28:], uint32(phoff))
		bo.PutUint32(ehdr[32:], uint32(shoff))
		bo.PutUint16(ehdr[40:], ehdr32Size)
		bo.PutUint16(ehdr[42:], phdr32Size)
		bo.PutUint16(ehdr[44:], uint16(len(l.progs)))
	}
	if !l.is64 && shoff > 0xffffffff {
		return 0, fmt.Errorf("%w: 32-bit file too large", ErrNotELF)
	}
	bw := bufio.NewWriterSize(w, 256<<10)
	cw := &countingWriter{w: bw}
	// e_shnum and e_shstrndx stay as they were: every section header is kept.
	cw.Write(ehdr)
	for _, p := range l.progs {
		cw.Write(progHeader(bo, l.is64, p))
	}
	for _, i := range order {
		s := &l.secs[i]
		if !s.keep {
			continue
		}
		cw.pad(s.newOff)
		if _, err := io.Copy(cw, io.NewSectionReader(r, int64(s.off), int64(s.size))); err != nil && cw.err == nil {
			return 0, fmt.Errorf("copy section %q: %w", s.name, err)
		}
	}
	cw.pad(shoff)
	for i := range l.secs {
		s := l.secs[i]
		if i > 0 && !s.keep && s.typ != uint32(elf.SHT_NULL) {
			s.typ = uint32(elf.SHT_NOBITS)
		}
		if i == 0 {
			s.newOff = s.off
		}
		cw.Write(sectionHeader(bo, l.is64, &s))
	}
	if cw.err != nil {
		return 0, fmt.Errorf("write stripped ELF: %w", cw.err)
	}
	if err := bw.Flush(); err != nil {
		return 0, fmt.Errorf("write stripped ELF: %w", err)
	}
	return cw.n, nil
}

// noteShift returns by how much a PT_NOTE segment moves, and whether all
// the sections with contents it overlaps are kept and moved together (so
// the segment's bytes are still contiguous) and one of them holds its start.
func noteShift(secs []rawSection, p elf.ProgHeader) (int64, bool) {
	start, end := p.Off, p.Off+p.Filesz
	if end < start {
		return 0, false
	}
	var shift int64
	seen, covered := false, false
	for i := 1; i < len(secs); i++ {
		s := &secs[i]
		if s.typ == uint32(elf.SHT_NOBITS) || s.size == 0 || s.off >= end || s.off+s.size <= start {
			continue
		}
		if !s.keep {
			return 0, false
		}
		d := int64(s.newOff - s.off)
		if seen && d != shift {
			return 0, false
		}
		seen, shift = true, d
		covered = covered || s.off <= start
	}
	return shift, covered
}

func progHeader(bo binary.ByteOrder, is64 bool, p elf.ProgHeader) []byte {
	if is64 {
		b := make([]byte, phdr64Size)
		bo.PutUint32(b[0:], uint32(p.Type))
		bo.PutUint32(b[4:], uint32(p.Flags))
		bo.PutUint64(b[8:], p.Off)
		bo.PutUint64(b[16:], p.Vaddr)
		bo.PutUint64(b[24:], p.Paddr)
		bo.PutUint64(b[32:], p.Filesz)
		bo.PutUint64(b[40:], p.Memsz)
		bo.PutUint64(b[48:], p.Align)
		return b
	}
	b := make([]byte, phdr32Size)
	bo.PutUint32(b[0:], uint32(p.Type))
	bo.PutUint32(b[4:], uint32(p.Off))
	bo.PutUint32(b[8:], uint32(p.Vaddr))
	bo.PutUint32(b[12:], uint32(p.Paddr))
	bo.PutUint32(b[16:], uint32(p.Filesz))
	bo.PutUint32(b[20:], uint32(p.Memsz))
	bo.PutUint32(b[24:], uint32(p.Flags))
	bo.PutUint32(b[28:], uint32(p.Align))
	return b
}

func sectionHeader(bo binary.ByteOrder, is64 bool, s *rawSection) []byte {
	if is64 {
		b := make([]byte, shdr64Size)
		bo.PutUint32(b[0:], s.nameOff)
		bo.PutUint32(b[4:], s.typ)
		bo.PutUint64(b[8:], s.flags)
		bo.PutUint64(b[16:], s.addr)
		bo.PutUint64(b[24:], s.newOff)
		bo.PutUint64(b[32:], s.size)
		bo.PutUint32(b[40:], s.link)
		bo.PutUint32(b[44:], s.info)
		bo.PutUint64(b[48:], s.align)
		bo.PutUint64(b[56:], s.entsize)
		return b
	}
	b := make([]byte, shdr32Size)
	bo.PutUint32(b[0:], s.nameOff)
	bo.PutUint32(b[4:], s.typ)
	bo.PutUint32(b[8:], uint32(s.flags))
	bo.PutUint32(b[12:], uint32(s.addr))
	bo.PutUint32(b[16:], uint32(s.newOff))
	bo.PutUint32(b[20:], uint32(s.size))
	bo.PutUint32(b[24:], s.link)
	bo.PutUint32(b[28:], s.info)
	bo.PutUint32(b[32:], uint32(s.align))
	bo.PutUint32(b[36:], uint32(s.entsize))
	return b
}

// countingWriter counts bytes, pads with zeros to an offset and keeps the
// first error (later writes are no-ops).
type countingWriter struct {
	w   io.Writer
	n   int64
	err error
}

var zeros [4096]byte

func (c *countingWriter) Write(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.w.Write(p)
	c.n += int64(n)
	c.err = err
	return n, err
}

func (c *countingWriter) pad(to uint64) {
	for c.err == nil && uint64(c.n) < to {
		k := to - uint64(c.n)
		if k > uint64(len(zeros)) {
			k = uint64(len(zeros))
		}
		c.Write(zeros[:k])
	}
}
