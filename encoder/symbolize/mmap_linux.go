package symbolize

import (
	"io"
	"os"
	"syscall"
)

// mapSection maps n bytes at file offset off of r read-only, when r is an
// open file; ok is false otherwise (the caller reads the bytes instead).
// The symbol, string and relocation tables are mapped while a table is
// built, not read into the heap: a Go binary's .symtab and .strtab are
// several MB each, and read they were garbage of that size per load,
// which the garbage collector's goal doubles (docs/benchmarks/footprint.md).
func mapSection(r io.ReaderAt, off, n int64) (data, mapping []byte, ok bool) {
	f, isFile := r.(*os.File)
	if !isFile || n <= 0 {
		return nil, nil, false
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, nil, false
	}
	page := int64(os.Getpagesize())
	start := off &^ (page - 1)
	var m []byte
	var merr error
	if err := rc.Control(func(fd uintptr) {
		m, merr = syscall.Mmap(int(fd), start, int(off-start+n), syscall.PROT_READ, syscall.MAP_PRIVATE)
	}); err != nil || merr != nil {
		return nil, nil, false
	}
	return m[off-start:], m, true
}

func unmap(m []byte) { _ = syscall.Munmap(m) }
