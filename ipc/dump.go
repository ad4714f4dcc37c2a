package ipc

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/tandem-profiler/tandem/schema"
)

const (
	// DumpHeaderSize is the size of a dump's file header: magic (8 bytes),
	// protocol major u16 LE, minor u16 LE, reserved u32 (0).
	DumpHeaderSize = 16

	// DumpMagic opens every dump file.
	DumpMagic = "TANDEM\x00D"

	// checksumMinor is the first minor version of major 1 whose dumps
	// checksum every frame (FlagChecksum).
	checksumMinor = 3

	dumpWriteBuffer = 256 << 10
	dumpFileMode    = 0o600
)

// DumpWriter records frames to a dump file: a file header followed by the
// same frames that cross the socket. It never records descriptors: an
// executable notice is written without one, and no header flag is ever set.
// It buffers; Close flushes and fsyncs. A DumpWriter is safe for concurrent
// use.
type DumpWriter struct {
	mu     sync.Mutex
	f      *os.File
	bw     *bufio.Writer
	w      *Writer
	closed bool
	// cursor is the dump's position in the dictionary logs, as a
	// connection's: a dump created in the middle of a generation starts at
	// its first chunk, so every dump is self-contained from its start.
	cursor dictCursor
}

// CreateDump creates (or truncates) the file at path, readable only by its
// owner, and writes the dump header for the protocol version of this build.
func CreateDump(path string) (*DumpWriter, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, dumpFileMode)
	if err != nil {
		return nil, fmt.Errorf("create dump: %w", err)
	}
	bw := bufio.NewWriterSize(f, dumpWriteBuffer)
	var h [DumpHeaderSize]byte
	copy(h[:8], DumpMagic)
	binary.LittleEndian.PutUint16(h[8:10], schema.MajorVersion)
	binary.LittleEndian.PutUint16(h[10:12], schema.MinorVersion)
	if _, err := bw.Write(h[:]); err != nil {
		f.Close()
		return nil, fmt.Errorf("create dump %s: write header: %w", path, err)
	}
	w := NewWriter(bw)
	w.off = DumpHeaderSize
	return &DumpWriter{f: f, bw: bw, w: w}, nil
}

// WriteFrame appends one frame. It returns ErrClosed after Close.
func (d *DumpWriter) WriteFrame(t FrameType, payload []byte) error {
	return d.WriteFrameWith(t, payload, DictionaryRef{})
}

// WriteFrameWith appends a frame that needs the dictionary chunks dict (a
// layout-2 batch, protocol 1.4), preceded by the chunks of dict this dump
// does not hold yet. dict must be in its log, and must not go back to an
// older generation than an earlier frame's; the zero DictionaryRef needs
// nothing (WriteFrame).
func (d *DumpWriter) WriteFrameWith(t FrameType, payload []byte, dict DictionaryRef) error {
	if err := dict.check(); err != nil {
		return fmt.Errorf("write dump %s frame: %w", t, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return fmt.Errorf("write dump frame: %w", ErrClosed)
	}
	if cur := d.cursor.log; dict.goesBack(cur) {
		return fmt.Errorf("write dump %s frame: needs dictionary generation %d after generation %d: generations must increase", t, dict.Log.generation, cur.generation)
	}
	for _, ch := range d.cursor.advance(dict) {
		if err := d.w.WriteFrame(FrameDictionary, ch[FrameOverhead:]); err != nil {
			// The cursor moved past chunks that may not be in the file:
			// the dump is broken from here anyway.
			return fmt.Errorf("write dump %s: %w", d.f.Name(), err)
		}
	}
	if err := d.w.WriteFrame(t, payload); err != nil {
		return fmt.Errorf("write dump %s: %w", d.f.Name(), err)
	}
	return nil
}

// Offset returns the size the file will have once flushed.
func (d *DumpWriter) Offset() int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.w.Offset()
}

// Sync flushes the buffer and fsyncs the file, so that everything written
// so far survives a crash.
func (d *DumpWriter) Sync() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return fmt.Errorf("sync dump: %w", ErrClosed)
	}
	if err := d.bw.Flush(); err != nil {
		return fmt.Errorf("flush dump %s: %w", d.f.Name(), err)
	}
	if err := d.f.Sync(); err != nil {
		return fmt.Errorf("sync dump %s: %w", d.f.Name(), err)
	}
	return nil
}

// Close flushes the buffer, fsyncs and closes the file. Calling it again
// returns nil.
func (d *DumpWriter) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	var errs []error
	if err := d.bw.Flush(); err != nil {
		errs = append(errs, fmt.Errorf("flush dump %s: %w", d.f.Name(), err))
	}
	if err := d.f.Sync(); err != nil {
		errs = append(errs, fmt.Errorf("sync dump %s: %w", d.f.Name(), err))
	}
	if err := d.f.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close dump %s: %w", d.f.Name(), err))
	}
	return errors.Join(errs...)
}

// DumpReader reads a dump file. It is not safe for concurrent use.
type DumpReader struct {
	r            *Reader
	c            io.Closer
	size         int64
	major, minor uint16
}

// OpenDump opens the dump at path and checks its header. A dump written by
// another major protocol version yields an error wrapping a *VersionError
// (errors.Is(err, ErrVersionMismatch)); a bad or truncated header yields a
// *FrameError.
func OpenDump(path string) (*DumpReader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open dump: %w", err)
	}
	d, err := NewDumpReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open dump %s: %w", path, err)
	}
	d.c = f
	return d, nil
}

// NewDumpReader reads a dump from r (a pipe, standard input, a byte slice)
// and checks its header. Size reports r's size when r has a Size or Stat
// method, -1 otherwise. Close does not close r.
func NewDumpReader(r io.Reader) (*DumpReader, error) {
	size := int64(-1)
	switch s := r.(type) {
	case interface{ Stat() (os.FileInfo, error) }:
		if fi, err := s.Stat(); err == nil && fi.Mode().IsRegular() {
			size = fi.Size()
		}
	case interface{ Size() int64 }:
		size = s.Size()
	}
	var h [DumpHeaderSize]byte
	if n, err := io.ReadFull(r, h[:]); err != nil {
		if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("read dump header: %w", err)
		}
		return nil, &FrameError{Offset: 0, Dump: true, Err: io.ErrUnexpectedEOF,
			Reason: fmt.Sprintf("truncated file header: want %d bytes, file ends after %d", DumpHeaderSize, n)}
	}
	if !bytes.Equal(h[:8], []byte(DumpMagic)) {
		return nil, &FrameError{Offset: 0, Dump: true, Err: ErrCorrupt,
			Reason: fmt.Sprintf("bad magic %q, want %q: not a tandem dump", h[:8], DumpMagic)}
	}
	major := binary.LittleEndian.Uint16(h[8:10])
	minor := binary.LittleEndian.Uint16(h[10:12])
	if err := CheckVersion(major, minor); err != nil {
		return nil, fmt.Errorf("check dump version: %w", err)
	}
	if rsv := binary.LittleEndian.Uint32(h[12:16]); rsv != 0 {
		return nil, &FrameError{Offset: 12, Dump: true, Err: ErrCorrupt,
			Reason: fmt.Sprintf("reserved file header field 0x%08x, want 0", rsv)}
	}
	fr := newReader(r, DumpHeaderSize, true)
	fr.version = fmt.Sprintf("%d.%d", major, minor)
	fr.checksums = checksumsForbidden
	if minor >= checksumMinor {
		fr.checksums = checksumsRequired
	}
	return &DumpReader{r: fr, size: size, major: major, minor: minor}, nil
}

// Next returns the next frame. It returns io.EOF at the end of a well-formed
// dump, and a *FrameError naming the byte offset and what was expected for a
// corrupt or truncated one (errors.Is(err, io.ErrUnexpectedEOF) when
// truncated). Frames of unknown types are skipped. Frame.File is always nil.
func (d *DumpReader) Next() (Frame, error) { return d.r.Next() }

// Version returns the protocol version in the dump's header.
func (d *DumpReader) Version() (major, minor uint16) { return d.major, d.minor }

// Offset returns the offset in the file of the next frame.
func (d *DumpReader) Offset() int64 { return d.r.Offset() }

// Size returns the size of the file when it was opened, or -1 if unknown.
func (d *DumpReader) Size() int64 { return d.size }

// SkippedFrames returns how many frames of unknown type were skipped and
// their size.
func (d *DumpReader) SkippedFrames() (frames, bytes uint64) { return d.r.SkippedFrames() }

// Close closes the file opened by OpenDump. Calling it again returns nil.
func (d *DumpReader) Close() error {
	if d.c == nil {
		return nil
	}
	c := d.c
	d.c = nil
	d.r.err = fmt.Errorf("read dump: %w", ErrClosed)
	if err := c.Close(); err != nil {
		return fmt.Errorf("close dump: %w", err)
	}
	return nil
}
