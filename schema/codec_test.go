package schema

import (
	"errors"
	"reflect"
	"testing"
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

func TestBatchRoundTrip(t *testing.T) {
	in := sampleBatch(t)
	data, err := EncodeBatch(in, nil)
	if err != nil {
		t.Fatal(err)
	}
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
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := sampleBatch(t)
			tt.mutate(b)
			data, err := EncodeBatch(b, nil)
			if err != nil {
				t.Fatal(err)
			}
			var out Batch
			err = DecodeBatch(data, &out)
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("DecodeBatch error = %v, want ErrMalformed", err)
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
	data, err := EncodeBatch(sampleBatch(f), nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var b Batch
		if err := DecodeBatch(data, &b); err != nil {
			return
		}
		// A batch that decodes must be safe to walk and re-encode identically.
		for _, s := range b.Samples {
			for _, fi := range b.Stack(s.Stack) {
				fr := b.Frames[fi]
				_ = b.Strings[fr.FunctionName]
				if fr.Mapping > 0 {
					_ = b.Mappings[fr.Mapping-1]
				}
			}
			_ = b.Processes[s.Process]
		}
		again, err := EncodeBatch(&b, nil)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		var b2 Batch
		if err := DecodeBatch(again, &b2); err != nil {
			t.Fatalf("decode re-encoded batch: %v", err)
		}
	})
}

func FuzzDecodeHello(f *testing.F) {
	data, _ := EncodeHello(&Hello{MajorVersion: 1, NodeName: "n", Tracers: []string{"python"}}, nil)
	f.Add(data)
	f.Fuzz(func(t *testing.T, data []byte) { _, _ = DecodeHello(data) })
}

func FuzzDecodeExecutableNotice(f *testing.F) {
	data, _ := EncodeExecutableNotice(&ExecutableNotice{FileName: "a", HasDescriptor: true}, nil)
	f.Add(data)
	f.Fuzz(func(t *testing.T, data []byte) { _, _ = DecodeExecutableNotice(data) })
}

func FuzzDecodeLossReport(f *testing.F) {
	data, _ := EncodeLossReport(&LossReport{Sequence: 1, Losses: []Loss{{Stage: LossSamplerQueue, Samples: 3}}}, nil)
	f.Add(data)
	f.Fuzz(func(t *testing.T, data []byte) { _, _ = DecodeLossReport(data) })
}

func FuzzDecodeGoodbye(f *testing.F) {
	data, _ := EncodeGoodbye(&Goodbye{Reason: "bye", LastSequence: 2}, nil)
	f.Add(data)
	f.Fuzz(func(t *testing.T, data []byte) { _, _ = DecodeGoodbye(data) })
}
