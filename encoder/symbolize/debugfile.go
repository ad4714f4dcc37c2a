package symbolize

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// DefaultDebugDir is where distributions install separate debug files
// (Debian's -dbgsym and -dbg packages, Fedora's debuginfo).
const DefaultDebugDir = "/usr/lib/debug"

// DebugSearch says where Load looks for an executable's separate debug
// file, which it reads when the executable has no .symtab of its own.
type DebugSearch struct {
	// Dirs are the debug directories, searched in order: by build id
	// (<dir>/.build-id/xx/yyyy.debug), then by .gnu_debuglink
	// (<dir>/<executable's directory>/<name>). None: no search at all,
	// not even next to the executable.
	Dirs []string
	// ExecutablePath is the executable's absolute path, for the
	// .gnu_debuglink places next to it (<its dir>/<name>,
	// <its dir>/.debug/<name>) and under Dirs; "" for none.
	ExecutablePath string
}

// How a debug file was found (DebugFile.Via).
const (
	ViaBuildID   = "build_id"
	ViaDebuglink = "debuglink"
)

// DebugFile says what Load did about a separate debug file.
type DebugFile struct {
	// Searched is true when the executable had no .symtab and Load
	// looked for a debug file.
	Searched bool
	// Path is the debug file whose symbols the table holds; "" when none.
	Path string
	// Via is how it was found: ViaBuildID or ViaDebuglink.
	Via string
	// Rejected counts files found at a search place but not used: another
	// build id or CRC, not ELF, over a limit, unreadable. Why is in
	// Table.Problems.
	Rejected int
}

// Debug file limits. A build id is 20 bytes (SHA-1) from GNU ld, 16 from
// lld's md5/uuid styles, 8 from xxhash; more than 64 is not one. Notes
// and the debuglink are read only from small sections (real ones are tens
// of bytes).
const (
	maxBuildIDBytes  = 64
	minBuildIDBytes  = 2        // the path needs xx/ and at least one more digit
	maxNoteBytes     = 64 << 10 // a note or .gnu_debuglink section
	maxDebuglinkName = 255      // NAME_MAX
	noteTypeBuildID  = 3        // NT_GNU_BUILD_ID
)

// parseBuildIDNote returns the GNU build id in a note section's bytes,
// nil when it holds none. align is the section's alignment (notes are
// padded to 4 bytes, to 8 in 8-aligned sections such as
// .note.gnu.property).
func parseBuildIDNote(data []byte, bo binary.ByteOrder, align uint64) []byte {
	pad := uint64(4)
	if align == 8 {
		pad = 8
	}
	up := func(n uint64) uint64 { return (n + pad - 1) &^ (pad - 1) }
	for off := uint64(0); off+12 <= uint64(len(data)); {
		namesz, descsz := uint64(bo.Uint32(data[off:])), uint64(bo.Uint32(data[off+4:]))
		typ := bo.Uint32(data[off+8:])
		name := off + 12
		desc := up(name + namesz) // padded from the section's start
		next := up(desc + descsz)
		if desc+descsz > uint64(len(data)) { // the last note's padding may be cut
			return nil
		}
		if typ == noteTypeBuildID && namesz == 4 && string(data[name:name+4]) == "GNU\x00" &&
			descsz >= minBuildIDBytes && descsz <= maxBuildIDBytes {
			return data[desc : desc+descsz]
		}
		off = next
	}
	return nil
}

// parseDebuglink reads a .gnu_debuglink section: a file name, NUL, padding
// to 4 bytes, then the CRC32 of the debug file in the file's byte order.
// The name must be a plain file name (no directory, not . or ..).
func parseDebuglink(data []byte, bo binary.ByteOrder) (string, uint32, error) {
	end := bytes.IndexByte(data, 0)
	if end < 0 {
		return "", 0, errors.New("file name without its NUL")
	}
	name := string(data[:end])
	switch {
	case name == "" || name == "." || name == "..":
		return "", 0, fmt.Errorf("file name %q is not a file", name)
	case strings.ContainsRune(name, '/'):
		return "", 0, fmt.Errorf("file name %q has a directory", name)
	case len(name) > maxDebuglinkName:
		return "", 0, fmt.Errorf("file name of %d bytes is longer than %d", len(name), maxDebuglinkName)
	}
	crcOff := (end + 1 + 3) &^ 3
	if crcOff+4 > len(data) {
		return "", 0, fmt.Errorf("no CRC after the file name %q", name)
	}
	return name, bo.Uint32(data[crcOff:]), nil
}

// buildIDPath is where a debug directory keeps the debug file of a build
// id: <dir>/.build-id/<first byte>/<the rest>.debug, lowercase hex.
func buildIDPath(dir string, id []byte) string {
	h := hex.EncodeToString(id)
	return filepath.Join(dir, ".build-id", h[:2], h[2:]+".debug")
}

// debuglinkPaths are the places a .gnu_debuglink name is looked for, in
// gdb's order: next to the executable, in .debug there, then under each
// debug directory at the executable's directory. The executable itself is
// never a candidate.
func debuglinkPaths(exe, name string, dirs []string) []string {
	var out []string
	if filepath.IsAbs(exe) {
		dir := filepath.Dir(filepath.Clean(exe))
		out = append(out, filepath.Join(dir, name), filepath.Join(dir, ".debug", name))
		for _, d := range dirs {
			out = append(out, filepath.Join(d, dir, name))
		}
	}
	clean := filepath.Clean(exe)
	n := 0
	for _, p := range out {
		if p != clean {
			out[n] = p
			n++
		}
	}
	return out[:n]
}

// exeIdentity is what ties an executable to its debug file.
type exeIdentity struct {
	class   elf.Class
	machine elf.Machine
	buildID []byte
	link    string // .gnu_debuglink name, "" if none
	linkCRC uint32
	linkErr error // a .gnu_debuglink section that could not be read
}

// identity reads the executable's build id and .gnu_debuglink.
func (l *loader) identity() exeIdentity {
	id := exeIdentity{class: l.f.Class, machine: l.f.Machine, buildID: l.buildID()}
	if s := l.f.Section(".gnu_debuglink"); s != nil && s.Size <= maxNoteBytes {
		data, err := l.read(s)
		if err == nil {
			id.link, id.linkCRC, err = parseDebuglink(data, l.f.ByteOrder)
		}
		if err != nil {
			id.linkErr = fmt.Errorf(".gnu_debuglink: %w", err)
		}
	}
	return id
}

// buildID returns the file's GNU build id from its note sections, or from
// its PT_NOTE segments when it has no section headers; nil when none.
func (l *loader) buildID() []byte {
	for _, s := range l.f.Sections {
		if s.Type != elf.SHT_NOTE || s.Size > maxNoteBytes {
			continue
		}
		data, err := l.read(s)
		if err != nil {
			continue
		}
		if id := parseBuildIDNote(data, l.f.ByteOrder, s.Addralign); id != nil {
			return id
		}
	}
	if len(l.f.Sections) > 1 {
		return nil
	}
	for _, p := range l.f.Progs {
		if p.Type != elf.PT_NOTE || p.Filesz > maxNoteBytes || p.Off > uint64(l.size) || p.Filesz > uint64(l.size)-p.Off {
			continue
		}
		data := make([]byte, p.Filesz)
		if _, err := l.r.ReadAt(data, int64(p.Off)); err != nil {
			continue
		}
		if id := parseBuildIDNote(data, l.f.ByteOrder, p.Align); id != nil {
			return id
		}
	}
	return nil
}

// debugSymbols looks for the executable's separate debug file, by build
// id and then by .gnu_debuglink, and adds its function symbols to b. It
// records what it did in dbg and what went wrong in errs.
func (l *loader) debugSymbols(ds DebugSearch, b *symBuilder, dbg *DebugFile, errs *[]error) {
	if len(ds.Dirs) == 0 {
		return
	}
	id := l.identity()
	if id.linkErr != nil {
		*errs = append(*errs, id.linkErr)
	}
	if id.buildID == nil && id.link == "" {
		return
	}
	dbg.Searched = true
	try := func(path, via string) bool {
		f, err := openDebugFile(path)
		if err != nil {
			if !errors.Is(err, os.ErrNotExist) {
				dbg.Rejected++
				*errs = append(*errs, fmt.Errorf("debug file %s: %w", path, err))
			}
			return false
		}
		defer f.Close()
		st, err := f.Stat()
		if err == nil && !st.Mode().IsRegular() {
			err = errors.New("not a regular file")
		}
		if err == nil {
			err = l.readDebugFile(f, st.Size(), via, id, b)
		}
		if err != nil {
			dbg.Rejected++
			*errs = append(*errs, fmt.Errorf("debug file %s: %w", path, err))
			return false
		}
		dbg.Path, dbg.Via = path, via
		return true
	}
	if id.buildID != nil {
		for _, d := range ds.Dirs {
			if try(buildIDPath(d, id.buildID), ViaBuildID) {
				return
			}
		}
	}
	if id.link != "" {
		for _, p := range debuglinkPaths(ds.ExecutablePath, id.link, ds.Dirs) {
			if try(p, ViaDebuglink) {
				return
			}
		}
	}
}

// openDebugFile opens a regular file read-only without blocking (a FIFO
// or device at a search place is refused before it is opened).
func openDebugFile(path string) (*os.File, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
}

// readDebugFile checks that r (size bytes) is the executable's debug file
// (the same class and machine; the same build id, and for a debuglink the
// CRC the executable names) and adds its .symtab's function symbols to b.
func (l *loader) readDebugFile(r io.ReaderAt, size int64, via string, id exeIdentity, b *symBuilder) error {
	if size > l.lim.MaxDebugFileBytes {
		return fmt.Errorf("%d bytes, more than the %d-byte debug file limit", size, l.lim.MaxDebugFileBytes)
	}
	ef, err := elf.NewFile(io.NewSectionReader(r, 0, size))
	if err != nil {
		return fmt.Errorf("read ELF headers: %w", err)
	}
	if ef.Class != id.class || ef.Machine != id.machine {
		return fmt.Errorf("%v %v, the executable is %v %v", ef.Class, ef.Machine, id.class, id.machine)
	}
	dl := loader{f: ef, r: r, size: size, lim: l.lim}
	defer dl.release()
	got := dl.buildID()
	switch {
	case via == ViaBuildID && !bytes.Equal(got, id.buildID):
		return fmt.Errorf("build id %x, the executable's is %x", got, id.buildID)
	case via == ViaDebuglink && id.buildID != nil && got != nil && !bytes.Equal(got, id.buildID):
		return fmt.Errorf("build id %x, the executable's is %x", got, id.buildID)
	case via == ViaDebuglink && id.buildID != nil && got != nil:
		// The same build id names the same build; the CRC32 would read
		// the whole file (hundreds of MB for a large C++ program) to say
		// less.
	case via == ViaDebuglink:
		crc, err := dl.crc32()
		if err != nil {
			return err
		}
		if crc != id.linkCRC {
			return fmt.Errorf("CRC32 %08x, the executable's .gnu_debuglink names %08x", crc, id.linkCRC)
		}
	}
	symtab := ef.Section(".symtab")
	if symtab == nil || symtab.Type != elf.SHT_SYMTAB {
		return errors.New("no .symtab")
	}
	if _, _, err := dl.symbols(symtab, b, nil); err != nil {
		return fmt.Errorf(".symtab: %w", err)
	}
	return nil
}

// crcChunk is how much of a debug file the CRC32 reads between looks at
// its time limit.
const crcChunk = 1 << 20

// crc32 is the CRC32 (IEEE, as .gnu_debuglink uses) of the whole file,
// mapped when it can be; it gives up past Limits.DebugCRCTimeout, so that
// a huge debug file costs the executable its debug symbols, not its own.
func (l *loader) crc32() (uint32, error) {
	var deadline time.Time
	if l.lim.DebugCRCTimeout > 0 {
		deadline = time.Now().Add(l.lim.DebugCRCTimeout)
	}
	data, m, mapped := mapSection(l.r, 0, l.size)
	if mapped {
		defer unmap(m)
	}
	var buf []byte
	crc := uint32(0)
	for off := int64(0); off < l.size; off += crcChunk {
		n := min(crcChunk, l.size-off)
		var b []byte
		if mapped {
			b = data[off : off+n]
		} else {
			if buf == nil {
				buf = make([]byte, min(crcChunk, l.size))
			}
			b = buf[:n]
			if _, err := l.r.ReadAt(b, off); err != nil {
				return 0, fmt.Errorf("read for CRC32: %w", err)
			}
		}
		crc = crc32.Update(crc, crc32.IEEETable, b)
		if !deadline.IsZero() && off+n < l.size && time.Now().After(deadline) {
			return 0, fmt.Errorf("CRC32 of the %d-byte file not done within %v", l.size, l.lim.DebugCRCTimeout)
		}
	}
	return crc, nil
}
