// Package testcorpus generates deterministic synthetic sampler streams for
// the encoder's tests and benchmarks, and resolves batches back to content
// (ground truth) so tests can compare what an encoder emitted with what went
// in. It is imported only by _test.go files.
//
// Benchmark() has the shape of the recorded corpus the encoder is measured
// against (20,000 samples, ~33 frames per sample mixing kernel, native,
// Python and Go frames, 231 pids, ~80 mappings, ~2,400 distinct stacks with
// Zipf popularity, timestamps over 5 s on 64 CPUs, batches of 500).
package testcorpus

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"time"

	"github.com/tandem-profiler/tandem/schema"
)

// Config shapes a generated corpus.
type Config struct {
	Seed        uint64
	Samples     int
	BatchSize   int
	PIDs        int
	TIDs        int // total threads, at least PIDs
	Containers  int
	Stacks      int
	CPUs        int
	DurationNS  int64
	StartNS     int64
	FrequencyHz uint32
	NodeName    string
	// ZipfS is the exponent of stack popularity (weight of rank k is k^-s).
	ZipfS float64
	// Fractions of samples by origin; the rest are CPU samples.
	OffCPU, Probe, UnknownOrigin float64
	// Labels is the fraction of Go samples carrying pprof labels.
	Labels float64
}

// Benchmark returns the configuration of the benchmark corpus.
func Benchmark() Config {
	return Config{
		Seed:        1,
		Samples:     20000,
		BatchSize:   500,
		PIDs:        231,
		TIDs:        659,
		Containers:  88,
		Stacks:      2900, // about 2,400 of them are sampled
		CPUs:        64,
		DurationNS:  5e9,
		StartNS:     1_790_000_000_000_000_000,
		FrequencyHz: 19,
		NodeName:    "node-a",
		ZipfS:       0.97,
		OffCPU:      0.08,
		Probe:       0.005,
		Labels:      0.2,
	}
}

// Small returns a small corpus with every origin (including one the encoder
// does not know) for correctness tests.
func Small() Config {
	c := Benchmark()
	c.Seed = 7
	c.Samples = 3000
	c.BatchSize = 250
	c.PIDs = 23
	c.TIDs = 61
	c.Containers = 9
	c.Stacks = 180
	c.CPUs = 8
	c.OffCPU = 0.15
	c.Probe = 0.05
	c.UnknownOrigin = 0.02
	return c
}

// Corpus is a generated stream: one session's Hello and its batches.
type Corpus struct {
	Hello   schema.Hello
	Batches []*schema.Batch
}

// End returns when a test flushes the corpus: 6 s after the session start,
// after every sample of a generated corpus (which spans DurationNS, 5 s).
func (c *Corpus) End() time.Time {
	return time.Unix(0, c.Hello.StartTimeUnixNano+6e9)
}

// Samples returns the number of samples in the corpus.
func (c *Corpus) Samples() int {
	n := 0
	for _, b := range c.Batches {
		n += len(b.Samples)
	}
	return n
}

// EnvCorpus names the environment variable that points benchmarks at a
// recorded dump instead of the generated corpus.
const EnvCorpus = "TANDEM_BENCH_CORPUS"

// ForBenchmark returns the corpus benchmarks replay: the dump named by
// $TANDEM_BENCH_CORPUS when set, else the generated Benchmark() corpus.
func ForBenchmark() (*Corpus, error) {
	if path := os.Getenv(EnvCorpus); path != "" {
		return LoadDump(path)
	}
	return Generate(Benchmark()), nil
}

type app struct {
	kind    int // appGo, appPython, appNative
	exePath string
	comm    string
	libs    []int // indices into user mappings
	pids    []int
}

const (
	appGo = iota
	appPython
	appNative
)

type proc struct {
	pid         uint32
	app         int
	comm, exe   string
	container   string
	unit        string
	service     string
	env         [][2]string
	tids        []uint32
	threadNames []string
}

type frameSpec struct {
	kind     schema.FrameKind
	addr     uint64
	mapping  int // index into gen.mappings, -1 = none
	fn, file string
	line     uint32
}

type gen struct {
	cfg      Config
	rng      *rand.Rand
	mappings []mappingSpec
	kernel   []frameSpec
	apps     []app
	procs    []proc
	stacks   [][]frameSpec
	stackApp []int
}

type mappingSpec struct {
	file, path, gnu, goID string
	fileID                schema.FileID
	start, end, off       uint64
}

func (g *gen) hex(n int) string {
	const digits = "0123456789abcdef"
	b := make([]byte, n)
	for i := range b {
		b[i] = digits[g.rng.IntN(16)]
	}
	return string(b)
}

func (g *gen) mapping(file, path string, goBinary bool) int {
	m := mappingSpec{
		file:   file,
		path:   path,
		fileID: schema.FileID{Hi: g.rng.Uint64(), Lo: g.rng.Uint64()},
		start:  0x1000 * uint64(1+g.rng.IntN(16)),
		off:    0,
	}
	m.end = m.start + 0x100000 + uint64(g.rng.IntN(1<<22))
	if goBinary {
		m.goID = g.hex(20) + "/" + g.hex(20)
		if g.rng.IntN(2) == 0 {
			m.gnu = g.hex(40)
		}
	} else if file != "vmlinux" && g.rng.IntN(10) != 0 {
		m.gnu = g.hex(40)
	}
	g.mappings = append(g.mappings, m)
	return len(g.mappings) - 1
}

// Generate builds a corpus deterministically from cfg.
func Generate(cfg Config) *Corpus {
	g := &gen{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))}

	// Kernel: vmlinux and 8 modules, 300 symbolized functions.
	kmods := []string{"vmlinux", "ext4", "xfs", "nf_conntrack", "nf_tables", "overlay", "veth", "bridge", "br_netfilter"}
	var kmaps []int
	for _, m := range kmods {
		kmaps = append(kmaps, g.mapping(m, "", false))
	}
	for i := range 300 {
		m := kmaps[0]
		if i%5 == 4 {
			m = kmaps[1+g.rng.IntN(len(kmaps)-1)]
		}
		g.kernel = append(g.kernel, frameSpec{
			kind: schema.FrameKernel, mapping: m,
			addr: g.mappings[m].start + uint64(i)*0x40 + 0x10,
			fn:   fmt.Sprintf("%s_fn_%d", kmods[indexOf(kmaps, m)], i),
		})
	}
	// Shared native libraries (30), then per-app executables.
	var libs []int
	for i := range 30 {
		libs = append(libs, g.mapping(fmt.Sprintf("lib%d.so.%d", i, 1+i%3), fmt.Sprintf("/usr/lib/x86_64-linux-gnu/lib%d.so.%d", i, 1+i%3), false))
	}
	libpython := g.mapping("libpython3.11.so.1.0", "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0", false)
	for i := range 10 {
		g.apps = append(g.apps, app{kind: appGo, comm: fmt.Sprintf("gosvc%d", i)})
		a := &g.apps[len(g.apps)-1]
		a.exePath = fmt.Sprintf("/usr/local/bin/gosvc%d", i)
		a.libs = []int{g.mapping(fmt.Sprintf("gosvc%d", i), a.exePath, true), libs[0]}
	}
	python := g.mapping("python3.11", "/usr/bin/python3.11", false)
	for i := range 6 {
		g.apps = append(g.apps, app{kind: appPython, comm: "python3", exePath: "/usr/bin/python3.11"})
		g.apps[len(g.apps)-1].libs = []int{python, libpython, libs[0], libs[1+i%4]}
	}
	for i := range 41 {
		path := fmt.Sprintf("/opt/app%d/bin/native%d", i, i)
		exe := g.mapping(fmt.Sprintf("native%d", i), path, false)
		a := app{kind: appNative, comm: fmt.Sprintf("native%d", i), exePath: path}
		a.libs = []int{exe, libs[0], libs[2+g.rng.IntN(28)], libs[2+g.rng.IntN(28)]}
		g.apps = append(g.apps, a)
	}

	g.makeProcesses()
	g.makeStacks()
	return g.emit()
}

func indexOf(s []int, v int) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

func (g *gen) makeProcesses() {
	cfg := g.cfg
	containers := make([]string, cfg.Containers)
	for i := range containers {
		containers[i] = g.hex(64)
	}
	for i := range cfg.PIDs {
		ai := i % len(g.apps)
		if i >= len(g.apps) {
			ai = g.rng.IntN(len(g.apps))
		}
		a := &g.apps[ai]
		p := proc{pid: uint32(1000 + i*7), app: ai, comm: a.comm, exe: a.exePath}
		switch {
		case len(containers) > 0 && g.rng.IntN(10) < 6:
			p.container = containers[g.rng.IntN(len(containers))]
		case g.rng.IntN(2) == 0:
			p.unit = a.comm + ".service"
		}
		if g.rng.IntN(10) == 0 {
			p.service = "svc-" + a.comm
		}
		if i%13 == 5 {
			p.comm = "" // comm unreadable: service.name falls back to the executable
		}
		if i%17 == 3 {
			p.env = [][2]string{{"DEPLOY_ENV", "prod"}, {"REGION", fmt.Sprintf("r%d", i%3)}}
		}
		p.tids = []uint32{p.pid}
		p.threadNames = []string{p.comm}
		a.pids = append(a.pids, len(g.procs))
		g.procs = append(g.procs, p)
	}
	// Distribute the remaining threads.
	for t := cfg.PIDs; t < cfg.TIDs; t++ {
		p := &g.procs[g.rng.IntN(len(g.procs))]
		p.tids = append(p.tids, p.pid+uint32(len(p.tids)))
		p.threadNames = append(p.threadNames, fmt.Sprintf("worker-%d", len(p.tids)-1))
	}
}

func (g *gen) makeStacks() {
	// Per-app function pools.
	type pool struct {
		native []frameSpec // by mapping
		interp []frameSpec
	}
	pools := make([]pool, len(g.apps))
	for ai := range g.apps {
		a := &g.apps[ai]
		var p pool
		for _, m := range a.libs {
			for j := range 40 {
				p.native = append(p.native, frameSpec{
					kind: schema.FrameNative, mapping: m,
					addr: g.mappings[m].start + uint64(j)*0x1f0 + 0x33, // shared libraries: the same offsets in every process
				})
			}
		}
		switch a.kind {
		case appGo:
			m := a.libs[0]
			for j := range 150 {
				p.interp = append(p.interp, frameSpec{
					kind: schema.FrameGo, mapping: m,
					addr: g.mappings[m].start + 0x2000 + uint64(j)*0x120,
					fn:   fmt.Sprintf("github.com/acme/%s/pkg%d.Func%d", a.comm, j%7, j),
					file: fmt.Sprintf("/src/%s/pkg%d/file%d.go", a.comm, j%7, j%11),
					line: uint32(10 + j*3),
				})
			}
		case appPython:
			for j := range 120 {
				p.interp = append(p.interp, frameSpec{
					kind: schema.FrameCPython, mapping: -1,
					addr: uint64(j % 9),
					fn:   fmt.Sprintf("handler_%d", j),
					file: fmt.Sprintf("/app/py%d/mod%d.py", ai, j%13),
					line: uint32(1 + j*2),
				})
			}
		}
		pools[ai] = p
	}
	pick := func(s []frameSpec, n int, out []frameSpec) []frameSpec {
		for range n {
			out = append(out, s[g.rng.IntN(len(s))])
		}
		return out
	}
	var live [3][]int // by kind, apps some process runs
	for ai := range g.apps {
		if len(g.apps[ai].pids) > 0 {
			live[g.apps[ai].kind] = append(live[g.apps[ai].kind], ai)
		}
	}
	seen := map[string]bool{}
	for len(g.stacks) < g.cfg.Stacks {
		// Python 30%, Go 35%, native 35% of stacks.
		kind := appNative
		switch r := g.rng.IntN(20); {
		case r < 6:
			kind = appPython
		case r < 13:
			kind = appGo
		}
		if len(live[kind]) == 0 {
			continue
		}
		ai := live[kind][g.rng.IntN(len(live[kind]))]
		a := &g.apps[ai]
		p := &pools[ai]
		var st []frameSpec
		if g.rng.IntN(10) >= 3 {
			st = pick(g.kernel, 4+g.rng.IntN(13), st)
		}
		switch a.kind {
		case appGo:
			st = pick(p.interp, 14+g.rng.IntN(21), st)
			st = pick(p.native, g.rng.IntN(5), st)
		case appPython:
			st = pick(p.native, 2+g.rng.IntN(4), st)
			st = pick(p.interp, 7+g.rng.IntN(11), st)
			st = pick(p.native, 6+g.rng.IntN(9), st)
		default:
			st = pick(p.native, 14+g.rng.IntN(21), st)
		}
		key := fmt.Sprint(ai, st)
		if seen[key] {
			continue
		}
		seen[key] = true
		g.stacks = append(g.stacks, st)
		g.stackApp = append(g.stackApp, ai)
	}
}

func (g *gen) emit() *Corpus {
	cfg := g.cfg
	c := &Corpus{Hello: schema.Hello{
		MajorVersion:        schema.MajorVersion,
		MinorVersion:        schema.MinorVersion,
		SamplerVersion:      "testcorpus",
		NodeName:            cfg.NodeName,
		KernelRelease:       "6.8.0-test",
		BootID:              "00000000-0000-0000-0000-000000000001",
		SamplingFrequencyHz: cfg.FrequencyHz,
		Tracers:             []string{"python", "go", "labels"},
		StartTimeUnixNano:   cfg.StartNS,
		OffCPUThreshold:     1 << 28,
	}}
	for i := range c.Hello.SessionID {
		c.Hello.SessionID[i] = byte(g.rng.IntN(256))
	}
	// Zipf popularity over a shuffled stack order.
	cdf := make([]float64, len(g.stacks))
	sum := 0.0
	for k := range cdf {
		sum += math.Pow(float64(k+1), -cfg.ZipfS)
		cdf[k] = sum
	}
	rank := g.rng.Perm(len(g.stacks))

	bb := schema.NewBatchBuilder()
	flush := func() {
		b := cloneBatch(bb.Batch())
		b.Sequence = uint64(len(c.Batches) + 1)
		c.Batches = append(c.Batches, b)
		bb.Reset()
	}
	for i := range cfg.Samples {
		si := rank[sort.SearchFloat64s(cdf, g.rng.Float64()*sum)]
		if si >= len(g.stacks) {
			si = len(g.stacks) - 1
		}
		a := &g.apps[g.stackApp[si]]
		p := &g.procs[a.pids[g.rng.IntN(len(a.pids))]]
		ti := g.rng.IntN(len(p.tids))
		ts := cfg.StartNS + int64(i)*cfg.DurationNS/int64(cfg.Samples) + int64(g.rng.IntN(1000))
		origin, value := schema.OriginCPUSampling, int64(1)
		switch r := g.rng.Float64(); {
		case r < cfg.OffCPU:
			origin, value = schema.OriginOffCPU, 1000+g.rng.Int64N(10_000_000)
		case r < cfg.OffCPU+cfg.Probe:
			origin = schema.OriginProbe
		case r < cfg.OffCPU+cfg.Probe+cfg.UnknownOrigin:
			origin, value = schema.Origin(9), 1+g.rng.Int64N(5)
		}
		var frames []uint32
		for _, f := range g.stacks[si] {
			fr := schema.Frame{
				Kind:          f.kind,
				AddressOrLine: f.addr,
				FunctionName:  bb.String(f.fn),
				SourceFile:    bb.String(f.file),
				SourceLine:    f.line,
			}
			if f.mapping >= 0 {
				m := &g.mappings[f.mapping]
				fr.Mapping = bb.Mapping(schema.Mapping{
					FileName: bb.String(m.file), Path: bb.String(m.path),
					GNUBuildID: bb.String(m.gnu), GoBuildID: bb.String(m.goID),
					FileID: m.fileID, Start: m.start, End: m.end, FileOffset: m.off,
				})
			}
			frames = append(frames, bb.Frame(fr))
		}
		proc := schema.Process{
			PID: p.pid, Comm: bb.String(p.comm), ExecutablePath: bb.String(p.exe),
			ContainerID: bb.String(p.container), SystemdUnit: bb.String(p.unit),
			ServiceName: bb.String(p.service),
		}
		for _, kv := range p.env {
			proc.EnvVars = append(proc.EnvVars, schema.KeyValue{Key: bb.String(kv[0]), Value: bb.String(kv[1])})
		}
		s := schema.Sample{
			TimestampUnixNano: ts,
			Origin:            origin,
			Value:             value,
			Process:           bb.Process(proc),
			TID:               p.tids[ti],
			CPU:               uint32(g.rng.IntN(cfg.CPUs)),
			ThreadName:        bb.String(p.threadNames[ti]),
			Stack:             bb.Stack(frames),
		}
		if a.kind == appGo && g.rng.Float64() < cfg.Labels {
			s.Labels = []schema.KeyValue{
				{Key: bb.String("handler"), Value: bb.String(fmt.Sprintf("/api/v%d", g.rng.IntN(4)))},
				{Key: bb.String("tenant"), Value: bb.String(fmt.Sprintf("t%d", g.rng.IntN(3)))},
			}
		}
		bb.AddSample(s)
		if bb.Samples() == cfg.BatchSize {
			flush()
		}
	}
	if bb.Samples() > 0 {
		flush()
	}
	return c
}

func cloneBatch(b *schema.Batch) *schema.Batch {
	out := &schema.Batch{
		Sequence:    b.Sequence,
		Strings:     slices.Clone(b.Strings),
		Mappings:    slices.Clone(b.Mappings),
		Frames:      slices.Clone(b.Frames),
		StackFrames: slices.Clone(b.StackFrames),
		StackEnds:   slices.Clone(b.StackEnds),
		Processes:   slices.Clone(b.Processes),
		Samples:     slices.Clone(b.Samples),
	}
	for i := range out.Processes {
		out.Processes[i].EnvVars = slices.Clone(out.Processes[i].EnvVars)
	}
	for i := range out.Samples {
		out.Samples[i].Labels = slices.Clone(out.Samples[i].Labels)
	}
	return out
}
