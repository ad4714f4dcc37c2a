package e2e

import (
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tandem-profiler/tandem/internal/headless"
	"github.com/tandem-profiler/tandem/internal/testbin"
)

// TestViewPairProfiles: the pprof files the live pair writes, with
// nothing but the default output (no remote store), opened with
// `tandem-encoder view` (run unprivileged) in a real headless Chromium:
// the flame graph, focused on the workloads, renders boxes named after
// the C workload's functions (no debug info: named by the encoder from
// its symbol table), the Go workload's and the Python workload's. The
// sampler's dump, given to view directly, shows the same.
func TestViewPairProfiles(t *testing.T) {
	requirePrivileges(t)
	headless.Chromium(t)
	src, err := os.ReadFile(filepath.Join(moduleRoot(t), "encoder/symbolize/testdata/workload.c"))
	if err != nil {
		t.Fatal(err)
	}
	cw := testbin.C(t, sharedDir(t), "cworkload", string(src), "-g0", "-O1")
	out := sharedDir(t)
	p := startPairOrdered(t, false, []string{"--output-dir", out})
	c := start(t, "c workload", 0, "timeout", "5", cw, "0")
	w := startWorkloads(t, p.bin, 5*time.Second)
	w.wait(t, 40*time.Second)
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the C workload did not finish")
	}
	p.sampler.stop(t, 30*time.Second)
	time.Sleep(3 * time.Second) // the encoder's last flush
	p.encoder.stop(t, 30*time.Second)
	if files, _ := filepath.Glob(filepath.Join(out, "*.pb.gz")); len(files) == 0 {
		t.Fatal("the encoder wrote no pprof file")
	}

	want := []string{"tandem_leaf", "tandem_middle", "main.tandemGoHotLoop", "tandem_py_alpha", "tandem_py_beta"}
	// The pprof files, as the encoder's user; the sampler's dump (root's
	// file), converted by view, its executables read again by path.
	for _, src := range []struct {
		what string
		uid  int
		path string
	}{{"pprof files", encoderUID, out}, {"the sampler's dump", 0, p.dump}} {
		seen := map[string]bool{}
		boxes := viewFlameGraph(t, p.bin, src.uid, src.path)
		for _, b := range boxes {
			seen[b] = true
		}
		for _, fn := range want {
			if !seen[fn] {
				t.Errorf("%s: no flame graph box names %s (boxes: %q)", src.what, fn, boxes)
			}
		}
		t.Logf("%s: %d labelled boxes: %q", src.what, len(boxes), boxes)
	}
}

// viewFlameGraph serves path with `tandem-encoder view` as uid and returns
// the labels of the flame graph's boxes, focused on the workloads'
// functions, as headless Chromium renders them.
func viewFlameGraph(t *testing.T, bin string, uid int, path string) []string {
	t.Helper()
	addr := freeAddr(t)
	v := start(t, "view", uid, filepath.Join(bin, "tandem-encoder"), "view", "--http-address", addr, path)
	defer v.kill()
	waitFor(t, "view's web UI", 60*time.Second, func() bool {
		if v.exited() {
			t.Fatalf("view exited: %v\n%s", v.err, tail(v.out.String(), 20))
		}
		return httpOK(addr + "/ui/")
	})
	q := url.Values{"f": {"tandem_leaf|tandemGoHotLoop|tandem_py_alpha|tandem_py_beta"}}
	return headless.FlameGraphBoxes(t, "http://"+addr+"/ui/flamegraph?"+q.Encode())
}
