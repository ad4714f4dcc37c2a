package testcorpus

import (
	"path/filepath"
	"testing"
)

// TestBenchmarkCorpusSanity guards the benchmark corpus: empty stacks would
// benchmark nothing and look fast doing it.
func TestBenchmarkCorpusSanity(t *testing.T) {
	c, err := ForBenchmark()
	if err != nil {
		t.Fatal(err)
	}
	var samples, frames, empty int
	pids := map[uint32]bool{}
	tids := map[uint32]bool{}
	stacks := map[string]bool{}
	mappings := map[string]bool{}
	kinds := map[string]int{}
	for _, b := range c.Batches {
		if len(b.Samples) == 0 {
			t.Fatal("empty batch")
		}
		for _, m := range b.Mappings {
			mappings[b.String(m.FileName)] = true
		}
		for _, s := range b.Samples {
			samples++
			st := b.Stack(s.Stack)
			if len(st) == 0 {
				empty++
			}
			frames += len(st)
			for _, f := range st {
				kinds[b.Frames[f].Kind.String()]++
			}
			pids[b.Processes[s.Process].PID] = true
			tids[s.TID] = true
		}
		for i := range b.NumStacks() {
			var fr []Frame
			for _, f := range b.Stack(uint32(i)) {
				fr = append(fr, BatchFrame(b, f))
			}
			stacks[StackString(fr)] = true
		}
	}
	perSample := float64(frames) / float64(samples)
	t.Logf("%d batches, %d samples, %.1f frames/sample %v, %d pids, %d tids, %d mappings, %d distinct stacks",
		len(c.Batches), samples, perSample, kinds, len(pids), len(tids), len(mappings), len(stacks))
	if empty > 0 {
		t.Errorf("%d samples with empty stacks", empty)
	}
	if perSample < 25 || perSample > 40 {
		t.Errorf("%.1f frames per sample, want about 33", perSample)
	}
	if len(pids) < 100 || len(stacks) < 1000 {
		t.Errorf("corpus too uniform: %d pids, %d stacks", len(pids), len(stacks))
	}
	for _, k := range []string{"kernel", "native", "cpython", "go"} {
		if kinds[k] == 0 {
			t.Errorf("no %s frames", k)
		}
	}
}

func TestGenerateDeterministic(t *testing.T) {
	a, b := Events(Generate(Small())), Events(Generate(Small()))
	if d := Diff(a, b, 3); d != nil {
		t.Fatalf("two generations differ: %v", d)
	}
	if len(a) != Small().Samples {
		t.Fatalf("%d events, want %d", len(a), Small().Samples)
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
