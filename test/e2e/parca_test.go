package e2e

import (
	"bytes"
	"debug/elf"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tandem-profiler/tandem/test/harness"
	"github.com/tandem-profiler/tandem/test/headless"
	"github.com/tandem-profiler/tandem/test/parcatest"
	"github.com/tandem-profiler/tandem/test/testbin"
)

// nativeFrame is a native location of a row: executable base name, build
// id and address.
type nativeFrame struct {
	file, buildID string
	addr          uint64
}

// nativeFrames lists a row's native frames (the stack's
// frame_type|address|mapping_file|build_id|... lines).
func nativeFrames(r parcatest.Row) []nativeFrame {
	var out []nativeFrame
	for _, loc := range strings.Split(r.Stack, "\n") {
		f := strings.Split(loc, "|")
		if len(f) < 4 || f[0] != "native" || f[3] == "" {
			continue
		}
		addr, err := strconv.ParseUint(strings.TrimPrefix(f[1], "0x"), 16, 64)
		if err != nil {
			continue
		}
		out = append(out, nativeFrame{file: f[2], buildID: f[3], addr: addr})
	}
	return out
}

// TestPairToParca puts the pair where parca-agent would be, in front of a
// Parca-compatible server (test/parcatest: the profile store, enforcing
// what the real server enforces, and its DebuginfoService on the same
// address, which symbolizes uploads as the server does), with
// parca-agent's default format, arrow-v2, and symbol upload on by default:
// the server accepts every request; rows carry parca-agent's producer,
// sample type and default labels; Python frames are named; every native
// executable the C and Go workloads' rows point at was uploaded, stripped,
// from the descriptor the sampler passed, under exactly the build id those
// rows carry; and the server names those rows' hot frames from the
// stripped uploads: the C workload's (built without debug information, so
// from its symbol table) and the Go workload's. The same run's pprof
// files, and the sampler's dump, look right in view (checkView).
func TestPairToParca(t *testing.T) {
	t.Parallel()
	requirePrivileges(t)
	headless.Chromium(t) // for checkView
	src, err := os.ReadFile(filepath.Join(harness.ModuleRoot(t), "encoder/symbolize/testdata/workload.c"))
	if err != nil {
		t.Fatal(err)
	}
	cw := testbin.C(t, sharedDir(t), "cworkload", string(src), "-g0", "-O1")
	srv := parcatest.StartServer(t)
	// Two outputs: the Parca server (parca-agent's default format), and
	// pprof files for view (below).
	pprofDir, conf := sharedDir(t), filepath.Join(sharedDir(t), "outputs.yaml")
	yaml := "outputs:\n  - name: parca\n    format: arrow-v2\n    address: " + srv.Addr() + "\n    insecure: true\n" +
		"  - name: local\n    format: pprof\n    dir: " + pprofDir + "\n"
	if err := os.WriteFile(conf, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startPairOrdered(t, false, []string{"--config-path", conf, "--debuginfo-temp-dir", sharedDir(t)})
	// 7 s: on a loaded machine the Python workload's two functions get
	// 10-20 samples (checkView needs both), the others more.
	c := start(t, "c workload", 0, "timeout", "7", cw, "0")
	w := startWorkloads(t, p.bin, 7*time.Second)
	w.wait(t, 40*time.Second)
	select {
	case <-c.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the C workload did not finish")
	}

	// The workloads' native frames name their executables and build ids.
	buildIDs := map[string]map[string]bool{"gobusy": {}, "cworkload": {}}
	var rows, python int
	harness.WaitFor(t, "rows of every workload at the server", 30*time.Second, func() bool {
		rows, python = 0, 0
		for _, r := range srv.Rows() {
			rows++
			if strings.Contains(r.Stack, "|tandem_py_alpha|") || strings.Contains(r.Stack, "|tandem_py_beta|") {
				python++
			}
			for _, f := range nativeFrames(r) {
				if ids, ok := buildIDs[f.file]; ok {
					ids[f.buildID] = true
				}
			}
		}
		return python > 0 && len(buildIDs["gobusy"]) > 0 && len(buildIDs["cworkload"]) > 0
	}, p.Sampler, p.Encoder)
	for exe, ids := range buildIDs {
		for id := range ids {
			harness.WaitFor(t, "the upload of "+exe+"'s symbols under "+id, 60*time.Second, func() bool {
				_, ok := srv.Symbols().Uploaded(id)
				return ok
			}, p.Sampler, p.Encoder)
			b, _ := srv.Symbols().Uploaded(id)
			ef, err := elf.NewFile(bytes.NewReader(b))
			if err != nil {
				t.Fatalf("%s's upload is not ELF: %v", exe, err)
			}
			if s := ef.Section(".text"); s == nil || s.Type != elf.SHT_NOBITS {
				t.Errorf("%s's upload keeps .text: not the stripped copy", exe)
			}
		}
	}
	p.Sampler.Stop(t, 30*time.Second)
	p.WaitDelivered(t, 2)
	p.Encoder.Stop(t, 30*time.Second)

	if errs := srv.Errors(); len(errs) != 0 {
		t.Errorf("the server rejected %d requests, first: %v", len(errs), errs[0])
	}
	if srv.WriteArrowCalls() == 0 {
		t.Error("no WriteArrow call (arrow-v2 is parca-agent's default format)")
	}
	all := srv.Rows()
	for i, r := range all {
		labels := map[string]string{}
		for _, kv := range strings.Split(r.Labels, ",") {
			k, v, _ := strings.Cut(kv, "=")
			labels[k] = v
		}
		var missing []string
		for _, name := range []string{"node", "comm", "cpu", "thread_id", "thread_name"} {
			if labels[name] == "" {
				missing = append(missing, name)
			}
		}
		if r.Producer != "parca_agent" || !strings.HasPrefix(r.Type, "samples/count cpu/nanoseconds ") || len(missing) > 0 || r.Stack == "" {
			t.Errorf("row %d: producer %q, type %q, labels %q (missing %v), %d stack bytes", i, r.Producer, r.Type, r.Labels, missing, len(r.Stack))
			break
		}
	}

	// The server names the workloads' frames from the stripped uploads:
	// samples by function, per executable.
	named := map[string]map[string]int64{"gobusy": {}, "cworkload": {}}
	var failed []string
	for _, r := range all {
		for _, f := range nativeFrames(r) {
			byFn, ok := named[f.file]
			if !ok {
				continue
			}
			lines, err := srv.Symbols().Symbolize(f.buildID, parcatest.Mapping{}, f.addr)
			if err != nil {
				failed = append(failed, err.Error())
				continue
			}
			for _, l := range lines {
				byFn[l.Function] += r.Value
			}
		}
	}
	if len(failed) > 0 {
		t.Errorf("%d frames not symbolized, first: %s", len(failed), failed[0])
	}
	for exe, fns := range map[string][]string{"cworkload": {"tandem_leaf", "tandem_middle"}, "gobusy": {"main.tandemGoHotLoop"}} {
		for _, fn := range fns {
			if named[exe][fn] == 0 {
				t.Errorf("no %s frame named %s by the server (it named %v)", exe, fn, named[exe])
			}
		}
	}
	t.Logf("%d rows (%d with the Python workload's functions) in %d WriteArrow calls; %d executables uploaded; named by the server: %v",
		len(all), python, srv.WriteArrowCalls(), len(srv.Symbols().Finished()), named)

	checkView(t, p, pprofDir)
}
