package symbolize

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"strings"
	"testing"
)

// tinyPclntab is a hand-built Go 1.20 pclntab with one function, main.f,
// at [0x1000, 0x1010) in f.go line 10: the fuzzer's seed (a real one is
// megabytes).
func tinyPclntab() []byte {
	le := binary.LittleEndian
	var b bytes.Buffer
	const hdr = 8 + 8*8
	names := []byte("main.f\x00")
	cutab := le.AppendUint32(nil, 0)
	files := []byte("f.go\x00")
	// pctab: offset 0 means "no table"; pcfile at 1 (value 0 over 16
	// bytes), pcln at 4 (value 10 over 16 bytes).
	pctab := []byte{0, 2, 16, 0, 22, 16, 0}
	nameOff := hdr
	cuOff := nameOff + len(names)
	fileOff := cuOff + len(cutab)
	pcOff := fileOff + len(files)
	funcOff := pcOff + len(pctab)
	b.Write(le.AppendUint32(nil, pcHeaderMagic120))
	b.Write([]byte{0, 0, 1, 8})
	for _, w := range []uint64{1, 1, 0x1000, uint64(nameOff), uint64(cuOff), uint64(fileOff), uint64(pcOff), uint64(funcOff)} {
		b.Write(le.AppendUint64(nil, w))
	}
	b.Write(names)
	b.Write(cutab)
	b.Write(files)
	b.Write(pctab)
	// functab: main.f at 0, its _func at 16; the end at 16.
	for _, w := range []uint32{0, 16, 16, 0} {
		b.Write(le.AppendUint32(nil, w))
	}
	// _func: entryOff, nameOff, args, deferreturn, pcsp, pcfile, pcln,
	// npcdata, cuOffset, startLine, funcID/flag/pad/nfuncdata.
	for _, w := range []uint32{0, 0, 0, 0, 0, 1, 4, 0, 0, 10, 0} {
		b.Write(le.AppendUint32(nil, w))
	}
	return b.Bytes()
}

func TestTinyPclntab(t *testing.T) {
	tab := tinyPclntab()
	p, err := parsePclntab(bytes.NewReader(tab), 0, uint64(len(tab)), binary.LittleEndian)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := p.lookup(0x1004, nil, nil)
	if !ok || len(got) != 1 || got[0] != (Frame{Function: "main.f", File: "f.go", Line: 10}) {
		t.Fatalf("got %+v %v", got, ok)
	}
	if _, ok := p.lookup(0x1010, nil, nil); ok {
		t.Fatal("the end of the text is in a function")
	}
}

// FuzzPclntab feeds the pclntab reader arbitrary tables and addresses,
// inline trees included (go:func.* placed inside the table).
func FuzzPclntab(f *testing.F) {
	f.Add(tinyPclntab(), uint64(0x1004), uint32(0))
	f.Add(tinyPclntab(), uint64(0x100f), uint32(40))
	f.Fuzz(func(t *testing.T, data []byte, addr uint64, gofunc uint32) {
		p, err := parsePclntab(bytes.NewReader(data), 0, uint64(len(data)), binary.LittleEndian)
		if err != nil {
			return
		}
		p.addr, p.gofunc = 0x800000, 0x800000+uint64(gofunc)
		for _, a := range []uint64{addr, p.textStart, p.textStart + 1} {
			p.lookup(a, nil, nil)
			p.has(a)
		}
	})
}

// FuzzLoad feeds Load arbitrary files and looks a few addresses up.
func FuzzLoad(f *testing.F) {
	// testdata/workload.elf is testdata/workload.c built with gcc -g0 -Os
	// -Wl,-z,noseparate-code -Wl,-z,max-page-size=0x10
	// -Wl,-z,common-page-size=0x10 -Wl,--build-id=none: .symtab, .dynsym
	// and a PLT in 7 KB (small seeds fuzz fast; it does not run).
	data, err := os.ReadFile("testdata/workload.elf")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data, uint64(0x6c4)) // free@plt
	f.Add(data, uint64(0x87a)) // tandem_leaf
	f.Fuzz(func(t *testing.T, data []byte, addr uint64) {
		tab, err := Load(bytes.NewReader(data), int64(len(data)), Limits{MaxSectionBytes: 1 << 20})
		if err != nil {
			return
		}
		for _, a := range []uint64{addr, addr + 1, addr - 1} {
			tab.Lookup(a, nil)
		}
		_ = tab.Bytes()
	})
}

// FuzzDebugFile feeds the debug file reader an arbitrary executable (its
// build id note and .gnu_debuglink) and an arbitrary debug file, found
// both ways, and checks that the search places stay inside their
// directories whatever the debuglink names.
func FuzzDebugFile(f *testing.F) {
	// testdata/static.elf is testdata/static.c built as workload.elf is
	// (tiny pages) with --build-id=sha1, stripped, with a .gnu_debuglink to
	// testdata/static.debug, its objcopy --only-keep-debug file.
	exe, err := os.ReadFile("testdata/static.elf")
	if err != nil {
		f.Fatal(err)
	}
	dbg, err := os.ReadFile("testdata/static.debug")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(exe, dbg)
	f.Add(exe, exe)
	f.Fuzz(func(t *testing.T, exe, dbg []byte) {
		lim := Limits{MaxSectionBytes: 1 << 20, MaxDebugFileBytes: 1 << 20}
		ef, err := elf.NewFile(bytes.NewReader(exe))
		if err != nil {
			return
		}
		l := loader{f: ef, r: bytes.NewReader(exe), size: int64(len(exe)), lim: lim}
		id := l.identity()
		if id.buildID != nil {
			p := buildIDPath("/usr/lib/debug", id.buildID)
			if !strings.HasPrefix(p, "/usr/lib/debug/.build-id/") {
				t.Fatalf("build id path %s", p)
			}
		}
		if id.link != "" {
			for _, p := range debuglinkPaths("/usr/lib/x/prog", id.link, []string{"/usr/lib/debug"}) {
				if !strings.HasPrefix(p, "/usr/lib/x/") && !strings.HasPrefix(p, "/usr/lib/debug/usr/lib/x/") {
					t.Fatalf("debuglink %q: search place %s", id.link, p)
				}
			}
		}
		for _, via := range []string{ViaBuildID, ViaDebuglink} {
			var b symBuilder
			_ = l.readDebugFile(bytes.NewReader(dbg), int64(len(dbg)), via, id, &b)
			syms, _ := b.finish(nil)
			if len(syms) > len(dbg)/16 {
				t.Fatalf("%d symbols from %d bytes", len(syms), len(dbg))
			}
		}
	})
}

// FuzzDebugSections feeds the .gnu_debuglink and build id note parsers
// arbitrary section bytes, without debug/elf around them (fast enough to
// explore), and checks that every search place they lead to stays in its
// directory.
func FuzzDebugSections(f *testing.F) {
	f.Add([]byte("libc.so.6.debug\x00\x00\x00\x00\x00\x78\x56\x34\x12"), uint8(4), false)
	f.Add([]byte("\x04\x00\x00\x00\x14\x00\x00\x00\x03\x00\x00\x00GNU\x00\x93\xac\x61\xec\x5a\x8e\xb1\x39\x6f\x9f\xbd\x35\x0e\x31\x69\xa5\x58\x52\x8a\x40"), uint8(4), false)
	f.Add([]byte("\x00\x00\x00\x04\x00\x00\x00\x03\x00\x00\x00\x03GNU\x00\x01\x02\x03\x00"), uint8(8), true)
	f.Fuzz(func(t *testing.T, data []byte, align uint8, bigEndian bool) {
		var bo binary.ByteOrder = binary.LittleEndian
		if bigEndian {
			bo = binary.BigEndian
		}
		if id := parseBuildIDNote(data, bo, uint64(align)); id != nil {
			if len(id) < minBuildIDBytes || len(id) > maxBuildIDBytes {
				t.Fatalf("build id of %d bytes", len(id))
			}
			if p := buildIDPath("/usr/lib/debug", id); !strings.HasPrefix(p, "/usr/lib/debug/.build-id/") || strings.Contains(p, "..") {
				t.Fatalf("build id path %s", p)
			}
		}
		name, _, err := parseDebuglink(data, bo)
		if err != nil {
			return
		}
		for _, p := range debuglinkPaths("/usr/lib/x/prog", name, []string{"/usr/lib/debug"}) {
			if !strings.HasPrefix(p, "/usr/lib/x/") && !strings.HasPrefix(p, "/usr/lib/debug/usr/lib/x/") {
				t.Fatalf("debuglink %q: search place %s", name, p)
			}
		}
	})
}
