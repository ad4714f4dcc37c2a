package aggregate

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tandem-profiler/tandem/encoder/internal/testcorpus"
	"github.com/tandem-profiler/tandem/schema"
	"github.com/tandem-profiler/tandem/test/promtest"
)

// flushEvents resolves every observation of a Flush back to content.
func flushEvents(t testing.TB, f *Flush) []testcorpus.Event {
	t.Helper()
	var out []testcorpus.Event
	stacks := map[uint32]string{}
	for _, s := range f.Samples {
		if len(s.Timestamps) != len(s.Values) || len(s.Timestamps) == 0 {
			t.Fatalf("sample has %d timestamps and %d values", len(s.Timestamps), len(s.Values))
		}
		st, ok := stacks[s.Stack]
		if !ok {
			var frames []testcorpus.Frame
			for _, l := range f.Stack(s.Stack) {
				loc := f.Locations[l]
				m := f.Mappings[loc.Mapping]
				fn := f.Functions[loc.Function]
				frames = append(frames, testcorpus.Frame{
					Kind: loc.Kind, Error: loc.Error, Address: loc.Address,
					MappingFile: f.Strings[m.FileName], MappingBuildID: f.Strings[m.GNUBuildID],
					Function: f.Strings[fn.Name], File: f.Strings[fn.File], Line: loc.Line,
				})
			}
			st = testcorpus.StackString(frames)
			stacks[s.Stack] = st
		}
		var kvs [][2]string
		for _, kv := range f.LabelSet(s.Labels) {
			kvs = append(kvs, [2]string{f.Strings[kv.Key], f.Strings[kv.Value]})
		}
		for i, ts := range s.Timestamps {
			out = append(out, testcorpus.Event{
				PID: f.Resources[s.Resource].PID, TID: s.TID, CPU: s.CPU,
				ThreadName: f.Strings[s.ThreadName], Origin: s.Origin, Value: s.Values[i],
				TimestampNS: ts, Stack: st, Labels: testcorpus.LabelString(kvs),
			})
		}
	}
	return out
}

func newTestAggregator(t testing.TB) *Aggregator {
	t.Helper()
	a, err := NewAggregator(DefaultConfig(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func addAll(t testing.TB, a *Aggregator, c *testcorpus.Corpus) {
	t.Helper()
	for _, b := range c.Batches {
		if err := a.Add(&c.Hello, b); err != nil {
			t.Fatal(err)
		}
	}
}

func checkFlush(t *testing.T, f *Flush, c *testcorpus.Corpus) {
	t.Helper()
	if diff := testcorpus.Diff(testcorpus.Events(c), flushEvents(t, f), 5); diff != nil {
		t.Fatalf("flush differs from input:\n%s", strings.Join(diff, "\n"))
	}
	if f.Events != c.Samples() {
		t.Errorf("Events = %d, want %d", f.Events, c.Samples())
	}
	checkInvariants(t, f)
}

func checkInvariants(t *testing.T, f *Flush) {
	t.Helper()
	if f.Strings[0] != "" || f.Mappings[0] != (Mapping{}) || f.Functions[0] != (Function{}) ||
		f.Locations[0] != (Location{}) || len(f.Stack(0)) != 0 || len(f.LabelSet(0)) != 0 {
		t.Fatal("index 0 sentinels violated")
	}
	for _, s := range f.Samples {
		if int(s.Stack) >= f.NumStacks() || int(s.Resource) >= len(f.Resources) ||
			int(s.ThreadName) >= len(f.Strings) || int(s.Labels) >= len(f.LabelEnds) {
			t.Fatalf("sample index out of range: %+v", s)
		}
		for _, ts := range s.Timestamps {
			if ts < f.StartUnixNano || ts > f.EndUnixNano {
				t.Fatalf("timestamp %d outside [%d, %d]", ts, f.StartUnixNano, f.EndUnixNano)
			}
		}
	}
	for _, l := range f.StackLocations {
		if l == 0 || int(l) >= len(f.Locations) {
			t.Fatalf("stack location %d out of range", l)
		}
	}
	for _, l := range f.Locations[1:] {
		if int(l.Mapping) >= len(f.Mappings) || int(l.Function) >= len(f.Functions) {
			t.Fatalf("location out of range: %+v", l)
		}
	}
}

func TestAggregatorRoundTrip(t *testing.T) {
	c := testcorpus.Generate(testcorpus.Small())
	a := newTestAggregator(t)
	addAll(t, a, c)
	f := a.Flush(time.Unix(0, c.Hello.StartTimeUnixNano))
	checkFlush(t, f, c)
	if len(f.Samples) >= c.Samples() {
		t.Logf("no aggregation: %d samples for %d events", len(f.Samples), c.Samples())
	}
	if f.StartUnixNano > c.Batches[0].Samples[0].TimestampUnixNano {
		t.Errorf("first interval starts at %d, after the oldest sample", f.StartUnixNano)
	}
}

func TestAggregatorAggregates(t *testing.T) {
	b := schema.NewBatchBuilder()
	stack := b.Stack([]uint32{b.Frame(schema.Frame{Kind: schema.FrameNative, AddressOrLine: 0x10})})
	proc := b.Process(schema.Process{PID: 1, Comm: b.String("a")})
	for i := range 4 {
		b.AddSample(schema.Sample{TimestampUnixNano: int64(100 + i), Origin: schema.OriginCPUSampling, Value: 1, Process: proc, TID: 1, Stack: stack})
	}
	b.AddSample(schema.Sample{TimestampUnixNano: 50, Origin: schema.OriginOffCPU, Value: 7, Process: proc, TID: 1, Stack: stack})
	b.AddSample(schema.Sample{TimestampUnixNano: 51, Origin: schema.OriginCPUSampling, Value: 1, Process: proc, TID: 1, CPU: 3, Stack: stack})
	a := newTestAggregator(t)
	hello := &schema.Hello{SamplingFrequencyHz: 19}
	if err := a.Add(hello, b.Batch()); err != nil {
		t.Fatal(err)
	}
	f := a.Flush(time.Unix(0, 200))
	if len(f.Samples) != 3 {
		t.Fatalf("got %d samples, want 3 (cpu 0, off-cpu, cpu 3)", len(f.Samples))
	}
	s := f.Samples[0]
	if got := s.Timestamps; len(got) != 4 || got[0] != 100 || got[3] != 103 || s.Total() != 4 || !s.AllOnes() {
		t.Errorf("first sample = %+v", s)
	}
	if s := f.Samples[1]; s.Origin != schema.OriginOffCPU || s.Total() != 7 || s.AllOnes() {
		t.Errorf("off-cpu sample = %+v", s)
	}
	if f.StartUnixNano != 50 || f.EndUnixNano != 200 {
		t.Errorf("interval [%d, %d], want [50, 200]", f.StartUnixNano, f.EndUnixNano)
	}
	next := a.Flush(time.Unix(0, 300))
	if !next.Empty() || next.StartUnixNano != 200 || next.EndUnixNano != 300 {
		t.Errorf("empty interval = [%d, %d] with %d samples", next.StartUnixNano, next.EndUnixNano, len(next.Samples))
	}
}

func TestAggregatorSteadyStateDictionary(t *testing.T) {
	c := testcorpus.Generate(testcorpus.Small())
	a := newTestAggregator(t)
	addAll(t, a, c)
	a.Release(a.Flush(time.Now()))
	before := a.Stats()
	addAll(t, a, c)
	f := a.Flush(time.Now())
	checkFlush(t, f, c)
	after := a.Stats()
	after.PendingEvents, after.PendingSamples = before.PendingEvents, before.PendingSamples
	if before != after {
		t.Errorf("replaying the same stream grew the dictionary:\nbefore %+v\nafter  %+v", before, after)
	}
}

func TestAggregatorPrunes(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DictionaryTTL = 2
	a, err := NewAggregator(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	a.minStale = 1
	old := testcorpus.Generate(testcorpus.Small())
	cur := testcorpus.Small()
	cur.Seed = 99
	fresh := testcorpus.Generate(cur)

	addAll(t, a, old)
	a.Release(a.Flush(time.Now()))
	full := a.Stats()
	var last *Flush
	for range 4 {
		addAll(t, a, fresh)
		if last != nil {
			a.Release(last)
		}
		last = a.Flush(time.Now())
		checkFlush(t, last, fresh)
	}
	st := a.Stats()
	if st.Generation == 0 {
		t.Fatalf("dictionary never pruned: %+v", st)
	}
	if st.Stacks >= full.Stacks+fresh.Batches[0].NumStacks() || st.Resources > len(fresh.Batches[0].Processes)*len(fresh.Batches) {
		t.Errorf("pruned dictionary still large: before %+v, after %+v", full, st)
	}
	// After pruning the old stream is new again and still round-trips.
	addAll(t, a, old)
	checkFlush(t, a.Flush(time.Now()), old)
}

func TestAggregatorPrunedFlushStaysValid(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DictionaryTTL = 1
	a, err := NewAggregator(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	a.minStale = 1
	c := testcorpus.Generate(testcorpus.Small())
	addAll(t, a, c)
	f := a.Flush(time.Now())
	a.Flush(time.Now()) // prunes everything
	a.Flush(time.Now())
	if a.Stats().Generation == 0 {
		t.Fatal("expected a pruning")
	}
	checkFlush(t, f, c) // the old snapshot is unaffected
}

func TestAggregatorRejectsInvalidBatch(t *testing.T) {
	valid := func() *schema.Batch {
		b := schema.NewBatchBuilder()
		m := b.Mapping(schema.Mapping{FileName: b.String("libc.so.6")})
		st := b.Stack([]uint32{b.Frame(schema.Frame{Kind: schema.FrameNative, AddressOrLine: 1, Mapping: m})})
		b.AddSample(schema.Sample{Stack: st, Process: b.Process(schema.Process{PID: 9}), Origin: schema.OriginCPUSampling, Value: 1})
		return b.Batch()
	}
	tests := []struct {
		name   string
		mutate func(b *schema.Batch)
	}{
		{"stack", func(b *schema.Batch) { b.Samples[0].Stack = 5 }},
		{"process", func(b *schema.Batch) { b.Samples[0].Process = 5 }},
		{"thread name", func(b *schema.Batch) { b.Samples[0].ThreadName = 99 }},
		{"label", func(b *schema.Batch) { b.Samples[0].Labels = []schema.KeyValue{{Key: 99}} }},
		{"frame", func(b *schema.Batch) { b.StackFrames[0] = 7 }},
		{"mapping", func(b *schema.Batch) { b.Frames[0].Mapping = 4 }},
		{"mapping string", func(b *schema.Batch) { b.Mappings[0].Path = 40 }},
		{"function", func(b *schema.Batch) { b.Frames[0].FunctionName = 40 }},
		{"stack ends", func(b *schema.Batch) { b.StackEnds[0] = 9 }},
		{"comm", func(b *schema.Batch) { b.Processes[0].Comm = 9 }},
		{"env", func(b *schema.Batch) { b.Processes[0].EnvVars = []schema.KeyValue{{Key: 0, Value: 12}} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newTestAggregator(t)
			b := valid()
			tt.mutate(b)
			err := a.Add(&schema.Hello{}, b)
			if !errors.Is(err, ErrInvalidBatch) {
				t.Fatalf("Add = %v, want ErrInvalidBatch", err)
			}
			if st := a.Stats(); st.PendingEvents != 0 {
				t.Errorf("rejected batch added %d events", st.PendingEvents)
			}
			if err := a.Add(&schema.Hello{}, valid()); err != nil {
				t.Fatalf("valid batch after a rejected one: %v", err)
			}
		})
	}
	if err := newTestAggregator(t).Add(nil, valid()); !errors.Is(err, ErrInvalidBatch) {
		t.Errorf("nil hello: %v", err)
	}
}

func TestAggregatorAddAllocations(t *testing.T) {
	c := testcorpus.Generate(testcorpus.Small())
	a := newTestAggregator(t)
	cycle := func() {
		for _, b := range c.Batches {
			if err := a.Add(&c.Hello, b); err != nil {
				t.Fatal(err)
			}
		}
		a.Release(a.Flush(time.Now()))
	}
	cycle()
	cycle()
	allocs := testing.AllocsPerRun(5, cycle)
	// A handful per flush (the sessions slice, map growth); none per sample.
	if perSample := allocs / float64(c.Samples()); perSample > 0.01 {
		t.Errorf("%.0f allocations per cycle of %d samples (%.3f/sample)", allocs, c.Samples(), perSample)
	}
}

func TestServiceName(t *testing.T) {
	tests := []struct {
		name, apm, comm, exe string
		pid                  uint32
		want                 string
	}{
		{"apm wins", "checkout", "java", "/usr/bin/java", 1, "checkout"},
		{"comm", "", "nginx", "/usr/sbin/nginx", 1, "nginx"},
		{"executable basename", "", "", "/opt/app/bin/server", 1, "server"},
		{"unknown", "", "", "", 42, "unknown_service:pid-42"},
		{"root path", "", "", "/", 7, "unknown_service:pid-7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ServiceName(tt.apm, tt.comm, tt.exe, tt.pid); got != tt.want {
				t.Errorf("ServiceName = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	if err := (Config{}).Validate(); err == nil {
		t.Error("zero TTL accepted")
	}
	if _, err := NewAggregator(Config{}, nil); err == nil {
		t.Error("NewAggregator accepted an invalid config")
	}
}

func TestFrameType(t *testing.T) {
	for _, tt := range []struct {
		loc  Location
		want string
	}{
		{Location{Kind: schema.FrameNative}, "native"},
		{Location{Kind: schema.FrameNative, Error: true}, "native"},
		{Location{Kind: schema.FrameUnknown, Error: true}, "abort-marker"},
		{Location{Kind: schema.FrameCPython}, "cpython"},
	} {
		if got := tt.loc.FrameType(); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.loc, got, tt.want)
		}
	}
}

// TestAggregatorFastPathCollisions feeds content that collides on the weak
// stack hash (same numbers and string lengths, different bytes) and on the
// pid, across batches: the verified fast paths must never reuse the wrong
// entry.
func TestAggregatorFastPathCollisions(t *testing.T) {
	batch := func(fn, file, lib, comm string, pid uint32, ts int64) *schema.Batch {
		b := schema.NewBatchBuilder()
		m := b.Mapping(schema.Mapping{FileName: b.String(lib), FileID: schema.FileID{Hi: 1, Lo: 2}, Start: 0x1000, End: 0x2000})
		st := b.Stack([]uint32{
			b.Frame(schema.Frame{Kind: schema.FrameCPython, AddressOrLine: 2, FunctionName: b.String(fn), SourceFile: b.String(file), SourceLine: 10}),
			b.Frame(schema.Frame{Kind: schema.FrameNative, AddressOrLine: 0x1234, Mapping: m}),
		})
		p := b.Process(schema.Process{PID: pid, Comm: b.String(comm)})
		b.AddSample(schema.Sample{TimestampUnixNano: ts, Origin: schema.OriginCPUSampling, Value: 1, Process: p, TID: pid, Stack: st})
		out := *b.Batch()
		return &out
	}
	c := &testcorpus.Corpus{Batches: []*schema.Batch{
		batch("aaa", "x.py", "liba.so", "one", 7, 1),
		batch("bbb", "x.py", "liba.so", "one", 7, 2), // function differs
		batch("aaa", "y.py", "liba.so", "two", 7, 3), // file and comm differ, same pid
		batch("aaa", "x.py", "libb.so", "one", 7, 4), // mapping name differs
		batch("aaa", "x.py", "liba.so", "one", 7, 5), // the first again
	}}
	a := newTestAggregator(t)
	for _, b := range c.Batches {
		if err := a.Add(&c.Hello, b); err != nil {
			t.Fatal(err)
		}
	}
	f := a.Flush(time.Unix(0, 10))
	checkFlush(t, f, c)
	if f.NumStacks() != 1+4 || len(f.Resources) != 2 {
		t.Errorf("%d stacks (want 4 + sentinel), %d resources (want 2)", f.NumStacks()-1, len(f.Resources))
	}
}

func TestAggregatorMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	a, err := NewAggregator(DefaultConfig(), reg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewAggregator(DefaultConfig(), reg); err == nil {
		t.Error("a second aggregator registered the same metrics")
	}
	c := testcorpus.Generate(testcorpus.Small())
	addAll(t, a, c)
	_ = a.Add(&c.Hello, &schema.Batch{Samples: []schema.Sample{{Stack: 3}}})
	want := map[string]float64{
		"tandem_encoder_aggregator_batches_total":          float64(len(c.Batches)),
		"tandem_encoder_aggregator_samples_total":          float64(c.Samples()),
		"tandem_encoder_aggregator_rejected_batches_total": 1,
	}
	for k, v := range want {
		if got := promtest.Value(t, reg, k); got != v {
			t.Errorf("%s = %v, want %v", k, got, v)
		}
	}
	if promtest.Value(t, reg, "tandem_encoder_aggregator_dictionary_stacks") == 0 {
		t.Error("dictionary gauge not reporting")
	}
}
