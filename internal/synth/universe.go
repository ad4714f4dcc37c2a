package synth

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/tandem-profiler/tandem/schema"
)

// The universe is everything a stream is drawn from: mappings, processes and
// threads, and the ranked list of distinct stacks with their popularity. It
// is a pure function of the Config.

// Popularity: p(rank k) = u/S + (1-u) * (k+q)^-s / Z, a Zipf-Mandelbrot head
// over a uniform floor. With S = 2404 these constants give the reference
// corpus's top stack (10.8%) and top ten (33%); the floor gives every stack
// at least one sample at 20,000 samples, so all of them appear.
const (
	zipfS     = 1.05
	zipfQ     = 0.2
	zipfFloor = 0.121
)

type spec struct {
	kind byte // 'N' native, 'K' kernel, 'P' CPython, 'G' Go
	mod  string
	fn   string
	file string
	line uint32
}

type chain struct {
	elems []spec
	class string // system call entered at the leaf, "" for none
	probe int    // index of the uprobe target, -1 for none
}

func (c *chain) blockable() bool {
	return c.class != "" && len(syscallClasses[c.class].block) > 0
}

func parseChain(s string, kernel bool) *chain {
	c := &chain{probe: -1}
	if i := strings.LastIndexByte(s, '|'); i >= 0 {
		c.class = s[i+1:]
		s = s[:i]
		if _, ok := syscallClasses[c.class]; !ok {
			panic("synth: unknown syscall class " + c.class)
		}
	}
	for _, e := range strings.Split(s, ";") {
		if e == "" {
			continue
		}
		c.elems = append(c.elems, parseSpec(e, kernel))
		if strings.Contains(e, "!") {
			c.probe = len(c.elems) - 1
		}
	}
	return c
}

func parseSpec(e string, kernel bool) spec {
	e = strings.Replace(e, "!", "", 1)
	if kernel {
		if i := strings.IndexByte(e, '/'); i >= 0 {
			return spec{kind: 'K', mod: e[:i], fn: e[i+1:]}
		}
		return spec{kind: 'K', fn: e}
	}
	if strings.HasPrefix(e, "P:") || strings.HasPrefix(e, "G:") {
		s := spec{kind: e[0]}
		rest := e[2:]
		at := strings.LastIndexByte(rest, '@')
		if at < 0 {
			panic("synth: bad frame spec " + e)
		}
		s.fn = rest[:at]
		loc := rest[at+1:]
		colon := strings.LastIndexByte(loc, ':')
		if colon < 0 {
			panic("synth: bad frame spec " + e)
		}
		s.file = loc[:colon]
		n, err := strconv.Atoi(loc[colon+1:])
		if err != nil {
			panic("synth: bad line in " + e)
		}
		s.line = uint32(n)
		return s
	}
	i := strings.IndexByte(e, ':')
	if i < 0 {
		panic("synth: bad frame spec " + e)
	}
	return spec{kind: 'N', mod: e[:i], fn: e[i+1:]}
}

func parseAll(list []string, kernel bool) []*chain {
	out := make([]*chain, len(list))
	for i, s := range list {
		out[i] = parseChain(s, kernel)
	}
	return out
}

type umapping struct {
	fileName, path     string
	gnuID, goID        string
	debuglink          string
	fileID             schema.FileID
	start, end, off    uint64
	base               uint64 // file VA (or kernel address) of the first text byte
	cursor             uint64
	kernel, vdso, isGo bool
}

type funcKey struct {
	mapping int32
	name    string
}

type ufunc struct{ start, size uint64 }

// uframe is a frame with its strings resolved; it is comparable and is
// interned by value.
type uframe struct {
	kind    schema.FrameKind
	addr    uint64
	mapping int32 // universe mapping index, -1 for none
	fn      string
	file    string
	line    uint32
	funcOff uint32
}

type uproc struct {
	pid                                 uint32
	comm, exe, container, unit, service string
	env                                 [][2]string
	prog                                int
}

type uthread struct {
	tid  uint32
	proc int32
	name string
	cpu  int32 // pinned CPU, -1 for none
}

type ustack struct {
	frames []int32 // leaf first
	prog   int
	origin schema.Origin
	label  int // index into the program's label values, -1 for none
}

type parsedRoot struct {
	chain   *chain
	weight  float64
	mid     bool
	leaves  string
	labeled bool
}

type midNode struct {
	s       spec
	callees []int32
}

type program struct {
	def    *progDef
	exe    int32
	roots  []parsedRoot
	groups map[string][]*chain // leaf groups by name (lookup only)
	middle []midNode
	repl   *strings.Replacer
	wheel  []int32 // thread indices, repeated by weight
	step   uint64
	// cover lists (root, leaf chain) pairs that a program's first CPU
	// stacks walk through, so that every library it uses appears.
	cover    [][2]int
	covered  int
	canProbe bool
	pSys     float64
	pIRQ     float64
}

type universe struct {
	cfg      Config
	mappings []umapping
	alias    map[string]int32
	kmod     map[string]int32
	funcs    map[funcKey]ufunc
	frames   []uframe
	frameIdx map[uframe]int32
	procs    []uproc
	threads  []uthread
	progs    []*program
	stacks   []ustack
	first    []uint64 // stack k owns samples [first[k], first[k+1])
	progOff  []uint64 // samples of the same program in earlier stacks
	prob     []float64

	kernelRelease string
	bootID        string
	session       [16]byte

	// parsed shared vocabulary
	interrupts []*chain
	bridges    []*chain
}

// kernelChains is the kernel vocabulary, parsed: the kernel thread and
// system call entry chains and each class's CPU and blocking chains.
type kernelChains struct {
	kthread, entry     *chain
	syscalls, kthreads map[string][2][]*chain
}

// parsedKernel parses the kernel vocabulary on first use, not at package
// initialisation: tandem-encoder links this package (its synth
// subcommand), and every start of it runs every linked package's
// initialisation (docs/benchmarks/footprint.md).
var parsedKernel = sync.OnceValue(func() *kernelChains {
	k := &kernelChains{
		kthread:  parseChain(kernelKthread, true),
		entry:    parseChain(kernelEntry, true),
		syscalls: make(map[string][2][]*chain, len(syscallClasses)),
		kthreads: make(map[string][2][]*chain, len(kthreadBodies)),
	}
	for name, c := range syscallClasses {
		k.syscalls[name] = [2][]*chain{parseAll(c.cpu, true), parseAll(c.block, true)}
	}
	for name, c := range kthreadBodies {
		k.kthreads[name] = [2][]*chain{parseAll(c.cpu, true), parseAll(c.block, true)}
	}
	return k
})

// entryChain returns a fresh copy of the system call entry frames.
func entryChain() []spec {
	return append([]spec(nil), parsedKernel().entry.elems...)
}

// expand substitutes the program's placeholders in s.
func (p *program) expand(s string) string {
	if strings.IndexByte(s, '%') < 0 {
		return s
	}
	return p.repl.Replace(s)
}

func buildUniverse(cfg Config) *universe {
	u := &universe{
		cfg:      cfg,
		alias:    map[string]int32{},
		kmod:     map[string]int32{},
		funcs:    map[funcKey]ufunc{},
		frameIdx: map[uframe]int32{},
	}
	r := newRNG(uint64(cfg.Seed))
	u.kernelRelease = "6.8.0-1019-aws"
	u.bootID = uuidString(r)
	for i := range u.session {
		u.session[i] = byte(r.Uint64())
	}
	u.buildMappings(newRNG(hash64(uint64(cfg.Seed), 1)))
	u.interrupts = parseAll(kernelInterrupts, true)
	u.bridges = parseAll(pyBridges, false)
	u.buildPrograms(newRNG(hash64(uint64(cfg.Seed), 2)))
	u.buildProcesses(newRNG(hash64(uint64(cfg.Seed), 3)))
	u.buildStacks(newRNG(hash64(uint64(cfg.Seed), 4)))
	u.assignQuotas()
	return u
}

func uuidString(r *rng) string {
	h := r.Hex(32)
	return h[0:8] + "-" + h[8:12] + "-4" + h[13:16] + "-a" + h[17:20] + "-" + h[20:32]
}

const goIDAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

func goBuildID(r *rng) string {
	var b strings.Builder
	for part := 0; part < 4; part++ {
		if part > 0 {
			b.WriteByte('/')
		}
		for i := 0; i < 20; i++ {
			b.WriteByte(goIDAlphabet[r.Intn(len(goIDAlphabet))])
		}
	}
	return b.String()
}

func pageUp(x uint64) uint64 { return (x + 0xfff) &^ 0xfff }

func (u *universe) buildMappings(r *rng) {
	for _, d := range userMappings {
		m := umapping{fileName: d.file, path: d.path, fileID: schema.FileID{Hi: r.Uint64(), Lo: r.Uint64()}}
		if d.class != mapGo || d.gnuID {
			m.gnuID = r.Hex(40)
		}
		size := pageUp(d.size)
		switch d.class {
		case mapLib:
			m.off = uint64(r.Range(1, 0x40)) << 12
			m.start = 0x7f0000000000 + uint64(r.Intn(0xfffff))<<20 + m.off
			m.base = m.off
			if strings.HasPrefix(d.path, libDir) {
				m.debuglink = m.gnuID[2:] + ".debug"
			}
		case mapExe:
			m.off = uint64(r.Range(1, 0x20)) << 12
			m.start = 0x550000000000 + uint64(r.Intn(0xfffff))<<24 + m.off
			m.base = m.off
		case mapGo:
			m.off = 0x1000
			m.start = 0x401000
			m.base = m.start
			m.goID = goBuildID(r)
			m.isGo = true
		case mapVDSO:
			m.start = 0x7ffc00000000 + uint64(r.Intn(0x3ffff))<<12
			m.vdso = true
		}
		m.end = m.start + size
		m.cursor = uint64(r.Intn(int(size/16))) &^ 0xf
		u.alias[d.alias] = int32(len(u.mappings))
		u.mappings = append(u.mappings, m)
	}
	// Kernel: vmlinux at a KASLR slot, then the modules.
	vm := umapping{fileName: "vmlinux", fileID: schema.FileID{Hi: r.Uint64(), Lo: r.Uint64()}, gnuID: r.Hex(40), kernel: true}
	vm.start = 0xffffffff81000000 + uint64(r.Intn(0x100))<<21
	vm.end = vm.start + 0x1e00000
	vm.base = vm.start
	vm.cursor = uint64(r.Intn(0x10000)) &^ 0xf
	u.kmod[""] = int32(len(u.mappings))
	u.mappings = append(u.mappings, vm)
	next := uint64(0xffffffffc0000000) + uint64(r.Intn(0x400))<<12
	for _, km := range kernelModules {
		m := umapping{
			fileName: km.name,
			path:     "/lib/modules/" + u.kernelRelease + "/kernel/" + km.path,
			fileID:   schema.FileID{Hi: r.Uint64(), Lo: r.Uint64()},
			gnuID:    r.Hex(40),
			kernel:   true,
		}
		m.start = next
		m.end = m.start + pageUp(km.size)
		m.base = m.start
		next = m.end + uint64(r.Range(1, 64))<<12
		u.kmod[km.name] = int32(len(u.mappings))
		u.mappings = append(u.mappings, m)
	}
}

func (u *universe) mappingFor(p *program, s spec) int32 {
	switch s.kind {
	case 'K':
		m, ok := u.kmod[s.mod]
		if !ok {
			panic("synth: unknown kernel module " + s.mod)
		}
		return m
	case 'G':
		return p.exe
	case 'N':
		if s.mod == "exe" {
			return p.exe
		}
		m, ok := u.alias[s.mod]
		if !ok {
			panic("synth: unknown mapping alias " + s.mod)
		}
		return m
	}
	return -1
}

func (u *universe) buildPrograms(r *rng) {
	for i := range programs {
		d := &programs[i]
		p := &program{def: d, exe: -1, groups: map[string][]*chain{}, pSys: d.pSys, pIRQ: d.pIRQ}
		if d.exe != "" {
			p.exe = u.alias[d.exe]
		}
		p.repl = strings.NewReplacer(
			"%G", "/usr/local/go/src",
			"%M", "/go/pkg/mod",
			"%A", d.files,
			"%P", d.pkg,
			"%N", d.name,
			"%L", "/usr/local/lib/python3.11",
			"%S", "/usr/local/lib/python3.11/site-packages",
		)
		for _, rd := range d.roots {
			pr := parsedRoot{weight: rd.weight, mid: rd.mid, leaves: rd.leaves, labeled: rd.labeled && d.labelKey != ""}
			switch {
			case strings.HasPrefix(rd.chain, "@"):
				pr.chain = parseChain(goRoots[rd.chain[1:]], false)
			default:
				pr.chain = parseChain(rd.chain, false)
			}
			p.roots = append(p.roots, pr)
			if _, ok := p.groups[rd.leaves]; !ok {
				p.groups[rd.leaves] = u.leafGroup(p, rd.leaves)
			}
		}
		for _, rd := range p.roots {
			for _, c := range p.groups[rd.leaves] {
				if c.probe >= 0 {
					p.canProbe = true
				}
			}
		}
		p.middle = u.genMiddle(p, r)
		p.cover = coverSequence(p)
		u.progs = append(u.progs, p)
	}
}

// coverSequence interleaves the leaf chains of a program's roots: the first
// chain of every distinct group, then the second, and so on.
func coverSequence(p *program) [][2]int {
	if p.def.kind == progKthread {
		var out [][2]int
		for i := range parsedKernel().kthreads[p.roots[0].leaves][0] {
			out = append(out, [2]int{0, i})
		}
		return out
	}
	var roots []int
	seen := map[string]bool{}
	for i, rt := range p.roots {
		if !seen[rt.leaves] {
			seen[rt.leaves] = true
			roots = append(roots, i)
		}
	}
	var out [][2]int
	for i := 0; ; i++ {
		added := false
		for _, ri := range roots {
			if i < len(p.groups[p.roots[ri].leaves]) {
				out = append(out, [2]int{ri, i})
				added = true
			}
		}
		if !added {
			return out
		}
	}
}

// leafGroup returns the leaf chains of a group, ordered so that a
// round-robin over them reaches every library early.
func (u *universe) leafGroup(p *program, name string) []*chain {
	d := p.def
	switch d.kind {
	case progKthread:
		return nil // kernel threads use parsedKernel().kthreads directly
	case progPython:
		return parseAll(pyLeaves[name], false)
	case progGo, progGoNative:
		return parseAll(goLeaves[name], false)
	}
	// Native: interleave the libraries' chains, plus a few hot functions
	// in the executable itself.
	var per [][]*chain
	var own []string
	for i := 0; i < 6; i++ {
		own = append(own, fmt.Sprintf("exe:hot_%d", i))
	}
	own = append(own, "exe:hot_0;c:__memmove_avx_unaligned_erms", "exe:hot_2;c:malloc;c:_int_malloc")
	per = append(per, parseAll(own, false))
	for _, lib := range d.libs {
		list, ok := nativeLeaves[lib]
		if !ok {
			list = []string{lib + ":" + lib + "_entry;" + lib + ":" + lib + "_work", lib + ":" + lib + "_lookup"}
		}
		per = append(per, parseAll(list, false))
	}
	var out []*chain
	for i := 0; ; i++ {
		added := false
		for _, l := range per {
			if i < len(l) {
				out = append(out, l[i])
				added = true
			}
		}
		if !added {
			return out
		}
	}
}

// genMiddle generates the program's application functions as a layered
// call graph.
func (u *universe) genMiddle(p *program, r *rng) []midNode {
	d := p.def
	if d.kind == progKthread {
		return nil
	}
	n := 160
	if d.kind == progPython {
		n = 120
	}
	nodes := make([]midNode, n)
	seen := map[string]bool{}
	for i := range nodes {
		var s spec
		for attempt := 0; ; attempt++ {
			switch d.kind {
			case progNative:
				s = spec{kind: 'N', mod: "exe", fn: fmt.Sprintf("%s_fn_%03d", d.name, i)}
			case progGo, progGoNative:
				pkg := goPkgs[r.Intn(len(goPkgs))]
				var fn string
				if r.Chance(0.7) {
					fn = fmt.Sprintf("%%P/internal/%s.(*%s).%s", pkg, goTypes[r.Intn(len(goTypes))], goMethods[r.Intn(len(goMethods))])
				} else {
					m := goMethods[r.Intn(len(goMethods))]
					fn = fmt.Sprintf("%%P/internal/%s.%s%s", pkg, strings.ToLower(m[:1]), m[1:]+goTypes[r.Intn(len(goTypes))])
				}
				if attempt > 20 {
					fn += fmt.Sprintf(".func%d", attempt-20)
				}
				s = spec{kind: 'G', fn: fn, file: fmt.Sprintf("%%A/internal/%s/%s.go", pkg, strings.ToLower(goTypes[r.Intn(len(goTypes))])), line: uint32(r.Range(20, 900))}
			case progPython:
				fn := pyFuncs[r.Intn(len(pyFuncs))]
				file := "%A/" + pyFiles[r.Intn(len(pyFiles))]
				s = spec{kind: 'P', fn: fn, file: file, line: uint32(r.Range(10, 600))}
			}
			key := s.fn + "@" + s.file
			if !seen[key] {
				seen[key] = true
				break
			}
		}
		nodes[i].s = s
		for c := r.Range(1, 3); c > 0; c-- {
			j := i + 1 + r.Intn(6)
			if j < n {
				nodes[i].callees = append(nodes[i].callees, int32(j))
			}
		}
	}
	return nodes
}

func (u *universe) buildProcesses(r *rng) {
	used := map[uint32]bool{}
	next := uint32(2)
	alloc := func(gapLo, gapHi int) uint32 {
		next += uint32(r.Range(gapLo, gapHi))
		for used[next] {
			next++
		}
		used[next] = true
		return next
	}
	addProc := func(pi int, comm, cid string, pid uint32) int32 {
		p := u.progs[pi]
		d := p.def
		proc := uproc{pid: pid, comm: comm, container: cid, unit: d.unit, service: d.service, prog: pi}
		if p.exe >= 0 {
			proc.exe = u.mappings[p.exe].path
		}
		for _, kv := range d.env {
			k, v, _ := strings.Cut(kv, "=")
			proc.env = append(proc.env, [2]string{k, v})
		}
		u.procs = append(u.procs, proc)
		return int32(len(u.procs) - 1)
	}
	addThreads := func(pi int, procIdx int32) {
		p := u.progs[pi]
		proc := &u.procs[procIdx]
		threads := p.def.threads
		if len(threads) == 0 {
			threads = []threadDef{{"", 1, 1}}
		}
		firstThread := true
		for _, td := range threads {
			for k := 0; k < td.count; k++ {
				t := uthread{proc: procIdx, cpu: -1}
				if firstThread {
					t.tid = proc.pid
					firstThread = false
				} else {
					t.tid = alloc(1, 3)
				}
				switch {
				case td.name == "":
					t.name = proc.comm
				case strings.Contains(td.name, "%d"):
					t.name = strings.Replace(td.name, "%d", strconv.Itoa(k), 1)
				default:
					t.name = td.name
				}
				if p.def.kind == progKthread {
					t.cpu = pinnedCPU(proc.comm, u.cfg.CPUs)
				}
				ti := int32(len(u.threads))
				u.threads = append(u.threads, t)
				for w := 0; w < td.weight; w++ {
					p.wheel = append(p.wheel, ti)
				}
			}
		}
	}
	// pid 1 first, kernel threads next, then host daemons, then containers.
	order := make([]int, 0, len(u.progs))
	for phase := 0; phase < 4; phase++ {
		for i, p := range u.progs {
			d := p.def
			var ph int
			switch {
			case d.name == "systemd":
				ph = 0
			case d.kind == progKthread:
				ph = 1
			case d.containers == 0:
				ph = 2
			default:
				ph = 3
			}
			if ph == phase {
				order = append(order, i)
			}
		}
	}
	for _, pi := range order {
		d := u.progs[pi].def
		switch {
		case d.name == "systemd":
			used[1] = true
			addThreads(pi, addProc(pi, d.comm, "", 1))
		case d.kind == progKthread:
			for _, c := range d.comms {
				addThreads(pi, addProc(pi, c, "", alloc(1, 12)))
			}
		case d.containers == 0:
			if next < 400 {
				next = 400
			}
			for k := 0; k < d.procs; k++ {
				addThreads(pi, addProc(pi, d.comm, "", alloc(5, 400)))
			}
		default:
			if next < 8000 {
				next = 8000
			}
			for c := 0; c < d.containers; c++ {
				cid := r.Hex(64)
				alloc(200, 20000)
				for k := 0; k < d.procs; k++ {
					addThreads(pi, addProc(pi, d.comm, cid, alloc(1, 40)))
				}
			}
		}
	}
	for _, p := range u.progs {
		l := uint64(len(p.wheel))
		if l == 0 {
			continue
		}
		// A step coprime with the wheel size visits every entry once per
		// revolution, in a scattered order.
		s := uint64(float64(l)*0.618) + 1
		for gcd(s, l) != 1 {
			s++
		}
		p.step = s
	}
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// pinnedCPU returns the CPU of a per-CPU kernel thread ("ksoftirqd/12",
// "kworker/3:1"), or -1.
func pinnedCPU(comm string, cpus int) int32 {
	_, rest, ok := strings.Cut(comm, "/")
	if !ok {
		return -1
	}
	end := 0
	for end < len(rest) && rest[end] >= '0' && rest[end] <= '9' {
		end++
	}
	if end == 0 {
		return -1
	}
	n, _ := strconv.Atoi(rest[:end])
	return int32(n % cpus)
}

// popularity returns the probability of each stack rank.
func popularity(n int) []float64 {
	w := make([]float64, n)
	z := 0.0
	for k := range w {
		w[k] = math.Pow(float64(k+1)+zipfQ, -zipfS)
		z += w[k]
	}
	for k := range w {
		w[k] = zipfFloor/float64(n) + (1-zipfFloor)*w[k]/z
	}
	return w
}

// Reference per-sample frame counts by kind (docs/benchmarks/method.md, Corpus), which the
// most popular stacks are chosen to meet.
var referenceFrames = [4]float64{7.3, 14.9, 3.3, 7.4} // kernel, native, python, go

// calibratedRanks is how many of the most popular stacks are picked among
// candidates to steer the per-kind frame means towards referenceFrames.
const (
	coverReserve    = 24
	calibratedRanks = 64
	candidates      = 24
)

func (u *universe) buildStacks(r *rng) {
	n := u.cfg.Stacks
	u.prob = popularity(n)
	target := make([]float64, len(u.progs))
	total := 0.0
	for i, p := range u.progs {
		target[i] = p.def.share
		total += p.def.share
	}
	for i := range target {
		target[i] /= total
	}

	// Pass 1, in rank order: give each rank to the program furthest below
	// its share (give or take noise), and make it off-CPU or a probe when
	// those are furthest below theirs.
	type slot struct {
		prog   int
		origin schema.Origin
	}
	slots := make([]slot, n)
	assigned := make([]float64, len(u.progs))
	offCap := make([]int, len(u.progs))
	for i, p := range u.progs {
		offCap[i] = n
		if p.def.kind == progKthread {
			offCap[i] = len(parsedKernel().kthreads[p.roots[0].leaves][1])
		}
	}
	// The least popular ranks are reserved, a few per program, so that
	// every program has enough stacks to cover its libraries whatever
	// the head of the distribution went to. They are CPU samples.
	reserved := make([]int, n)
	for k := range reserved {
		reserved[k] = -1
	}
	var want []int
	total = 0
	for i, p := range u.progs {
		want = append(want, min(coverReserve, len(p.cover)))
		total += float64(want[i])
	}
	resMass := 0.0
	if float64(n) >= 2*total {
		k := n - 1
		for left := true; left; {
			left = false
			for i := range u.progs {
				if want[i] > 0 {
					want[i]--
					reserved[k] = i
					resMass += u.prob[k]
					target[i] -= u.prob[k]
					k--
					left = true
				}
			}
		}
	}
	for i := range target {
		target[i] = max(target[i], 0) / (1 - resMass)
	}
	mass, offMass, probeMass := 0.0, 0.0, 0.0
	for k := 0; k < n; k++ {
		pk := u.prob[k]
		if reserved[k] >= 0 {
			slots[k] = slot{reserved[k], schema.OriginCPUSampling}
			continue
		}
		best, bestScore := 0, math.Inf(-1)
		for i := range u.progs {
			score := target[i]*(mass+pk) - assigned[i] + 0.5*pk*target[i]*(r.Float64()-0.5)
			if score > bestScore {
				best, bestScore = i, score
			}
		}
		p := u.progs[best]
		origin := schema.OriginCPUSampling
		offShare := u.cfg.OffCPUFraction / (1 - resMass)
		probeShare := u.cfg.ProbeFraction / (1 - resMass)
		switch {
		case offCap[best] > 0 && offShare*(mass+pk)-offMass >= pk/2:
			origin = schema.OriginOffCPU
			offMass += pk
			offCap[best]--
		case p.canProbe && probeShare*(mass+pk)-probeMass >= pk/2:
			origin = schema.OriginProbe
			probeMass += pk
		}
		assigned[best] += pk
		mass += pk
		slots[k] = slot{best, origin}
	}

	// Pass 2, from the least popular stack to the most: the tail goes
	// first, so that the first stacks of each program (which walk through
	// every leaf chain, for coverage) are rare ones, and the head goes
	// last, each rank picked among candidates to pull the running
	// per-kind means towards the reference.
	seen := map[string]bool{}
	var key []byte
	gen := func(k int) (ustack, string) {
		origin := slots[k].origin
		for attempt := 0; ; attempt++ {
			if attempt == 50 {
				origin = schema.OriginCPUSampling
			}
			st := u.genStack(slots[k].prog, origin, r)
			key = key[:0]
			for _, f := range st.frames {
				key = append(key, byte(f), byte(f>>8), byte(f>>16), byte(f>>24))
			}
			if !seen[string(key)] || attempt > 1000 {
				return st, string(key)
			}
		}
	}
	var sums [4]float64
	mass = 0
	u.stacks = make([]ustack, n)
	var means [][4]float64 // per program, over its tail stacks
	for k := n - 1; k >= 0; k-- {
		pk := u.prob[k]
		if k < calibratedRanks && means == nil {
			means = u.programMeans(calibratedRanks)
		}
		st, key := gen(k)
		if k < calibratedRanks {
			// What the more popular stacks, still to come, will add if
			// they are typical of their programs.
			var future [4]float64
			for j := 0; j < k; j++ {
				for i := range future {
					future[i] += u.prob[j] * means[slots[j].prog][i]
				}
			}
			bestErr := math.Inf(1)
			nc := candidates
			if k < 8 {
				nc *= 4
			}
			for c := 0; c < nc; c++ {
				if c > 0 {
					st2, key2 := gen(k)
					seen[key2] = false // not taken (yet)
					st, key = st2, key2
				}
				counts := u.kindCounts(st)
				e := 0.0
				for i := range sums {
					d := (sums[i] + pk*counts[i] + future[i] - referenceFrames[i]) / referenceFrames[i]
					e += d * d
				}
				if e < bestErr {
					bestErr = e
					u.stacks[k] = st
				}
			}
			key = u.stackKey(u.stacks[k])
		} else {
			u.stacks[k] = st
		}
		seen[key] = true
		counts := u.kindCounts(u.stacks[k])
		for i := range sums {
			sums[i] += pk * counts[i]
		}
		mass += pk
	}
}

// programMeans returns each program's mean frame counts by kind over its
// stacks of rank >= from (already generated); programs without any get the
// reference.
func (u *universe) programMeans(from int) [][4]float64 {
	means := make([][4]float64, len(u.progs))
	counts := make([]float64, len(u.progs))
	for k := from; k < len(u.stacks); k++ {
		st := u.stacks[k]
		c := u.kindCounts(st)
		for i := range c {
			means[st.prog][i] += c[i]
		}
		counts[st.prog]++
	}
	for p := range means {
		if counts[p] == 0 {
			means[p] = referenceFrames
			continue
		}
		for i := range means[p] {
			means[p][i] /= counts[p]
		}
	}
	return means
}

func (u *universe) stackKey(st ustack) string {
	b := make([]byte, 0, 4*len(st.frames))
	for _, f := range st.frames {
		b = append(b, byte(f), byte(f>>8), byte(f>>16), byte(f>>24))
	}
	return string(b)
}

// kindCounts returns a stack's kernel, native, Python and Go frame counts.
func (u *universe) kindCounts(st ustack) [4]float64 {
	var c [4]float64
	for _, f := range st.frames {
		switch u.frames[f].kind {
		case schema.FrameKernel:
			c[0]++
		case schema.FrameNative:
			c[1]++
		case schema.FrameCPython:
			c[2]++
		case schema.FrameGo:
			c[3]++
		}
	}
	return c
}

// assignQuotas spreads cfg.Samples over the ranked stacks by systematic
// sampling: stack k receives round(N*P(<=k)) - round(N*P(<k)) samples.
func (u *universe) assignQuotas() {
	n := uint64(u.cfg.Samples)
	s := len(u.stacks)
	u.first = make([]uint64, s+1)
	u.progOff = make([]uint64, s)
	c := 0.0
	perProg := make([]uint64, len(u.progs))
	for k := 0; k < s; k++ {
		c += u.prob[k]
		f := math.Ceil(float64(n)*c - 0.5)
		v := uint64(0)
		if f > 0 {
			v = uint64(f)
		}
		if v > n || k == s-1 {
			v = n
		}
		if v < u.first[k] {
			v = u.first[k]
		}
		u.first[k+1] = v
		pi := u.stacks[k].prog
		u.progOff[k] = perProg[pi]
		perProg[pi] += v - u.first[k]
	}
}

// stackOf returns the stack that owns sample slot j.
func (u *universe) stackOf(j uint64) int {
	return sort.Search(len(u.stacks), func(k int) bool { return u.first[k+1] > j })
}

const (
	leafRandom  = iota // sampled at an arbitrary instruction
	leafSyscall        // the syscall instruction of a wrapper
	leafEntry          // function entry (uprobe)
	leafFixed          // a fixed resume point (after a context switch)
)

func (u *universe) genStack(pi int, origin schema.Origin, r *rng) ustack {
	p := u.progs[pi]
	st := ustack{prog: pi, origin: origin, label: -1}
	var user, kern []spec
	userLeaf := leafRandom
	kernLeaf := leafRandom

	if p.def.kind == progKthread {
		body := parsedKernel().kthreads[p.roots[0].leaves]
		kern = append(kern, parsedKernel().kthread.elems...)
		if origin == schema.OriginOffCPU && len(body[1]) > 0 {
			kern = append(kern, body[1][r.Intn(len(body[1]))].elems...)
			kernLeaf = leafFixed
		} else {
			var c *chain
			if p.covered < len(p.cover) {
				c = body[0][p.cover[p.covered][1]]
				p.covered++
			} else {
				c = body[0][r.Intn(len(body[0]))]
			}
			kern = append(kern, c.elems[:r.Range(min(2, len(c.elems)), len(c.elems))]...)
			if r.Chance(0.15) {
				ic := u.interrupts[r.Intn(len(u.interrupts)-3)].elems // not page faults
				kern = append(kern, ic[:r.Range(len(ic)/2, len(ic))]...)
			}
		}
		st.frames = u.materialize(p, nil, kern, userLeaf, kernLeaf, r)
		return st
	}

	// Root, filtered by what the origin needs from the leaf.
	var cands []int
	for i, rt := range p.roots {
		ok := false
		for _, c := range p.groups[rt.leaves] {
			if origin == schema.OriginOffCPU && c.blockable() || origin == schema.OriginProbe && c.probe >= 0 || origin == schema.OriginCPUSampling {
				ok = true
				break
			}
		}
		if ok {
			cands = append(cands, i)
		}
	}
	var ri int
	coverChain := -1
	if origin == schema.OriginCPUSampling && p.covered < len(p.cover) {
		// First time through: every chain once, so that every
		// library shows up.
		ri, coverChain = p.cover[p.covered][0], p.cover[p.covered][1]
		p.covered++
	} else {
		w := make([]float64, len(cands))
		for i, c := range cands {
			w[i] = p.roots[c].weight
		}
		ri = cands[r.Weighted(w)]
	}
	root := p.roots[ri]
	user = append(user, root.chain.elems...)
	if root.labeled {
		st.label = r.Intn(len(p.def.labels))
	}
	if root.mid && len(p.middle) > 0 {
		depth := r.Range(p.def.mid[0], p.def.mid[1])
		node := int32(r.Intn(8))
		for d := 0; d < depth; d++ {
			user = append(user, p.middle[node].s)
			if p.def.kind == progPython && r.Chance(0.12) {
				user = append(user, u.bridges[r.Intn(len(u.bridges))].elems...)
			}
			cs := p.middle[node].callees
			if len(cs) == 0 {
				break
			}
			node = cs[r.Intn(len(cs))]
		}
	}

	group := p.groups[root.leaves]
	switch origin {
	case schema.OriginOffCPU:
		var bl []*chain
		for _, c := range group {
			if c.blockable() {
				bl = append(bl, c)
			}
		}
		c := bl[r.Intn(len(bl))]
		user = append(user, c.elems...)
		blocks := parsedKernel().syscalls[c.class][1]
		kern = append(entryChain(), blocks[r.Intn(len(blocks))].elems...)
		userLeaf, kernLeaf = leafSyscall, leafFixed
	case schema.OriginProbe:
		var pl []*chain
		for _, c := range group {
			if c.probe >= 0 {
				pl = append(pl, c)
			}
		}
		c := pl[r.Intn(len(pl))]
		user = append(user, c.elems[:c.probe+1]...)
		userLeaf = leafEntry
	default:
		var c *chain
		enter, whole := false, false
		if coverChain >= 0 {
			c = group[coverChain]
			enter = c.class != "" && r.Chance(0.5)
			whole = true
		} else if r.Chance(p.pSys) {
			var sys []*chain
			for _, c := range group {
				if c.class != "" {
					sys = append(sys, c)
				}
			}
			if len(sys) > 0 {
				c = sys[r.Intn(len(sys))]
				enter = true
			}
		}
		if c == nil {
			c = group[r.Intn(len(group))]
		}
		if enter {
			user = append(user, c.elems...)
			cpu := parsedKernel().syscalls[c.class][0]
			body := cpu[r.Intn(len(cpu))].elems
			kern = append(entryChain(), body[:r.Range((len(body)+1)/2, len(body))]...)
			userLeaf = leafSyscall
		} else {
			cut := len(c.elems)
			if c.class != "" {
				cut--
			}
			if cut < 1 {
				cut = 1
			}
			lo := 1
			if whole {
				lo = cut
			}
			user = append(user, c.elems[:r.Range(lo, cut)]...)
			if p.def.kind == progPython && user[len(user)-1].kind == 'P' {
				// Caught interpreting: the interpreter loop is the
				// native leaf.
				user = append(user, spec{kind: 'N', mod: "pylib", fn: "_PyEval_EvalFrameDefault"})
			}
			if r.Chance(p.pIRQ) {
				ic := u.interrupts[r.Intn(len(u.interrupts))].elems
				kern = ic[:r.Range(len(ic)/2, len(ic))]
			}
		}
	}
	st.frames = u.materialize(p, user, kern, userLeaf, kernLeaf, r)
	return st
}

// materialize turns root-to-leaf user and kernel specs into interned frames,
// leaf first.
func (u *universe) materialize(p *program, user, kern []spec, userLeaf, kernLeaf int, r *rng) []int32 {
	out := make([]int32, 0, len(user)+len(kern))
	for i := len(kern) - 1; i >= 0; i-- {
		callee, mode := "", -1
		if i+1 < len(kern) {
			callee = kern[i+1].fn
		} else {
			mode = kernLeaf
		}
		out = append(out, u.frame(p, kern[i], callee, mode, r))
	}
	for i := len(user) - 1; i >= 0; i-- {
		callee, mode := "", -1
		if i+1 < len(user) {
			callee = user[i+1].fn
		} else if len(kern) > 0 && userLeaf == leafRandom {
			mode = leafRandom // interrupted
		} else {
			mode = userLeaf
		}
		out = append(out, u.frame(p, user[i], callee, mode, r))
	}
	return out
}

// frame interns one frame. mode is -1 for a caller frame (return address
// determined by the callee), or a leaf mode.
func (u *universe) frame(p *program, s spec, callee string, mode int, r *rng) int32 {
	f := uframe{mapping: -1}
	variant := uint64(0)
	if mode == leafRandom {
		variant = uint64(1 + r.Intn(6))
	}
	switch s.kind {
	case 'P':
		f.kind = schema.FrameCPython
		f.fn = p.expand(s.fn)
		f.file = p.expand(s.file)
		f.line = s.line
		if mode == -1 && callee != "" && strings.HasPrefix(s.file, "%A/") {
			f.line += uint32(hashString(callee)%40) + 1
		} else if mode == leafRandom {
			f.line += uint32(variant % 4)
		}
		f.addr = uint64(f.line)
	case 'G', 'N', 'K':
		f.mapping = u.mappingFor(p, s)
		fn := p.expand(s.fn)
		fk := u.function(f.mapping, fn)
		var off uint64
		switch {
		case mode == leafEntry:
			off = 0
		case mode == -1 && s.kind == 'G':
			off = hash64(hashString(fn), uint64(s.line), hashString(callee)) % fk.size
		case mode == -1:
			off = hash64(hashString(fn), hashString(callee)) % fk.size
		case mode == leafSyscall || mode == leafFixed:
			off = hash64(hashString(fn), 0x5c) % fk.size
		default:
			off = hash64(hashString(fn), variant) % fk.size
		}
		if off == 0 && mode != leafEntry {
			off = 1
		}
		f.addr = fk.start + off
		switch s.kind {
		case 'K':
			f.kind = schema.FrameKernel
			f.fn = fn
			f.funcOff = uint32(off)
		case 'N':
			f.kind = schema.FrameNative
		case 'G':
			if p.def.kind == progGoNative {
				f.kind = schema.FrameNative
				break
			}
			f.kind = schema.FrameGo
			f.fn = fn
			f.file = p.expand(s.file)
			f.line = s.line
			if mode == -1 && strings.HasPrefix(s.file, "%A/") {
				f.line += uint32(hashString(callee)%60) + 1
			} else if mode == leafRandom {
				f.line += uint32(variant % 4)
			}
		}
	}
	if i, ok := u.frameIdx[f]; ok {
		return i
	}
	i := int32(len(u.frames))
	u.frames = append(u.frames, f)
	u.frameIdx[f] = i
	return i
}

// function returns the address range of a function, allocating it in its
// mapping on first use.
func (u *universe) function(m int32, name string) ufunc {
	k := funcKey{m, name}
	if f, ok := u.funcs[k]; ok {
		return f
	}
	mp := &u.mappings[m]
	h := hashString(name)
	size := (0x40 + h%0x7c0) &^ 0xf
	span := mp.end - mp.start
	if size > span/4 {
		size = (span / 4) &^ 0xf
	}
	if mp.cursor+size > span {
		mp.cursor = (h >> 20) % (span - size) &^ 0xf
	}
	f := ufunc{start: mp.base + mp.cursor, size: size}
	mp.cursor += size + (h>>40)%0x80&^0xf
	u.funcs[k] = f
	return f
}
