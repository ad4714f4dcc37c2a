package e2e

import (
	"debug/elf"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/tandem-profiler/tandem/test/harness"
	"github.com/tandem-profiler/tandem/test/otlptest"
	"github.com/tandem-profiler/tandem/test/privtest"
)

// buildCWorkload compiles encoder/symbolize/testdata/workload.c without
// debug information (gcc -g0), dynamically linked: its functions are named
// only by .symtab, its calls into libc go through the PLT.
func buildCWorkload(t *testing.T) string {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		privtest.SkipOrFail(t, "gcc not installed (make tools installs it): %v", err)
	}
	dir := sharedDir(t)
	out := filepath.Join(dir, "cworkload")
	src := filepath.Join(harness.ModuleRoot(t), "encoder/symbolize/testdata/workload.c")
	if b, err := exec.Command(gcc, "-g0", "-O1", "-o", out, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, b)
	}
	return out
}

// TestSymbolizeNative: without --symbolize-go and without any symbol
// upload, a C workload without debug information and a Go workload come
// out with their function names, named by the unprivileged encoder from
// the descriptors the sampler passed: in the OTLP receiver's profiles and
// the pprof files of one live encoder with both outputs, and in the pprof
// files of a replay of the sampler's dump on this machine (dumps keep
// their names where their executables still are).
func TestSymbolizeNative(t *testing.T) {
	t.Parallel()
	requirePrivileges(t)
	cw := buildCWorkload(t)
	// Two outputs at once, OTLP and pprof files, --symbolize-native=auto
	// (the default) and no symbol upload flag at all.
	recv, cfgPath, liveDir := otlpAndPprofOutputs(t)
	p := startPairOrdered(t, false, []string{"--config-path", cfgPath})
	// 6 s: 15-40 samples of each function on a loaded machine; one
	// named frame of each is what the checks need.
	c := start(t, "c workload", 0, "timeout", "6", cw, "0")
	g := start(t, "go workload", 0, filepath.Join(p.bin, "gobusy"), "6s")
	for _, w := range []*proc{c, g} {
		select {
		case <-w.Done():
		case <-time.After(40 * time.Second):
			t.Fatalf("%s did not finish", w.Name)
		}
	}
	p.Sampler.Stop(t, 30*time.Second)
	p.WaitDelivered(t, 2)
	if n := harness.EncoderMetric(t, p.HTTPAddr, "tandem_encoder_symbolizer_resolved_total"); n == 0 {
		t.Error("the symbolizer named no location")
	}
	p.Encoder.Stop(t, 30*time.Second)

	// OTLP: the C functions (symbol table, PLT) and the Go function
	// (pclntab), as native frames.
	found := map[string]int64{}
	want := []string{"tandem_leaf", "tandem_middle", "main.tandemGoHotLoop"}
	for _, s := range recv.Samples(t) {
		for _, f := range s.Frames {
			if f.Type == "go" {
				t.Fatalf("Go frame %q: the sampler symbolized without --symbolize-go", f.Function)
			}
			for _, fn := range strings.Split(f.Functions, ";") {
				for _, w := range want {
					if fn == w && f.Type == "native" {
						found[w] += s.Total()
						if w == "main.tandemGoHotLoop" && (f.File == "" || f.Line == 0) {
							t.Errorf("Go frame %s without file and line: %+v", w, f)
						}
					}
				}
			}
		}
	}
	t.Logf("OTLP samples by function: %v", found)
	for _, w := range want {
		if found[w] == 0 {
			t.Errorf("no native frame named %s in the OTLP profiles", w)
		}
	}

	// pprof files, from the sampler's dump: no descriptors, so the
	// encoder reads the executables by path (checking their file ids).
	outDir := sharedDir(t)
	out, err := runCommand(filepath.Join(p.bin, "tandem-encoder"), "replay", "--output-dir", outDir, "--profiling-duration", "2s", p.dump)
	if err != nil {
		t.Fatalf("replay %s: %v\n%s", p.dump, err, out)
	}
	checkPprofNames(t, liveDir, "live pprof output", want)
	checkPprofNames(t, outDir, "replayed dump", want)
}

// otlpAndPprofOutputs writes an encoder config file with two outputs: OTLP
// to a new receiver, and pprof files in a directory the encoder can write.
func otlpAndPprofOutputs(t *testing.T) (recv *otlptest.Receiver, cfgPath, pprofDir string) {
	t.Helper()
	recv = otlptest.StartReceiver(t)
	shared := sharedDir(t)
	pprofDir = filepath.Join(shared, "profiles")
	cfgPath = filepath.Join(shared, "outputs.yaml")
	cfg := "outputs:\n  - name: collector\n    format: otlp\n    address: " + recv.Addr() + "\n    insecure: true\n" +
		"  - name: local\n    format: pprof\n    dir: " + pprofDir + "\n"
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(pprofDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(pprofDir, encoderUID, encoderUID); err != nil {
		t.Fatal(err)
	}
	return recv, cfgPath, pprofDir
}

// checkPprofNames fails unless the pprof files in dir name every function
// of want.
func checkPprofNames(t *testing.T, dir, what string, want []string) {
	t.Helper()
	inPprof := map[string]bool{}
	for _, prof := range pprofProfiles(t, dir, what) {
		for _, l := range prof.Location {
			for _, ln := range l.Line {
				if ln.Function != nil {
					inPprof[ln.Function.Name] = true
				}
			}
		}
	}
	for _, w := range want {
		if !inPprof[w] {
			t.Errorf("%s: no pprof location names %s", what, w)
		}
	}
}

// libcInternal are libc functions absent from its .dynsym that
// testdata/libcbusy.c spends its time in: only libc's debug file names
// them.
var libcInternal = []string{"msort_with_tmp.part.0", "_int_malloc", "_int_free", "malloc_consolidate", "unlink_chunk.constprop.0"}

// requireLibcDebugFile installs Debian's libc6-dbg when libc's debug file
// is not under /usr/lib/debug/.build-id (make tools installs it too) and
// returns libc's path.
func requireLibcDebugFile(t *testing.T) string {
	t.Helper()
	libc := "/lib/x86_64-linux-gnu/libc.so.6"
	if runtime.GOARCH == "arm64" {
		libc = "/lib/aarch64-linux-gnu/libc.so.6"
	}
	ef, err := elf.Open(libc)
	if err != nil {
		privtest.SkipOrFail(t, "no libc at %s: %v", libc, err)
	}
	defer ef.Close()
	note := ef.Section(".note.gnu.build-id")
	if note == nil {
		t.Fatalf("%s has no build id", libc)
	}
	data, err := note.Data()
	if err != nil || len(data) < 18 {
		t.Fatalf("%s build id note %x: %v", libc, data, err)
	}
	id := hex.EncodeToString(data[16:])
	debug := filepath.Join("/usr/lib/debug/.build-id", id[:2], id[2:]+".debug")
	if !fileExists(debug) {
		if out, err := exec.Command("apt-get", "install", "-y", "-qq", "libc6-dbg").CombinedOutput(); err != nil {
			privtest.SkipOrFail(t, "apt-get install libc6-dbg: %v\n%s", err, out)
		}
	}
	if !fileExists(debug) {
		privtest.SkipOrFail(t, "libc6-dbg installed, but %s (libc's build id) is not there: another libc6 version?", debug)
	}
	return libc
}

// TestLibcDebugSymbols: with Debian's libc6-dbg installed, the pair's
// profile of a workload inside libc names libc's internal functions
// (_int_malloc, msort_with_tmp.part.0), read by the unprivileged encoder
// from /usr/lib/debug/.build-id; the same dump replayed with
// --debuginfo-directories= (no debug files) leaves those very addresses
// unnamed, [libc.so.6] in a flame graph.
func TestLibcDebugSymbols(t *testing.T) {
	t.Parallel()
	requirePrivileges(t)
	libc := requireLibcDebugFile(t)
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		privtest.SkipOrFail(t, "gcc not installed (make tools installs it): %v", err)
	}
	busy := filepath.Join(sharedDir(t), "libcbusy")
	if b, err := exec.Command(gcc, "-O1", "-g0", "-o", busy, filepath.Join(harness.ModuleRoot(t), "test/e2e/testdata/libcbusy.c")).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, b)
	}

	p := startPair(t)
	// 5 s: most of its samples are in msort_with_tmp, and one named
	// internal function is what the checks need.
	w := start(t, "libc workload", 0, busy, "5")
	select {
	case <-w.Done():
	case <-time.After(40 * time.Second):
		t.Fatal("the libc workload did not finish")
	}
	p.Sampler.Stop(t, 30*time.Second)
	// The encoder's last flush brings the workload's libc frames, named.
	var named map[string]int64
	harness.WaitFor(t, "libc internal functions in the OTLP profiles", 30*time.Second, func() bool {
		named = libcNames(p.recv.Samples(t), libc)
		return len(named) > 0
	}, p.Encoder)
	t.Logf("OTLP samples in libc internal functions: %v", named)
	if n := harness.EncoderMetric(t, p.HTTPAddr, `tandem_encoder_symbolizer_debug_files_total{via="build_id"}`); n < 1 {
		t.Errorf("debug files read by build id: %v", n)
	}
	p.Encoder.Stop(t, 30*time.Second)

	// The sampler's dump replayed with and without the debug directories:
	// the same libc addresses, named only with them.
	with, without := sharedDir(t), sharedDir(t)
	for dir, extra := range map[string][]string{with: nil, without: {"--debuginfo-directories="}} {
		args := append([]string{"replay", "--output-dir", dir, "--profiling-duration", "2s"}, extra...)
		if out, err := runCommand(filepath.Join(p.bin, "tandem-encoder"), append(args, p.dump)...); err != nil {
			t.Fatalf("replay %v: %v\n%s", extra, err, out)
		}
	}
	withNames, withoutNames := pprofLibcNames(t, with, libc), pprofLibcNames(t, without, libc)
	internal := 0
	for addr, fn := range withNames {
		if !slices.Contains(libcInternal, fn) {
			continue
		}
		internal++
		if got, ok := withoutNames[addr]; !ok || got != "" {
			t.Errorf("libc address %#x: %s with libc6-dbg, %q (present %v) without; want an unnamed location", addr, fn, got, ok)
		}
	}
	if internal == 0 {
		t.Errorf("the replay with the debug directories names no libc internal function: %v", withNames)
	}
	t.Logf("libc locations named as internal functions only with libc6-dbg: %d", internal)
}

// libcNames counts the samples of native frames in libc per internal
// function name.
func libcNames(samples []otlptest.Sample, libc string) map[string]int64 {
	out := map[string]int64{}
	for _, s := range samples {
		for _, f := range s.Frames {
			if f.Type != "native" || filepath.Base(f.MappingFile) != filepath.Base(libc) {
				continue
			}
			for _, fn := range strings.Split(f.Functions, ";") {
				if slices.Contains(libcInternal, fn) {
					out[fn] += s.Total()
				}
			}
		}
	}
	return out
}

// pprofProfiles parses every pprof file in dir, failing when there is none
// (what names dir in the message).
func pprofProfiles(t *testing.T, dir, what string) []*profile.Profile {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.pb.gz"))
	if len(files) == 0 {
		t.Fatalf("%s: no pprof file in %s", what, dir)
	}
	var out []*profile.Profile
	for _, path := range files {
		fh, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		prof, err := profile.Parse(fh)
		fh.Close()
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, prof)
	}
	return out
}

// pprofLibcNames returns the function of every libc location in the pprof
// files of dir, by address ("" for an unnamed location).
func pprofLibcNames(t *testing.T, dir, libc string) map[uint64]string {
	t.Helper()
	out := map[uint64]string{}
	for _, prof := range pprofProfiles(t, dir, "libc names") {
		for _, l := range prof.Location {
			if l.Mapping == nil || filepath.Base(l.Mapping.File) != filepath.Base(libc) {
				continue
			}
			name := ""
			if n := len(l.Line); n > 0 && l.Line[n-1].Function != nil {
				name = l.Line[n-1].Function.Name
			}
			out[l.Address] = name
		}
	}
	return out
}
