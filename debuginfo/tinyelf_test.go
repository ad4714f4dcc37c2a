package debuginfo

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"testing"
)

// tinyELF builds a small ELF of either class and byte order: a PT_NOTE
// program header over a GNU build-id note, .text (code that must be
// dropped), .debug_info, .symtab with one symbol, .strtab, .shstrtab.
// It makes fuzzing cheap and covers what the machine's binaries do not
// (32-bit, big-endian).
func tinyELF(is64 bool, bo binary.ByteOrder) []byte {
	type sec struct {
		name           string
		typ            elf.SectionType
		flags          elf.SectionFlag
		addr           uint64
		data           []byte
		link           uint32
		align, entsize uint64
		off            uint64
		nameOff        uint32
	}
	u16 := func(b *bytes.Buffer, v uint16) { binary.Write(b, bo, v) }
	u32 := func(b *bytes.Buffer, v uint32) { binary.Write(b, bo, v) }
	word := func(b *bytes.Buffer, v uint64) {
		if is64 {
			binary.Write(b, bo, v)
		} else {
			binary.Write(b, bo, uint32(v))
		}
	}
	var note bytes.Buffer
	u32(&note, 4)
	u32(&note, 8)
	u32(&note, 3) // NT_GNU_BUILD_ID
	note.WriteString("GNU\x00")
	note.Write([]byte{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4})

	var sym bytes.Buffer
	symEnt := uint64(16)
	if is64 {
		symEnt = 24
		sym.Write(make([]byte, 24))
		u32(&sym, 1)
		sym.Write([]byte{byte(elf.STB_GLOBAL)<<4 | byte(elf.STT_FUNC), 0})
		u16(&sym, 2)
		word(&sym, 0x1000)
		word(&sym, 16)
	} else {
		sym.Write(make([]byte, 16))
		u32(&sym, 1)
		word(&sym, 0x1000)
		word(&sym, 16)
		sym.Write([]byte{byte(elf.STB_GLOBAL)<<4 | byte(elf.STT_FUNC), 0})
		u16(&sym, 2)
	}
	secs := []sec{
		{},
		{name: ".note.gnu.build-id", typ: elf.SHT_NOTE, flags: elf.SHF_ALLOC, addr: 0x200, data: note.Bytes(), align: 4},
		{name: ".text", typ: elf.SHT_PROGBITS, flags: elf.SHF_ALLOC | elf.SHF_EXECINSTR, addr: 0x1000, data: bytes.Repeat([]byte{0xcc}, 64), align: 16},
		{name: ".debug_info", typ: elf.SHT_PROGBITS, data: []byte("debug info bytes"), align: 1},
		{name: ".symtab", typ: elf.SHT_SYMTAB, data: sym.Bytes(), link: 5, align: 8, entsize: symEnt},
		{name: ".strtab", typ: elf.SHT_STRTAB, data: []byte("\x00tiny_func\x00"), align: 1},
		{name: ".shstrtab", typ: elf.SHT_STRTAB, align: 1},
	}
	var shstr bytes.Buffer
	shstr.WriteByte(0)
	for i := 1; i < len(secs); i++ {
		secs[i].nameOff = uint32(shstr.Len())
		shstr.WriteString(secs[i].name + "\x00")
	}
	secs[len(secs)-1].data = shstr.Bytes()

	ehdrSize, phdrSize, shdrSize := uint64(ehdr32Size), uint64(phdr32Size), uint64(shdr32Size)
	if is64 {
		ehdrSize, phdrSize, shdrSize = ehdr64Size, phdr64Size, shdr64Size
	}
	off := ehdrSize + phdrSize
	for i := 1; i < len(secs); i++ {
		off = (off + secs[i].align - 1) / secs[i].align * secs[i].align
		secs[i].off = off
		off += uint64(len(secs[i].data))
	}
	shoff := (off + 7) &^ 7

	var b bytes.Buffer
	class, data := elf.ELFCLASS32, elf.ELFDATA2LSB
	if is64 {
		class = elf.ELFCLASS64
	}
	if bo == binary.BigEndian {
		data = elf.ELFDATA2MSB
	}
	b.Write([]byte{0x7f, 'E', 'L', 'F', byte(class), byte(data), 1, 0, 0, 0, 0, 0, 0, 0, 0, 0})
	u16(&b, uint16(elf.ET_EXEC))
	u16(&b, uint16(elf.EM_X86_64))
	u32(&b, 1)
	word(&b, 0x1000) // entry
	word(&b, ehdrSize)
	word(&b, shoff)
	u32(&b, 0) // flags
	u16(&b, uint16(ehdrSize))
	u16(&b, uint16(phdrSize))
	u16(&b, 1)
	u16(&b, uint16(shdrSize))
	u16(&b, uint16(len(secs)))
	u16(&b, uint16(len(secs)-1))
	// PT_NOTE over the build-id note.
	n := secs[1]
	u32(&b, uint32(elf.PT_NOTE))
	if is64 {
		u32(&b, uint32(elf.PF_R))
	}
	word(&b, n.off)
	word(&b, n.addr)
	word(&b, n.addr)
	word(&b, uint64(len(n.data)))
	word(&b, uint64(len(n.data)))
	if !is64 {
		u32(&b, uint32(elf.PF_R))
	}
	word(&b, 4)
	for _, s := range secs[1:] {
		b.Write(make([]byte, s.off-uint64(b.Len())))
		b.Write(s.data)
	}
	b.Write(make([]byte, shoff-uint64(b.Len())))
	for _, s := range secs {
		u32(&b, s.nameOff)
		u32(&b, uint32(s.typ))
		word(&b, uint64(s.flags))
		word(&b, s.addr)
		word(&b, s.off)
		word(&b, uint64(len(s.data)))
		u32(&b, s.link)
		u32(&b, 0)
		word(&b, s.align)
		word(&b, s.entsize)
	}
	return b.Bytes()
}

// TestStripTinyELF strips both classes in both byte orders.
func TestStripTinyELF(t *testing.T) {
	for _, is64 := range []bool{true, false} {
		for _, bo := range []binary.ByteOrder{binary.LittleEndian, binary.BigEndian} {
			t.Run(fmt.Sprintf("64=%v/%v", is64, bo), func(t *testing.T) {
				in := tinyELF(is64, bo)
				if _, err := elf.NewFile(bytes.NewReader(in)); err != nil {
					t.Fatalf("the test's ELF does not parse: %v", err)
				}
				var out bytes.Buffer
				st, err := Strip(&out, bytes.NewReader(in), int64(len(in)))
				if err != nil {
					t.Fatal(err)
				}
				f, err := elf.NewFile(bytes.NewReader(out.Bytes()))
				if err != nil {
					t.Fatalf("stripped ELF does not parse: %v", err)
				}
				if st.Kept != 5 || st.Dropped != 1 {
					t.Errorf("kept %d, dropped %d; want 5 and 1 (.text)", st.Kept, st.Dropped)
				}
				if s := f.Section(".text"); s.Type != elf.SHT_NOBITS || s.Size != 64 || s.Addr != 0x1000 {
					t.Errorf(".text: %+v", s.SectionHeader)
				}
				if bytes.Contains(out.Bytes(), bytes.Repeat([]byte{0xcc}, 16)) {
					t.Error(".text bytes still in the output")
				}
				syms, err := f.Symbols()
				if err != nil || len(syms) != 1 || syms[0].Name != "tiny_func" || syms[0].Value != 0x1000 {
					t.Errorf("symbols %+v, %v", syms, err)
				}
				if d, _ := f.Section(".debug_info").Data(); string(d) != "debug info bytes" {
					t.Errorf(".debug_info = %q", d)
				}
				if len(f.Progs) != 1 || f.Progs[0].Type != elf.PT_NOTE {
					t.Fatalf("program headers %+v", f.Progs)
				}
				b := make([]byte, f.Progs[0].Filesz)
				f.Progs[0].ReadAt(b, 0)
				if !bytes.HasSuffix(b, []byte{0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4}) {
					t.Errorf("PT_NOTE does not point at the build id: % x", b)
				}
				if f.Entry != 0x1000 || f.Machine != elf.EM_X86_64 || f.ByteOrder != bo {
					t.Errorf("header changed: %+v", f.FileHeader)
				}
			})
		}
	}
}
