package testcorpus

import (
	"path/filepath"
	"testing"

	"github.com/tandem-profiler/tandem/internal/synth"
	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/schema"
)

// TestBenchmarkCorpusSanity guards the corpus benchmarks replay, which may
// be a dump ($TANDEM_BENCH_CORPUS): empty stacks would benchmark nothing and
// look fast doing it. (internal/synth's TestShape checks the generated one
// closely.)
func TestBenchmarkCorpusSanity(t *testing.T) {
	c, err := ForBenchmark()
	if err != nil {
		t.Fatal(err)
	}
	var m synth.ShapeMeter
	empty := 0
	for _, b := range c.Batches {
		if len(b.Samples) == 0 {
			t.Fatal("empty batch")
		}
		m.Add(b)
		for _, s := range b.Samples {
			if len(b.Stack(s.Stack)) == 0 {
				empty++
			}
		}
	}
	s := m.Shape()
	t.Log(s)
	if empty > 0 {
		t.Errorf("%d samples with empty stacks", empty)
	}
	if f := s.FramesPerSample(); f < 25 || f > 40 {
		t.Errorf("%.1f frames per sample, want about 33", f)
	}
	if s.PIDs < 100 || s.DistinctStacks < 1000 {
		t.Errorf("corpus too uniform: %d pids, %d stacks", s.PIDs, s.DistinctStacks)
	}
	for _, k := range []schema.FrameKind{schema.FrameKernel, schema.FrameNative, schema.FrameCPython, schema.FrameGo} {
		if s.FramesByKind[k] == 0 {
			t.Errorf("no %s frames", k)
		}
	}
}

func TestDumpRoundTrip(t *testing.T) {
	c := Generate(Small())
	path := filepath.Join(t.TempDir(), "small.dump")
	if err := WriteDump(c, path); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvCorpus, path)
	back, err := ForBenchmark()
	if err != nil {
		t.Fatal(err)
	}
	if back.Hello.SessionID != c.Hello.SessionID || back.Hello.SamplingFrequencyHz != c.Hello.SamplingFrequencyHz {
		t.Errorf("hello = %+v", back.Hello)
	}
	if d := Diff(Events(c), Events(back), 3); d != nil {
		t.Fatalf("dump round trip differs: %v", d)
	}
}

// TestLoadDumpDictionaries: a dump as a protocol 1.4 sampler records it
// (dictionary chunks, layout-2 batches) loads into the same events.
func TestLoadDumpDictionaries(t *testing.T) {
	c := Generate(Small())
	path := filepath.Join(t.TempDir(), "small-1.4.dump")
	w, err := ipc.CreateDump(path)
	if err != nil {
		t.Fatal(err)
	}
	write := func(ft ipc.FrameType, p []byte, err error) {
		t.Helper()
		if err == nil {
			err = w.WriteFrame(ft, p)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	p, err := schema.EncodeHello(&c.Hello, nil)
	write(ipc.FrameHello, p, err)
	d := synth.NewDictionaries(1)
	for _, b := range c.Batches {
		chunk, p, err := d.Encode(b)
		if chunk != nil {
			write(ipc.FrameDictionary, chunk, err)
		}
		write(ipc.FrameBatch, p, err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	back, err := LoadDump(path)
	if err != nil {
		t.Fatal(err)
	}
	if back.Batches[0].Dictionary == nil {
		t.Fatal("loaded batches are not layout 2")
	}
	if diff := Diff(Events(c), Events(back), 3); diff != nil {
		t.Fatalf("1.4 dump differs: %v", diff)
	}
}

// TestGenerateCopies: a corpus a test changes leaves the next Generate of
// the same configuration as it was.
func TestGenerateCopies(t *testing.T) {
	want := Events(Generate(Small()))
	c := Generate(Small())
	c.Batches[0].Samples[0].Value++
	c.Batches[0].Strings[len(c.Batches[0].Strings)-1] = "changed"
	c.Batches[0].Samples[0].Labels = append(c.Batches[0].Samples[0].Labels, schema.KeyValue{})
	c.Hello.Tracers[0] = "changed"
	again := Generate(Small())
	if d := Diff(want, Events(again), 3); d != nil {
		t.Fatalf("a changed corpus changed the next one: %v", d)
	}
	if again.Hello.Tracers[0] == "changed" {
		t.Fatal("the Hello's tracers are shared")
	}
}
