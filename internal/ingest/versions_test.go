package ingest

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/tandem-profiler/tandem/internal/synth"
	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/schema"
)

// contentSink keeps what every batch said, in order.
type contentSink struct{ batches []string }

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
	s.batches = append(s.batches, fmt.Sprintf("seq %d: %d samples, %d frames, sum %d", b.Sequence, len(b.Samples), frames, v))
}
func (s *contentSink) Loss(*Session, *schema.LossReport) {}
func (s *contentSink) Executable(_ *Session, _ *schema.ExecutableNotice, f *os.File) {
	closeFile(f)
}

// TestReadsDumpsOfEveryVersion replays one synthetic session from a dump
// written by this build (1.3: a CRC-32C on every frame) and from the same
// frames as a 1.2 sampler recorded them (no checksums, header minor 2,
// written here byte by byte from docs/ipc-format.md), and checks that the
// Sink sees the same batches from both.
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
	var stream []frame
	for _, m := range msgs {
		var f frame
		switch m.Kind {
		case synth.KindHello:
			f.t = ipc.FrameHello
			f.p, err = schema.EncodeHello(m.Hello, nil)
		case synth.KindBatch:
			f.t = ipc.FrameBatch
			f.p, err = schema.EncodeBatch(m.Batch, nil)
		case synth.KindExecutable:
			f.t = ipc.FrameExecutable
			f.p, err = schema.EncodeExecutableNotice(m.Executable, nil)
		}
		if err != nil {
			t.Fatal(err)
		}
		stream = append(stream, f)
	}

	dir := t.TempDir()
	current := filepath.Join(dir, "1.3.dump")
	d, err := ipc.CreateDump(current)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range stream {
		if err := d.WriteFrame(f.t, f.p); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}

	legacy := []byte("TANDEM\x00D")
	legacy = binary.LittleEndian.AppendUint16(legacy, 1)
	legacy = binary.LittleEndian.AppendUint16(legacy, 2)
	legacy = binary.LittleEndian.AppendUint32(legacy, 0)
	for _, f := range stream {
		legacy = append(legacy, byte(f.t), 0, 0, 0)
		legacy = binary.LittleEndian.AppendUint32(legacy, uint32(len(f.p)))
		legacy = append(legacy, f.p...)
	}
	old := filepath.Join(dir, "1.2.dump")
	if err := os.WriteFile(old, legacy, 0o600); err != nil {
		t.Fatal(err)
	}

	read := func(path string) []string {
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
		return sink.batches
	}
	got13, got12 := read(current), read(old)
	if len(got13) != cfg.Samples/cfg.BatchSize {
		t.Fatalf("1.3 dump: %d batches, want %d", len(got13), cfg.Samples/cfg.BatchSize)
	}
	if !reflect.DeepEqual(got13, got12) {
		t.Fatalf("1.2 dump read as\n%q\n1.3 dump as\n%q", got12, got13)
	}
}
