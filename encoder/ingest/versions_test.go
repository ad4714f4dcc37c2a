package ingest

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tandem-profiler/tandem/internal/synth"
	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/schema"
)

// contentSink keeps what every batch said, in order.
type contentSink struct {
	batches []string
	links   int // samples with a trace link
}

func (s *contentSink) Batch(_ *Session, b *schema.Batch) {
	var v int64
	frames := 0
	for _, smp := range b.Samples {
		v += smp.Value
		for _, fi := range b.Stack(smp.Stack) {
			f := b.Frames[fi]
			frames++
			v += int64(f.AddressOrLine) + int64(len(b.String(f.FunctionName)))
		}
	}
	for _, smp := range b.Samples {
		if smp.Link != 0 && b.Links[smp.Link-1].IsValid() {
			s.links++
		}
	}
	s.batches = append(s.batches, fmt.Sprintf("seq %d: %d samples, %d frames, sum %d", b.Sequence, len(b.Samples), frames, v))
}
func (s *contentSink) Loss(*Session, *schema.LossReport) {}
func (s *contentSink) Executable(_ *Session, _ *schema.ExecutableNotice, f *os.File) {
	closeFile(f)
}

// TestReadsDumpsOfEveryVersion replays one synthetic session from dumps of
// every protocol version that packed batches exist in, and checks that the
// Sink sees the same batches from all of them:
//
//   - 1.2: no checksums, header minor 2, written here byte by byte from
//     docs/ipc-format.md;
//   - 1.3: a CRC-32C on every frame, header minor 3, written the same way;
//   - this build's dump writer, with the batches in layout 1 (what a 1.3
//     sampler sends);
//   - this build's dump writer, as a 1.4 sampler records: dictionary
//     chunks, each before the first batch that needs it, and layout-2
//     batches;
//   - 1.4: the layout-1 stream under a header of minor 4;
//   - this build's dump writer, as a 1.5 sampler records when every
//     sample has a trace link: the same batches, and every link.
func TestReadsDumpsOfEveryVersion(t *testing.T) {
	cfg := synth.DefaultConfig()
	cfg.Samples, cfg.BatchSize = 3000, 500
	msgs, err := synth.Collect(cfg)
	if err != nil {
		t.Fatal(err)
	}
	type frame struct {
		t ipc.FrameType
		p []byte
	}
	var stream, stream14, stream15 []frame
	dicts, dicts15 := synth.NewDictionaries(1), synth.NewDictionaries(1)
	for _, m := range msgs {
		var f frame
		switch m.Kind {
		case synth.KindHello:
			f.t = ipc.FrameHello
			f.p, err = schema.EncodeHello(m.Hello, nil)
		case synth.KindBatch:
			f.t = ipc.FrameBatch
			f.p, err = schema.EncodeBatch(m.Batch, nil)
			if err != nil {
				break
			}
			chunk, p, err := dicts.Encode(m.Batch)
			if err != nil {
				t.Fatal(err)
			}
			if chunk != nil {
				stream14 = append(stream14, frame{ipc.FrameDictionary, chunk})
			}
			chunk15, p15, err := dicts15.Encode(synth.Linked(m.Batch, 4))
			if err != nil {
				t.Fatal(err)
			}
			if chunk15 != nil {
				stream15 = append(stream15, frame{ipc.FrameDictionary, chunk15})
			}
			stream = append(stream, f)
			stream14 = append(stream14, frame{ipc.FrameBatch, p})
			stream15 = append(stream15, frame{ipc.FrameBatch, p15})
			continue
		case synth.KindExecutable:
			f.t = ipc.FrameExecutable
			f.p, err = schema.EncodeExecutableNotice(m.Executable, nil)
		}
		if err != nil {
			t.Fatal(err)
		}
		stream = append(stream, f)
		stream14 = append(stream14, f)
		stream15 = append(stream15, f)
	}

	dir := t.TempDir()
	writeDump := func(name string, frames []frame) string {
		t.Helper()
		path := filepath.Join(dir, name)
		d, err := ipc.CreateDump(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range frames {
			if err := d.WriteFrame(f.t, f.p); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.Close(); err != nil {
			t.Fatal(err)
		}
		return path
	}
	// legacy writes a dump of minor version 2 or 3 as its samplers did.
	legacy := func(minor uint16) string {
		t.Helper()
		b := []byte("TANDEM\x00D")
		b = binary.LittleEndian.AppendUint16(b, 1)
		b = binary.LittleEndian.AppendUint16(b, minor)
		b = binary.LittleEndian.AppendUint32(b, 0)
		for _, f := range stream {
			var flags byte
			if minor >= 3 {
				flags = 0x02 // FlagChecksum
			}
			h := append([]byte{byte(f.t), flags, 0, 0}, binary.LittleEndian.AppendUint32(nil, uint32(len(f.p)))...)
			b = append(b, h...)
			if minor >= 3 {
				sum := crc32.Update(crc32.Checksum(h, crc32.MakeTable(crc32.Castagnoli)), crc32.MakeTable(crc32.Castagnoli), f.p)
				b = binary.LittleEndian.AppendUint32(b, sum)
			}
			b = append(b, f.p...)
		}
		path := filepath.Join(dir, fmt.Sprintf("1.%d.dump", minor))
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}

	read := func(path string) ([]string, int) {
		t.Helper()
		r, err := ipc.OpenDump(path)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		sink := &contentSink{}
		if err := newTracker(t, sink, nil, nil).Serve(context.Background(), r, nil); err != nil {
			t.Fatalf("%s: %v", filepath.Base(path), err)
		}
		return sink.batches, sink.links
	}
	want, _ := read(writeDump("layout1.dump", stream))
	if len(want) != cfg.Samples/cfg.BatchSize {
		t.Fatalf("layout-1 dump: %d batches, want %d", len(want), cfg.Samples/cfg.BatchSize)
	}
	for _, path := range []string{legacy(2), legacy(3), legacy(4), writeDump("layout2.dump", stream14), writeDump("linked.dump", stream15)} {
		got, links := read(path)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s read as\n%q\nlayout-1 dump of this build as\n%q", filepath.Base(path), got, want)
		}
		if wantLinks := map[bool]int{true: cfg.Samples}[strings.HasPrefix(filepath.Base(path), "linked")]; links != wantLinks {
			t.Errorf("%s: %d linked samples, want %d", filepath.Base(path), links, wantLinks)
		}
	}
}
