package parcatest

import (
	"debug/elf"
	"testing"
)

// TestNormalize: the server's base computation, case by case.
func TestNormalize(t *testing.T) {
	pie := layout{typ: elf.ET_DYN, loads: []elf.ProgHeader{
		{Type: elf.PT_LOAD, Off: 0, Vaddr: 0, Memsz: 0x1000},
		{Type: elf.PT_LOAD, Off: 0x1000, Vaddr: 0x1000, Memsz: 0x3000},
	}}
	// A library whose text segment is linked 0x1000 above its file offset.
	shifted := layout{typ: elf.ET_DYN, loads: []elf.ProgHeader{
		{Type: elf.PT_LOAD, Off: 0, Vaddr: 0, Memsz: 0x800},
		{Type: elf.PT_LOAD, Off: 0x800, Vaddr: 0x1800, Memsz: 0x2000},
	}}
	exec := layout{typ: elf.ET_EXEC, loads: []elf.ProgHeader{{Type: elf.PT_LOAD, Off: 0, Vaddr: 0x400000, Memsz: 0x5000}}}
	for _, tc := range []struct {
		name string
		l    layout
		m    Mapping
		addr uint64
		want uint64
		err  bool
	}{
		{"arrow: no mapping, already adjusted", pie, Mapping{}, 0x1234, 0x1234, false},
		{"PIE text mapping", pie, Mapping{Start: 0x7f0000001000, Limit: 0x7f0000004000, Offset: 0x1000}, 0x7f0000001234, 0x1234, false},
		{"PIE first mapping", pie, Mapping{Start: 0x7f0000000000, Limit: 0x7f0000001000}, 0x7f0000000010, 0x10, false},
		{"segment above its offset", shifted, Mapping{Start: 0x7f0000000000, Limit: 0x7f0000002000, Offset: 0x800}, 0x7f0000000100, 0x1900, false},
		{"fixed-address executable", exec, Mapping{Start: 0x400000, Limit: 0x405000}, 0x401000, 0x401000, false},
		{"mapping over everything", pie, Mapping{Limit: ^uint64(0)}, 0x1234, 0x1234, false},
		{"address past the mapping", pie, Mapping{Start: 0x7f0000001000, Limit: 0x7f0000004000, Offset: 0x1000}, 0x7f0000004000, 0, true},
		{"no header for the offset", pie, Mapping{Start: 0x7f0000001000, Limit: 0x7f0000009000, Offset: 0x9000}, 0x7f0000001000, 0x7f0000001000, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := normalize(tc.addr, tc.m, tc.l)
			if (err != nil) != tc.err || !tc.err && got != tc.want {
				t.Errorf("normalize(%#x, %+v) = %#x, %v; want %#x (error %t)", tc.addr, tc.m, got, err, tc.want, tc.err)
			}
		})
	}
}
