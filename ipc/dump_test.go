package ipc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tandem-profiler/tandem/schema"
)

func TestDumpRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "stream.tandem")
	d, err := CreateDump(path)
	if err != nil {
		t.Fatal(err)
	}
	type want struct {
		t FrameType
		p []byte
	}
	frames := []want{
		{FrameHello, []byte("hello payload")},
		{FrameBatch, seqPayload(1, 5000)},
		{FrameExecutable, []byte("notice without descriptor")},
		{FrameLoss, seqPayload(2, 30)},
		{FrameBatch, seqPayload(3, 300<<10)},
		{FrameGoodbye, nil},
	}
	for _, f := range frames {
		if err := d.WriteFrame(f.t, f.p); err != nil {
			t.Fatal(err)
		}
	}
	size := d.Offset()
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := d.WriteFrame(FrameBatch, nil); !errors.Is(err, ErrClosed) {
		t.Fatalf("WriteFrame after Close = %v, want ErrClosed", err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != size {
		t.Fatalf("file is %d bytes, Offset said %d", fi.Size(), size)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("dump mode %v, want 0600", fi.Mode().Perm())
	}

	r, err := OpenDump(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if major, minor := r.Version(); major != schema.MajorVersion || minor != schema.MinorVersion {
		t.Errorf("Version() = %d.%d", major, minor)
	}
	if r.Size() != size || r.Offset() != DumpHeaderSize {
		t.Errorf("Size() = %d, Offset() = %d", r.Size(), r.Offset())
	}
	for i, f := range frames {
		got, err := r.Next()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if got.Type != f.t || !bytes.Equal(got.Payload, f.p) || got.File != nil {
			t.Fatalf("frame %d: got %s (%d bytes), want %s (%d bytes)", i, got.Type, len(got.Payload), f.t, len(f.p))
		}
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("Next at end = %v, want io.EOF", err)
	}
	if r.Offset() != r.Size() {
		t.Errorf("Offset() = %d at end, Size() = %d", r.Offset(), r.Size())
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Next(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Next after Close = %v, want ErrClosed", err)
	}
}

func TestDumpSync(t *testing.T) {
	path := filepath.Join(t.TempDir(), "d")
	d, err := CreateDump(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.WriteFrame(FrameHello, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := concat(dumpHeader(schema.MajorVersion, schema.MinorVersion, 0), cframe(FrameHello, []byte("x"))); !bytes.Equal(b, want) {
		t.Fatalf("file = %x, want %x", b, want)
	}
}

func TestCorruptDump(t *testing.T) {
	// The frame-structure cases use a 1.2 dump (frames without checksums:
	// what 1.0-1.2 samplers recorded), the checksum cases a 1.3 one.
	hdr := dumpHeader(schema.MajorVersion, 2, 0)
	empty := frame(FrameHello, nil) // 8 bytes: the next frame is at 24
	hdr13 := dumpHeader(schema.MajorVersion, 3, 0)
	cempty := cframe(FrameHello, nil) // 12 bytes: the next frame is at 28
	flip := func(b []byte, i int) []byte {
		b = bytes.Clone(b)
		b[i] ^= 0x10
		return b
	}
	batch := cframe(FrameBatch, seqPayload(7, 100))
	shorten := func(b []byte, n uint32) []byte {
		b = bytes.Clone(b)
		binary.LittleEndian.PutUint32(b[4:8], n)
		return b
	}
	newer := fmt.Sprintf("%d.0", schema.MajorVersion+1)
	ours := fmt.Sprintf("%d.%d", schema.MajorVersion, schema.MinorVersion)
	tests := []struct {
		name   string
		data   []byte
		frames int      // frames read before the error
		is     error    // errors.Is
		offset int64    // -1: not a *FrameError
		text   []string // substrings of the message
	}{
		{"empty file", nil, 0, io.ErrUnexpectedEOF, 0,
			[]string{"dump corrupt at byte 0: truncated file header: want 16 bytes, file ends after 0"}},
		{"truncated header", hdr[:10], 0, io.ErrUnexpectedEOF, 0,
			[]string{"at byte 0", "want 16 bytes, file ends after 10"}},
		{"bad magic", concat([]byte("TANDEM\x00X"), hdr[8:]), 0, ErrCorrupt, 0,
			[]string{"at byte 0", "bad magic", "not a tandem dump"}},
		{"newer major version", dumpHeader(schema.MajorVersion+1, 0, 0), 0, ErrVersionMismatch, -1,
			[]string{newer, ours, "newer"}},
		{"older major version", dumpHeader(0, 9, 0), 0, ErrVersionMismatch, -1,
			[]string{"0.9", ours}},
		{"reserved header field", dumpHeader(schema.MajorVersion, 0, 1), 0, ErrCorrupt, 12,
			[]string{"at byte 12", "reserved file header field 0x00000001, want 0"}},
		{"truncated frame header", concat(hdr, []byte{2, 0, 0}), 0, io.ErrUnexpectedEOF, 16,
			[]string{"dump corrupt at byte 16: truncated frame header: want 8 bytes, file ends after 3"}},
		{"oversized length", concat(hdr, empty, rawFrame(FrameBatch, 0, 0, 0xffffffff, nil)), 1, ErrFrameTooLarge, 24,
			[]string{"dump corrupt at byte 24: length 4294967295 exceeds maximum 16777216"}},
		{"garbage payload length", concat(hdr, empty, rawFrame(FrameBatch, 0, 0, 0x00a0b0c0, []byte("garbage"))), 1, io.ErrUnexpectedEOF, 24,
			[]string{"at byte 24", "want 10531008 bytes, file ends after 7"}},
		{"truncated payload", concat(hdr, empty, empty, rawFrame(FrameBatch, 0, 0, 2048, make([]byte, 17))), 2, io.ErrUnexpectedEOF, 32,
			[]string{"dump corrupt at byte 32: truncated frame payload: want 2048 bytes, file ends after 17"}},
		{"descriptor flag", concat(hdr, rawFrame(FrameExecutable, FlagDescriptor, 0, 1, []byte{0})), 0, ErrCorrupt, 16,
			[]string{"at byte 16", "flags 0x01 not allowed on executable frames in a dump"}},
		{"reserved frame bits", concat(hdr, empty, rawFrame(FrameBatch, 0, 0x100, 0, nil)), 1, ErrCorrupt, 24,
			[]string{"at byte 24", "reserved header bits 0x0100"}},
		{"truncated unknown frame", concat(hdr, rawFrame(42, 0, 0, 100, make([]byte, 99))), 0, io.ErrUnexpectedEOF, 16,
			[]string{"at byte 16", "want 100 bytes, file ends after 99"}},

		{"1.3 frame without a checksum", concat(hdr13, cempty, frame(FrameBatch, nil)), 1, ErrCorrupt, 28,
			[]string{"dump corrupt at byte 28: batch frame without a checksum (flag 0x02): a dump of protocol 1.3 checksums every frame"}},
		{"1.2 frame with a checksum", concat(hdr, empty, cempty), 1, ErrCorrupt, 24,
			[]string{"dump corrupt at byte 24: hello frame with a checksum (flag 0x02): a dump of protocol 1.2 has none"}},
		{"truncated checksum", concat(hdr13, cempty, batch[:10]), 1, io.ErrUnexpectedEOF, 28,
			[]string{"dump corrupt at byte 28: truncated frame checksum: want 4 bytes, file ends after 2"}},
		{"flipped payload byte", concat(hdr13, cempty, flip(batch, 12+50)), 1, ErrChecksum, 28,
			[]string{"dump corrupt at byte 28: batch frame checksum mismatch", "100 payload bytes (bytes 40-140)"}},
		{"flipped checksum byte", concat(hdr13, cempty, flip(batch, 9)), 1, ErrChecksum, 28,
			[]string{"dump corrupt at byte 28: batch frame checksum mismatch"}},
		{"type flipped to an unknown one", concat(hdr13, cempty, flip(batch, 0)), 1, ErrChecksum, 28,
			[]string{"dump corrupt at byte 28: unknown(18) frame checksum mismatch"}},
		{"flipped byte in an unknown frame", concat(hdr13, cempty, flip(cframe(99, make([]byte, 3*readBufferSize)), 2*readBufferSize)), 1, ErrChecksum, 28,
			[]string{"dump corrupt at byte 28: unknown(99) frame checksum mismatch"}},
		{"length shortened", concat(hdr13, cempty, shorten(batch, 90)), 1, ErrChecksum, 28,
			[]string{"dump corrupt at byte 28", "checksum mismatch", "90 payload bytes"}},
		{"length lengthened", concat(hdr13, cempty, flip(batch, 4)), 1, io.ErrUnexpectedEOF, 28,
			[]string{"dump corrupt at byte 28: truncated frame payload: want 116 bytes, file ends after 100"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "corrupt.tandem")
			if err := os.WriteFile(path, tt.data, 0o600); err != nil {
				t.Fatal(err)
			}
			frames, err := readDumpFile(path)
			if frames != tt.frames {
				t.Errorf("read %d frames before the error, want %d", frames, tt.frames)
			}
			if err == nil || err == io.EOF {
				t.Fatalf("err = %v, want an error", err)
			}
			if !errors.Is(err, tt.is) {
				t.Errorf("err = %v, want errors.Is %v", err, tt.is)
			}
			for _, s := range tt.text {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("err = %q, want it to contain %q", err, s)
				}
			}
			var fe *FrameError
			if tt.offset >= 0 {
				if !errors.As(err, &fe) {
					t.Fatalf("err = %v (%T), want a *FrameError", err, err)
				}
				if fe.Offset != tt.offset || !fe.Dump {
					t.Errorf("Offset = %d, Dump = %v; want %d, true", fe.Offset, fe.Dump, tt.offset)
				}
			}
			var ve *VersionError
			if errors.Is(tt.is, ErrVersionMismatch) && !errors.As(err, &ve) {
				t.Errorf("err = %v, want a *VersionError", err)
			}
		})
	}
}

// TestDumpFlippedBytes flips single bytes of a dump written by
// CreateDump, at a table of positions in every frame (header, checksum,
// first, middle and last payload byte) and in frames of every size class,
// and checks that each yields an error naming the offset of the frame the
// byte belongs to, before any frame at or after it is returned: the
// frames before it read back unchanged.
func TestDumpFlippedBytes(t *testing.T) {
	frames := []struct {
		t FrameType
		p []byte
	}{
		{FrameHello, seqPayload(0, 90)},
		{FrameBatch, seqPayload(1, 4000)},
		{FrameExecutable, seqPayload(0, 300)},
		{FrameBatch, seqPayload(2, 3*readBufferSize+5)}, // larger than the read buffer
		{FrameLoss, seqPayload(3, 40)},
		{FrameStats, seqPayload(0, 700)},
		{240, seqPayload(0, 50)}, // unknown to this build: skipped, but checked
		{FrameGoodbye, nil},
	}
	path := filepath.Join(t.TempDir(), "d.tandem")
	d, err := CreateDump(path)
	if err != nil {
		t.Fatal(err)
	}
	var starts []int64
	for _, f := range frames {
		starts = append(starts, d.Offset())
		if err := d.WriteFrame(f.t, f.p); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	clean, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, f := range frames {
		start := int(starts[i])
		positions := map[string]int{
			"type": start, "flags": start + 1, "reserved": start + 2,
			"length": start + 4, "length high byte": start + 7,
			"checksum": start + HeaderSize, "checksum last byte": start + FrameOverhead - 1,
		}
		if n := len(f.p); n > 0 {
			body := start + FrameOverhead
			positions["first payload byte"] = body
			positions["middle payload byte"] = body + n/2
			positions["last payload byte"] = body + n - 1
		}
		for where, pos := range positions {
			for _, mask := range []byte{0x01, 0x80, 0xff} {
				t.Run(fmt.Sprintf("frame %d (%s) %s ^0x%02x", i, f.t, where, mask), func(t *testing.T) {
					data := bytes.Clone(clean)
					data[pos] ^= mask
					r, err := NewDumpReader(bytes.NewReader(data))
					if err != nil {
						t.Fatal(err)
					}
					var got int
					for {
						fr, err := r.Next()
						if err == nil {
							for got < len(frames) && !frames[got].t.Known() {
								got++
							}
							if got >= i {
								t.Fatalf("frame %d (%s) returned despite the flipped byte at %d", got, fr.Type, pos)
							}
							if fr.Type != frames[got].t || !bytes.Equal(fr.Payload, frames[got].p) {
								t.Fatalf("frame %d read back wrong", got)
							}
							got++
							continue
						}
						var fe *FrameError
						if !errors.As(err, &fe) || !errors.Is(err, ErrCorrupt) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, ErrFrameTooLarge) {
							t.Fatalf("err = %v, want a *FrameError", err)
						}
						if fe.Offset != int64(start) || !strings.Contains(err.Error(), fmt.Sprintf("dump corrupt at byte %d: ", start)) {
							t.Fatalf("err = %v, want it to name byte %d", err, start)
						}
						return
					}
				})
			}
		}
	}
}

func TestDumpAcceptsNewerMinorAndSkipsUnknownFrames(t *testing.T) {
	data := concat(dumpHeader(schema.MajorVersion, schema.MinorVersion+3, 0),
		cframe(FrameHello, []byte("h")), cframe(250, []byte("from the future")), cframe(FrameBatch, []byte("b")))
	r, err := NewDumpReader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	n := 0
	for {
		_, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if skipped, _ := r.SkippedFrames(); n != 2 || skipped != 1 {
		t.Fatalf("read %d frames, skipped %d; want 2 and 1", n, skipped)
	}
	if r.Size() != int64(len(data)) {
		t.Fatalf("Size() = %d, want %d", r.Size(), len(data))
	}
}

// readDumpFile opens and reads a whole dump, returning how many frames it
// read and the error that ended it.
func readDumpFile(path string) (int, error) {
	r, err := OpenDump(path)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	n := 0
	for {
		if _, err := r.Next(); err != nil {
			return n, err
		}
		n++
	}
}

// FuzzDumpReader checks that no file makes the dump reader panic, and that
// every error is typed and names an offset inside the file.
func FuzzDumpReader(f *testing.F) {
	path := filepath.Join(f.TempDir(), "seed")
	d, err := CreateDump(path)
	if err != nil {
		f.Fatal(err)
	}
	d.WriteFrame(FrameHello, []byte("hello"))
	d.WriteFrame(FrameBatch, seqPayload(1, 40))
	d.WriteFrame(FrameGoodbye, nil)
	if err := d.Close(); err != nil {
		f.Fatal(err)
	}
	seed, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add(seed[:len(seed)-3])
	f.Add(concat(dumpHeader(schema.MajorVersion, 2, 0), frame(FrameHello, []byte("1.2")), frame(FrameBatch, seqPayload(1, 30))))
	f.Add(dumpHeader(schema.MajorVersion+1, 0, 0))
	f.Add([]byte("TANDEM"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := NewDumpReader(bytes.NewReader(data))
		if err != nil {
			var fe *FrameError
			var ve *VersionError
			switch {
			case errors.As(err, &fe):
				if fe.Offset < 0 || fe.Offset >= DumpHeaderSize || !fe.Dump {
					t.Fatalf("header error %v at offset %d", err, fe.Offset)
				}
			case errors.As(err, &ve):
			default:
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		defer r.Close()
		for {
			fr, err := r.Next()
			if err == io.EOF {
				if r.Offset() != int64(len(data)) {
					t.Fatalf("io.EOF at offset %d of %d", r.Offset(), len(data))
				}
				return
			}
			if err != nil {
				var fe *FrameError
				if !errors.As(err, &fe) || !fe.Dump || fe.Offset < DumpHeaderSize || fe.Offset > int64(len(data)) {
					t.Fatalf("err = %v", err)
				}
				if !strings.Contains(err.Error(), fmt.Sprintf("at byte %d", fe.Offset)) {
					t.Fatalf("err = %q does not name its offset", err)
				}
				return
			}
			if fr.File != nil || !fr.Type.Known() {
				t.Fatalf("frame %+v", fr)
			}
		}
	})
}

// TestDumpDictionaryCursor: a dump keeps its own dictionary cursor, so a
// dump created in the middle of a generation holds every chunk of it
// before the first batch that needs one; a new generation starts at its
// first chunk; a reference that goes back a generation is refused.
func TestDumpDictionaryCursor(t *testing.T) {
	g1, g2 := NewDictionaryLog(1), NewDictionaryLog(2)
	for i := range 3 {
		if _, err := g1.Append([]byte(fmt.Sprintf("g1.%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	// The session so far went to an earlier dump (or a socket); this one
	// starts now.
	path := filepath.Join(t.TempDir(), "late.tandem")
	d, err := CreateDump(path)
	if err != nil {
		t.Fatal(err)
	}
	write := func(tp FrameType, p string, ref DictionaryRef) {
		t.Helper()
		if err := d.WriteFrameWith(tp, []byte(p), ref); err != nil {
			t.Fatal(err)
		}
	}
	write(FrameHello, "hello", DictionaryRef{})
	write(FrameBatch, "batch 7", DictionaryRef{Log: g1, Chunks: 2})
	write(FrameLoss, "loss 8", DictionaryRef{})
	write(FrameBatch, "batch 9", DictionaryRef{Log: g1, Chunks: 3})
	if _, err := g2.Append([]byte("g2.0")); err != nil {
		t.Fatal(err)
	}
	write(FrameBatch, "batch 10", DictionaryRef{Log: g2, Chunks: 1})
	if err := d.WriteFrameWith(FrameBatch, []byte("batch 11"), DictionaryRef{Log: g1, Chunks: 3}); err == nil ||
		!strings.Contains(err.Error(), "needs dictionary generation 1 after generation 2") {
		t.Fatalf("a reference to an older generation: %v", err)
	}
	if err := d.WriteFrameWith(FrameBatch, []byte("batch 12"), DictionaryRef{Log: g2, Chunks: 2}); err == nil ||
		!strings.Contains(err.Error(), "whose log holds 1") {
		t.Fatalf("a reference beyond its log: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := OpenDump(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var got []string
	for {
		f, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, f.Type.String()+" "+string(f.Payload))
	}
	want := []string{"hello hello", "dictionary g1.0", "dictionary g1.1", "batch batch 7", "loss loss 8",
		"dictionary g1.2", "batch batch 9", "dictionary g2.0", "batch batch 10"}
	if !slices.Equal(got, want) {
		t.Fatalf("dump holds\n%q\nwant\n%q", got, want)
	}
}
