package e2e

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/tandem-profiler/tandem/encoder/pprofout"
	"github.com/tandem-profiler/tandem/schema"
	"github.com/tandem-profiler/tandem/test/harness"
	"github.com/tandem-profiler/tandem/test/obitest"
)

// TestTraceLinks: the test plays OBI. On a BPF filesystem of its own it
// pins the span map (traces_ctx_v1, created from the tracer's declaration
// of it) before the sampler starts, as OBI does, and the sampler, with
// --obi-process-ctx, must use that map. The test then writes a known span
// for every thread of the Go workload, as OBI does for the threads it
// instruments: the OTLP receiver must see that trace id and span id as the
// link of the workload's samples, the pprof files as their trace_id and
// span_id labels, and no other process's sample may have a link; a replay
// of the sampler's dump must give the same labels.
func TestTraceLinks(t *testing.T) {
	t.Parallel()
	requirePrivileges(t)
	bpffs := obitest.MountBPFFS(t)
	spans := obitest.PinSpanMap(t, bpffs)
	mapID, err := spans.ID()
	if err != nil {
		t.Fatal(err)
	}
	recv, cfgPath, pprofDir := otlpAndPprofOutputs(t)
	p := startPairOrdered(t, false, []string{"--config-path", cfgPath}, "--obi-process-ctx", "--bpffs-root", bpffs)
	if ids := mapIDs(t, p.Sampler.Pid()); !ids[mapID] {
		t.Fatalf("the sampler does not hold the span map OBI pinned (map id %d): it made its own", mapID)
	}

	link := schema.TraceLink{
		TraceID: [16]byte{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
		SpanID:  [8]byte{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
	}
	traceHex, spanHex := hex.EncodeToString(link.TraceID[:]), hex.EncodeToString(link.SpanID[:])
	g := start(t, "go workload", 0, filepath.Join(p.bin, "gobusy"), "8s")
	other := start(t, "sha256sum workload", 0, "timeout", "8", "sha256sum", "/dev/zero")
	gpid := g.Pid()
	// The Go runtime starts threads as it goes: set the span of every
	// thread the workload has, again and again, until it exits.
	tick := time.NewTicker(20 * time.Millisecond)
	deadline := time.After(40 * time.Second)
	threads := 0
	for running := true; running; {
		n, err := spans.SetProcess(uint32(gpid), link)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("set the workload's span: %v", err)
		}
		threads = max(threads, n)
		select {
		case <-g.Done():
			running = false
		case <-tick.C:
		case <-deadline:
			t.Fatal("go workload did not finish")
		}
	}
	tick.Stop()
	select {
	case <-other.Done():
	case <-time.After(40 * time.Second):
		t.Fatal("sha256sum workload did not finish")
	}
	p.Sampler.Stop(t, 30*time.Second)
	p.WaitDelivered(t, 2)
	linkedAtEncoder := harness.EncoderMetric(t, p.HTTPAddr, "tandem_encoder_aggregator_linked_samples_total")
	p.Encoder.Stop(t, 30*time.Second)

	// OTLP: the workload's samples carry the link, nobody else's does.
	var linked, unlinked, others int64
	for _, s := range recv.Samples(t) {
		pid := s.Resource["process.pid"]
		switch {
		case pid == strconv.Itoa(gpid) && s.TraceID == traceHex && s.SpanID == spanHex:
			linked += s.Total()
		case s.TraceID != "" || s.SpanID != "":
			t.Errorf("sample of pid %s (%s) linked to %s/%s", pid, s.Resource["service.name"], s.TraceID, s.SpanID)
		case pid == strconv.Itoa(gpid):
			unlinked += s.Total()
		default:
			others += s.Total()
		}
	}
	t.Logf("OTLP: gobusy (%d threads) %d samples linked, %d not; %d samples of other processes; encoder counted %v linked",
		threads, linked, unlinked, others, linkedAtEncoder)
	// A thread's first samples may come before the test sets its span.
	if linked == 0 || float64(linked) < 0.8*float64(linked+unlinked) {
		t.Errorf("%d of gobusy's %d samples carry the link, want at least 80%%", linked, linked+unlinked)
	}
	if others == 0 {
		t.Error("no samples of other processes: nothing shows they stay unlinked")
	}

	// pprof files: the live encoder's and a replay of the sampler's dump.
	replayDir := sharedDir(t)
	out, err := runCommand(filepath.Join(p.bin, "tandem-encoder"), "replay", "--output-dir", replayDir, "--profiling-duration", "2s", p.dump)
	if err != nil {
		t.Fatalf("replay %s: %v\n%s", p.dump, err, out)
	}
	for _, dir := range []string{pprofDir, replayDir} {
		var plinked, punlinked int64
		var samples []*profile.Sample
		for _, prof := range pprofProfiles(t, dir, "pprof output") {
			samples = append(samples, prof.Sample...)
		}
		for _, s := range samples {
			pid := s.NumLabel[pprofout.LabelPID]
			tr, sp := s.Label[pprofout.LabelTraceID], s.Label[pprofout.LabelSpanID]
			isG := len(pid) == 1 && pid[0] == int64(gpid)
			switch {
			case isG && len(tr) == 1 && tr[0] == traceHex && len(sp) == 1 && sp[0] == spanHex:
				plinked += s.Value[0]
			case len(tr)+len(sp) > 0:
				t.Errorf("%s: sample of pid %v labelled trace_id %v span_id %v", dir, pid, tr, sp)
			case isG:
				punlinked += s.Value[0]
			}
		}
		t.Logf("pprof %s: gobusy %d samples labelled, %d not", dir, plinked, punlinked)
		if plinked == 0 || float64(plinked) < 0.8*float64(plinked+punlinked) {
			t.Errorf("%s: %d of gobusy's %d samples carry trace_id and span_id, want at least 80%%", dir, plinked, plinked+punlinked)
		}
	}
}

// mapIDs returns the ids of the BPF maps process pid holds descriptors of.
func mapIDs(t *testing.T, pid int) map[uint32]bool {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fdinfo", pid)
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[uint32]bool{}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		for line := range strings.Lines(string(data)) {
			if v, ok := strings.CutPrefix(line, "map_id:"); ok {
				if id, err := strconv.ParseUint(strings.TrimSpace(v), 10, 32); err == nil {
					ids[uint32(id)] = true
				}
			}
		}
	}
	return ids
}
