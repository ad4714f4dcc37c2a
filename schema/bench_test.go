package schema_test

// Stream benchmarks: the cost of the Cap'n Proto batch codec per sample and
// the bytes each sample costs on the socket, over the reference synthetic
// corpus (internal/synth, DefaultConfig: 20,000 samples of the shape in
// docs/benchmarks/stream.md) or over a recorded dump named by $TANDEM_BENCH_CORPUS.
//
// Batch size decides how well the batch-local tables (strings, mappings,
// frames, stacks, processes) amortize, so every benchmark runs at 500, 1000
// and 2000 samples per batch. A dump is re-batched to each size with a
// BatchBuilder, exactly as the sampler would have built it.
//
// One benchmark op is the whole corpus. Reported per sample:
//
//	ns/sample       wall time
//	cpu-ns/sample   CPU time of the whole process (GC included)
//	samples/s       1e9 / ns/sample
//	B/sample        bytes on the socket: encoded payload + 12-byte frame header and checksum
//	allocs/sample   heap allocations
//
// Run them on one core, as the sampler and encoder run:
//
//	go test -run '^$' -bench 'Batch$' -cpu 1 -count 5 ./schema/

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tandem-profiler/tandem/internal/synth"
	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/schema"
)

// envCorpus names the environment variable that points the benchmarks at a
// recorded dump instead of the synthetic corpus.
const envCorpus = "TANDEM_BENCH_CORPUS"

var benchBatchSizes = []int{500, 1000, 2000}

// corpus is one corpus cut into batches of one size, with its encoding.
type corpus struct {
	batches  []*schema.Batch
	payloads [][]byte
	samples  int
	frames   int // stack frames over all samples
	wire     int // payload bytes + one frame header per batch
}

var (
	corpusMu    sync.Mutex
	corpusCache = map[int]*corpus{}
	dumpBatches []*schema.Batch // decoded once, re-batched per size
)

// benchCorpus returns the corpus cut into batches of batchSize samples.
func benchCorpus(tb testing.TB, batchSize int) *corpus {
	tb.Helper()
	corpusMu.Lock()
	defer corpusMu.Unlock()
	if c, ok := corpusCache[batchSize]; ok {
		return c
	}
	var batches []*schema.Batch
	if path := os.Getenv(envCorpus); path != "" {
		if dumpBatches == nil {
			var err error
			if dumpBatches, err = loadDump(path); err != nil {
				tb.Fatal(err)
			}
		}
		batches = rebatch(dumpBatches, batchSize)
	} else {
		cfg := synth.DefaultConfig()
		cfg.BatchSize = batchSize
		msgs, err := synth.Collect(cfg)
		if err != nil {
			tb.Fatal(err)
		}
		for _, m := range msgs {
			if m.Kind == synth.KindBatch {
				batches = append(batches, m.Batch)
			}
		}
	}
	c := &corpus{batches: batches}
	for _, b := range batches {
		p, err := schema.EncodeBatch(b, nil)
		if err != nil {
			tb.Fatal(err)
		}
		c.payloads = append(c.payloads, p)
		c.samples += len(b.Samples)
		for _, s := range b.Samples {
			c.frames += len(b.Stack(s.Stack))
		}
		c.wire += ipc.FrameOverhead + len(p)
	}
	if c.samples == 0 {
		tb.Fatal("corpus has no samples")
	}
	corpusCache[batchSize] = c
	return c
}

// loadDump decodes every batch of a dump (all sessions, in order).
func loadDump(path string) ([]*schema.Batch, error) {
	d, err := ipc.OpenDump(path)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	var out []*schema.Batch
	var dict schema.Dictionary
	for {
		f, err := d.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if f.Type == ipc.FrameDictionary { // protocol 1.4
			var ch schema.DictionaryChunk
			if err := schema.DecodeDictionaryChunk(f.Payload, &ch); err != nil {
				return nil, fmt.Errorf("%s: chunk before offset %d: %w", path, d.Offset(), err)
			}
			if err := dict.Apply(&ch); err != nil {
				return nil, fmt.Errorf("%s: chunk before offset %d: %w", path, d.Offset(), err)
			}
			continue
		}
		if f.Type != ipc.FrameBatch {
			continue
		}
		b := &schema.Batch{} // layout 2: the dictionary's tables as they are now
		if err := schema.DecodeBatchWith(f.Payload, &dict, b); err != nil {
			return nil, fmt.Errorf("%s: batch before offset %d: %w", path, d.Offset(), err)
		}
		out = append(out, b)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no batches", path)
	}
	return out, nil
}

// rebatch re-cuts the samples of src into batches of size samples, interning
// the tables again with a BatchBuilder as the sampler does.
func rebatch(src []*schema.Batch, size int) []*schema.Batch {
	var out []*schema.Batch
	bb := schema.NewBatchBuilder()
	var stack []uint32
	flush := func() {
		if bb.Samples() == 0 {
			return
		}
		b := synth.CloneBatch(bb.Batch())
		b.Sequence = uint64(len(out) + 1)
		out = append(out, b)
		bb.Reset()
	}
	for _, in := range src {
		str := func(i uint32) uint32 { return bb.String(in.String(i)) }
		kvs := func(l []schema.KeyValue) []schema.KeyValue {
			if l == nil {
				return nil
			}
			o := make([]schema.KeyValue, len(l))
			for i, kv := range l {
				o[i] = schema.KeyValue{Key: str(kv.Key), Value: str(kv.Value)}
			}
			return o
		}
		for _, s := range in.Samples {
			stack = stack[:0]
			for _, fi := range in.Stack(s.Stack) {
				f := in.Frames[fi]
				if f.Mapping != 0 {
					m := in.Mappings[f.Mapping-1]
					m.FileName, m.Path = str(m.FileName), str(m.Path)
					m.GNUBuildID, m.GoBuildID = str(m.GNUBuildID), str(m.GoBuildID)
					f.Mapping = bb.Mapping(m)
				}
				f.FunctionName, f.SourceFile = str(f.FunctionName), str(f.SourceFile)
				stack = append(stack, bb.Frame(f))
			}
			p := in.Processes[s.Process]
			p.Comm, p.ExecutablePath = str(p.Comm), str(p.ExecutablePath)
			p.ContainerID, p.SystemdUnit, p.ServiceName = str(p.ContainerID), str(p.SystemdUnit), str(p.ServiceName)
			p.EnvVars = kvs(p.EnvVars)
			s.Process = bb.Process(p)
			s.ThreadName = str(s.ThreadName)
			s.Stack = bb.Stack(stack)
			s.Labels = kvs(s.Labels)
			bb.AddSample(s)
			if bb.Samples() == size {
				flush()
			}
		}
	}
	flush()
	return out
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// meter reports per-sample figures for a benchmark whose op is the corpus.
type meter struct {
	c       *corpus
	mallocs uint64
	cpu     time.Duration
}

func startMeter(b *testing.B, c *corpus) *meter {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ResetTimer()
	return &meter{c: c, mallocs: ms.Mallocs, cpu: processCPU()}
}

func (m *meter) report(b *testing.B) {
	b.StopTimer()
	cpu := processCPU() - m.cpu
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	n := float64(b.N) * float64(m.c.samples)
	ns := float64(b.Elapsed().Nanoseconds()) / n
	b.ReportMetric(ns, "ns/sample")
	b.ReportMetric(1e9/ns, "samples/s")
	if cpu > 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/n, "cpu-ns/sample")
	}
	b.ReportMetric(float64(ms.Mallocs-m.mallocs)/n, "allocs/sample")
	b.ReportMetric(float64(m.c.wire)/float64(m.c.samples), "B/sample")
}

// BenchmarkEncodeBatch measures schema.EncodeBatch over the whole corpus:
// the sampler's cost of putting its batches on the wire.
func BenchmarkEncodeBatch(b *testing.B) {
	for _, size := range benchBatchSizes {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			c := benchCorpus(b, size)
			b.SetBytes(int64(c.wire))
			m := startMeter(b, c)
			for b.Loop() {
				for _, batch := range c.batches {
					if _, err := schema.EncodeBatch(batch, nil); err != nil {
						b.Fatal(err)
					}
				}
			}
			m.report(b)
		})
	}
}

// BenchmarkDecodeBatch measures schema.DecodeBatch (with its validation)
// over the whole corpus into one reused Batch, as the encoder's ingest does.
func BenchmarkDecodeBatch(b *testing.B) {
	for _, size := range benchBatchSizes {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			c := benchCorpus(b, size)
			var into schema.Batch
			for _, p := range c.payloads { // size the reused slices
				if err := schema.DecodeBatch(p, &into); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(c.wire))
			m := startMeter(b, c)
			for b.Loop() {
				for _, p := range c.payloads {
					if err := schema.DecodeBatch(p, &into); err != nil {
						b.Fatal(err)
					}
				}
			}
			m.report(b)
		})
	}
}

// TestBenchCorpusSanity guards the benchmark corpus: empty stacks benchmark
// nothing and look fast doing it. Every batch size must round-trip through
// the codec into the same, non-empty stacks.
func TestBenchCorpusSanity(t *testing.T) {
	sizes := benchBatchSizes
	if testing.Short() {
		sizes = sizes[:1]
	}
	var want int
	for _, size := range sizes {
		c := benchCorpus(t, size)
		if want == 0 {
			want = c.samples
		} else if c.samples != want {
			t.Errorf("batch=%d: %d samples, batch=%d had %d", size, c.samples, sizes[0], want)
		}
		if os.Getenv(envCorpus) == "" && c.samples != synth.DefaultSamples {
			t.Errorf("batch=%d: %d samples, want %d", size, c.samples, synth.DefaultSamples)
		}
		var got schema.Batch
		frames, empty, withComm := 0, 0, 0
		for i, p := range c.payloads {
			if err := schema.DecodeBatch(p, &got); err != nil {
				t.Fatalf("batch=%d: batch %d: %v", size, i, err)
			}
			in := c.batches[i]
			if len(got.Samples) != len(in.Samples) || len(got.Samples) == 0 || len(got.Samples) > size {
				t.Fatalf("batch=%d: batch %d has %d samples, encoded %d", size, i, len(got.Samples), len(in.Samples))
			}
			for j, s := range got.Samples {
				st := got.Stack(s.Stack)
				if len(st) == 0 {
					empty++
				}
				frames += len(st)
				if w := in.Stack(in.Samples[j].Stack); len(w) != len(st) {
					t.Fatalf("batch=%d: batch %d sample %d: %d frames decoded, %d encoded", size, i, j, len(st), len(w))
				}
				if len(st) > 0 {
					f := got.Frames[st[0]]
					wf := in.Frames[in.Stack(in.Samples[j].Stack)[0]]
					if f.Kind != wf.Kind || f.AddressOrLine != wf.AddressOrLine ||
						got.String(f.FunctionName) != in.String(wf.FunctionName) {
						t.Fatalf("batch=%d: batch %d sample %d: leaf frame %+v, encoded %+v", size, i, j, f, wf)
					}
				}
				if got.String(got.Processes[s.Process].Comm) != "" {
					withComm++
				}
			}
		}
		if empty != 0 {
			t.Errorf("batch=%d: %d samples with an empty stack", size, empty)
		}
		if withComm == 0 {
			t.Errorf("batch=%d: no sample names its process's comm", size)
		}
		if frames != c.frames {
			t.Errorf("batch=%d: %d frames decoded, %d encoded", size, frames, c.frames)
		}
		perSample := float64(frames) / float64(c.samples)
		if perSample < 5 {
			t.Errorf("batch=%d: %.1f frames per sample: the corpus is too shallow to benchmark", size, perSample)
		}
		t.Logf("batch=%d: %d batches, %d samples, %.1f frames/sample, %.1f B/sample on the socket",
			size, len(c.batches), c.samples, perSample, float64(c.wire)/float64(c.samples))
	}
}
