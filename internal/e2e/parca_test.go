package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/tandem-profiler/tandem/internal/parcatest"
)

// TestPairToParca puts the pair where parca-agent would be, in front of a
// Parca-compatible server (internal/parcatest: the profile store, enforcing
// what the real server enforces, and its DebuginfoService on the same
// address), with parca-agent's default format, arrow-v2, and symbol upload
// on by default: the server accepts every request; rows carry
// parca-agent's producer, sample type and default labels; Python frames
// are named; and every native executable the Go workload's rows point at
// was uploaded, from the descriptor the sampler passed, under exactly the
// build id those rows carry, so the server can symbolize them.
func TestPairToParca(t *testing.T) {
	requirePrivileges(t)
	srv := parcatest.StartServer(t)
	p := startPairOrdered(t, false, []string{"--remote-store-address", srv.Addr(), "--remote-store-insecure",
		"--remote-store-format", "arrow-v2", "--debuginfo-temp-dir", sharedDir(t)})
	w := startWorkloads(t, p.bin, 10*time.Second)
	w.wait(t, 40*time.Second)

	// The Go workload's native frames name its executable and build id.
	goBuildIDs := map[string]bool{}
	var rows, python int
	waitFor(t, "rows of every workload at the server", 30*time.Second, func() bool {
		rows, python = 0, 0
		for _, r := range srv.Rows() {
			rows++
			if strings.Contains(r.Stack, "|tandem_py_alpha|") || strings.Contains(r.Stack, "|tandem_py_beta|") {
				python++
			}
			for _, loc := range strings.Split(r.Stack, "\n") {
				f := strings.Split(loc, "|") // frame_type|address|mapping_file|build_id|...
				if len(f) > 3 && f[0] == "native" && f[2] == "gobusy" && f[3] != "" {
					goBuildIDs[f[3]] = true
				}
			}
		}
		return python > 0 && len(goBuildIDs) > 0
	})
	for id := range goBuildIDs {
		waitFor(t, "the upload of gobusy's symbols under "+id, 60*time.Second, func() bool {
			_, ok := srv.Symbols().Uploaded(id)
			return ok
		})
	}
	p.sampler.stop(t, 30*time.Second)
	time.Sleep(3 * time.Second) // the encoder's last flush
	p.encoder.stop(t, 30*time.Second)

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
	t.Logf("%d rows (%d with the Python workload's functions) in %d WriteArrow calls; gobusy build ids %v uploaded; %d executables uploaded in all",
		len(all), python, srv.WriteArrowCalls(), keys(goBuildIDs), len(srv.Symbols().Finished()))
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
