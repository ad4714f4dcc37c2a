package symbolize

import (
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"strings"
	"time"
	"unsafe"
)

// Frame is one source frame of a resolved address. Inlined calls come
// first, the function the address is in last.
type Frame struct {
	Function string
	File     string // "" when unknown (ELF symbols carry no file)
	Line     uint32 // 0 when unknown
}

// Limits bound what Load reads from one file.
type Limits struct {
	// MaxSectionBytes is the largest section (symbol table, string table,
	// relocations, pclntab) Load reads; a larger one is skipped.
	MaxSectionBytes int64
	// MaxDebugFileBytes is the largest separate debug file read (one
	// found by .gnu_debuglink is read whole for its CRC32).
	MaxDebugFileBytes int64
	// DebugCRCTimeout bounds that CRC32 (0: no bound): past it the debug
	// file is not used, and the executable keeps its own symbols.
	DebugCRCTimeout time.Duration
}

// Defaults for Limits fields left zero.
const (
	defaultMaxSectionBytes   = 256 << 20
	defaultMaxDebugFileBytes = 1 << 30
)

// ErrNoSymbols is returned by Load for a valid ELF file without anything
// to name functions by.
var ErrNoSymbols = errors.New("no symbol table, dynamic symbols or Go pclntab")

// Table names the functions of one executable. It is immutable and safe
// for concurrent use.
type Table struct {
	syms  []sym  // sorted by start, one per start
	names string // symbol names, concatenated
	pcln  *pclntab
	// inl reads Go inline trees lazily from the file (nil: none).
	inl *sectionBytes
	// Problems lists what could not be read although the table is usable
	// (a section over the limit, a corrupt PLT, a debug file that is not
	// the executable's); nil when none.
	Problems error
	// Debug says whether a separate debug file was looked for and used.
	Debug DebugFile
	// inMemory is the bytes of the file a Detached table holds.
	inMemory int64
	detached bool
}

// sym is one function symbol: [start, start+size) names names[off:off+n].
// size 0 (unknown) extends to the next symbol.
type sym struct {
	start  uint64
	size   uint32
	off, n uint32
}

// Bytes is the memory the table holds, for cache accounting.
func (t *Table) Bytes() int64 {
	n := int64(len(t.syms))*int64(unsafe.Sizeof(sym{})) + int64(len(t.names)) + 64
	if t.pcln != nil {
		n += int64(len(t.pcln.ftab)) + 256 // the rest is read from the file
	}
	n += t.inMemory
	return n
}

// Symbols is how many ELF function symbols (PLT stubs included) the table
// holds; Go functions found through the pclntab are not counted.
func (t *Table) Symbols() int { return len(t.syms) }

// HasGo reports whether the table has a Go pclntab.
func (t *Table) HasGo() bool { return t.pcln != nil }

// Lookup appends the frames of the file virtual address addr to dst and
// returns it; nothing is appended when addr is in no known function.
func (t *Table) Lookup(addr uint64, dst []Frame) []Frame {
	if t.pcln != nil {
		if out, ok := t.pcln.lookup(addr, t.inl, dst); ok {
			return out
		}
	}
	i, ok := slices.BinarySearchFunc(t.syms, addr, func(s sym, a uint64) int {
		switch {
		case s.start < a:
			return -1
		case s.start > a:
			return 1
		}
		return 0
	})
	if !ok {
		i-- // the last symbol starting before addr
	}
	if i < 0 {
		return dst
	}
	s := &t.syms[i]
	if s.size != 0 && addr-s.start >= uint64(s.size) {
		return dst
	}
	return append(dst, Frame{Function: t.names[s.off : s.off+s.n]})
}

// Load reads the symbol tables of the ELF file r (size bytes). Bad input
// yields an error, never a panic; reads stay within the file's sections.
// The table reads a Go pclntab from r as lookups need it (r must stay
// open; once it is closed, or shrinks, the pclntab names nothing). When r
// is an *os.File the symbol, string and relocation tables are mapped from
// it while loading (see mapSection); a file truncated under such a mapping
// makes Load fail instead of crashing the encoder.
func Load(r io.ReaderAt, size int64, lim Limits) (*Table, error) {
	return LoadWithDebug(r, size, lim, DebugSearch{})
}

// LoadWithDebug is Load that also reads the symbol table of the
// executable's separate debug file when the executable has no .symtab
// (stripped): found by build id or .gnu_debuglink as search says, and
// used only when its build id (or its CRC32, for a debuglink) matches.
// The debug file is closed before it returns.
func LoadWithDebug(r io.ReaderAt, size int64, lim Limits, search DebugSearch) (t *Table, err error) {
	defer func() {
		if r := recover(); r != nil {
			if !isFault(r) {
				panic(r)
			}
			t, err = nil, fmt.Errorf("the file changed while it was read: %v", r)
		}
	}()
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	return load(r, size, lim, search)
}

func load(r io.ReaderAt, size int64, lim Limits, search DebugSearch) (*Table, error) {
	if lim.MaxSectionBytes <= 0 {
		lim.MaxSectionBytes = defaultMaxSectionBytes
	}
	if lim.MaxDebugFileBytes <= 0 {
		lim.MaxDebugFileBytes = defaultMaxDebugFileBytes
	}
	f, err := elf.NewFile(io.NewSectionReader(r, 0, size))
	if err != nil {
		return nil, fmt.Errorf("read ELF headers: %w", err)
	}
	l := loader{f: f, r: r, size: size, lim: lim}
	defer l.release()
	t := &Table{}
	var errs []error
	if pcln, err := l.pclntab(); err != nil {
		errs = append(errs, fmt.Errorf("read Go pclntab: %w", err))
	} else {
		t.pcln = pcln
	}
	b := symBuilder{pcln: t.pcln}
	symtab := f.Section(".symtab")
	gofunc := uint64(0)
	if symtab != nil && symtab.Type == elf.SHT_SYMTAB {
		n, gf, err := l.symbols(symtab, &b, nil)
		if err != nil {
			errs = append(errs, fmt.Errorf(".symtab: %w", err))
		}
		gofunc = gf
		if n == 0 {
			symtab = nil
		}
	} else {
		symtab = nil
	}
	var dynNames []string // dynamic symbol names by index, for the PLT
	if dynsym := f.Section(".dynsym"); dynsym != nil && dynsym.Type == elf.SHT_DYNSYM {
		into := &b
		if symtab != nil {
			into = nil // .symtab is a superset: keep only the names by index
		}
		if _, _, err := l.symbols(dynsym, into, &dynNames); err != nil {
			errs = append(errs, fmt.Errorf(".dynsym: %w", err))
		}
	}
	if err := l.plt(&b, dynNames); err != nil {
		errs = append(errs, fmt.Errorf("PLT: %w", err))
	}
	if symtab == nil { // stripped: its full symbols may be in a debug file
		l.debugSymbols(search, &b, &t.Debug, &errs)
	}
	if t.pcln != nil && t.pcln.version >= 120 {
		if gofunc == 0 { // stripped (go test, -ldflags=-s): ask the module data
			gofunc = l.moduledataGofunc(t.pcln)
		}
		if gofunc != 0 {
			t.pcln.gofunc = gofunc
			if gofunc < t.pcln.addr || gofunc-t.pcln.addr >= t.pcln.all.n {
				t.inl = l.sectionAt(gofunc) // read from the file on demand
			}
		}
	}
	t.syms, t.names = b.finish(t.pcln)
	if len(t.syms) == 0 && t.pcln == nil {
		return nil, errors.Join(append([]error{ErrNoSymbols}, errs...)...)
	}
	t.Problems = errors.Join(errs...)
	return t, nil
}

type loader struct {
	f    *elf.File
	r    io.ReaderAt
	size int64
	lim  Limits
	// transient are the mappings of the sections read only while
	// loading (symbol, string and relocation tables), unmapped when Load
	// returns: nothing of them is kept (names are copied into the table).
	transient [][]byte
}

// scratch returns the contents of s for use while loading only: mapped
// from the file when it can be (no heap garbage of the size of the
// section), else read.
func (l *loader) scratch(s *elf.Section) ([]byte, error) {
	data, mapping, err := l.mapped(s)
	if mapping != nil {
		l.transient = append(l.transient, mapping)
	}
	return data, err
}

// isFault reports whether a recovered value is a memory fault (the
// runtime's error under debug.SetPanicOnFault has an Addr method).
func isFault(r any) bool {
	_, ok := r.(interface{ Addr() uintptr })
	return ok
}

// release unmaps the transient mappings.
func (l *loader) release() {
	for _, m := range l.transient {
		unmap(m)
	}
	l.transient = nil
}

// read returns the contents of s, bounded by the limits.
func (l *loader) read(s *elf.Section) ([]byte, error) {
	if err := l.check(s); err != nil {
		return nil, err
	}
	b := make([]byte, s.Size)
	if _, err := l.r.ReadAt(b, int64(s.Offset)); err != nil {
		return nil, fmt.Errorf("read section %s: %w", s.Name, err)
	}
	return b, nil
}

// mapped returns the contents of s, bounded by the limits, mapped from
// the file when it can be (mapping is then the mapping to unmap), else
// read.
func (l *loader) mapped(s *elf.Section) (data, mapping []byte, err error) {
	if err := l.check(s); err != nil {
		return nil, nil, err
	}
	if data, mapping, ok := mapSection(l.r, int64(s.Offset), int64(s.Size)); ok {
		return data, mapping, nil
	}
	data, err = l.read(s)
	return data, nil, err
}

// check says whether s can be read within the limits.
func (l *loader) check(s *elf.Section) error {
	switch {
	case s.Type == elf.SHT_NOBITS:
		return fmt.Errorf("section %s has no contents", s.Name)
	case s.Flags&elf.SHF_COMPRESSED != 0:
		return fmt.Errorf("section %s is compressed", s.Name)
	case s.Size > uint64(l.lim.MaxSectionBytes):
		return fmt.Errorf("section %s is %d bytes, more than the %d-byte limit", s.Name, s.Size, l.lim.MaxSectionBytes)
	case s.Offset > uint64(l.size) || s.Size > uint64(l.size)-s.Offset:
		return fmt.Errorf("section %s [%d, +%d) is outside the %d-byte file", s.Name, s.Offset, s.Size, l.size)
	}
	return nil
}

// sectionBytes is a window of the file holding one section's contents,
// read on demand, addressed by virtual address.
type sectionBytes struct {
	g    region // the section's bytes in the file
	addr uint64 // virtual address of g's first byte
}

// sectionAt returns the section holding the virtual address addr.
func (l *loader) sectionAt(addr uint64) *sectionBytes {
	for _, s := range l.f.Sections {
		if s.Type == elf.SHT_NOBITS || s.Flags&elf.SHF_ALLOC == 0 || s.Flags&elf.SHF_COMPRESSED != 0 {
			continue
		}
		if addr < s.Addr || addr-s.Addr >= s.Size {
			continue
		}
		if s.Offset > uint64(l.size) || s.Size > uint64(l.size)-s.Offset {
			return nil
		}
		return &sectionBytes{g: region{r: l.r, base: int64(s.Offset), n: s.Size}, addr: s.Addr}
	}
	return nil
}

// readAt fills b from the virtual address addr; false when that is not
// entirely inside the section.
func (s *sectionBytes) readAt(b []byte, addr uint64) bool {
	return addr >= s.addr && s.g.readAt(b, addr-s.addr)
}

// symBuilder collects function symbols.
type symBuilder struct {
	syms  []sym
	rank  []uint8
	names strings.Builder
	// pcln, when set, names Go functions: their ELF symbols are not
	// collected (finish would drop them; a Go binary's .symtab is mostly
	// these, and collecting their names cost 20 MB of garbage per load).
	pcln *pclntab
}

func (b *symBuilder) add(start, size uint64, name string, rank uint8) {
	if name == "" || start == 0 || b.pcln != nil && b.pcln.has(start) {
		return
	}
	b.syms = append(b.syms, sym{start: start, size: uint32(min(size, 1<<32-1)), off: uint32(b.names.Len()), n: uint32(len(name))})
	b.rank = append(b.rank, rank)
	b.names.WriteString(name)
}

// finish sorts the symbols and keeps the best one per start: global over
// weak over local, then the longest (a sized one over a label). Symbols
// inside a Go function the pclntab knows are dropped: it names them
// better.
func (b *symBuilder) finish(pcln *pclntab) ([]sym, string) {
	idx := make([]int, len(b.syms))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(x, y int) int {
		sx, sy := &b.syms[x], &b.syms[y]
		switch {
		case sx.start != sy.start:
			if sx.start < sy.start {
				return -1
			}
			return 1
		case b.rank[x] != b.rank[y]:
			return int(b.rank[x]) - int(b.rank[y])
		}
		return int(sy.size) - int(sx.size)
	})
	out := make([]sym, 0, len(idx))
	for _, i := range idx {
		s := b.syms[i]
		if len(out) > 0 && out[len(out)-1].start == s.start {
			continue
		}
		if pcln != nil && pcln.has(s.start) {
			continue
		}
		out = append(out, s)
	}
	// A copy, not slices.Clip: the duplicates dropped (a .dynsym and a
	// debug file's .symtab name most functions twice) would stay allocated.
	out = slices.Clone(out)
	// Keep only the names that survived.
	all := b.names.String()
	var names strings.Builder
	for i := range out {
		s := &out[i]
		name := all[s.off : s.off+s.n]
		s.off = uint32(names.Len())
		names.WriteString(name)
	}
	return out, strings.Clone(names.String())
}

// symbols reads the function symbols of a symbol table section into b (if
// not nil) and, when byIndex is not nil, every symbol's name by index. It
// returns how many function symbols it found and the address of Go's
// symbol go:func.* (or go.func.*), 0 if absent.
func (l *loader) symbols(s *elf.Section, b *symBuilder, byIndex *[]string) (int, uint64, error) {
	if int(s.Link) >= len(l.f.Sections) || s.Link == 0 {
		return 0, 0, fmt.Errorf("string table link %d is not a section", s.Link)
	}
	data, err := l.scratch(s)
	if err != nil {
		return 0, 0, err
	}
	strtab, err := l.scratch(l.f.Sections[s.Link])
	if err != nil {
		return 0, 0, fmt.Errorf("string table: %w", err)
	}
	entSize := 24
	if l.f.Class == elf.ELFCLASS32 {
		entSize = 16
	}
	bo := l.f.ByteOrder
	n, gofunc := 0, uint64(0)
	for off := 0; off+entSize <= len(data); off += entSize {
		e := data[off : off+entSize]
		var nameOff uint32
		var value, size uint64
		var info uint8
		var shndx uint16
		nameOff = bo.Uint32(e[0:4])
		if entSize == 24 {
			info, shndx = e[4], bo.Uint16(e[6:8])
			value, size = bo.Uint64(e[8:16]), bo.Uint64(e[16:24])
		} else {
			value, size = uint64(bo.Uint32(e[4:8])), uint64(bo.Uint32(e[8:12]))
			info, shndx = e[12], bo.Uint16(e[14:16])
		}
		name := cString(strtab, nameOff)
		if byIndex != nil {
			*byIndex = append(*byIndex, name)
		}
		typ, bind := elf.SymType(info&0xf), elf.SymBind(info>>4)
		if name == "go:func.*" || name == "go.func.*" {
			gofunc = value
		}
		if typ != elf.STT_FUNC && typ != elf.STT_GNU_IFUNC || elf.SectionIndex(shndx) == elf.SHN_UNDEF {
			continue
		}
		n++
		if b != nil {
			b.add(value, size, name, bindRank(bind))
		}
	}
	return n, gofunc, nil
}

func bindRank(b elf.SymBind) uint8 {
	switch b {
	case elf.STB_GLOBAL:
		return 0
	case elf.STB_WEAK:
		return 1
	}
	return 2
}

// cString returns the NUL-terminated string at off in tab ("" when off is
// outside it). It aliases tab.
func cString(tab []byte, off uint32) string {
	if uint64(off) >= uint64(len(tab)) {
		return ""
	}
	s := tab[off:]
	if i := slices.Index(s, 0); i >= 0 {
		s = s[:i]
	}
	return unsafe.String(unsafe.SliceData(s), len(s))
}

// PLT layouts: where stub i of .rela.plt lives. x86-64 stubs start at
// .plt.sec when there is one (IBT's second PLT), else after .plt's 16-byte
// header; arm64 stubs after .plt's 32-byte header.
const (
	pltEntry      = 16
	pltHeaderX86  = 16
	pltHeaderA64  = 32
	relaEntrySize = 24
)

// plt names the PLT stubs "name@plt", from .rela.plt and the dynamic
// symbols (x86-64 and arm64, 64-bit only).
func (l *loader) plt(b *symBuilder, dynNames []string) error {
	if l.f.Class != elf.ELFCLASS64 || len(dynNames) == 0 {
		return nil
	}
	var base uint64
	var jumpSlot uint32
	switch l.f.Machine {
	case elf.EM_X86_64:
		jumpSlot = uint32(elf.R_X86_64_JMP_SLOT)
		if s := l.f.Section(".plt.sec"); s != nil {
			base = s.Addr
		} else if s := l.f.Section(".plt"); s != nil {
			base = s.Addr + pltHeaderX86
		}
	case elf.EM_AARCH64:
		jumpSlot = uint32(elf.R_AARCH64_JUMP_SLOT)
		if s := l.f.Section(".plt"); s != nil {
			base = s.Addr + pltHeaderA64
		}
	default:
		return nil
	}
	rel := l.f.Section(".rela.plt")
	if base == 0 || rel == nil || rel.Type != elf.SHT_RELA {
		return nil
	}
	data, err := l.scratch(rel)
	if err != nil {
		return err
	}
	bo := l.f.ByteOrder
	for i := 0; (i+1)*relaEntrySize <= len(data); i++ {
		info := bo.Uint64(data[i*relaEntrySize+8:])
		symIdx, typ := info>>32, uint32(info)
		if typ != jumpSlot || symIdx >= uint64(len(dynNames)) {
			continue
		}
		name := dynNames[symIdx]
		if name == "" {
			continue
		}
		b.add(base+uint64(i)*pltEntry, pltEntry, name+"@plt", 0)
	}
	return nil
}
