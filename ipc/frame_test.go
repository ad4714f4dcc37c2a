package ipc

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

func TestFrameRoundTrip(t *testing.T) {
	type want struct {
		t FrameType
		p []byte
	}
	frames := []want{
		{FrameHello, []byte("hello")},
		{FrameBatch, seqPayload(1, 100)},
		{FrameExecutable, nil},
		{FrameLoss, seqPayload(2, 3*readBufferSize+17)}, // larger than the read buffer
		{FrameGoodbye, []byte{}},
		{FrameAck, seqPayload(2, 8)},
		{FrameStats, []byte("stats")},
		{FrameBatch, bytes.Repeat([]byte{0xab}, MaxFrameSize)}, // the largest allowed
	}
	var buf bytes.Buffer
	w := NewWriter(&buf)
	for _, f := range frames {
		if err := w.WriteFrame(f.t, f.p); err != nil {
			t.Fatalf("WriteFrame(%s): %v", f.t, err)
		}
	}
	if w.Offset() != int64(buf.Len()) {
		t.Fatalf("Writer.Offset() = %d, wrote %d", w.Offset(), buf.Len())
	}
	r := NewReader(&buf)
	for i, f := range frames {
		got, err := r.Next()
		if err != nil {
			t.Fatalf("frame %d: Next: %v", i, err)
		}
		if got.Type != f.t || !bytes.Equal(got.Payload, f.p) || got.File != nil {
			t.Fatalf("frame %d: got type %s, %d bytes; want %s, %d bytes", i, got.Type, len(got.Payload), f.t, len(f.p))
		}
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("Next at end = %v, want io.EOF", err)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("Next after end = %v, want io.EOF again", err)
	}
}

func TestWriterRefusesOversizedPayload(t *testing.T) {
	var buf bytes.Buffer
	err := NewWriter(&buf).WriteFrame(FrameBatch, make([]byte, MaxFrameSize+1))
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("err = %v, want ErrFrameTooLarge", err)
	}
	if buf.Len() != 0 {
		t.Fatalf("wrote %d bytes of an oversized frame", buf.Len())
	}
}

func TestReaderSkipsUnknownTypes(t *testing.T) {
	stream := concat(
		frame(FrameHello, []byte("h")),
		frame(0, []byte("zero")),
		frame(200, bytes.Repeat([]byte{1}, 1000)),
		frame(FrameBatch, []byte("b")),
	)
	r := NewReader(bytes.NewReader(stream))
	var types []FrameType
	for {
		f, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, f.Type)
	}
	if fmt.Sprint(types) != fmt.Sprint([]FrameType{FrameHello, FrameBatch}) {
		t.Fatalf("types = %v", types)
	}
	frames, size := r.SkippedFrames()
	if frames != 2 || size != 2*HeaderSize+4+1000 {
		t.Fatalf("SkippedFrames() = %d, %d", frames, size)
	}
}

func TestReaderErrors(t *testing.T) {
	ok := frame(FrameHello, []byte("12345678")) // 16 bytes
	tests := []struct {
		name   string
		stream []byte
		offset int64
		is     error
		text   string
	}{
		{"truncated header", concat(ok, []byte{1, 0, 0}), 16, io.ErrUnexpectedEOF,
			"frame at byte 16: truncated frame header: want 8 bytes, stream ends after 3"},
		{"truncated payload", concat(ok, rawFrame(FrameBatch, 0, 0, 2048, make([]byte, 17))), 16, io.ErrUnexpectedEOF,
			"frame at byte 16: truncated frame payload: want 2048 bytes, stream ends after 17"},
		{"truncated unknown payload", concat(ok, rawFrame(99, 0, 0, 10, make([]byte, 4))), 16, io.ErrUnexpectedEOF,
			"want 10 bytes, stream ends after 4"},
		{"oversized length", concat(ok, rawFrame(FrameBatch, 0, 0, 0xffffffff, nil)), 16, ErrFrameTooLarge,
			"frame at byte 16: length 4294967295 exceeds maximum 16777216"},
		{"just over the maximum", rawFrame(FrameBatch, 0, 0, MaxFrameSize+1, nil), 0, ErrFrameTooLarge,
			"length 16777217 exceeds maximum 16777216"},
		{"non-zero flags", concat(ok, rawFrame(FrameBatch, 0x80, 0, 0, nil)), 16, ErrCorrupt,
			"flags 0x80 not allowed on batch frames"},
		{"descriptor flag on a plain stream", rawFrame(FrameExecutable, FlagDescriptor, 0, 0, nil), 0, ErrCorrupt,
			"flags 0x01 not allowed on executable frames"},
		{"non-zero reserved", concat(ok, ok, rawFrame(FrameBatch, 0, 7, 0, nil)), 32, ErrCorrupt,
			"frame at byte 32: reserved header bits 0x0007, want 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(bytes.NewReader(tt.stream))
			var err error
			for err == nil {
				_, err = r.Next()
			}
			var fe *FrameError
			if !errors.As(err, &fe) {
				t.Fatalf("err = %v (%T), want *FrameError", err, err)
			}
			if fe.Offset != tt.offset {
				t.Errorf("Offset = %d, want %d", fe.Offset, tt.offset)
			}
			if !errors.Is(err, tt.is) {
				t.Errorf("err = %v, want errors.Is %v", err, tt.is)
			}
			if !strings.Contains(err.Error(), tt.text) {
				t.Errorf("err = %q, want it to contain %q", err, tt.text)
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("at byte %d", tt.offset)) {
				t.Errorf("err = %q does not name offset %d", err, tt.offset)
			}
			if _, again := r.Next(); again != err {
				t.Errorf("second Next = %v, want the same error", again)
			}
		})
	}
}

func TestFrameTypeNames(t *testing.T) {
	for ft := FrameType(0); ft < 10; ft++ {
		if ft.Known() == strings.HasPrefix(ft.String(), "unknown") {
			t.Errorf("%d: Known() = %v, String() = %q", ft, ft.Known(), ft.String())
		}
	}
	if !FrameBatch.Reliable() || !FrameLoss.Reliable() || FrameHello.Reliable() || FrameExecutable.Reliable() {
		t.Error("Reliable() wrong")
	}
}

// loopReader returns the same bytes over and over.
type loopReader struct {
	b   []byte
	off int
}

func (l *loopReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		c := copy(p[n:], l.b[l.off:])
		n += c
		l.off = (l.off + c) % len(l.b)
	}
	return n, nil
}

func TestReadWriteDoNotAllocate(t *testing.T) {
	payload := make([]byte, 4096)
	w := NewWriter(io.Discard)
	if n := testing.AllocsPerRun(100, func() { _ = w.WriteFrame(FrameBatch, payload) }); n != 0 {
		t.Errorf("WriteFrame allocates %v times per frame", n)
	}
	r := NewReader(&loopReader{b: cframe(FrameBatch, payload)})
	r.Next() // size the buffer
	if n := testing.AllocsPerRun(100, func() { _, _ = r.Next() }); n != 0 {
		t.Errorf("Next allocates %v times per frame", n)
	}
}

func BenchmarkWriteFrame(b *testing.B) {
	for _, size := range []int{64, 4096, 256 << 10} {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			payload := make([]byte, size)
			// Through a buffer, as dumps are written, so that the copy counts.
			w := NewWriter(bufio.NewWriterSize(io.Discard, 1<<20))
			b.ReportAllocs()
			b.SetBytes(int64(FrameOverhead + size))
			for b.Loop() {
				if err := w.WriteFrame(FrameBatch, payload); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkReadFrame(b *testing.B) {
	for _, size := range []int{64, 4096, 256 << 10} {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			r := NewReader(&loopReader{b: cframe(FrameBatch, make([]byte, size))})
			b.ReportAllocs()
			b.SetBytes(int64(FrameOverhead + size))
			for b.Loop() {
				if _, err := r.Next(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// FuzzReader checks that no input makes the Reader panic or misreport
// where it is, and that frames written by Writer come back unchanged.
func FuzzReader(f *testing.F) {
	f.Add(concat(frame(FrameHello, []byte("h")), frame(FrameBatch, seqPayload(1, 20)), frame(77, []byte("x"))))
	f.Add([]byte{})
	f.Add(rawFrame(FrameBatch, 0, 0, 0xffffffff, nil))
	f.Add(rawFrame(FrameExecutable, 1, 0, 2, []byte("ab")))
	f.Add([]byte{1, 0, 0, 0, 5, 0})
	f.Add(concat(cframe(FrameHello, []byte("h")), cframe(FrameBatch, seqPayload(1, 20)), cframe(77, []byte("x"))))
	f.Add(concat(cframe(FrameHello, nil), frame(FrameBatch, nil)))
	f.Add(rawCFrame(FrameExecutable, FlagDescriptor, 0, 2, []byte("ab")))
	f.Fuzz(func(t *testing.T, data []byte) {
		// Arbitrary bytes as a stream.
		r := NewReader(bytes.NewReader(data))
		last := int64(0)
		for i := 0; ; i++ {
			fr, err := r.Next()
			if r.Offset() < last || r.Offset() > int64(len(data)) {
				t.Fatalf("offset %d after %d, stream of %d", r.Offset(), last, len(data))
			}
			last = r.Offset()
			if err == io.EOF {
				if r.Offset() != int64(len(data)) {
					t.Fatalf("io.EOF at offset %d of %d", r.Offset(), len(data))
				}
				break
			}
			if err != nil {
				var fe *FrameError
				if !errors.As(err, &fe) || fe.Offset < 0 || fe.Offset > int64(len(data)) {
					t.Fatalf("err = %v", err)
				}
				break
			}
			if !fr.Type.Known() || len(fr.Payload) > MaxFrameSize {
				t.Fatalf("frame %d: type %s, %d bytes", i, fr.Type, len(fr.Payload))
			}
		}

		// The same bytes as a list of frames: type byte, length byte, payload.
		type want struct {
			t FrameType
			p []byte
		}
		var frames []want
		var buf bytes.Buffer
		w := NewWriter(&buf)
		unknown := 0
		for d := data; len(d) >= 2; {
			ft, n := FrameType(d[0]), min(int(d[1]), len(d)-2)
			p := d[2 : 2+n]
			d = d[2+n:]
			if err := w.WriteFrame(ft, p); err != nil {
				t.Fatal(err)
			}
			if ft.Known() {
				frames = append(frames, want{ft, p})
			} else {
				unknown++
			}
		}
		r = NewReader(&buf)
		for i, want := range frames {
			got, err := r.Next()
			if err != nil {
				t.Fatalf("frame %d: %v", i, err)
			}
			if got.Type != want.t || !bytes.Equal(got.Payload, want.p) {
				t.Fatalf("frame %d: got %s %x, want %s %x", i, got.Type, got.Payload, want.t, want.p)
			}
		}
		if _, err := r.Next(); err != io.EOF {
			t.Fatalf("after %d frames: %v, want io.EOF", len(frames), err)
		}
		if n, _ := r.SkippedFrames(); n != uint64(unknown) {
			t.Fatalf("skipped %d frames, want %d", n, unknown)
		}

		// One byte of the written stream flipped (position and bits taken
		// from the input): the checksums let through an unchanged prefix
		// of the frames and then fail; nothing altered is ever returned.
		written := buf.Bytes()
		if len(data) < 2 || len(written) == 0 {
			return
		}
		pos := int(binary.LittleEndian.Uint16(append([]byte{data[0]}, data[len(data)-1]))) % len(written)
		if pos == 1 {
			// The first frame's flags decide whether a plain stream has
			// checksums at all (docs/ipc-format.md, "Checksums"); a dump's
			// header version decides for dumps.
			pos = 0
		}
		corrupt := bytes.Clone(written)
		corrupt[pos] ^= data[len(data)/2] | 1
		r = NewReader(bytes.NewReader(corrupt))
		for i := 0; ; i++ {
			got, err := r.Next()
			if err != nil {
				if err == io.EOF {
					t.Fatalf("byte %d flipped: read to the end after %d frames", pos, i)
				}
				break
			}
			if i >= len(frames) || got.Type != frames[i].t || !bytes.Equal(got.Payload, frames[i].p) {
				t.Fatalf("byte %d flipped: frame %d came back altered", pos, i)
			}
		}
	})
}
