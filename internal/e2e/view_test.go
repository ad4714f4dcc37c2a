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
// its symbol table), the Go workload's and the Python workload's.
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

	addr := freeAddr(t)
	v := start(t, "view", encoderUID, filepath.Join(p.bin, "tandem-encoder"), "view", "--http-address", addr, out)
	t.Cleanup(v.kill)
	waitFor(t, "view's web UI", 60*time.Second, func() bool {
		if v.exited() {
			t.Fatalf("view exited: %v\n%s", v.err, tail(v.out.String(), 20))
		}
		return httpOK(addr + "/ui/")
	})
	want := []string{"tandem_leaf", "tandem_middle", "main.tandemGoHotLoop", "tandem_py_alpha", "tandem_py_beta"}
	q := url.Values{"f": {"tandem_leaf|tandemGoHotLoop|tandem_py_alpha|tandem_py_beta"}}
	boxes := headless.FlameGraphBoxes(t, "http://"+addr+"/ui/flamegraph?"+q.Encode())
	seen := map[string]bool{}
	for _, b := range boxes {
		seen[b] = true
	}
	for _, fn := range want {
		if !seen[fn] {
			t.Errorf("no flame graph box names %s (boxes: %q)", fn, boxes)
		}
	}
	t.Logf("%d labelled boxes: %q", len(boxes), boxes)
}
