package vm

import (
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/tandem-profiler/tandem/test/harness"
	"github.com/tandem-profiler/tandem/test/otlptest"
	"github.com/tandem-profiler/tandem/test/parcatest"
	"github.com/tandem-profiler/tandem/test/privtest"
	"github.com/tandem-profiler/tandem/test/streamtest"
)

// The limits of each phase, generous for software emulation on a loaded
// 2-core machine (a tracer load took up to 1m46s there with every
// interpreter tracer; this test loads only the native unwinder).
const (
	bootWithin    = 3 * time.Minute
	encoderWithin = 2 * time.Minute
	samplerWithin = 4 * time.Minute
	stopWithin    = 90 * time.Second
	profileFor    = 20 * time.Second
	// vmHz is the sampling frequency in the guest.
	vmHz = 49
)

// envOr reads a measurement knob: TANDEM_VM_TRACERS (the sampler's
// --tracers, "native" by default: the workload is C) and TANDEM_VM_HZ let
// docs/benchmarks/kernel.md measure what other tracer sets and frequencies cost under
// emulation; the assertions do not change.
func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// Where things are in the guest.
const (
	guestResults = "/results"
	guestSocket  = "/run/tandem/tandem.sock"
	encoderHTTP  = "127.0.0.1:7071"
	encoderUID   = 65534
)

// kernelsEnv selects the kernels TestKernels runs (vm.SelectTargets):
// unset, the Default ones (make test); "all" for make test-kernels.
const kernelsEnv = "TANDEM_VM_KERNELS"

// requireVM skips outside CI (fails in CI) when the VM for target cannot
// run here, and returns its kernel and busybox from the kernel cache.
func requireVM(t *testing.T, target Target) (Kernel, string) {
	t.Helper()
	if testing.Short() && !privtest.InCI() {
		t.Skip("kernel test skipped in -short mode")
	}
	if runtime.GOARCH != "amd64" {
		t.Skipf("the kernel test runs on amd64 hosts; this is %s", runtime.GOARCH)
	}
	k, err := CachedKernel(CacheDir(), target)
	if err != nil {
		privtest.SkipOrFail(t, "kernel test cannot run: %v", err)
	}
	busybox, err := CachedBusybox(CacheDir(), target.Arch)
	if err != nil {
		privtest.SkipOrFail(t, "kernel test cannot run: %v", err)
	}
	m, err := MachineFor(target.Arch)
	if err != nil {
		t.Fatal(err)
	}
	cc := compilers[target.Arch]
	for _, need := range []struct{ cmd, pkg string }{{m.QEMU, m.Package}, {cc.cmd, cc.pkg}, {"xz", "xz-utils"}} {
		if _, err := exec.LookPath(need.cmd); err != nil {
			privtest.SkipOrFail(t, "kernel test cannot run: no %s (apt-get install %s, or make tools)", need.cmd, need.pkg)
		}
	}
	return k, busybox
}

// compilers build the C workload for each guest architecture.
var compilers = map[string]struct{ cmd, pkg string }{
	"amd64": {"gcc", "gcc"},
	"arm64": {"aarch64-linux-gnu-gcc", "gcc-aarch64-linux-gnu"},
}

// TestKernels runs the pair on each kernel of the matrix selected by
// TANDEM_VM_KERNELS (by default the ones make test runs), one after the
// other: each VM uses both CPUs.
func TestKernels(t *testing.T) {
	targets, err := SelectTargets(os.Getenv(kernelsEnv))
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range targets {
		t.Run(target.Name, func(t *testing.T) { testKernel(t, target) })
	}
}

// testKernel runs the pair on one kernel in qemu, off-CPU profiling on at
// probability 1, against a C workload with a known hot function and a
// known blocking one, and checks: the sampler starts on that kernel,
// finds kprobes and samples; its on-CPU samples name the hot function
// and its off-CPU samples hold the blocking function under the
// scheduler's kernel frames, named wallclock in the guest encoder's pprof
// files and, replayed on the host from the sampler's recording, off_cpu
// in OTLP and wallclock in Parca's Arrow; the pair's loss accounting
// balances; the sampler confined itself; and the kernel printed no
// warning (console and dmesg).
func testKernel(t *testing.T, target Target) {
	k, busybox := requireVM(t, target)
	g := newGuest(t, k, busybox)
	plan := g.pairPlan()
	began := time.Now()
	irdPath, size := g.initramfs(t, plan)
	work := g.work
	built := time.Since(began) + g.buildTime

	consoleLog, err := os.Create(filepath.Join(work, "console.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer consoleLog.Close()
	disk := filepath.Join(work, "results.img")
	vm, err := Start(Config{Kernel: k, Initramfs: irdPath, ResultsDisk: disk, ResultsBytes: 512 << 20,
		MemoryMiB: 2048, CPUs: 2, Console: consoleLog})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vm.Kill)
	t.Logf("kernel %s (%s), accelerator %s, initramfs %.1f MiB, built in %v", k.Release, k.Arch, vm.Accel(), float64(size)/(1<<20), built.Round(time.Second))
	results := map[string][]byte{}
	defer func() {
		if t.Failed() {
			t.Logf("---- console (last lines) ----\n%s", vm.Console(40))
			for _, name := range []string{"sampler.log", "encoder.log", "workload.log"} {
				if b, ok := results["results/"+name]; ok {
					t.Logf("---- %s (last lines) ----\n%s", name, tail(string(b), 40))
				}
			}
		}
	}()
	// Each phase's limit, cut to what is left before the test binary's
	// own deadline (-timeout), so that a slow run fails naming the phase
	// rather than as a panic of the whole binary.
	limit := func(d time.Duration) time.Duration {
		if dl, ok := t.Deadline(); ok {
			if left := time.Until(dl) - 20*time.Second; left < d {
				return max(left, time.Second)
			}
		}
		return d
	}
	// A guest failure still writes the results (the logs): read them
	// before failing.
	fail := func(err error) {
		t.Helper()
		if errors.Is(err, ErrGuestFailed) {
			if _, rerr := vm.Await(EventResults, "the results", limit(2*time.Minute)); rerr == nil {
				_ = vm.Wait(limit(time.Minute))
				results, _ = ReadResults(disk)
			}
		}
		t.Fatal(err)
	}
	booted, err := vm.Await(EventBooted, "boot (the agent running)", limit(bootWithin))
	if err != nil {
		fail(err)
	}
	bootWall := vm.Elapsed()
	if _, err := vm.Await(EventEncoderReady, "the encoder's readiness", limit(encoderWithin)); err != nil {
		fail(err)
	}
	ready, err := vm.Await(EventSamplerReady, "the sampler's readiness (sampling)", limit(samplerWithin))
	if err != nil {
		fail(err)
	}
	readyWall := vm.Elapsed()
	for _, ev := range []string{EventSamplerExited, EventEncoderExited} {
		e, err := vm.Await(ev, ev, limit(profileFor+2*stopWithin))
		if err != nil {
			fail(err)
		}
		if e.Detail != "exit status 0" {
			t.Errorf("%s: %s, want exit status 0", ev, e.Detail)
		}
	}
	if _, err := vm.Await(EventResults, "the results written", limit(2*time.Minute)); err != nil {
		fail(err)
	}
	if err := vm.Wait(limit(time.Minute)); err != nil {
		t.Fatalf("qemu after the guest's power-off: %v", err)
	}
	total := vm.Elapsed()
	if results, err = ReadResults(disk); err != nil {
		t.Fatal(err)
	}
	samplerLog := string(results["results/sampler.log"])
	t.Logf("timings (%s): boot to the agent %v (kernel uptime %.0f s), sampler ready %.1f s after its start (%v after qemu started), VM total %v, test total %v",
		vm.Accel(), bootWall.Round(time.Second), booted.Value, ready.Value, readyWall.Round(time.Second), total.Round(time.Second), time.Since(began).Round(time.Second))
	if m := regexp.MustCompile(`msg="eBPF tracer loaded".*? duration=(\S+)`).FindStringSubmatch(samplerLog); m != nil {
		t.Logf("tracer load under %s: %s (--tracers %s)", vm.Accel(), m[1], envOr("TANDEM_VM_TRACERS", "native"))
	}

	if ready.Detail != "confined" {
		t.Errorf("the ready sampler: %s", ready.Detail)
	}
	checkKernelWarnings(t, vm, string(results["results/dmesg"]))
	checkSamplerLog(t, samplerLog)
	checkGuestPprof(t, results)
	produced, resendLost := dumpTotals(t, results["results/sampler.dump"])
	checkGuestBalance(t, string(results["results/encoder.metrics"]), produced, resendLost)
	checkHostReplay(t, g, results["results/sampler.dump"], produced)
}

// checkKernelWarnings fails on any kernel warning on the console or in
// the guest's dmesg (which holds every level).
func checkKernelWarnings(t *testing.T, vm *VM, dmesg string) {
	t.Helper()
	if w := vm.KernelWarnings(); len(w) > 0 {
		t.Errorf("%v:\n%s", ErrKernelWarning, FormatWarnings(w))
	}
	if dmesg == "" {
		t.Errorf("no dmesg from the guest")
	}
	if w := FindKernelWarnings(dmesg); len(w) > 0 {
		t.Errorf("kernel warning in the guest's dmesg:\n%s", FormatWarnings(w))
	}
	// Under emulation on a loaded host the guest's clock is what goes
	// wrong first (a TSC marked unstable, a clocksource switch): keep
	// those lines beside any warning.
	for _, l := range strings.Split(dmesg, "\n") {
		if strings.Contains(l, "clocksource") && (strings.Contains(l, "unstable") || strings.Contains(l, "Switched")) {
			t.Logf("guest dmesg: %s", strings.TrimSpace(l))
		}
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// checkSamplerLog: the sampler found kprobes on this kernel and logged no
// error.
func checkSamplerLog(t *testing.T, log string) {
	t.Helper()
	if !strings.Contains(log, `msg="kprobes present: off-CPU profiling hooks finish_task_switch"`) {
		t.Errorf("the sampler did not report kprobes present")
	}
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "level=ERROR") || strings.Contains(l, "panic:") {
			t.Errorf("sampler: %s", l)
		}
	}
}

// stackSummary is what a check needs of a sample: its type, its frames'
// names leaf first with their kind (kernel or not), its count of
// observations and its process.
type stackSummary struct {
	kind    string // cpu, wallclock, off_cpu
	frames  []frameName
	count   int64
	process string
}

type frameName struct {
	name   string
	kernel bool
}

func (s stackSummary) has(fn string) int {
	for i, f := range s.frames {
		if f.name == fn {
			return i
		}
	}
	return -1
}

// offCPUShape checks an off-CPU stack that holds the blocking function:
// scheduler kernel frames (finish_task_switch or __schedule) above it,
// i.e. nearer the leaf.
func offCPUShape(s stackSummary) bool {
	i := s.has("tandem_block_wait")
	if i < 0 {
		return false
	}
	for _, f := range s.frames[:i] {
		if f.kernel && (strings.HasPrefix(f.name, "finish_task_switch") || f.name == "__schedule") {
			return true
		}
	}
	return false
}

// tally counts the samples of the hot function on CPU and of the
// blocking function off CPU, and checks the names of the sample types.
type tally struct {
	hot, blocked, offCPU, cpu int64
	offCPUNames               map[string]bool
	// byProcess counts on-CPU and off-CPU samples per process name
	// (where the format has one): how much of each the profiler's own
	// processes take.
	byProcess map[string][2]int64
	// kernelOnly counts off-CPU samples without a user-space frame, per
	// process (the issue saw only those).
	kernelOnly map[string]int64
}

func (ty *tally) add(s stackSummary, offName string) {
	if ty.offCPUNames == nil {
		ty.offCPUNames = map[string]bool{}
		ty.byProcess = map[string][2]int64{}
		ty.kernelOnly = map[string]int64{}
	}
	if s.process != "" {
		c := ty.byProcess[s.process]
		if s.kind == "cpu" {
			c[0] += s.count
		} else {
			c[1] += s.count
		}
		ty.byProcess[s.process] = c
	}
	switch s.kind {
	case "cpu":
		ty.cpu += s.count
		if s.has("tandem_hot_loop") >= 0 {
			ty.hot += s.count
		}
	default:
		ty.offCPUNames[s.kind] = true
		ty.offCPU += s.count
		user := false
		for _, f := range s.frames {
			user = user || !f.kernel
		}
		if !user && s.process != "" {
			ty.kernelOnly[s.process] += s.count
		}
		if offCPUShape(s) {
			ty.blocked += s.count
		}
	}
}

func (ty *tally) check(t *testing.T, where, offName string) {
	t.Helper()
	t.Logf("%s: %d on-CPU samples (%d in tandem_hot_loop), %d off-CPU (%d in tandem_block_wait under the scheduler), off-CPU named %v",
		where, ty.cpu, ty.hot, ty.offCPU, ty.blocked, ty.offCPUNames)
	if len(ty.byProcess) > 0 {
		t.Logf("%s: [on-CPU off-CPU] samples by process: %v; off-CPU samples without a user frame: %v", where, ty.byProcess, ty.kernelOnly)
	}
	if ty.hot == 0 {
		t.Errorf("%s: no on-CPU sample names tandem_hot_loop", where)
	}
	if ty.blocked == 0 {
		t.Errorf("%s: no off-CPU sample holds tandem_block_wait under scheduler kernel frames", where)
	}
	if len(ty.offCPUNames) != 1 || !ty.offCPUNames[offName] {
		t.Errorf("%s: off-CPU samples are named %v, want %s", where, ty.offCPUNames, offName)
	}
}

// checkGuestPprof reads the guest encoder's pprof files: it named the
// workload's functions from the executables the sampler passed.
func checkGuestPprof(t *testing.T, results map[string][]byte) {
	t.Helper()
	var ty tally
	files := 0
	for name, b := range results {
		if !strings.HasPrefix(name, "results/pprof/") {
			continue
		}
		files++
		p, err := parsePprof(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, s := range pprofStacks(p) {
			ty.add(s, "wallclock")
		}
	}
	if files == 0 {
		t.Fatal("the guest's encoder wrote no pprof file")
	}
	ty.check(t, fmt.Sprintf("guest encoder, %d pprof files (off-CPU counted in distinct stacks)", files), "wallclock")
}

func parsePprof(b []byte) (*profile.Profile, error) {
	if zr, err := gzip.NewReader(bytes.NewReader(b)); err == nil {
		if raw, err := io.ReadAll(zr); err == nil {
			b = raw
		}
	}
	return profile.ParseData(b)
}

// pprofStacks summarizes a pprof profile. A sample carries its value
// under its own sample type and 0 under the others; an off-CPU sample
// counts once (its value is nanoseconds). A kernel frame is a location
// without a mapping or in the kernel's.
func pprofStacks(p *profile.Profile) []stackSummary {
	var out []stackSummary
	for _, s := range p.Sample {
		ss := stackSummary{count: 1}
		for i, v := range s.Value {
			if v != 0 && i < len(p.SampleType) {
				ss.kind = p.SampleType[i].Type
				if ss.kind == "samples" {
					ss.kind, ss.count = "cpu", v
				}
				break
			}
		}
		for _, loc := range s.Location {
			kernel := loc.Mapping == nil || strings.Contains(loc.Mapping.File, "kernel") || strings.Contains(loc.Mapping.File, "vmlinux")
			for _, l := range loc.Line {
				if l.Function != nil {
					ss.frames = append(ss.frames, frameName{name: l.Function.Name, kernel: kernel})
				}
			}
		}
		out = append(out, ss)
	}
	return out
}

// dumpTotals writes the recording to a file and reads its totals.
func dumpTotals(t *testing.T, data []byte) (samples, resendLost int64) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sampler.dump")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return streamtest.DumpTotals(t, path)
}

// metric sums one metric's series in a Prometheus text exposition.
func metric(text, name string) (float64, bool) {
	var sum float64
	found := false
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, name) || (len(line) > len(name) && line[len(name)] != ' ' && line[len(name)] != '{') {
			continue
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			sum += v
			found = true
		}
	}
	return sum, found
}

// checkGuestBalance: every sample the sampler produced (its recording)
// was ingested by the encoder or reported lost in-band, and the encoder
// lost none on its side.
func checkGuestBalance(t *testing.T, metrics string, produced, resendLost int64) {
	t.Helper()
	if metrics == "" {
		t.Fatal("no encoder metrics from the guest")
	}
	ingested, ok := metric(metrics, "tandem_encoder_ingest_samples_total")
	if !ok {
		t.Fatal("the guest encoder's metrics have no tandem_encoder_ingest_samples_total")
	}
	lost, _ := metric(metrics, "tandem_encoder_sampler_lost_samples_total")
	// The sampler's counters arrive in-band (--stats-interval).
	own, _ := metric(metrics, "tandem_sampler_reporter_own_off_cpu_traces_total")
	traces, _ := metric(metrics, "tandem_sampler_reporter_traces_total")
	retries, _ := metric(metrics, "tandem_sampler_tracer_load_retries_total")
	t.Logf("guest sampler: %v traces from the tracer, %v of them its own off-CPU traces (left out); tracer loads repeated after its start-up probe failed: %v", traces, own, retries)
	t.Logf("guest balance: the sampler produced %d samples (its recording), the encoder ingested %v, %v reported lost in-band (%d in the loss reports)",
		produced, ingested, lost, resendLost)
	if produced == 0 {
		t.Error("the sampler's recording holds no samples")
	}
	if float64(produced) != ingested+lost {
		t.Errorf("produced %d != ingested %v + reported lost %v", produced, ingested, lost)
	}
	for _, m := range []string{"tandem_encoder_ingest_sequence_gaps_total", "tandem_encoder_ingest_duplicate_frames_total",
		"tandem_encoder_rejected_batches_total", "tandem_encoder_lost_samples_total"} {
		if v, _ := metric(metrics, m); v != 0 {
			t.Errorf("guest encoder: %s = %v, want 0", m, v)
		}
	}
}

// checkHostReplay replays the sampler's recording on the host into an
// OTLP receiver, a Parca server (Arrow v2) and pprof files at once.
func checkHostReplay(t *testing.T, g *guest, dump []byte, produced int64) {
	t.Helper()
	work := g.work
	path := filepath.Join(work, "sampler.dump")
	if err := os.WriteFile(path, dump, 0o644); err != nil {
		t.Fatal(err)
	}
	recv := otlptest.StartReceiver(t)
	srv := parcatest.StartServer(t)
	pprofDir := filepath.Join(work, "replay-pprof")
	conf := filepath.Join(work, "outputs.yaml")
	yaml := "outputs:\n" +
		"  - name: otlp\n    format: otlp\n    address: " + recv.Addr() + "\n    insecure: true\n    compression: none\n" +
		"  - name: parca\n    format: arrow-v2\n    address: " + srv.Addr() + "\n    insecure: true\n" +
		"  - name: local\n    format: pprof\n    dir: " + pprofDir + "\n"
	if err := os.WriteFile(conf, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(g.hostBin, "tandem-encoder"), "replay", "--config-path", conf,
		"--debuginfo-upload-disable", "--symbolize-native", "on", "--log-format", "text", path)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("replay of the guest's recording: %v\n%s", err, out)
	}

	// OTLP: off_cpu.
	var otlp tally
	var received int64
	for _, s := range recv.Samples(t) {
		ss := stackSummary{kind: s.SampleType, count: int64(len(s.Timestamps)), process: s.Resource["service.name"]}
		if ss.count == 0 {
			ss.count = s.Total()
		}
		if s.SampleType == "samples" || s.SampleType == "cpu" {
			ss.kind = "cpu"
		}
		for _, f := range s.Frames {
			ss.frames = append(ss.frames, frameName{name: f.Function, kernel: f.Type == "kernel"})
		}
		received += ss.count
		otlp.add(ss, "off_cpu")
	}
	otlp.check(t, "host replay, OTLP", "off_cpu")
	if n := otlp.byProcess["tandem-sampler"][1]; n != 0 {
		t.Errorf("host replay, OTLP: %d off-CPU samples of the sampler itself, want none (it leaves its own out)", n)
	}
	if received != produced {
		t.Errorf("host replay: the OTLP receiver got %d samples, the recording holds %d", received, produced)
	}

	// Arrow: wallclock rows hold the blocking function under the
	// scheduler's kernel frames. The Parca formats leave native names to
	// the server, so the rows carry the workload's addresses: the check
	// places them in tandem_block_wait's symbol range (the workload is
	// static and non-PIE, so an address is its virtual address).
	lo, hi := symbolRange(t, g.workload, "tandem_block_wait")
	types := map[string]int64{}
	var schedRows, blockedRows int
	for _, r := range srv.Rows() {
		ty, _, _ := strings.Cut(r.Type, " ")
		types[ty] += r.Value
		if !strings.HasPrefix(ty, "wallclock/") {
			continue
		}
		sched := false
		for _, loc := range strings.Split(r.Stack, "\n") {
			f := strings.Split(loc, "|")
			if len(f) < 8 {
				continue
			}
			if f[0] == "kernel" && (f[7] == "__schedule" || strings.HasPrefix(f[7], "finish_task_switch")) {
				sched = true
			}
			addr, err := strconv.ParseUint(strings.TrimPrefix(f[1], "0x"), 16, 64)
			if sched && err == nil && f[0] == "native" && f[2] == filepath.Base(g.workload) && addr >= lo && addr <= hi {
				blockedRows++
				break
			}
		}
		if sched {
			schedRows++
		}
	}
	t.Logf("host replay, Arrow: values by sample type %v, %d wallclock rows with the scheduler's frames, %d of them in tandem_block_wait [%#x, %#x]",
		types, schedRows, blockedRows, lo, hi)
	if types["wallclock/nanoseconds"] == 0 {
		t.Errorf("host replay, Arrow: no wallclock/nanoseconds rows (types %v)", keys(types))
	}
	if types["off_cpu/nanoseconds"] != 0 {
		t.Errorf("host replay, Arrow: off_cpu rows; Parca's name is wallclock")
	}
	if blockedRows == 0 {
		t.Errorf("host replay, Arrow: no wallclock row holds tandem_block_wait under the scheduler's kernel frames")
	}

	// pprof: wallclock, named.
	entries, err := os.ReadDir(pprofDir)
	if err != nil {
		t.Fatal(err)
	}
	var pp tally
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(pprofDir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		p, err := parsePprof(b)
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		for _, s := range pprofStacks(p) {
			pp.add(s, "wallclock")
		}
	}
	pp.check(t, fmt.Sprintf("host replay, %d pprof files (off-CPU counted in distinct stacks)", len(entries)), "wallclock")
}

func keys(m map[string]int64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// build is one architecture's binaries, built once per test binary.
type build struct {
	once sync.Once
	dir  string
	took time.Duration
	err  error
}

var (
	buildsMu  sync.Mutex
	builds    = map[string]*build{}
	buildRoot string // holds every architecture's directory
)

// guest is what the tests' VMs are made of: the binaries (built once per
// test binary and architecture, in a directory whose path the guest
// shares: see workload) and the kernel.
type guest struct {
	k         Kernel
	busybox   string
	work      string // this test's own directory (results disk, console log)
	bin       string // the shared binaries, for the guest's architecture
	hostBin   string // the same for the host's (the replay's encoder)
	workload  string // the C workload, at the same path here and in the guest
	buildTime time.Duration
}

func newGuest(t *testing.T, k Kernel, busybox string) *guest {
	t.Helper()
	arch := k.Arch
	if arch == "" {
		arch = "amd64"
	}
	b := buildFor(t, arch)
	took := b.took
	// The host replays the guest's recording with its own encoder.
	host := b
	if arch != runtime.GOARCH {
		host = buildFor(t, runtime.GOARCH)
		took += host.took
	}
	return &guest{k: k, busybox: busybox, work: t.TempDir(), bin: b.dir, hostBin: host.dir,
		workload: filepath.Join(b.dir, "offcpu"), buildTime: took}
}

// buildFor builds the binaries and the workload for arch, once.
func buildFor(t *testing.T, arch string) *build {
	t.Helper()
	buildsMu.Lock()
	if buildRoot == "" {
		dir, err := os.MkdirTemp("", "tandem-vmtest-")
		if err == nil {
			err = os.Chmod(dir, 0o755)
		}
		if err != nil {
			buildsMu.Unlock()
			t.Fatal(err)
		}
		buildRoot = dir
	}
	b := builds[arch]
	if b == nil {
		b = &build{dir: filepath.Join(buildRoot, arch)}
		builds[arch] = b
	}
	buildsMu.Unlock()
	b.once.Do(func() {
		began := time.Now()
		if b.err = os.Mkdir(b.dir, 0o755); b.err != nil {
			return
		}
		// Build fails t itself; b.err tells later callers it did.
		b.err = fmt.Errorf("the build for %s failed (see the first test that built it)", arch)
		harness.Build(t, harness.BuildConfig{GOARCH: arch, Dir: b.dir}, harness.Sampler, harness.Encoder, agent)
		b.err = nil
		// The workload lives at the same path in the guest and here:
		// the host's replay names its frames from the file at that path.
		if out, err := exec.Command(compilers[arch].cmd, "-static", "-pthread", "-O1", "-g0", "-fno-omit-frame-pointer",
			"-o", filepath.Join(b.dir, "offcpu"), "testdata/offcpu.c").CombinedOutput(); err != nil {
			b.err = fmt.Errorf("build the workload for %s: %v\n%s", arch, err, out)
		}
		b.took = time.Since(began)
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b
}

// agent is the guest's init.
var agent = harness.Target{Out: "agent", Package: "./test/vm/agent"}

// TestMain removes the shared binaries.
func TestMain(m *testing.M) {
	code := m.Run()
	if buildRoot != "" {
		os.RemoveAll(buildRoot)
	}
	os.Exit(code)
}

// pairPlan: the workload, the encoder writing pprof files, and the
// sampler with off-CPU at probability 1, recording its stream.
func (g *guest) pairPlan() Plan {
	return Plan{
		Workload: Command{Args: []string{g.workload}, Log: guestResults + "/workload.log"},
		Encoder: Command{UID: encoderUID, Log: guestResults + "/encoder.log", Args: []string{
			"/tandem/tandem-encoder", "serve", "--socket", guestSocket, "--allowed-uid", "0",
			"--output-dir", guestResults + "/pprof", "--profiling-duration", "5s",
			"--http-address", encoderHTTP, "--node", "vm", "--log-level", "debug", "--log-format", "text"}},
		Sampler: Command{Log: guestResults + "/sampler.log", Args: []string{
			"/tandem/tandem-sampler", "--socket", guestSocket, "--encoder-uid", strconv.Itoa(encoderUID),
			"--record", guestResults + "/sampler.dump", "--tracers", envOr("TANDEM_VM_TRACERS", "native"), "--off-cpu-threshold", "1",
			"--profiling-cpu-sampling-frequency", envOr("TANDEM_VM_HZ", strconv.Itoa(vmHz)), "--stats-interval", "2s",
			"--log-level", "debug", "--log-format", "text"}},
		Socket:        guestSocket,
		SocketDirUID:  encoderUID,
		EncoderHTTP:   encoderHTTP,
		MetricsFile:   guestResults + "/encoder.metrics",
		KernelLog:     guestResults + "/dmesg",
		DrainedMetric: `tandem_encoder_ingest_frames_total{type="goodbye"}`,
		ProfileFor:    profileFor,
		ReadyWithin:   samplerWithin,
		StopWithin:    stopWithin,
		WritableDirs:  []string{guestResults, guestResults + "/pprof"},
		Collect:       []string{guestResults},
		ResultsDevice: "/dev/vda",
	}
}

// initramfs writes the initramfs for plan and returns its path and size.
func (g *guest) initramfs(t *testing.T, plan Plan) (string, int64) {
	t.Helper()
	mods, err := g.k.ModuleFiles("virtio_pci", "virtio_blk")
	if err != nil {
		t.Fatal(err)
	}
	initScript, err := os.ReadFile("testdata/init.sh")
	if err != nil {
		t.Fatal(err)
	}
	planJSON, err := json.Marshal(plan)
	if err != nil {
		t.Fatal(err)
	}
	ird := NewInitramfs()
	ird.AddBytes("/init", initScript, 0o755)
	ird.AddFile("/bin/busybox", g.busybox, 0o755)
	for _, b := range []string{"tandem-sampler", "tandem-encoder", "agent"} {
		ird.AddFile("/tandem/"+b, filepath.Join(g.bin, b), 0o755)
	}
	ird.AddFile(g.workload, g.workload, 0o755)
	ird.AddBytes(PlanPath, planJSON, 0o644)
	// Compressed modules (6.12's .ko.xz) go in decompressed: busybox's
	// insmod hands the bytes to init_module as they are.
	var loaded []string
	for _, m := range mods {
		guestPath := filepath.Join("/lib/modules", g.k.Release, strings.TrimSuffix(m, ".xz"))
		if strings.HasSuffix(m, ".xz") {
			raw, err := exec.Command("xz", "-dc", filepath.Join(g.k.Modules, m)).Output()
			if err != nil {
				t.Fatalf("decompress %s: %v", m, err)
			}
			ird.AddBytes(guestPath, raw, 0o644)
		} else {
			ird.AddFile(guestPath, filepath.Join(g.k.Modules, m), 0o644)
		}
		loaded = append(loaded, strings.TrimSuffix(m, ".xz"))
	}
	ird.AddBytes("/tandem/modules", []byte(strings.Join(loaded, "\n")+"\n"), 0o644)
	// The encoder's uid needs no passwd entry; busybox's tools like one.
	ird.AddBytes("/etc/passwd", []byte("root:x:0:0:root:/:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n"), 0o644)
	ird.AddBytes("/etc/group", []byte("root:x:0:\nnogroup:x:65534:\n"), 0o644)
	path := filepath.Join(g.work, "initramfs.cpio")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	size, err := ird.WriteTo(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	return path, size
}

// TestKernelRefusal boots 6.1 with a kernel feature the tracer needs
// taken away, and checks that the sampler exits at once, before loading
// the tracer, with one line that names what is missing, the fix and the
// kernel's release:
//   - locked down for confidentiality (a boot option; that mode forbids
//     kprobes, perf events on the kernel and BPF reads of kernel memory);
//   - every kprobe disarmed (0 in debugfs's kprobes/enabled), with off-CPU
//     profiling on: its kprobe would attach and never fire.
func TestKernelRefusal(t *testing.T) {
	for _, tc := range []struct {
		name   string
		append string
		writes []FileWrite
		want   string // in the sampler's last line
	}{
		{name: "lockdown", append: "lockdown=confidentiality", want: "lockdown=confidentiality"},
		{name: "kprobes-disarmed", writes: []FileWrite{{Path: "/sys/kernel/debug/kprobes/enabled", Content: "0"}},
			want: "every kprobe is disarmed (/sys/kernel/debug/kprobes/enabled is 0)"},
	} {
		t.Run(tc.name, func(t *testing.T) { testRefusal(t, tc.append, tc.writes, tc.want) })
	}
}

func testRefusal(t *testing.T, cmdline string, writes []FileWrite, want string) {
	k, busybox := requireVM(t, Matrix[0])
	g := newGuest(t, k, busybox)
	plan := g.pairPlan()
	plan.ExpectSamplerExit = true
	plan.Writes = writes
	irdPath, _ := g.initramfs(t, plan)
	disk := filepath.Join(g.work, "results.img")
	vm, err := Start(Config{Kernel: k, Initramfs: irdPath, ResultsDisk: disk, ResultsBytes: 64 << 20,
		MemoryMiB: 1024, CPUs: 2, Append: cmdline})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vm.Kill)
	exited, err := vm.Await(EventSamplerExited, "the sampler's exit", bootWithin+encoderWithin+samplerWithin)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := vm.Await(EventResults, "the results", 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := vm.Wait(time.Minute); err != nil {
		t.Fatalf("qemu after the guest's power-off: %v", err)
	}
	results, err := ReadResults(disk)
	if err != nil {
		t.Fatal(err)
	}
	log := strings.TrimSpace(string(results["results/sampler.log"]))
	last := log[strings.LastIndex(log, "\n")+1:]
	t.Logf("the sampler exited %.1f s after its start (%s): %s", exited.Value, exited.Detail, last)
	if exited.Detail == "exit status 0" {
		t.Errorf("the sampler exited 0 on a kernel it cannot use")
	}
	if !strings.HasPrefix(last, "tandem-sampler: kernel "+k.Release+": ") || !strings.Contains(last, want) {
		t.Errorf("the sampler's last line %q: want one line naming kernel %s and %q", last, k.Release, want)
	}
	if strings.Contains(log, "eBPF tracer loaded") || strings.Contains(log, "verifier") {
		t.Errorf("the sampler went on to load the tracer:\n%s", log)
	}
	checkKernelWarnings(t, vm, string(results["results/dmesg"]))
}

// TestGuestFailureIsReported: a guest whose run cannot go on (here, a
// workload that does not exist) says why on the console, still writes its
// results and powers off; a phase that does not come in time is named.
func TestGuestFailureIsReported(t *testing.T) {
	k, busybox := requireVM(t, Matrix[0])
	g := newGuest(t, k, busybox)
	plan := g.pairPlan()
	plan.Workload.Args = []string{"/nonexistent/workload"}
	irdPath, _ := g.initramfs(t, plan)
	disk := filepath.Join(g.work, "results.img")
	vm, err := Start(Config{Kernel: k, Initramfs: irdPath, ResultsDisk: disk, ResultsBytes: 16 << 20, MemoryMiB: 1024, CPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vm.Kill)
	if _, err := vm.Await(EventBooted, "boot", time.Millisecond); err == nil || !strings.Contains(err.Error(), "the VM did not reach boot in 1ms") {
		t.Errorf("a boot that cannot happen in 1 ms: err %v", err)
	}
	_, err = vm.Await(EventSamplerReady, "the sampler's readiness", bootWithin+encoderWithin)
	if !errors.Is(err, ErrGuestFailed) || !strings.Contains(err.Error(), "/nonexistent/workload") {
		t.Fatalf("err %v, want the guest's failure naming the workload", err)
	}
	if _, err := vm.Await(EventResults, "the results", 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := vm.Wait(time.Minute); err != nil {
		t.Fatalf("qemu after the guest's power-off: %v", err)
	}
	if _, err := vm.Await(EventBooted, "anything", time.Minute); err == nil || !strings.Contains(err.Error(), "qemu exited") {
		t.Errorf("waiting on a VM that is gone: err %v, want qemu's exit", err)
	}
	if _, err := ReadResults(disk); err != nil && !strings.Contains(err.Error(), "no files") {
		t.Errorf("results disk: %v", err)
	}
}

// symbolRange returns the addresses of a function in an executable's
// symbol table: [start, end].
func symbolRange(t *testing.T, exe, fn string) (uint64, uint64) {
	t.Helper()
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatalf("%s: %v", exe, err)
	}
	for _, s := range syms {
		if s.Name == fn && s.Size > 0 {
			return s.Value, s.Value + s.Size
		}
	}
	t.Fatalf("%s has no symbol %s", exe, fn)
	return 0, 0
}
