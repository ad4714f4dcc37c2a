package synth

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tandem-profiler/tandem/schema"
)

// collect generates a stream or fails the test.
func collect(t testing.TB, cfg Config) []Message {
	t.Helper()
	msgs, err := Collect(cfg)
	if err != nil {
		t.Fatalf("Collect: %v", err)
	}
	return msgs
}

var (
	defaultOnce sync.Once
	defaultMsgs []Message
	defaultErr  error
)

// defaultStream returns the messages of DefaultConfig's stream, generated
// once for the tests that read it (they must not change it).
func defaultStream(t testing.TB) []Message {
	t.Helper()
	defaultOnce.Do(func() { defaultMsgs, defaultErr = Collect(DefaultConfig()) })
	if defaultErr != nil {
		t.Fatalf("Collect: %v", defaultErr)
	}
	return defaultMsgs
}

// encodeStream encodes every message of a stream, concatenated with an
// 8-byte frame header each, as on the socket and in a dump.
func encodeStream(t testing.TB, msgs []Message) []byte {
	t.Helper()
	var out, buf []byte
	var err error
	for _, m := range msgs {
		buf = buf[:0]
		switch m.Kind {
		case KindHello:
			buf, err = schema.EncodeHello(m.Hello, buf)
		case KindBatch:
			buf, err = schema.EncodeBatch(m.Batch, buf)
		case KindExecutable:
			buf, err = schema.EncodeExecutableNotice(m.Executable, buf)
		}
		if err != nil {
			t.Fatalf("encode %v: %v", m.Kind, err)
		}
		n := len(buf)
		out = append(out, byte(m.Kind), 0, 0, 0, byte(n), byte(n>>8), byte(n>>16), byte(n>>24))
		out = append(out, buf...)
	}
	return out
}

func TestDeterminism(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Samples = 5000
	a := collect(t, cfg)
	b := collect(t, cfg)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two runs with the same config differ")
	}
	if !bytes.Equal(encodeStream(t, a), encodeStream(t, b)) {
		t.Fatal("two runs with the same config encode differently")
	}
	cfg.Seed++
	c := collect(t, cfg)
	if bytes.Equal(encodeStream(t, a), encodeStream(t, c)) {
		t.Fatal("different seeds produce the same stream")
	}
}

func TestShape(t *testing.T) {
	seeds := []int64{1, 2, 3}
	if testing.Short() {
		seeds = seeds[:1]
	}
	for _, seed := range seeds {
		cfg := DefaultConfig()
		cfg.Seed = seed
		var m ShapeMeter
		if seed == DefaultConfig().Seed {
			for _, msg := range defaultStream(t) {
				if msg.Kind == KindBatch {
					m.Add(msg.Batch)
				}
			}
		} else if err := Generate(cfg, func(msg Message) error {
			if msg.Kind == KindBatch {
				m.Add(msg.Batch)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		s := m.Shape()
		t.Logf("seed %d: %v", seed, s)
		near := func(what string, got, want, tol float64) {
			t.Helper()
			if math.Abs(got-want) > tol*want {
				t.Errorf("seed %d: %s = %.3f, want %.3f +- %.0f%%", seed, what, got, want, 100*tol)
			}
		}
		exact := func(what string, got, want int) {
			t.Helper()
			if got != want {
				t.Errorf("seed %d: %s = %d, want %d", seed, what, got, want)
			}
		}
		exact("samples", s.Samples, 20000)
		exact("batches", s.Batches, 40)
		near("frames/sample", s.FramesPerSample(), 32.9, 0.05)
		near("kernel frames/sample", s.KindPerSample(schema.FrameKernel), 7.3, 0.10)
		near("native frames/sample", s.KindPerSample(schema.FrameNative), 14.9, 0.08)
		near("python frames/sample", s.KindPerSample(schema.FrameCPython), 3.3, 0.10)
		near("go frames/sample", s.KindPerSample(schema.FrameGo), 7.4, 0.10)
		exact("pids", s.PIDs, 231)
		exact("tids", s.TIDs, 659)
		exact("containers", s.Containers, 88)
		exact("user mappings", s.UserMappings, 83)
		exact("go mappings", s.GoMappings, 10)
		exact("kernel mappings", s.KernelMappings, 9)
		exact("distinct stacks", s.DistinctStacks, 2404)
		near("top stack share", s.TopStackShare, 0.108, 0.03)
		near("top ten share", s.Top10Share, 0.33, 0.03)
		near("off-CPU share", float64(s.OffCPUSamples)/float64(s.Samples), DefaultOffCPUFraction, 0.05)
		near("probe share", float64(s.ProbeSamples)/float64(s.Samples), DefaultProbeFraction, 0.25)
	}
}

var (
	hex40     = regexp.MustCompile(`^[0-9a-f]{40}$`)
	hex64     = regexp.MustCompile(`^[0-9a-f]{64}$`)
	goBuildRE = regexp.MustCompile(`^[A-Za-z0-9_-]{20}(/[A-Za-z0-9_-]{20}){3}$`)
)

// TestValid checks every index and the plausibility of every value.
func TestValid(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Seed = 7
	msgs := collect(t, cfg)
	if len(msgs) == 0 || msgs[0].Kind != KindHello {
		t.Fatal("stream does not start with a Hello")
	}
	h := msgs[0].Hello
	if h.MajorVersion != schema.MajorVersion || h.NodeName != DefaultNodeName || h.StartTimeUnixNano != DefaultStart.UnixNano() || h.OffCPUThreshold == 0 {
		t.Errorf("hello: %+v", *h)
	}
	start := DefaultStart.UnixNano()
	end := start + int64(DefaultDuration)
	announced := map[schema.FileID]bool{}
	seq := uint64(0)
	lastTS := int64(0)
	for _, m := range msgs[1:] {
		switch m.Kind {
		case KindHello:
			t.Fatal("second Hello")
		case KindExecutable:
			n := m.Executable
			if announced[n.FileID] {
				t.Errorf("executable %s announced twice", n.FileName)
			}
			announced[n.FileID] = true
			if n.FileName == "" || n.Path == "" || n.PID == 0 || n.HasDescriptor || n.FileID.IsZero() {
				t.Errorf("notice: %+v", *n)
			}
			if n.GNUBuildID == "" && n.GoBuildID == "" {
				t.Errorf("notice %s without build id", n.FileName)
			}
		case KindBatch:
			b := m.Batch
			seq++
			if b.Sequence != seq {
				t.Fatalf("batch sequence %d, want %d", b.Sequence, seq)
			}
			checkBatch(t, b, cfg, announced)
			for _, s := range b.Samples {
				if s.TimestampUnixNano < lastTS || s.TimestampUnixNano < start || s.TimestampUnixNano >= end {
					t.Fatalf("timestamp %d out of order or range", s.TimestampUnixNano)
				}
				lastTS = s.TimestampUnixNano
			}
		}
	}
	if seq != 40 {
		t.Errorf("%d batches, want 40", seq)
	}
	if len(announced) != 83 {
		t.Errorf("%d executables announced, want 83", len(announced))
	}
}

func checkBatch(t *testing.T, b *schema.Batch, cfg Config, announced map[schema.FileID]bool) {
	t.Helper()
	ns := uint32(len(b.Strings))
	if ns == 0 || b.Strings[0] != "" {
		t.Fatal("string 0 is not empty")
	}
	str := func(i uint32) string {
		if i >= ns {
			t.Fatalf("string index %d of %d", i, ns)
		}
		return b.Strings[i]
	}
	for i, m := range b.Mappings {
		name, gnu, goID := str(m.FileName), str(m.GNUBuildID), str(m.GoBuildID)
		str(m.Path)
		if name == "" || m.End <= m.Start || m.Start&0xfff != 0 || m.FileID.IsZero() {
			t.Errorf("mapping %d: %+v", i, m)
		}
		if gnu != "" && !hex40.MatchString(gnu) || goID != "" && !goBuildRE.MatchString(goID) || gnu == "" && goID == "" {
			t.Errorf("mapping %s: build ids %q %q", name, gnu, goID)
		}
	}
	for i, f := range b.Frames {
		fn, file := str(f.FunctionName), str(f.SourceFile)
		if f.Mapping > uint32(len(b.Mappings)) {
			t.Fatalf("frame %d: mapping %d of %d", i, f.Mapping, len(b.Mappings))
		}
		var m *schema.Mapping
		if f.Mapping > 0 {
			m = &b.Mappings[f.Mapping-1]
		}
		switch f.Kind {
		case schema.FrameKernel:
			if m == nil || fn == "" || file != "" || f.AddressOrLine < m.Start || f.AddressOrLine >= m.End || uint64(f.FunctionOffset) > f.AddressOrLine-m.Start {
				t.Errorf("kernel frame %d: %+v %q", i, f, fn)
			}
		case schema.FrameNative:
			if m == nil || fn != "" {
				t.Fatalf("native frame %d: %+v", i, f)
			}
			lo, hi := m.FileOffset, m.FileOffset+m.End-m.Start // file VA of a shared object
			if str(m.GoBuildID) != "" {
				lo, hi = m.Start, m.End // non-PIE Go binary
			}
			if f.AddressOrLine < lo || f.AddressOrLine >= hi {
				t.Errorf("native frame %d: address %#x outside %s [%#x, %#x)", i, f.AddressOrLine, str(m.FileName), lo, hi)
			}
			if !announced[m.FileID] {
				t.Errorf("frame in %s before its ExecutableNotice", str(m.FileName))
			}
		case schema.FrameGo:
			if m == nil || str(m.GoBuildID) == "" || fn == "" || !strings.HasSuffix(file, ".go") && !strings.HasSuffix(file, ".s") || f.SourceLine == 0 ||
				f.AddressOrLine < m.Start || f.AddressOrLine >= m.End {
				t.Errorf("go frame %d: %+v %q %q", i, f, fn, file)
			}
		case schema.FrameCPython:
			if m != nil || fn == "" || file == "" || f.SourceLine == 0 {
				t.Errorf("python frame %d: %+v %q %q", i, f, fn, file)
			}
		default:
			t.Errorf("frame %d: unexpected kind %v", i, f.Kind)
		}
	}
	prev := uint32(0)
	for i, e := range b.StackEnds {
		if e < prev || e > uint32(len(b.StackFrames)) || e == prev {
			t.Fatalf("stack %d ends at %d (previous %d, %d frames)", i, e, prev, len(b.StackFrames))
		}
		stack := b.StackFrames[prev:e]
		sawUser := false
		for _, fi := range stack {
			if fi >= uint32(len(b.Frames)) {
				t.Fatalf("stack %d: frame %d of %d", i, fi, len(b.Frames))
			}
			if k := b.Frames[fi].Kind; k != schema.FrameKernel {
				sawUser = true
			} else if sawUser {
				t.Errorf("stack %d: kernel frame below a user frame", i)
			}
		}
		prev = e
	}
	for i, p := range b.Processes {
		comm, cid := str(p.Comm), str(p.ContainerID)
		str(p.ExecutablePath)
		str(p.SystemdUnit)
		str(p.ServiceName)
		if p.PID == 0 || comm == "" || len(comm) > 15 || cid != "" && !hex64.MatchString(cid) {
			t.Errorf("process %d: %+v %q %q", i, p, comm, cid)
		}
		for _, kv := range p.EnvVars {
			if str(kv.Key) == "" {
				t.Errorf("process %d: empty env var name", i)
			}
			str(kv.Value)
		}
	}
	for i, s := range b.Samples {
		if s.Process >= uint32(len(b.Processes)) || s.Stack >= uint32(b.NumStacks()) || int(s.CPU) >= cfg.CPUs || s.TID == 0 || str(s.ThreadName) == "" {
			t.Fatalf("sample %d: %+v", i, s)
		}
		stack := b.Stack(s.Stack)
		leaf := b.Frames[stack[0]]
		switch s.Origin {
		case schema.OriginCPUSampling, schema.OriginProbe:
			if s.Value != 1 {
				t.Errorf("sample %d: %v value %d", i, s.Origin, s.Value)
			}
		case schema.OriginOffCPU:
			if s.Value <= 0 || leaf.Kind != schema.FrameKernel || str(leaf.FunctionName) != "finish_task_switch.isra.0" {
				t.Errorf("off-CPU sample %d: value %d, leaf %q", i, s.Value, str(leaf.FunctionName))
			}
		case UnknownOrigin:
			if cfg.UnknownOriginFraction == 0 || s.Value < 1 || s.Value > 5 {
				t.Errorf("sample %d: unknown origin, value %d, fraction %v", i, s.Value, cfg.UnknownOriginFraction)
			}
		default:
			t.Errorf("sample %d: origin %v", i, s.Origin)
		}
		if s.Origin == schema.OriginProbe && leaf.Kind == schema.FrameKernel {
			t.Errorf("probe sample %d has kernel frames", i)
		}
		for _, kv := range s.Labels {
			if str(kv.Key) == "" || str(kv.Value) == "" {
				t.Errorf("sample %d: empty label", i)
			}
		}
	}
}

// normalize makes nil and empty slices compare equal.
func normalize(b *schema.Batch) *schema.Batch {
	c := CloneBatch(b)
	for i := range c.Processes {
		if len(c.Processes[i].EnvVars) == 0 {
			c.Processes[i].EnvVars = nil
		}
	}
	for i := range c.Samples {
		if len(c.Samples[i].Labels) == 0 {
			c.Samples[i].Labels = nil
		}
	}
	return c
}

func TestRoundTrip(t *testing.T) {
	msgs := defaultStream(t)
	var dec schema.Batch
	var buf []byte
	samples, bytesTotal := 0, 0
	for _, m := range msgs {
		var err error
		buf = buf[:0]
		switch m.Kind {
		case KindHello:
			buf, err = schema.EncodeHello(m.Hello, buf)
			if err != nil {
				t.Fatal(err)
			}
			h, err := schema.DecodeHello(buf)
			if err != nil || !reflect.DeepEqual(h, *m.Hello) {
				t.Fatalf("hello round trip: %v\n%+v\n%+v", err, h, *m.Hello)
			}
		case KindExecutable:
			buf, err = schema.EncodeExecutableNotice(m.Executable, buf)
			if err != nil {
				t.Fatal(err)
			}
			n, err := schema.DecodeExecutableNotice(buf)
			if err != nil || n != *m.Executable {
				t.Fatalf("notice round trip: %v\n%+v\n%+v", err, n, *m.Executable)
			}
		case KindBatch:
			buf, err = schema.EncodeBatch(m.Batch, buf)
			if err != nil {
				t.Fatal(err)
			}
			if err := schema.DecodeBatch(buf, &dec); err != nil {
				t.Fatalf("batch %d: %v", m.Batch.Sequence, err)
			}
			if !reflect.DeepEqual(normalize(&dec), normalize(m.Batch)) {
				t.Fatalf("batch %d does not round-trip", m.Batch.Sequence)
			}
			samples += len(m.Batch.Samples)
		}
		bytesTotal += 8 + len(buf) // frame header + payload
	}
	t.Logf("encoded stream: %d bytes for %d samples, %.1f bytes/sample", bytesTotal, samples, float64(bytesTotal)/float64(samples))
}

func TestEmitError(t *testing.T) {
	stop := errors.New("stop")
	batches := 0
	err := Generate(DefaultConfig(), func(m Message) error {
		if m.Kind == KindBatch {
			batches++
			if batches == 3 {
				return stop
			}
		}
		return nil
	})
	if !errors.Is(err, stop) || batches != 3 {
		t.Fatalf("err %v after %d batches, want %v after 3", err, batches, stop)
	}
}

func TestValidate(t *testing.T) {
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("zero config: %v", err)
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Errorf("default config: %v", err)
	}
	bad := []func(*Config){
		func(c *Config) { c.Samples = -1 },
		func(c *Config) { c.BatchSize = -5 },
		func(c *Config) { c.Duration = -time.Second },
		func(c *Config) { c.CPUs = -1 },
		func(c *Config) { c.Stacks = -1 },
		func(c *Config) { c.OffCPUFraction = 1 },
		func(c *Config) { c.OffCPUFraction = math.NaN() },
		func(c *Config) { c.ProbeFraction = -0.1 },
		func(c *Config) { c.UnknownOriginFraction = 1 },
		func(c *Config) { c.UnknownOriginFraction = math.NaN() },
		func(c *Config) { c.LabelFraction = 1.5 },
		func(c *Config) { c.OffCPUFraction, c.ProbeFraction = 0.6, 0.5 },
		func(c *Config) { c.Start = time.Unix(-5, 0) },
	}
	for i, mut := range bad {
		c := DefaultConfig()
		mut(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("case %d: %+v validated", i, c)
		}
		if err := Generate(c, func(Message) error { return nil }); err == nil {
			t.Errorf("case %d: Generate accepted %+v", i, c)
		}
	}
}

// TestSmallAndOdd exercises configurations far from the default.
func TestSmallAndOdd(t *testing.T) {
	cases := []Config{
		{Samples: 1, Seed: 3},
		{Samples: 7, BatchSize: 1, Stacks: 1, CPUs: 1},
		{Samples: 333, BatchSize: 100, Stacks: 50, Duration: time.Millisecond},
		{Samples: 3000, Stacks: 10000, OffCPUFraction: 0, ProbeFraction: 0},
		{Samples: 2000, OffCPUFraction: 0.5, ProbeFraction: 0.1, Duration: time.Hour},
		{Samples: 2000, Stacks: 50, UnknownOriginFraction: 0.1},
	}
	for i, cfg := range cases {
		msgs := collect(t, cfg)
		full := cfg.withDefaults()
		want := (full.Samples + full.BatchSize - 1) / full.BatchSize
		var m ShapeMeter
		got, unknown := 0, 0
		for _, msg := range msgs {
			if msg.Kind == KindBatch {
				got++
				checkBatch(t, msg.Batch, full, allAnnounced(msgs))
				m.Add(msg.Batch)
				for _, s := range msg.Batch.Samples {
					if s.Origin == UnknownOrigin {
						unknown++
					}
				}
			}
		}
		s := m.Shape()
		if got != want || s.Samples != full.Samples {
			t.Errorf("case %d: %d batches / %d samples, want %d / %d", i, got, s.Samples, want, full.Samples)
		}
		if cfg.OffCPUFraction == 0 && s.OffCPUSamples != 0 || cfg.ProbeFraction == 0 && s.ProbeSamples != 0 {
			t.Errorf("case %d: %d off-CPU and %d probe samples, want none", i, s.OffCPUSamples, s.ProbeSamples)
		}
		if cfg.OffCPUFraction == 0.5 {
			if f := float64(s.OffCPUSamples) / float64(s.Samples); math.Abs(f-0.5) > 0.05 {
				t.Errorf("case %d: off-CPU share %.3f, want 0.5", i, f)
			}
		}
		if f := float64(unknown) / float64(s.Samples); math.Abs(f-cfg.UnknownOriginFraction) > 0.03 {
			t.Errorf("case %d: unknown-origin share %.3f, want %v", i, f, cfg.UnknownOriginFraction)
		}
		if full.Stacks == 1 && s.DistinctStacks != 1 {
			t.Errorf("case %d: %d distinct stacks, want 1", i, s.DistinctStacks)
		}
	}
}

func allAnnounced(msgs []Message) map[schema.FileID]bool {
	out := map[schema.FileID]bool{}
	for _, m := range msgs {
		if m.Kind == KindExecutable {
			out[m.Executable.FileID] = true
		}
	}
	return out
}

// TestCollectCopies checks that Collect keeps independent copies of the
// batches that Generate reuses.
func TestCollectCopies(t *testing.T) {
	msgs := collect(t, Config{Samples: 1000, BatchSize: 100})
	var seqs []uint64
	seen := map[*schema.Batch]bool{}
	for _, m := range msgs {
		if m.Kind == KindBatch {
			if seen[m.Batch] {
				t.Fatal("Collect returned the same batch twice")
			}
			seen[m.Batch] = true
			seqs = append(seqs, m.Batch.Sequence)
		}
	}
	for i, s := range seqs {
		if s != uint64(i+1) {
			t.Fatalf("sequences %v", seqs)
		}
	}
}

func BenchmarkGenerate(b *testing.B) {
	cfg := DefaultConfig()
	b.ReportAllocs()
	for b.Loop() {
		if err := Generate(cfg, func(Message) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*cfg.Samples), "ns/sample")
}

// BenchmarkBatches measures producing batches once the universe exists:
// the per-sample cost of a long stream.
func BenchmarkBatches(b *testing.B) {
	cfg := DefaultConfig()
	cfg.Samples = 200000
	b.ReportAllocs()
	for b.Loop() {
		if err := Generate(cfg, func(Message) error { return nil }); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*cfg.Samples), "ns/sample")
}

func BenchmarkGenerateEncode(b *testing.B) {
	cfg := DefaultConfig()
	var buf []byte
	total := 0
	b.ReportAllocs()
	for b.Loop() {
		total = 0
		if err := Generate(cfg, func(m Message) error {
			if m.Kind != KindBatch {
				return nil
			}
			var err error
			buf, err = schema.EncodeBatch(m.Batch, buf[:0])
			total += len(buf)
			return err
		}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(total)/float64(cfg.Samples), "B/sample")
}

func TestSplit(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Samples, cfg.BatchSize = 1200, 500
	msgs, err := Collect(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hello, batches := Split(msgs)
	if hello == nil || hello != msgs[0].Hello {
		t.Fatalf("hello %v, want the first message's", hello)
	}
	var want []*schema.Batch
	for _, m := range msgs {
		if m.Kind == KindBatch {
			want = append(want, m.Batch)
		}
	}
	if len(batches) != 3 || !slices.Equal(batches, want) {
		t.Errorf("%d batches, want the stream's 3 in order", len(batches))
	}
}

// TestSmallConfig checks that the encoder's correctness corpus has what
// those tests rely on: every origin, an unknown one included, and labelled
// samples.
func TestSmallConfig(t *testing.T) {
	cfg := SmallConfig()
	msgs := collect(t, cfg)
	origins := map[schema.Origin]int{}
	labelled := 0
	for _, m := range msgs {
		if m.Kind != KindBatch {
			continue
		}
		checkBatch(t, m.Batch, cfg, allAnnounced(msgs))
		for _, s := range m.Batch.Samples {
			origins[s.Origin]++
			if len(s.Labels) > 0 {
				labelled++
			}
		}
	}
	for _, o := range []schema.Origin{schema.OriginCPUSampling, schema.OriginOffCPU, schema.OriginProbe, UnknownOrigin} {
		if origins[o] == 0 {
			t.Errorf("no %d (%v) samples: %v", o, o, origins)
		}
	}
	if labelled == 0 {
		t.Error("no labelled samples")
	}
	t.Logf("origins %v, %d labelled samples", origins, labelled)
}

func TestLinked(t *testing.T) {
	b := schema.NewBatchBuilder()
	p := b.Process(schema.Process{PID: 7})
	for _, tid := range []uint32{1, 1, 2, 1} {
		b.AddSample(schema.Sample{Process: p, TID: tid})
	}
	in := b.Batch()
	out := Linked(in, 2)
	if len(in.Links) != 0 || in.Samples[0].Link != 0 {
		t.Fatal("Linked modified its input")
	}
	links := make([]schema.TraceLink, len(out.Samples))
	for i, s := range out.Samples {
		if s.Link == 0 || !out.Links[s.Link-1].IsValid() {
			t.Fatalf("sample %d has no valid link", i)
		}
		links[i] = out.Links[s.Link-1]
	}
	// Thread 1's first two samples share a span, its third starts the
	// next; thread 2 has its own.
	if links[0] != links[1] || links[3] == links[0] || links[2] == links[0] {
		t.Errorf("links %v", links)
	}
}
