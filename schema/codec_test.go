package schema

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	capnp "capnproto.org/go/capnp/v3"

	"github.com/tandem-profiler/tandem/schema/internal/wire"
)

// sampleBatch builds a small batch with every table and field populated.
func sampleBatch(t testing.TB) *Batch {
	t.Helper()
	bb := NewBatchBuilder()
	vmlinux := bb.Mapping(Mapping{FileName: bb.String("vmlinux"), GNUBuildID: bb.String("aabbccdd"), FileID: FileID{Hi: 1, Lo: 2}})
	libc := bb.Mapping(Mapping{
		FileName: bb.String("libc.so.6"), Path: bb.String("/usr/lib/x86_64-linux-gnu/libc.so.6"),
		GNUBuildID: bb.String("0123456789abcdef0123456789abcdef01234567"),
		FileID:     FileID{Hi: 0xdead, Lo: 0xbeef}, Start: 0x28000, End: 0x1bd000, FileOffset: 0x28000,
	})
	k := bb.Frame(Frame{Kind: FrameKernel, AddressOrLine: 0x1234, Mapping: vmlinux, FunctionName: bb.String("do_syscall_64")})
	n := bb.Frame(Frame{Kind: FrameNative, AddressOrLine: 0x29d8f, Mapping: libc})
	py := bb.Frame(Frame{Kind: FrameCPython, FunctionName: bb.String("handle"), SourceFile: bb.String("app.py"), SourceLine: 42, FunctionOffset: 3})
	errFrame := bb.Frame(Frame{Kind: FrameUnknown, Error: true, AddressOrLine: 7})
	s1 := bb.Stack([]uint32{k, n, py})
	s2 := bb.Stack([]uint32{n, errFrame})
	if again := bb.Stack([]uint32{k, n, py}); again != s1 {
		t.Fatalf("stack not de-duplicated: %d != %d", again, s1)
	}
	p := bb.Process(Process{
		PID: 4242, Comm: bb.String("python3"), ExecutablePath: bb.String("/usr/bin/python3.11"),
		ContainerID: bb.String("c0ffee"), SystemdUnit: bb.String("app.service"), ServiceName: bb.String("checkout"),
		EnvVars: []KeyValue{{Key: bb.String("DEPLOY"), Value: bb.String("blue")}},
	})
	bb.AddSample(Sample{TimestampUnixNano: 1700000000000000000, Origin: OriginCPUSampling, Value: 1, Process: p, TID: 4243, CPU: 1, ThreadName: bb.String("worker"), Stack: s1,
		Labels: []KeyValue{{Key: bb.String("span"), Value: bb.String("x")}}})
	bb.AddSample(Sample{TimestampUnixNano: 1700000000000001000, Origin: OriginOffCPU, Value: 250000, Process: p, TID: 4242, CPU: 0, Stack: s2})
	b := bb.Batch()
	b.Sequence = 9
	return b
}

// batchEncoders are the layouts a decoder must read: the packed layout
// EncodeBatch writes (1.2) and the list layout of 1.0 and 1.1 samplers.
var batchEncoders = []struct {
	name   string
	encode func(testing.TB, *Batch) []byte
}{
	{"packed", func(t testing.TB, b *Batch) []byte {
		data, err := EncodeBatch(b, nil)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}},
	{"lists", encodeBatchLists},
}

func TestBatchRoundTrip(t *testing.T) {
	for _, enc := range batchEncoders {
		t.Run(enc.name, func(t *testing.T) {
			in := sampleBatch(t)
			data := enc.encode(t, in)
			var out Batch
			if err := DecodeBatch(data, &out); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*in, out) {
				t.Fatalf("round trip mismatch:\n in: %+v\nout: %+v", *in, out)
			}
			// Decoding again into the same value reuses it and gives the same result.
			if err := DecodeBatch(data, &out); err != nil || !reflect.DeepEqual(*in, out) {
				t.Fatalf("second decode into reused batch differs (err %v)", err)
			}
			if got := out.String(out.Frames[out.Stack(out.Samples[0].Stack)[2]].FunctionName); got != "handle" {
				t.Fatalf("leaf-to-root frame 2 function = %q, want handle", got)
			}
		})
	}
}

// TestDecodeBatchProtocol11 decodes a batch a 1.1 sampler wrote (the
// sampleBatch, encoded by EncodeBatch before the packed layout existed).
func TestDecodeBatchProtocol11(t *testing.T) {
	data, err := os.ReadFile("testdata/batch-1.1.capnp")
	if err != nil {
		t.Fatal(err)
	}
	var out Batch
	if err := DecodeBatch(data, &out); err != nil {
		t.Fatal(err)
	}
	if in := sampleBatch(t); !reflect.DeepEqual(*in, out) {
		t.Fatalf("1.1 batch decodes to\n%+v\nwant\n%+v", out, *in)
	}
}

// TestDecodeBatchReusedStrings checks that strings handed out by one
// decode are not changed by the next one into the same Batch.
func TestDecodeBatchReusedStrings(t *testing.T) {
	in := sampleBatch(t)
	data, err := EncodeBatch(in, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out Batch
	if err := DecodeBatch(data, &out); err != nil {
		t.Fatal(err)
	}
	kept := slices.Clone(out.Strings)
	other := sampleBatch(t)
	for i := 1; i < len(other.Strings); i++ {
		other.Strings[i] = strings.Repeat("z", len(other.Strings[i]))
	}
	data2, err := EncodeBatch(other, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := DecodeBatch(data2, &out); err != nil {
		t.Fatal(err)
	}
	clear(data)
	if !reflect.DeepEqual(kept, in.Strings) {
		t.Fatalf("strings of the first decode changed: %q, want %q", kept, in.Strings)
	}
}

func TestMessagesRoundTrip(t *testing.T) {
	hello := Hello{MajorVersion: MajorVersion, MinorVersion: MinorVersion, SamplerVersion: "v1", NodeName: "node-a",
		KernelRelease: "6.18.0", BootID: "b00t", SamplingFrequencyHz: 19, Tracers: []string{"python", "hotspot"},
		SessionID: [16]byte{1, 2, 3}, StartTimeUnixNano: 123, OffCPUThreshold: 42}
	data, err := EncodeHello(&hello, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeHello(data); err != nil || !reflect.DeepEqual(got, hello) {
		t.Fatalf("hello: got %+v, %v", got, err)
	}

	notice := ExecutableNotice{FileID: FileID{Hi: 5, Lo: 6}, FileName: "libc.so.6", Path: "/lib/libc.so.6", GNUBuildID: "ab",
		GoBuildID: "go", DebuglinkFileName: "libc.debug", PID: 7, HasDescriptor: true, IsVDSO: true}
	if data, err = EncodeExecutableNotice(&notice, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeExecutableNotice(data); err != nil || got != notice {
		t.Fatalf("notice: got %+v, %v", got, err)
	}

	loss := LossReport{Sequence: 3, Losses: []Loss{{Stage: LossSamplerQueue, Reason: "queue full", Samples: 10, Bytes: 2000}, {Stage: LossExecutableQueue, Descriptors: 2}}}
	if data, err = EncodeLossReport(&loss, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeLossReport(data); err != nil || !reflect.DeepEqual(got, loss) {
		t.Fatalf("loss: got %+v, %v", got, err)
	}

	bye := Goodbye{Reason: "SIGTERM", LastSequence: 77}
	if data, err = EncodeGoodbye(&bye, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeGoodbye(data); err != nil || got != bye {
		t.Fatalf("goodbye: got %+v, %v", got, err)
	}
}

// TestDecodeBatchRejectsBadIndices checks that every reference is validated,
// so consumers can index without checks.
func TestDecodeBatchRejectsBadIndices(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(b *Batch)
	}{
		{"string 0 not empty", func(b *Batch) { b.Strings[0] = "x" }},
		{"empty string table", func(b *Batch) { b.Strings = nil }},
		{"mapping file name", func(b *Batch) { b.Mappings[0].FileName = 999 }},
		{"frame mapping", func(b *Batch) { b.Frames[0].Mapping = 99 }},
		{"frame function", func(b *Batch) { b.Frames[0].FunctionName = 999 }},
		{"stack frame index", func(b *Batch) { b.StackFrames[0] = 99 }},
		{"stack ends decreasing", func(b *Batch) { b.StackEnds[1] = 0 }},
		{"stack ends past frames", func(b *Batch) { b.StackEnds[1] = 999 }},
		{"sample stack", func(b *Batch) { b.Samples[0].Stack = 9 }},
		{"sample process", func(b *Batch) { b.Samples[0].Process = 9 }},
		{"sample thread name", func(b *Batch) { b.Samples[0].ThreadName = 999 }},
		{"sample label", func(b *Batch) { b.Samples[0].Labels[0].Value = 999 }},
		{"process env", func(b *Batch) { b.Processes[0].EnvVars[0].Key = 999 }},
	}
	for _, enc := range batchEncoders {
		for _, tt := range tests {
			t.Run(enc.name+"/"+tt.name, func(t *testing.T) {
				b := sampleBatch(t)
				tt.mutate(b)
				data := enc.encode(t, b)
				var out Batch
				err := DecodeBatch(data, &out)
				if !errors.Is(err, ErrMalformed) {
					t.Fatalf("DecodeBatch error = %v, want ErrMalformed", err)
				}
			})
		}
	}
}

// encodePackedWith encodes b in the packed layout, then lets mutate
// overwrite fields of the message.
func encodePackedWith(t testing.TB, b *Batch, mutate func(w wire.Batch) error) []byte {
	t.Helper()
	return encodeMutated(t, func(seg *capnp.Segment) error { return encodeBatch(seg, b) }, wire.ReadRootBatch, mutate)
}

// encodeMutated encodes a message with encode, reads its root back with
// read, lets mutate overwrite fields, and returns the message's bytes.
func encodeMutated[W any](t testing.TB, encode func(*capnp.Segment) error, read func(*capnp.Message) (W, error), mutate func(W) error) []byte {
	t.Helper()
	msg, seg, err := newMessage()
	if err != nil {
		t.Fatal(err)
	}
	if err := encode(seg); err != nil {
		t.Fatal(err)
	}
	w, err := read(msg)
	if err != nil {
		t.Fatal(err)
	}
	if err := mutate(w); err != nil {
		t.Fatal(err)
	}
	data, err := finish(msg, nil)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func le32(vs ...uint32) []byte {
	var d []byte
	for _, v := range vs {
		d = binary.LittleEndian.AppendUint32(d, v)
	}
	return d
}

// TestDecodeBatchRejectsBadPacked feeds the packed decoder records that a
// correct encoder never writes; each must fail with an error naming the
// table and the entry.
func TestDecodeBatchRejectsBadPacked(t *testing.T) {
	withField := func(get func(wire.Batch) ([]byte, error), set func(wire.Batch, []byte) error, edit func([]byte) []byte) func(wire.Batch) error {
		return func(w wire.Batch) error {
			d, err := get(w)
			if err != nil {
				return err
			}
			return set(w, edit(slices.Clone(d)))
		}
	}
	tests := []struct {
		name   string
		mutate func(w wire.Batch) error
		want   string
	}{
		{"unknown layout", func(w wire.Batch) error { w.SetLayout(7); return nil }, "layout 7"},
		{"string ends ragged", withField(wire.Batch.StringEnds, wire.Batch.SetStringEnds, func(d []byte) []byte { return d[:len(d)-1] }),
			"batch string ends"},
		{"no strings", func(w wire.Batch) error { return w.SetStringEnds(nil) }, "string 0 must be the empty string"},
		{"string 0 not empty", withField(wire.Batch.StringEnds, wire.Batch.SetStringEnds, func(d []byte) []byte {
			binary.LittleEndian.PutUint32(d, 1)
			return d
		}), "string 0 must be the empty string"},
		{"string ends decreasing", withField(wire.Batch.StringEnds, wire.Batch.SetStringEnds, func(d []byte) []byte {
			binary.LittleEndian.PutUint32(d[8:], 0)
			return d
		}), "string 2 ends at 0"},
		{"string bytes left over", withField(wire.Batch.StringBytes, wire.Batch.SetStringBytes, func(d []byte) []byte { return append(d, 'x') }),
			"string bytes hold"},
		{"string bytes short", withField(wire.Batch.StringBytes, wire.Batch.SetStringBytes, func(d []byte) []byte { return d[:len(d)-1] }),
			"string bytes hold"},
		{"string too long", func(w wire.Batch) error {
			if err := w.SetStringBytes(make([]byte, maxTextBytes+1)); err != nil {
				return err
			}
			return w.SetStringEnds(le32(0, maxTextBytes+1))
		}, "string 1 has 65537 bytes"},
		{"frames ragged", withField(wire.Batch.PackedFrames, wire.Batch.SetPackedFrames, func(d []byte) []byte { return d[:len(d)-2] }),
			"whole number of 34-byte entries"},
		{"frame reserved flags", withField(wire.Batch.PackedFrames, wire.Batch.SetPackedFrames, func(d []byte) []byte {
			d[frameRecordSize+33] = 0x82
			return d
		}), "frame 1 has reserved flag bits 0x82"},
		{"frame mapping", withField(wire.Batch.PackedFrames, wire.Batch.SetPackedFrames, func(d []byte) []byte {
			binary.LittleEndian.PutUint32(d[frameRecordSize+8:], 3)
			return d
		}), "frame 1 references mapping 3 of 2"},
		{"frame source file", withField(wire.Batch.PackedFrames, wire.Batch.SetPackedFrames, func(d []byte) []byte {
			binary.LittleEndian.PutUint32(d[16:], 1000)
			return d
		}), "frame 0 references a string"},
		{"stack frames ragged", withField(wire.Batch.PackedStackFrames, wire.Batch.SetPackedStackFrames, func(d []byte) []byte { return d[:len(d)-3] }),
			"batch stack frames"},
		{"stack frame index", withField(wire.Batch.PackedStackFrames, wire.Batch.SetPackedStackFrames, func(d []byte) []byte {
			binary.LittleEndian.PutUint32(d[4:], 4)
			return d
		}), "entry 1 references frame 4 of 4"},
		{"stack ends past frames", withField(wire.Batch.PackedStackEnds, wire.Batch.SetPackedStackEnds, func(d []byte) []byte {
			binary.LittleEndian.PutUint32(d[4:], 6)
			return d
		}), "stack 1 ends at 6"},
		{"stack ends decreasing", withField(wire.Batch.PackedStackEnds, wire.Batch.SetPackedStackEnds, func(d []byte) []byte {
			binary.LittleEndian.PutUint32(d[4:], 2)
			return d
		}), "stack 1 ends at 2 (previous 3"},
		{"processes ragged", withField(wire.Batch.PackedProcesses, wire.Batch.SetPackedProcesses, func(d []byte) []byte { return append(d, 0) }),
			"batch processes"},
		{"process string", withField(wire.Batch.PackedProcesses, wire.Batch.SetPackedProcesses, func(d []byte) []byte {
			binary.LittleEndian.PutUint32(d[20:], 1000)
			return d
		}), "process 0 references a string"},
		{"env owner out of range", func(w wire.Batch) error { return w.SetPackedEnvVars(le32(1, 0, 0)) }, "pair 0 belongs to 1"},
		{"env string", func(w wire.Batch) error { return w.SetPackedEnvVars(le32(0, 1000, 0)) }, "pair 0 references a string"},
		{"env ragged", func(w wire.Batch) error { return w.SetPackedEnvVars(make([]byte, 13)) }, "whole number of 12-byte entries"},
		{"samples ragged", withField(wire.Batch.PackedSamples, wire.Batch.SetPackedSamples, func(d []byte) []byte { return d[:len(d)-1] }),
			"whole number of 38-byte entries"},
		{"sample stack", withField(wire.Batch.PackedSamples, wire.Batch.SetPackedSamples, func(d []byte) []byte {
			binary.LittleEndian.PutUint32(d[sampleRecordSize+32:], 2)
			return d
		}), "sample 1 references process 0 of 1, stack 2 of 2"},
		{"sample process", withField(wire.Batch.PackedSamples, wire.Batch.SetPackedSamples, func(d []byte) []byte {
			binary.LittleEndian.PutUint32(d[16:], 1)
			return d
		}), "sample 0 references process 1 of 1"},
		{"label owners decreasing", func(w wire.Batch) error { return w.SetPackedLabels(le32(1, 0, 0, 0, 0, 0)) }, "pair 1 belongs to 0 (previous pair to 1"},
		{"label owner out of range", func(w wire.Batch) error { return w.SetPackedLabels(le32(2, 0, 0)) }, "pair 0 belongs to 2"},
		{"label string", func(w wire.Batch) error { return w.SetPackedLabels(le32(0, 0, 1000)) }, "pair 0 references a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := encodePackedWith(t, sampleBatch(t), tt.mutate)
			var out Batch
			err := DecodeBatch(data, &out)
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("DecodeBatch error = %v, want ErrMalformed mentioning %q", err, tt.want)
			}
		})
	}
}

func TestDecodeGarbage(t *testing.T) {
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"short header", []byte{0, 0}},
		{"segment count huge", []byte{0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0}},
		{"segment larger than data", []byte{0, 0, 0, 0, 0xff, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b Batch
			if err := DecodeBatch(tt.data, &b); !errors.Is(err, ErrMalformed) {
				t.Fatalf("DecodeBatch = %v, want ErrMalformed", err)
			}
			if _, err := DecodeHello(tt.data); !errors.Is(err, ErrMalformed) {
				t.Fatalf("DecodeHello = %v, want ErrMalformed", err)
			}
		})
	}
}

func FuzzDecodeBatch(f *testing.F) {
	for _, enc := range batchEncoders {
		f.Add(enc.encode(f, sampleBatch(f)))
	}
	if old, err := os.ReadFile("testdata/batch-1.1.capnp"); err == nil {
		f.Add(old)
	}
	l2 := sampleBatch(f)
	l2.Generation = 1
	f.Add(encodeLayout2(f, l2)) // needs a dictionary: always refused
	f.Add(batchEncoders[0].encode(f, linkedBatch(f)))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var b Batch
		if err := DecodeBatch(data, &b); err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		walkBatch(&b)
		// A batch that decodes re-encodes (packed) to the same batch.
		again, err := EncodeBatch(&b, nil)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		var b2 Batch
		if err := DecodeBatch(again, &b2); err != nil {
			t.Fatalf("decode re-encoded batch: %v", err)
		}
		if normalizeBatch(&b); !reflect.DeepEqual(b, b2) {
			t.Fatalf("re-encoded batch decodes to\n%+v\nwant\n%+v", b2, b)
		}
	})
}

// walkBatch follows every reference of a decoded batch, as consumers do
// without checks: it panics if decoding let a bad index through.
func walkBatch(b *Batch) {
	for _, s := range b.Samples {
		for _, fi := range b.Stack(s.Stack) {
			fr := b.Frames[fi]
			_, _ = b.Strings[fr.FunctionName], b.Strings[fr.SourceFile]
			if fr.Mapping > 0 {
				m := b.Mappings[fr.Mapping-1]
				_, _ = b.Strings[m.FileName], b.Strings[m.GoBuildID]
			}
		}
		p := b.Processes[s.Process]
		_, _ = b.Strings[p.Comm], b.Strings[s.ThreadName]
		if s.Link > 0 {
			_ = b.Links[s.Link-1]
		}
		for _, kv := range append(s.Labels, p.EnvVars...) {
			_, _ = b.Strings[kv.Key], b.Strings[kv.Value]
		}
	}
}

// normalizeBatch turns empty label and env lists into nil, as the packed
// layout (which cannot tell them apart) decodes them.
func normalizeBatch(b *Batch) {
	for i := range b.Samples {
		if len(b.Samples[i].Labels) == 0 {
			b.Samples[i].Labels = nil
		}
	}
	for i := range b.Processes {
		if len(b.Processes[i].EnvVars) == 0 {
			b.Processes[i].EnvVars = nil
		}
	}
}

// packedFields lists the Data fields of the packed layout with their
// accessors, in FuzzDecodeBatchPacked's argument order.
var packedFields = []dataField[wire.Batch]{
	{wire.Batch.StringBytes, wire.Batch.SetStringBytes},
	{wire.Batch.StringEnds, wire.Batch.SetStringEnds},
	{wire.Batch.PackedFrames, wire.Batch.SetPackedFrames},
	{wire.Batch.PackedStackFrames, wire.Batch.SetPackedStackFrames},
	{wire.Batch.PackedStackEnds, wire.Batch.SetPackedStackEnds},
	{wire.Batch.PackedProcesses, wire.Batch.SetPackedProcesses},
	{wire.Batch.PackedEnvVars, wire.Batch.SetPackedEnvVars},
	{wire.Batch.PackedSamples, wire.Batch.SetPackedSamples},
	{wire.Batch.PackedLabels, wire.Batch.SetPackedLabels},
	{wire.Batch.PackedLinks, wire.Batch.SetPackedLinks},
}

// FuzzDecodeBatchPacked mutates the packed tables directly (a byte-level
// fuzzer of the whole message rarely keeps them consistent enough to get
// past the string table). A batch that decodes must re-encode to the same
// bytes in every field.
func FuzzDecodeBatchPacked(f *testing.F) {
	seed := func(b *Batch) {
		data, err := EncodeBatch(b, nil)
		if err != nil {
			f.Fatal(err)
		}
		args := readFields(f, data, wire.ReadRootBatch, packedFields)
		f.Add(args[0], args[1], args[2], args[3], args[4], args[5], args[6], args[7], args[8], args[9])
	}
	seed(sampleBatch(f))
	seed(linkedBatch(f))
	empty := NewBatchBuilder()
	seed(empty.Batch())
	f.Fuzz(func(t *testing.T, strBytes, strEnds, frames, stackFrames, stackEnds, procs, env, samples, labels, links []byte) {
		args := [][]byte{strBytes, strEnds, frames, stackFrames, stackEnds, procs, env, samples, labels, links}
		sb := sampleBatch(t)
		data := encodePackedWith(t, sb, func(w wire.Batch) error { return setFields(w, packedFields, args) })
		var b Batch
		if err := DecodeBatch(data, &b); err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		walkBatch(&b)
		again, err := EncodeBatch(&b, nil)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		checkFields(t, again, wire.ReadRootBatch, packedFields, args)
	})
}

// dataField is a Data field of the wire struct W with its accessors: the
// packed tables the fuzzers mutate directly.
type dataField[W any] struct {
	get func(W) ([]byte, error)
	set func(W, []byte) error
}

// readFields reads the root struct of the encoded message data and returns
// a copy of each of its fields.
func readFields[W any](t testing.TB, data []byte, read func(*capnp.Message) (W, error), fields []dataField[W]) [][]byte {
	t.Helper()
	msg, err := openMessage(data)
	if err != nil {
		t.Fatal(err)
	}
	w, err := read(msg)
	if err != nil {
		t.Fatal(err)
	}
	out := make([][]byte, len(fields))
	for i, fd := range fields {
		d, err := fd.get(w)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = slices.Clone(d)
	}
	return out
}

// setFields sets each of fields of w to the matching entry of args.
func setFields[W any](w W, fields []dataField[W], args [][]byte) error {
	for i, fd := range fields {
		if err := fd.set(w, args[i]); err != nil {
			return err
		}
	}
	return nil
}

// checkFields fails t unless the fields of the encoded message data are
// args.
func checkFields[W any](t testing.TB, data []byte, read func(*capnp.Message) (W, error), fields []dataField[W], args [][]byte) {
	t.Helper()
	for i, got := range readFields(t, data, read, fields) {
		if !bytes.Equal(got, args[i]) {
			t.Fatalf("field %d re-encodes to %x, was %x", i, got, args[i])
		}
	}
}

// fuzzRoundTrip is what every message fuzzer asserts about its input:
// either decode refuses it with ErrMalformed, or the decoded value encodes
// to bytes that decode to the same value.
func fuzzRoundTrip[T any](t *testing.T, data []byte, decode func([]byte) (T, error), encode func(*T, []byte) ([]byte, error), equal func(a, b T) bool) {
	t.Helper()
	v, err := decode(data)
	if err != nil {
		if !errors.Is(err, ErrMalformed) {
			t.Fatalf("error %v does not wrap ErrMalformed", err)
		}
		return
	}
	again, err := encode(&v, nil)
	if err != nil {
		t.Fatalf("re-encode %+v: %v", v, err)
	}
	v2, err := decode(again)
	if err != nil {
		t.Fatalf("decode re-encoded %+v: %v", v, err)
	}
	if !equal(v, v2) {
		t.Fatalf("re-encoded message decodes to\n%+v\nwant\n%+v", v2, v)
	}
}

func deepEqual[T any](a, b T) bool { return reflect.DeepEqual(a, b) }

func FuzzDecodeHello(f *testing.F) {
	data, _ := EncodeHello(&Hello{MajorVersion: 1, NodeName: "n", Tracers: []string{"python"}}, nil)
	f.Add(data)
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRoundTrip(t, data, DecodeHello, EncodeHello, deepEqual) })
}

func FuzzDecodeExecutableNotice(f *testing.F) {
	data, _ := EncodeExecutableNotice(&ExecutableNotice{FileName: "a", HasDescriptor: true}, nil)
	f.Add(data)
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzRoundTrip(t, data, DecodeExecutableNotice, EncodeExecutableNotice, deepEqual)
	})
}

func FuzzDecodeLossReport(f *testing.F) {
	data, _ := EncodeLossReport(&LossReport{Sequence: 1, Losses: []Loss{{Stage: LossSamplerQueue, Samples: 3}}}, nil)
	f.Add(data)
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRoundTrip(t, data, DecodeLossReport, EncodeLossReport, deepEqual) })
}

func FuzzDecodeGoodbye(f *testing.F) {
	data, _ := EncodeGoodbye(&Goodbye{Reason: "bye", LastSequence: 2}, nil)
	f.Add(data)
	f.Fuzz(func(t *testing.T, data []byte) { fuzzRoundTrip(t, data, DecodeGoodbye, EncodeGoodbye, deepEqual) })
}
