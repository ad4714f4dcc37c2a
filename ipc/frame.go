package ipc

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
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
	// FrameDictionary is a schema.DictionaryChunk (protocol 1.4): it extends
	// the connection's (or dump's) dictionary. Not sequenced, not acked:
	// the client writes on each connection the chunks a batch needs before
	// the batch.
	FrameDictionary FrameType = 8

	maxKnownFrameType = FrameDictionary
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
	case FrameDictionary:
		return "dictionary"
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
	// HeaderSize is the size of the fixed frame header: type u8, flags u8,
	// reserved u16 (0), payload length u32 little-endian.
	HeaderSize = 8

	// ChecksumSize is the size of the CRC-32C that follows the fixed
	// header when FlagChecksum is set (protocol 1.3).
	ChecksumSize = 4

	// FrameOverhead is what a frame written by this build adds to its
	// payload: the header and its checksum.
	FrameOverhead = HeaderSize + ChecksumSize

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

	// FlagChecksum in a frame header's flags byte says that a CRC-32C
	// (Castagnoli) of the 8 header bytes and the payload follows the
	// header, little-endian (protocol 1.3). Writers of this build set it on
	// every frame except FrameAck, whose 16 bytes are fixed. A reader
	// checks it before returning the frame (or skipping it, for an unknown
	// type). Whether a stream carries checksums is decided once: by the
	// dump header's version in a dump (1.3 and later: every frame; 1.0 to
	// 1.2: none), by the first frame on a socket or plain stream.
	FlagChecksum uint8 = 0x02

	readBufferSize = 64 << 10
)

// castagnoli is the CRC-32C table; hash/crc32 uses the SSE 4.2 / ARMv8
// CRC instructions for it where the CPU has them.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

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

// header is a parsed fixed frame header. parseHeader is the only place
// that reads one: the frame Reader and the sampler's ack reader share it.
type header struct {
	t        FrameType
	flags    uint8
	reserved uint16
	length   uint32
}

func parseHeader(b []byte) header {
	return header{
		t:        FrameType(b[0]),
		flags:    b[1],
		reserved: binary.LittleEndian.Uint16(b[2:4]),
		length:   binary.LittleEndian.Uint32(b[4:8]),
	}
}

func putHeader(b []byte, t FrameType, flags uint8, n int) {
	b[0] = byte(t)
	b[1] = flags
	b[2], b[3] = 0, 0
	binary.LittleEndian.PutUint32(b[4:8], uint32(n))
}

// appendFrame appends a frame without a checksum (header and payload) to
// dst: only the ack is written so (see AppendAck).
func appendFrame(dst []byte, t FrameType, flags uint8, payload []byte) []byte {
	var h [HeaderSize]byte
	putHeader(h[:], t, flags, len(payload))
	return append(append(dst, h[:]...), payload...)
}

// frameChecksum is the CRC-32C of a frame: its fixed header (so a flipped
// type, flag or length bit is caught too) and its payload.
func frameChecksum(hdr, payload []byte) uint32 {
	return crc32.Update(crc32.Update(0, castagnoli, hdr[:HeaderSize]), castagnoli, payload)
}

// putChecksummedHeader fills b[:FrameOverhead] for a frame of type t with
// flags (FlagChecksum is added) and payload.
func putChecksummedHeader(b []byte, t FrameType, flags uint8, payload []byte) {
	putHeader(b, t, flags|FlagChecksum, len(payload))
	binary.LittleEndian.PutUint32(b[HeaderSize:FrameOverhead], frameChecksum(b, payload))
}

// encodeFrame returns a whole checksummed frame (header, checksum,
// payload) in a new slice.
func encodeFrame(t FrameType, flags uint8, payload []byte) []byte {
	b := make([]byte, FrameOverhead+len(payload))
	putChecksummedHeader(b, t, flags, payload)
	copy(b[FrameOverhead:], payload)
	return b
}

// Writer writes frames to an io.Writer. It does not buffer: wrap w in a
// bufio.Writer when the frames are small and w is a file. A Writer is not
// safe for concurrent use.
type Writer struct {
	w   io.Writer
	hdr [FrameOverhead]byte
	off int64
}

// NewWriter returns a Writer that writes frames to w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: w} }

// WriteFrame writes one frame with its checksum (flags FlagChecksum). It returns an error wrapping
// ErrFrameTooLarge, without writing anything, when the payload exceeds
// MaxFrameSize.
func (w *Writer) WriteFrame(t FrameType, payload []byte) error {
	if len(payload) > MaxFrameSize {
		return fmt.Errorf("write %s frame: payload of %d bytes exceeds maximum %d: %w",
			t, len(payload), MaxFrameSize, ErrFrameTooLarge)
	}
	putChecksummedHeader(w.hdr[:], t, 0, payload)
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

// checksums says whether a Reader's frames carry FlagChecksum.
type checksums uint8

const (
	// checksumsFirstFrame: the first frame decides (sockets, plain
	// streams); it then becomes one of the two below.
	checksumsFirstFrame checksums = iota
	checksumsRequired             // every frame has one (1.3 dumps, 1.3 samplers)
	checksumsForbidden            // no frame has one (1.0-1.2 dumps and samplers)
)

// Reader reads frames from an io.Reader: a socket stream or the part of a
// dump after its file header. It buffers its input. A Reader is not safe
// for concurrent use.
//
// Frames of unknown types are skipped by length and counted (see
// SkippedFrames). Once Next has returned an error other than a read
// deadline at a frame boundary, it keeps returning that error.
type Reader struct {
	br    *bufio.Reader
	off   int64 // offset of the next frame
	start int64 // offset of the frame Next returned last
	hdr   [FrameOverhead]byte
	buf   []byte
	err   error
	dump  bool // error messages speak of a file
	// descriptors allows FlagDescriptor on FrameExecutable (sockets).
	descriptors bool
	checksums   checksums
	// version names the dump's protocol version in checksum errors.
	version string

	frames, skipped, skippedBytes uint64
}

// NewReader returns a Reader for the frame stream r, starting at offset 0.
// The first frame decides whether frames carry checksums (FlagChecksum):
// then every frame must do as it did. No other flag is allowed.
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
// offset and the expectation when the stream is malformed, truncated
// (errors.Is(err, io.ErrUnexpectedEOF)) or fails its checksum
// (errors.Is(err, ErrChecksum)). A checksummed frame is returned only
// after its checksum matched.
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
		n, err := io.ReadFull(r.br, r.hdr[:HeaderSize])
		if err != nil {
			if n == 0 && errors.Is(err, os.ErrDeadlineExceeded) {
				// Nothing consumed: the stream is still in sync.
				return Frame{}, 0, fmt.Errorf("read frame header: %w", err)
			}
			return Frame{}, 0, r.fail(r.readErr(err, start, 0, "frame header", HeaderSize, n))
		}
		h := parseHeader(r.hdr[:])
		if h.reserved != 0 {
			return Frame{}, 0, r.fail(r.corrupt(start, h.t, fmt.Sprintf("reserved header bits 0x%04x, want 0", h.reserved), ErrCorrupt))
		}
		if err := r.checkFlags(start, h); err != nil {
			return Frame{}, 0, r.fail(err)
		}
		if h.length > MaxFrameSize {
			return Frame{}, 0, r.fail(r.corrupt(start, h.t, fmt.Sprintf("length %d exceeds maximum %d", h.length, MaxFrameSize), ErrFrameTooLarge))
		}
		r.off += HeaderSize
		size := HeaderSize + uint64(h.length)
		checked := h.flags&FlagChecksum != 0
		var stored uint32
		if checked {
			n, err := io.ReadFull(r.br, r.hdr[HeaderSize:FrameOverhead])
			r.off += int64(n)
			if err != nil {
				return Frame{}, 0, r.fail(r.readErr(err, start, h.t, "frame checksum", ChecksumSize, n))
			}
			stored = binary.LittleEndian.Uint32(r.hdr[HeaderSize:FrameOverhead])
			size += ChecksumSize
		}
		if !h.t.Known() {
			d, sum, err := r.discard(int(h.length), checked)
			r.off += int64(d)
			if err != nil {
				return Frame{}, 0, r.fail(r.readErr(err, start, h.t, "frame payload", int(h.length), d))
			}
			// The type byte is covered by the checksum: a corrupt known
			// frame must not pass for an unknown one and vanish.
			if checked && sum != stored {
				return Frame{}, 0, r.fail(r.checksumErr(start, h, stored, sum))
			}
			r.skipped++
			r.skippedBytes += size
			continue
		}
		p, got, err := r.readPayload(int(h.length))
		r.off += int64(got)
		if err != nil {
			return Frame{}, 0, r.fail(r.readErr(err, start, h.t, "frame payload", int(h.length), got))
		}
		if checked {
			if sum := frameChecksum(r.hdr[:], p); sum != stored {
				return Frame{}, 0, r.fail(r.checksumErr(start, h, stored, sum))
			}
		}
		r.frames++
		r.start = start
		return Frame{Type: h.t, Payload: p}, h.flags, nil
	}
}

// checkFlags enforces the flag rules: FlagDescriptor only on a socket's
// FrameExecutable, FlagChecksum on every frame or on none.
func (r *Reader) checkFlags(start int64, h header) error {
	allowed := FlagChecksum
	if r.descriptors && h.t == FrameExecutable {
		allowed |= FlagDescriptor
	}
	if h.flags&^allowed != 0 {
		return r.corrupt(start, h.t, fmt.Sprintf("flags 0x%02x not allowed on %s frames%s", h.flags, h.t, r.where()), ErrCorrupt)
	}
	has := h.flags&FlagChecksum != 0
	switch r.checksums {
	case checksumsFirstFrame:
		r.checksums = checksumsForbidden
		if has {
			r.checksums = checksumsRequired
		}
	case checksumsRequired:
		if !has {
			why := "the stream's first frame had one"
			if r.dump {
				why = "a dump of protocol " + r.version + " checksums every frame"
			}
			return r.corrupt(start, h.t, fmt.Sprintf("%s frame without a checksum (flag 0x%02x): %s", h.t, FlagChecksum, why), ErrCorrupt)
		}
	case checksumsForbidden:
		if has {
			why := "the stream's first frame had none"
			if r.dump {
				why = "a dump of protocol " + r.version + " has none (checksums start with 1.3)"
			}
			return r.corrupt(start, h.t, fmt.Sprintf("%s frame with a checksum (flag 0x%02x): %s", h.t, FlagChecksum, why), ErrCorrupt)
		}
	}
	return nil
}

func (r *Reader) checksumErr(start int64, h header, stored, computed uint32) *FrameError {
	body := start + FrameOverhead
	return r.corrupt(start, h.t, fmt.Sprintf("%s frame checksum mismatch: stored 0x%08x, computed 0x%08x over its header and %d payload bytes (bytes %d-%d)",
		h.t, stored, computed, h.length, body, body+int64(h.length)), ErrChecksum)
}

// discard skips n payload bytes, computing their checksum (with the
// header's) when sum is set.
func (r *Reader) discard(n int, sum bool) (int, uint32, error) {
	if !sum {
		d, err := r.br.Discard(n)
		return d, 0, err
	}
	crc := crc32.Update(0, castagnoli, r.hdr[:HeaderSize])
	done := 0
	for done < n {
		b, err := r.br.Peek(min(n-done, r.br.Size()))
		crc = crc32.Update(crc, castagnoli, b)
		d, _ := r.br.Discard(len(b))
		done += d
		if err != nil {
			return done, crc, err
		}
	}
	return done, crc, nil
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
