package ipc

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
)

// FrameType is the first byte of a frame header; it says what the payload
// is. Values are never reused. Readers skip frames of a type they do not
// know.
type FrameType uint8

// Frame types. The payload of each is the schema message named in the
// comment, except FrameAck, whose payload ipc itself defines.
const (
	FrameHello      FrameType = 1 // schema.Hello: first frame of every connection and dump
	FrameBatch      FrameType = 2 // schema.Batch (reliable: sequenced, acked)
	FrameExecutable FrameType = 3 // schema.ExecutableNotice (+ optional descriptor on sockets)
	FrameLoss       FrameType = 4 // schema.LossReport (reliable)
	FrameGoodbye    FrameType = 5 // schema.Goodbye: last frame of a clean shutdown
	FrameAck        FrameType = 6 // encoder -> sampler, exactly 8 bytes: uint64 LE sequence
	FrameStats      FrameType = 7 // schema.SamplerStats: the sampler's own metrics, best effort (protocol 1.1)

	maxKnownFrameType = FrameStats
)

// String returns a stable lower-case name, used in metrics labels.
func (t FrameType) String() string {
	switch t {
	case FrameHello:
		return "hello"
	case FrameBatch:
		return "batch"
	case FrameExecutable:
		return "executable"
	case FrameLoss:
		return "loss"
	case FrameGoodbye:
		return "goodbye"
	case FrameAck:
		return "ack"
	case FrameStats:
		return "stats"
	default:
		return "unknown(" + strconv.Itoa(int(t)) + ")"
	}
}

// Known reports whether this build knows the frame type. Readers skip
// frames of unknown types.
func (t FrameType) Known() bool { return t >= FrameHello && t <= maxKnownFrameType }

// Reliable reports whether frames of this type are sequenced and
// acknowledged (FrameBatch, FrameLoss).
func (t FrameType) Reliable() bool { return t == FrameBatch || t == FrameLoss }

const (
	// HeaderSize is the size of a frame header: type u8, flags u8,
	// reserved u16 (0), payload length u32 little-endian.
	HeaderSize = 8

	// MaxFrameSize is the largest payload length a frame may declare. It
	// is checked before anything is allocated.
	MaxFrameSize = 16 << 20

	// AckPayloadSize is the exact payload length of a FrameAck.
	AckPayloadSize = 8

	// FlagDescriptor in a frame header's flags byte says that a file
	// descriptor travels with the frame as SCM_RIGHTS ancillary data. Only
	// FrameExecutable frames on a socket set it; dumps never do, and
	// readers of dumps and plain streams reject it.
	FlagDescriptor uint8 = 0x01

	readBufferSize = 64 << 10
)

// Frame is one decoded frame.
type Frame struct {
	Type FrameType
	// Payload is valid until the next call to Next on the same reader.
	Payload []byte
	// File is the descriptor attached to a FrameExecutable received on a
	// socket with FlagDescriptor set; nil otherwise. The receiver owns it
	// and must close it.
	File *os.File
}

func putHeader(b []byte, t FrameType, flags uint8, n int) {
	b[0] = byte(t)
	b[1] = flags
	b[2], b[3] = 0, 0
	binary.LittleEndian.PutUint32(b[4:8], uint32(n))
}

// appendFrame appends a whole frame (header and payload) to dst.
func appendFrame(dst []byte, t FrameType, flags uint8, payload []byte) []byte {
	var h [HeaderSize]byte
	putHeader(h[:], t, flags, len(payload))
	return append(append(dst, h[:]...), payload...)
}

// Writer writes frames to an io.Writer. It does not buffer: wrap w in a
// bufio.Writer when the frames are small and w is a file. A Writer is not
// safe for concurrent use.
type Writer struct {
	w   io.Writer
	hdr [HeaderSize]byte
	off int64
}

// NewWriter returns a Writer that writes frames to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// WriteFrame writes one frame with flags 0. It returns an error wrapping
// ErrFrameTooLarge, without writing anything, when the payload exceeds
// MaxFrameSize.
func (w *Writer) WriteFrame(t FrameType, payload []byte) error {
	if len(payload) > MaxFrameSize {
		return fmt.Errorf("write %s frame: payload of %d bytes exceeds maximum %d: %w",
			t, len(payload), MaxFrameSize, ErrFrameTooLarge)
	}
	putHeader(w.hdr[:], t, 0, len(payload))
	n, err := w.w.Write(w.hdr[:])
	w.off += int64(n)
	if err != nil {
		return fmt.Errorf("write %s frame header: %w", t, err)
	}
	n, err = w.w.Write(payload)
	w.off += int64(n)
	if err != nil {
		return fmt.Errorf("write %s frame payload: %w", t, err)
	}
	return nil
}

// Offset returns the number of bytes written so far.
func (w *Writer) Offset() int64 { return w.off }

// Reader reads frames from an io.Reader: a socket stream or the part of a
// dump after its file header. It buffers its input. A Reader is not safe
// for concurrent use.
//
// Frames of unknown types are skipped by length and counted (see
// SkippedFrames). Once Next has returned an error other than a read
// deadline at a frame boundary, it keeps returning that error.
type Reader struct {
	br   *bufio.Reader
	off  int64 // offset of the next frame
	hdr  [HeaderSize]byte
	buf  []byte
	err  error
	dump bool // error messages speak of a file
	// descriptors allows FlagDescriptor on FrameExecutable (sockets).
	descriptors bool

	frames, skipped, skippedBytes uint64
}

// NewReader returns a Reader for the frame stream r, starting at offset 0.
// Header flags must be zero.
func NewReader(r io.Reader) *Reader { return newReader(r, 0, false) }

func newReader(r io.Reader, base int64, dump bool) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, readBufferSize), off: base, dump: dump}
}

// Offset returns the offset of the next frame: the number of bytes
// consumed, counted from the start of the stream (or of the dump file).
func (r *Reader) Offset() int64 { return r.off }

// SkippedFrames returns how many frames of unknown type were skipped, and
// their total size including headers.
func (r *Reader) SkippedFrames() (frames, bytes uint64) { return r.skipped, r.skippedBytes }

// Next returns the next frame of a known type. It returns io.EOF when the
// stream ends cleanly at a frame boundary, and a *FrameError naming the
// offset and the expectation when the stream is malformed or truncated
// (errors.Is(err, io.ErrUnexpectedEOF) for truncation).
func (r *Reader) Next() (Frame, error) {
	f, _, err := r.next()
	return f, err
}

// next is Next that also returns the header flags.
func (r *Reader) next() (Frame, uint8, error) {
	if r.err != nil {
		return Frame{}, 0, r.err
	}
	for {
		start := r.off
		n, err := io.ReadFull(r.br, r.hdr[:])
		if err != nil {
			if n == 0 && errors.Is(err, os.ErrDeadlineExceeded) {
				// Nothing consumed: the stream is still in sync.
				return Frame{}, 0, fmt.Errorf("read frame header: %w", err)
			}
			return Frame{}, 0, r.fail(r.readErr(err, start, 0, "frame header", HeaderSize, n))
		}
		t := FrameType(r.hdr[0])
		flags := r.hdr[1]
		length := binary.LittleEndian.Uint32(r.hdr[4:8])
		if rsv := binary.LittleEndian.Uint16(r.hdr[2:4]); rsv != 0 {
			return Frame{}, 0, r.fail(r.corrupt(start, t, fmt.Sprintf("reserved header bits 0x%04x, want 0", rsv), ErrCorrupt))
		}
		if flags != 0 && !(r.descriptors && t == FrameExecutable && flags == FlagDescriptor) {
			return Frame{}, 0, r.fail(r.corrupt(start, t, fmt.Sprintf("flags 0x%02x not allowed on %s frames%s",
				flags, t, r.where()), ErrCorrupt))
		}
		if length > MaxFrameSize {
			return Frame{}, 0, r.fail(r.corrupt(start, t, fmt.Sprintf("length %d exceeds maximum %d", length, MaxFrameSize), ErrFrameTooLarge))
		}
		r.off += HeaderSize
		if !t.Known() {
			d, err := r.br.Discard(int(length))
			r.off += int64(d)
			if err != nil {
				return Frame{}, 0, r.fail(r.readErr(err, start, t, "frame payload", int(length), d))
			}
			r.skipped++
			r.skippedBytes += HeaderSize + uint64(length)
			continue
		}
		p, got, err := r.readPayload(int(length))
		r.off += int64(got)
		if err != nil {
			return Frame{}, 0, r.fail(r.readErr(err, start, t, "frame payload", int(length), got))
		}
		r.frames++
		return Frame{Type: t, Payload: p}, flags, nil
	}
}

func (r *Reader) where() string {
	if r.dump {
		return " in a dump"
	}
	return ""
}

func (r *Reader) fail(err error) error {
	r.err = err
	return err
}

func (r *Reader) corrupt(off int64, t FrameType, reason string, class error) *FrameError {
	return &FrameError{Offset: off, Type: t, Dump: r.dump, Reason: reason, Err: class}
}

// readErr turns a short read into a truncation *FrameError and wraps any
// other read error (closed socket, reset connection) with context.
func (r *Reader) readErr(err error, start int64, t FrameType, what string, want, got int) error {
	if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("read %s at byte %d: %w", what, start, err)
	}
	if what == "frame header" && got == 0 {
		return io.EOF
	}
	end := "stream ends"
	if r.dump {
		end = "file ends"
	}
	return &FrameError{
		Offset: start, Type: t, Dump: r.dump, Err: io.ErrUnexpectedEOF,
		Reason: fmt.Sprintf("truncated %s: want %d bytes, %s after %d", what, want, end, got),
	}
}

// readPayload reads n bytes into the reusable buffer. A buffer larger than
// the current one grows with the data actually received, so a length that
// lies costs at most twice what the peer really sent.
func (r *Reader) readPayload(n int) ([]byte, int, error) {
	if n <= cap(r.buf) {
		b := r.buf[:n]
		got, err := io.ReadFull(r.br, b)
		return b, got, err
	}
	b := r.buf[:0]
	for len(b) < n {
		chunk := min(n-len(b), max(len(b), readBufferSize))
		if cap(b)-len(b) < chunk {
			nb := make([]byte, len(b), len(b)+chunk)
			copy(nb, b)
			b = nb
		}
		got, err := io.ReadFull(r.br, b[len(b):len(b)+chunk])
		b = b[:len(b)+got]
		if err != nil {
			r.buf = b[:0]
			return nil, len(b), err
		}
	}
	r.buf = b[:0]
	return b, n, nil
}
