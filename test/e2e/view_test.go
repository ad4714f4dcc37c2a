package e2e

import (
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/tandem-profiler/tandem/test/harness"
	"github.com/tandem-profiler/tandem/test/headless"
	"github.com/tandem-profiler/tandem/test/otlptest"
)

// checkView opens the pprof files the pair wrote to dir (as the
// encoder's user) and the sampler's dump (root's file, converted by view,
// its executables read again by path) with `tandem-encoder view`, in a
// real headless Chromium: the flame graph, focused on the workloads,
// renders boxes named after the C workload's functions (no debug info:
// named by the encoder from its symbol table), the Go workload's and the
// Python workload's.
func checkView(t *testing.T, p *pair, dir string) {
	t.Helper()
	if files, _ := filepath.Glob(filepath.Join(dir, "*.pb.gz")); len(files) == 0 {
		t.Fatal("the encoder wrote no pprof file")
	}
	want := []string{"tandem_leaf", "tandem_middle", "main.tandemGoHotLoop", "tandem_py_alpha", "tandem_py_beta"}
	// The pprof files, as the encoder's user; the sampler's dump (root's
	// file), converted by view, its executables read again by path.
	for _, src := range []struct {
		what string
		uid  int
		path string
	}{{"pprof files", encoderUID, dir}, {"the sampler's dump", 0, p.dump}} {
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
	addr := otlptest.FreeAddr(t)
	v := start(t, "view", uid, filepath.Join(bin, "tandem-encoder"), "view", "--http-address", addr, path)
	defer v.Kill()
	harness.WaitFor(t, "view's web UI", 60*time.Second, func() bool { return harness.HTTPOK(addr + "/ui/") }, v)
	q := url.Values{"f": {"tandem_leaf|tandemGoHotLoop|tandem_py_alpha|tandem_py_beta"}}
	return headless.FlameGraphBoxes(t, "http://"+addr+"/ui/flamegraph?"+q.Encode())
}
