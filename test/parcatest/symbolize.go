package parcatest

import (
	"bytes"
	"debug/dwarf"
	"debug/elf"
	"debug/gosym"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Why Symbolize gives up, as Parca's symbolizer does (server
// pkg/symbolizer): the location then stays unsymbolized.
var (
	ErrNotUploadedYet = errors.New("debuginfo not uploaded yet")
	ErrNotValidELF    = errors.New("not a valid ELF file")
	ErrNoDebuginfo    = errors.New("no debug info found")
	ErrLinerFailed    = errors.New("liner creation failed")
)

// SymbolLine is one line of a symbolized location.
type SymbolLine struct {
	Function string
	File     string
	Line     int64
}

// Mapping is a process mapping as Parca's address normalization sees it.
// The zero Mapping (what the Arrow formats carry) means the address is
// already in the ELF file's virtual address space.
type Mapping struct {
	Start, Limit, Offset uint64
}

// Symbolize resolves an address of the executable uploaded under buildID
// as Parca's server does: it picks one liner by what the upload holds
// (DWARF, else a Go pclntab, else .symtab/.dynsym with synthesized
// name@plt entries from .rela.plt), normalizes the address with the
// mapping and the upload's PT_LOAD headers, and returns the lines (inlined
// frames first, as pprof orders them). Like the server it gives up on the
// whole upload when the liner it picked cannot read a section it needs
// (a .rela.plt or .gopclntab stripped to SHT_NOBITS, say), and returns no
// lines for an address outside the liner's range or before its first
// symbol. Names are not demangled (Parca's "simple" demangling leaves C
// and Go names unchanged).
func (s *SymbolStore) Symbolize(buildID string, m Mapping, addr uint64) ([]SymbolLine, error) {
	lr, err := s.liner(buildID)
	if err != nil {
		return nil, err
	}
	pc, err := normalize(addr, m, lr.layout)
	if err != nil {
		return nil, fmt.Errorf("normalize %#x for build id %s: %w", addr, buildID, err)
	}
	r := lr.liner.pcRange()
	if pc < r[0] || pc > r[1] {
		return nil, nil
	}
	return lr.liner.lines(pc)
}

type linerResult struct {
	liner  liner
	layout layout
	err    error
}

func (s *SymbolStore) liner(buildID string) (linerResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if lr, ok := s.liners[buildID]; ok {
		return lr, lr.err
	}
	e, ok := s.entries[buildID]
	if !ok || e.Uploading || e.Data == nil {
		return linerResult{}, fmt.Errorf("build id %s: %w", buildID, ErrNotUploadedYet)
	}
	lr := newLiner(e.Data)
	if lr.err != nil {
		lr.err = fmt.Errorf("build id %s: %w", buildID, lr.err)
		if errors.Is(lr.err, ErrNotValidELF) {
			e.Invalid = true
		}
	}
	s.liners[buildID] = lr
	return lr, lr.err
}

func isELF(b []byte) bool {
	_, err := elf.NewFile(bytes.NewReader(b))
	return err == nil
}

// newLiner picks the liner the server's quality check selects.
func newLiner(b []byte) linerResult {
	f, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		return linerResult{err: fmt.Errorf("%w: %w", ErrNotValidELF, err)}
	}
	lr := linerResult{layout: layout{typ: f.Type}}
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD {
			lr.layout.loads = append(lr.layout.loads, p.ProgHeader)
		}
	}
	hasSection := func(ok func(*elf.Section) bool) bool { return slices.ContainsFunc(f.Sections, ok) }
	switch {
	case hasDWARF(f):
		lr.liner, err = newDWARFLiner(f)
	case f.Section(".gopclntab") != nil:
		lr.liner, err = newGoLiner(f)
	case hasSection(func(s *elf.Section) bool { return s.Type == elf.SHT_SYMTAB || s.Type == elf.SHT_DYNSYM }):
		lr.liner, err = newSymtabLiner(f)
	default:
		return linerResult{err: ErrNoDebuginfo}
	}
	if err != nil {
		lr.err = fmt.Errorf("%w: %w", ErrLinerFailed, err)
	}
	return lr
}

// hasDWARF: one of the sections debug/dwarf started with is present with
// contents (the server's readableDWARFSections).
func hasDWARF(f *elf.File) bool {
	for _, s := range f.Sections {
		name, ok := strings.CutPrefix(s.Name, ".debug_")
		if !ok {
			name, ok = strings.CutPrefix(s.Name, ".zdebug_")
		}
		if ok && s.Type == elf.SHT_PROGBITS && slices.Contains([]string{"abbrev", "info", "str", "line", "ranges"}, name) {
			return true
		}
	}
	return false
}

type liner interface {
	lines(pc uint64) ([]SymbolLine, error)
	pcRange() [2]uint64
}

// layout is what the server keeps of an upload to normalize addresses.
type layout struct {
	typ   elf.Type
	loads []elf.ProgHeader
}

// normalize turns a runtime address into a symbol-table address: the
// server's base computation from the mapping (start, limit, offset) and
// the PT_LOAD header the address falls in.
func normalize(addr uint64, m Mapping, l layout) (uint64, error) {
	zero := m.Start == 0 && m.Limit == 0
	if !zero && (addr < m.Start || addr >= m.Limit) {
		return 0, fmt.Errorf("address %#x outside the mapping [%#x, %#x)", addr, m.Start, m.Limit)
	}
	h, err := l.header(m, addr)
	if err != nil || h == nil {
		return addr, err
	}
	if m.Start == 0 && m.Offset == 0 && (m.Limit == 0 || m.Limit == ^uint64(0)) {
		return addr, nil // a mapping spanning everything: already adjusted
	}
	switch l.typ {
	case elf.ET_EXEC:
		return addr, nil
	case elf.ET_DYN:
		// The server subtracts start - vaddr for a segment at file
		// offset 0, and start - offset - (vaddr - off) otherwise.
		if h.Off == 0 {
			return addr - (m.Start - h.Vaddr), nil
		}
		return addr - (m.Start - m.Offset - (h.Vaddr - h.Off)), nil
	}
	return 0, fmt.Errorf("unsupported ELF type %v", l.typ)
}

// header finds the PT_LOAD header an address falls in: by virtual address
// for the zero mapping, by file offset otherwise (the nearest below the
// address when several match).
func (l layout) header(m Mapping, addr uint64) (*elf.ProgHeader, error) {
	if m.Start == 0 && m.Limit == 0 {
		for i := range l.loads {
			if h := &l.loads[i]; h.Vaddr <= addr && addr < h.Vaddr+h.Memsz {
				return h, nil
			}
		}
		return nil, nil
	}
	if m.Start >= m.Limit {
		return nil, fmt.Errorf("invalid mapping range: start %#x >= limit %#x", m.Start, m.Limit)
	}
	if m.Limit >= 1<<63 || len(l.loads) == 0 {
		return nil, nil
	}
	off := addr - m.Start + m.Offset
	var best *elf.ProgHeader
	for i := range l.loads {
		h := &l.loads[i]
		if off >= h.Off && off < h.Off+h.Memsz && (best == nil || addr-h.Vaddr < addr-best.Vaddr) {
			best = h
		}
	}
	return best, nil
}

// symtabLiner names addresses from .symtab, .dynsym and PLT entries
// synthesized from .rela.plt (perf's and Parca's name@plt).
type symtabLiner struct {
	syms []elf.Symbol // functions, by address; the best of equal addresses last
}

func newSymtabLiner(f *elf.File) (*symtabLiner, error) {
	syms, symErr := f.Symbols()
	dyn, dynErr := f.DynamicSymbols()
	rela, plt := f.Section(".rela.plt"), f.Section(".plt")
	if dynErr == nil && rela != nil && plt != nil && int(rela.Link) < len(f.Sections) && f.Sections[rela.Link].Type == elf.SHT_DYNSYM {
		data, err := io.ReadAll(rela.Open())
		if err != nil {
			return nil, fmt.Errorf("read .rela.plt: %w", err)
		}
		// One Elf64_Rela (24 bytes) per PLT slot after the first: the
		// stub of relocation i is at .plt + (i+1)*entsize; the symbol
		// index is the high 32 bits of r_info.
		addr := plt.Addr
		for len(data) >= 24 {
			info := f.ByteOrder.Uint64(data[8:16])
			data = data[24:]
			addr += plt.Entsize
			i := info >> 32
			if i == 0 || i > uint64(len(dyn)) {
				continue
			}
			syms = append(syms, elf.Symbol{Name: dyn[i-1].Name + "@plt", Info: elf.ST_INFO(elf.STB_GLOBAL, elf.STT_FUNC),
				Section: 1, Value: addr, Size: rela.Entsize})
		}
		if len(data) != 0 {
			return nil, fmt.Errorf("read .rela.plt: %d trailing bytes", len(data))
		}
	}
	if symErr != nil && dynErr != nil {
		return nil, fmt.Errorf("read symbol tables: %w", symErr)
	}
	l := &symtabLiner{}
	for _, s := range append(syms, dyn...) {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Name != "" && s.Section != elf.SHN_UNDEF {
			l.syms = append(l.syms, s)
		}
	}
	slices.SortStableFunc(l.syms, func(a, b elf.Symbol) int {
		if a.Value != b.Value {
			return cmpUint(a.Value, b.Value)
		}
		return worseFirst(a, b)
	})
	return l, nil
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// worseFirst orders symbols at one address as perf's choose_best_symbol
// ranks them (sized, non-weak, global, fewer leading underscores, longer
// name), best last.
func worseFirst(a, b elf.Symbol) int {
	rank := func(s elf.Symbol) []int {
		under := len(s.Name) - len(strings.TrimLeft(s.Name, "_"))
		return []int{b2i(s.Size > 0), b2i(elf.ST_BIND(s.Info) != elf.STB_WEAK), b2i(elf.ST_BIND(s.Info) == elf.STB_GLOBAL), -under, len(s.Name)}
	}
	if c := slices.Compare(rank(a), rank(b)); c != 0 {
		return c
	}
	return strings.Compare(b.Name, a.Name)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (l *symtabLiner) pcRange() [2]uint64 {
	if len(l.syms) == 0 {
		return [2]uint64{1, 0} // empty
	}
	last := l.syms[len(l.syms)-1]
	return [2]uint64{l.syms[0].Value, last.Value + last.Size}
}

// lines names the last symbol at or below pc (the server does not check
// the symbol's size).
func (l *symtabLiner) lines(pc uint64) ([]SymbolLine, error) {
	i, _ := slices.BinarySearchFunc(l.syms, pc+1, func(s elf.Symbol, v uint64) int { return cmpUint(s.Value, v) })
	if i == 0 {
		return nil, nil
	}
	return []SymbolLine{{Function: l.syms[i-1].Name, File: "?"}}, nil
}

// goLiner names addresses from .gopclntab (no inlined frames, as the
// server's Go liner).
type goLiner struct{ tab *gosym.Table }

func newGoLiner(f *elf.File) (*goLiner, error) {
	sec := f.Section(".gopclntab")
	if sec.Type == elf.SHT_NOBITS {
		return nil, errors.New(".gopclntab has no contents (SHT_NOBITS)")
	}
	pcln, err := sec.Data()
	if err != nil || len(pcln) == 0 {
		return nil, fmt.Errorf("read .gopclntab: %d bytes, %v", len(pcln), err)
	}
	var symtab []byte
	if s := f.Section(".gosymtab"); s != nil && s.Type != elf.SHT_NOBITS {
		symtab, _ = s.Data()
	}
	var text uint64
	if s := f.Section(".text"); s != nil {
		text = s.Addr
	}
	tab, err := gosym.NewTable(symtab, gosym.NewLineTable(pcln, text))
	if err != nil {
		return nil, fmt.Errorf("parse .gopclntab: %w", err)
	}
	return &goLiner{tab: tab}, nil
}

func (l *goLiner) pcRange() [2]uint64 {
	if len(l.tab.Funcs) == 0 {
		return [2]uint64{1, 0}
	}
	r := [2]uint64{l.tab.Funcs[0].Entry, 0}
	for _, fn := range l.tab.Funcs {
		r[1] = max(r[1], fn.End)
	}
	return r
}

func (l *goLiner) lines(pc uint64) (out []SymbolLine, err error) {
	defer func() {
		if r := recover(); r != nil { // gosym panics on some addresses; the server recovers too
			out, err = nil, fmt.Errorf("gosym at %#x: %v", pc, r)
		}
	}()
	file, line, fn := l.tab.PCToLine(pc)
	name := "?"
	if fn != nil {
		name = fn.Name
	}
	return []SymbolLine{{Function: name, File: file, Line: int64(line)}}, nil
}

// dwarfLiner names addresses from DWARF: the subprogram containing pc and
// the inlined subroutines within it, with lines from the line table.
type dwarfLiner struct {
	d      *dwarf.Data
	ranges [2]uint64
}

func newDWARFLiner(f *elf.File) (*dwarfLiner, error) {
	d, err := f.DWARF()
	if err != nil {
		return nil, fmt.Errorf("read DWARF: %w", err)
	}
	l := &dwarfLiner{d: d, ranges: [2]uint64{^uint64(0), 0}}
	r := d.Reader()
	for {
		e, err := r.Next()
		if err != nil {
			return nil, fmt.Errorf("read DWARF: %w", err)
		}
		if e == nil {
			break
		}
		if e.Tag == dwarf.TagCompileUnit {
			rs, _ := d.Ranges(e)
			for _, rg := range rs {
				l.ranges[0], l.ranges[1] = min(l.ranges[0], rg[0]), max(l.ranges[1], rg[1])
			}
		}
		r.SkipChildren()
	}
	return l, nil
}

func (l *dwarfLiner) pcRange() [2]uint64 { return l.ranges }

func (l *dwarfLiner) lines(pc uint64) ([]SymbolLine, error) {
	r := l.d.Reader()
	cu, err := r.SeekPC(pc)
	if err != nil {
		return nil, nil // no unit covers pc
	}
	lr, err := l.d.LineReader(cu)
	if err != nil || lr == nil {
		return nil, fmt.Errorf("line table at %#x: %v", pc, err)
	}
	var le dwarf.LineEntry
	file, line := "?", int64(0)
	if lr.SeekPC(pc, &le) == nil {
		file, line = le.File.Name, int64(le.Line)
	}
	// The chain of DIEs containing pc: a subprogram, then inlined
	// subroutines nested in it, outermost first.
	chain := l.walk(r, pc, nil)
	if len(chain) == 0 {
		return nil, nil
	}
	// Innermost first: pc's own line, then each caller at its call site.
	out := make([]SymbolLine, 0, len(chain))
	for i := len(chain) - 1; i >= 0; i-- {
		out = append(out, SymbolLine{Function: l.name(chain[i]), File: file, Line: line})
		if cf, ok := chain[i].Val(dwarf.AttrCallFile).(int64); ok {
			files := lr.Files()
			if cf >= 0 && int(cf) < len(files) && files[cf] != nil {
				file = files[cf].Name
			}
			line, _ = chain[i].Val(dwarf.AttrCallLine).(int64)
		}
	}
	return out, nil
}

// walk reads the children of the entry read last and follows the one
// containing pc down to the innermost.
func (l *dwarfLiner) walk(r *dwarf.Reader, pc uint64, chain []*dwarf.Entry) []*dwarf.Entry {
	for {
		e, err := r.Next()
		if err != nil || e == nil || e.Tag == 0 {
			return chain
		}
		if e.Tag == dwarf.TagSubprogram || e.Tag == dwarf.TagInlinedSubroutine || e.Tag == dwarf.TagLexDwarfBlock {
			rs, _ := l.d.Ranges(e)
			if slices.ContainsFunc(rs, func(rg [2]uint64) bool { return rg[0] <= pc && pc < rg[1] }) {
				if e.Tag != dwarf.TagLexDwarfBlock {
					chain = append(chain, e)
				}
				if e.Children {
					return l.walk(r, pc, chain)
				}
				return chain
			}
		}
		if e.Children {
			r.SkipChildren()
		}
	}
}

// name follows abstract origins and specifications to the DIE's name.
func (l *dwarfLiner) name(e *dwarf.Entry) string {
	for range 4 {
		if n, ok := e.Val(dwarf.AttrName).(string); ok {
			return n
		}
		off, ok := e.Val(dwarf.AttrAbstractOrigin).(dwarf.Offset)
		if !ok {
			off, ok = e.Val(dwarf.AttrSpecification).(dwarf.Offset)
		}
		if !ok {
			break
		}
		r := l.d.Reader()
		r.Seek(off)
		next, err := r.Next()
		if err != nil || next == nil {
			break
		}
		e = next
	}
	return "?"
}
