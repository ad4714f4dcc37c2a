package main

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/schema"
	"github.com/tandem-profiler/tandem/test/obitest"
	"github.com/tandem-profiler/tandem/test/proctest"
	"github.com/tandem-profiler/tandem/test/sdnotifytest"
)

// TestPrivilegedSpanMapSamplerFirst is the order test/e2e's
// TestTraceLinks does not cover: the sampler starts (--obi-process-ctx)
// before OBI, so the tracer creates the span map and pins it; OBI, played
// by the test, then opens the pin and writes a busy child's span. The
// recorded stream must carry that link on the child's samples, and on no
// other process's.
func TestPrivilegedSpanMapSamplerFirst(t *testing.T) {
	requireRoot(t)
	bpffs := obitest.MountBPFFS(t)
	dir := t.TempDir()
	dump := filepath.Join(dir, "stream.dump")
	childPID, childExited := startBusyChild(t)

	notify := sdnotifytest.Listen(t, dir)
	t.Setenv("NOTIFY_SOCKET", notify.Path())
	stderr := &proctest.Output{}
	sampler, exit, exited := startCommand(t, []string{
		"--no-encoder", "--record", dump, "--obi-process-ctx", "--bpffs-root", bpffs,
		"--tracers", "labels", "--metrics-log-interval", "0", "--log-format", "json",
	}, stderr)
	if err := notify.WaitFor("READY=1", exited, 90*time.Second); err != nil {
		t.Fatalf("the sampler did not become ready: %v; it said: %s", err, stderr.String())
	}
	// Ready means loaded: the tracer pinned its map for OBI.
	if _, err := os.Stat(filepath.Join(bpffs, "otel", "traces_ctx_v1")); err != nil {
		t.Fatalf("no span map pinned after start: %v", err)
	}
	spans := obitest.OpenSpanMap(t, bpffs)
	link := schema.TraceLink{TraceID: [16]byte{0x0a, 15: 0x01}, SpanID: [8]byte{0x0b, 7: 0x02}}
	// sha256sum is single-threaded: its one thread runs the span.
	if err := spans.Set(childPID, childPID, link); err != nil {
		t.Fatal(err)
	}
	if got, err := spans.Get(childPID, childPID); err != nil || got != link {
		t.Fatalf("the pinned map holds %v (%v) for the child, want %v", got, err, link)
	}
	// Wait for the child's CPU time, not a wall-clock window: on a loaded
	// machine it gets a small share of a CPU. 2 s on CPU at 19 Hz are 38
	// samples; the tracer itself misses up to 40% under load.
	from := cpuTime(t, childPID)
	for deadline := time.Now().Add(2 * time.Minute); cpuTime(t, childPID)-from < 2*time.Second; {
		select {
		case <-exited:
			t.Fatalf("the sampler exited early: %s", stderr.String())
		case <-childExited:
			t.Fatal("the busy child exited")
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the busy child ran %v on CPU in 2 minutes, want 2 s", cpuTime(t, childPID)-from)
		}
	}
	checkConfined(t, sampler.Process.Pid, notify, exited)
	if err := sampler.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-exit:
		if code != 0 {
			t.Fatalf("exit status %d after SIGTERM; stderr:\n%s", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the sampler did not exit within 30 s of SIGTERM")
	}

	r, err := ipc.OpenDump(dump)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var dict schema.Dictionary
	var linked, unlinked int
	for {
		f, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch f.Type {
		case ipc.FrameDictionary:
			applyChunk(t, &dict, f.Payload)
		case ipc.FrameBatch:
			var b schema.Batch
			if err := schema.DecodeBatchWith(f.Payload, &dict, &b); err != nil {
				t.Fatal(err)
			}
			for _, s := range b.Samples {
				pid := b.Processes[s.Process].PID
				switch {
				case s.Link != 0 && (pid != childPID || b.Links[s.Link-1] != link):
					t.Errorf("sample of pid %d linked to %x", pid, b.Links[s.Link-1])
				case s.Link != 0:
					linked++
				case pid == childPID:
					unlinked++
				}
			}
		}
	}
	t.Logf("child: %d samples linked, %d not (those before the test wrote its span)", linked, unlinked)
	if linked < 10 {
		t.Errorf("%d linked samples of the child, want >= 10", linked)
	}
}
