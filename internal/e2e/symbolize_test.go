package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/tandem-profiler/tandem/internal/otlptest"
	"github.com/tandem-profiler/tandem/internal/privtest"
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
	src := filepath.Join(moduleRoot(t), "encoder/symbolize/testdata/workload.c")
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
	requirePrivileges(t)
	cw := buildCWorkload(t)
	// Two outputs at once, OTLP and pprof files, --symbolize-native=auto
	// (the default) and no symbol upload flag at all.
	recv := otlptest.StartReceiver(t)
	shared := sharedDir(t)
	liveDir := filepath.Join(shared, "profiles")
	cfgPath := filepath.Join(shared, "outputs.yaml")
	cfg := "outputs:\n  - name: collector\n    format: otlp\n    address: " + recv.Addr() + "\n    insecure: true\n" +
		"  - name: local\n    format: pprof\n    dir: " + liveDir + "\n"
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(liveDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(liveDir, encoderUID, encoderUID); err != nil {
		t.Fatal(err)
	}
	p := startPairOrdered(t, false, []string{"--config-path", cfgPath})
	c := start(t, "c workload", 0, "timeout", "10", cw, "0")
	g := start(t, "go workload", 0, filepath.Join(p.bin, "gobusy"), "10s")
	for _, w := range []*proc{c, g} {
		select {
		case <-w.done:
		case <-time.After(40 * time.Second):
			t.Fatalf("%s did not finish", w.name)
		}
	}
	p.sampler.stop(t, 30*time.Second)
	time.Sleep(3 * time.Second) // the encoder's last flush
	if n := encoderMetric(t, p.httpAddr, "tandem_encoder_symbolizer_resolved_total"); n == 0 {
		t.Error("the symbolizer named no location")
	}
	p.encoder.stop(t, 30*time.Second)

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

// checkPprofNames fails unless the pprof files in dir name every function
// of want.
func checkPprofNames(t *testing.T, dir, what string, want []string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.pb.gz"))
	if len(files) == 0 {
		t.Fatalf("%s: no pprof file in %s", what, dir)
	}
	inPprof := map[string]bool{}
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
