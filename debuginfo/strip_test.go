package debuginfo

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tandem-profiler/tandem/test/testbin"
)

// stripFile strips path into memory and returns the parsed result.
func stripFile(t *testing.T, path string) (*elf.File, []byte, StripStats) {
	t.Helper()
	in, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	st, err := Strip(&out, in, fi.Size())
	if err != nil {
		t.Fatalf("strip %s: %v", path, err)
	}
	if st.OutputSize != int64(out.Len()) {
		t.Errorf("stats say %d bytes, wrote %d", st.OutputSize, out.Len())
	}
	ef, err := elf.NewFile(bytes.NewReader(out.Bytes()))
	if err != nil {
		t.Fatalf("stripped %s does not parse: %v", path, err)
	}
	t.Logf("%s: %d -> %d bytes (%.1f%%), %d sections kept, %d dropped",
		path, st.InputSize, st.OutputSize, 100*float64(st.OutputSize)/float64(st.InputSize), st.Kept, st.Dropped)
	return ef, out.Bytes(), st
}

// checkStripped compares a stripped file with its original: same section
// headers (names, addresses, sizes), kept contents byte for byte, .text
// gone, same build id, PT_NOTE only.
func checkStripped(t *testing.T, path string, got *elf.File, gotBytes []byte) {
	t.Helper()
	origBytes, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	orig, err := elf.NewFile(bytes.NewReader(origBytes))
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Sections) != len(orig.Sections) {
		t.Fatalf("%d sections, want %d", len(got.Sections), len(orig.Sections))
	}
	if got.Machine != orig.Machine || got.Type != orig.Type || got.Entry != orig.Entry || got.Class != orig.Class {
		t.Errorf("header changed: %+v vs %+v", got.FileHeader, orig.FileHeader)
	}
	for i, o := range orig.Sections {
		g := got.Sections[i]
		if g.Name != o.Name || g.Addr != o.Addr || g.Size != o.Size || g.Flags != o.Flags || g.Link != o.Link {
			t.Errorf("section %d: %+v, want %+v", i, g.SectionHeader, o.SectionHeader)
			continue
		}
		keep := KeepSection(o.Name, o.Type) && o.Type != elf.SHT_NOBITS && o.Size > 0
		if o.Name == ".shstrtab" {
			keep = true
		}
		if !keep {
			if o.Type != elf.SHT_NULL && g.Type != elf.SHT_NOBITS {
				t.Errorf("section %s: type %v, want SHT_NOBITS", o.Name, g.Type)
			}
			continue
		}
		if g.Type != o.Type {
			t.Errorf("section %s: type %v, want %v", o.Name, g.Type, o.Type)
		}
		if g.Offset%min(max(o.Addralign, 1), maxSectionAlign) != 0 && o.Offset%min(max(o.Addralign, 1), maxSectionAlign) == 0 {
			t.Errorf("section %s: offset %#x not aligned to %d", o.Name, g.Offset, o.Addralign)
		}
		ob, gb := rawBytes(t, bytes.NewReader(origBytes), o), rawBytes(t, bytes.NewReader(gotBytes), g)
		if !bytes.Equal(ob, gb) {
			t.Errorf("section %s: contents differ", o.Name)
		}
	}
	if s := got.Section(".text"); s == nil || s.Type != elf.SHT_NOBITS {
		t.Errorf(".text: %+v, want present and SHT_NOBITS", s)
	}
	// PT_LOAD headers unchanged (a symbolizer maps addresses with them),
	// PT_NOTE moved with the notes, nothing else.
	var loads []elf.ProgHeader
	for _, p := range orig.Progs {
		if p.Type == elf.PT_LOAD {
			loads = append(loads, p.ProgHeader)
		}
	}
	for _, p := range got.Progs {
		switch p.Type {
		case elf.PT_LOAD:
			if len(loads) == 0 || p.ProgHeader != loads[0] {
				t.Errorf("PT_LOAD %+v, want the original's next: %+v", p.ProgHeader, loads)
				continue
			}
			loads = loads[1:]
		case elf.PT_NOTE:
		default:
			t.Errorf("program header %v kept, want only PT_LOAD and PT_NOTE", p.Type)
		}
	}
	if len(loads) != 0 {
		t.Errorf("PT_LOAD headers missing: %+v", loads)
	}
	if want, have := buildID(t, orig), buildID(t, got); want != have {
		t.Errorf("GNU build id %q, want %q", have, want)
	}
	// The notes are readable through the program headers too.
	var noteSegs, notes int
	for _, p := range got.Progs {
		if p.Type != elf.PT_NOTE {
			continue
		}
		notes++
		b := make([]byte, p.Filesz)
		if _, err := p.ReadAt(b, 0); err != nil {
			t.Errorf("read PT_NOTE: %v", err)
		}
		for _, s := range got.Sections {
			if s.Type == elf.SHT_NOTE && s.Offset == p.Off {
				noteSegs++
				sb, _ := s.Data()
				if !bytes.HasPrefix(b, sb) && !bytes.HasPrefix(sb, b) {
					t.Errorf("PT_NOTE at %#x does not hold %s", p.Off, s.Name)
				}
			}
		}
	}
	if notes > 0 && noteSegs == 0 {
		t.Errorf("no PT_NOTE segment starts at a note section")
	}
}

// rawBytes reads a section's bytes as stored (compressed sections stay
// compressed).
func rawBytes(t *testing.T, r io.ReaderAt, s *elf.Section) []byte {
	t.Helper()
	b := make([]byte, s.FileSize)
	if _, err := r.ReadAt(b, int64(s.Offset)); err != nil && s.FileSize > 0 {
		t.Fatalf("read %s: %v", s.Name, err)
	}
	return b
}

func buildID(t *testing.T, f *elf.File) string {
	t.Helper()
	s := f.Section(".note.gnu.build-id")
	if s == nil {
		return ""
	}
	b, err := s.Data()
	if err != nil || len(b) < 16 {
		t.Fatalf("read build id note: %v", err)
	}
	return string(b[16:])
}

func TestStripCBinary(t *testing.T) {
	for _, path := range []string{"/usr/bin/sha256sum", "/usr/bin/ls"} {
		if _, err := os.Stat(path); err != nil {
			t.Logf("skip %s: %v", path, err)
			continue
		}
		t.Run(filepath.Base(path), func(t *testing.T) {
			got, out, st := stripFile(t, path)
			checkStripped(t, path, got, out)
			if got.Section(".dynsym") == nil {
				t.Errorf(".dynsym missing")
			}
			if buildID(t, got) == "" {
				t.Errorf("no GNU build id kept")
			}
			if st.OutputSize >= st.InputSize/2 {
				t.Errorf("stripped to %d of %d bytes: .text not dropped?", st.OutputSize, st.InputSize)
			}
		})
	}
}

const helloGo = "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hello\") }\n"

func TestStripGoBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a Go program")
	}
	path := testbin.Go(t, "", "hello", helloGo, "-ldflags=-B gobuildid")
	got, out, st := stripFile(t, path)
	checkStripped(t, path, got, out)
	for _, name := range []string{".symtab", ".gopclntab", ".go.buildinfo", ".note.go.buildid", ".note.gnu.build-id"} {
		s := got.Section(name)
		if s == nil || s.Type == elf.SHT_NOBITS {
			t.Errorf("section %s not kept", name)
		}
	}
	syms, err := got.Symbols()
	if err != nil || len(syms) == 0 {
		t.Fatalf("symbols: %d, %v", len(syms), err)
	}
	var hasMain bool
	for _, s := range syms {
		hasMain = hasMain || s.Name == "main.main"
	}
	if !hasMain {
		t.Errorf("main.main not in the stripped symbol table")
	}
	if buildID(t, got) == "" {
		t.Errorf("no GNU build id")
	}
	if st.OutputSize >= st.InputSize {
		t.Errorf("stripped to %d of %d bytes", st.OutputSize, st.InputSize)
	}
	// A Go binary without symbols still keeps .gopclntab.
	path = testbin.Go(t, "", "hello", helloGo, "-ldflags=-s -w")
	got, out, _ = stripFile(t, path)
	checkStripped(t, path, got, out)
	if s := got.Section(".gopclntab"); s == nil || s.Type == elf.SHT_NOBITS {
		t.Errorf(".gopclntab not kept in a -s -w binary")
	}
}

func TestStripRejects(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		want error
	}{
		{"empty", nil, ErrNotELF},
		{"text", []byte("#!/bin/sh\necho hi\n"), ErrNotELF},
		{"truncated header", []byte("\x7fELF\x02\x01\x01"), ErrNotELF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Strip(&bytes.Buffer{}, bytes.NewReader(tc.in), int64(len(tc.in)))
			if err == nil || !strings.Contains(err.Error(), tc.want.Error()) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
		})
	}
}

// FuzzStrip feeds arbitrary bytes (seeded with real binaries cut short and
// mutated) to Strip: it must never panic, and whatever it writes must parse.
func FuzzStrip(f *testing.F) {
	// Small valid ELFs (stripped copies of real binaries: a few KiB with
	// every header) keep executions and minimization cheap; a binary cut
	// after its first page covers out-of-range headers.
	for _, p := range []string{"/usr/bin/true", "/usr/bin/sha256sum"} {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		var small bytes.Buffer
		if _, err := Strip(&small, bytes.NewReader(b), int64(len(b))); err == nil {
			f.Add(small.Bytes())
		}
		f.Add(b[:min(len(b), 4096)])
	}
	for _, is64 := range []bool{true, false} {
		for _, bo := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
			f.Add(tinyELF(is64, bo))
		}
	}
	f.Add([]byte("\x7fELF\x02\x01\x01\x00"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var out bytes.Buffer
		st, err := Strip(&out, bytes.NewReader(in), int64(len(in)))
		if err != nil {
			return
		}
		if int64(out.Len()) > 2*int64(len(in))+1<<20 {
			t.Fatalf("%d bytes out of %d in", out.Len(), len(in))
		}
		if st.OutputSize != int64(out.Len()) {
			t.Fatalf("stats %d, wrote %d", st.OutputSize, out.Len())
		}
		if _, err := elf.NewFile(bytes.NewReader(out.Bytes())); err != nil {
			t.Fatalf("output does not parse: %v", err)
		}
	})
}
