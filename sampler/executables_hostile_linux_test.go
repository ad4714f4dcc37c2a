package sampler

import (
	"debug/elf"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"go.opentelemetry.io/ebpf-profiler/process"
	"go.opentelemetry.io/ebpf-profiler/reporter"
)

// blockingProcess is a process whose mapped files live on a filesystem
// that blocks: opening one waits, in the kernel, until someone opens the
// FIFO for writing, as an open on a FUSE mount waits for a daemon that may
// never answer.
type blockingProcess struct {
	fakeProcess
	fifo string
}

func (p blockingProcess) OpenMappingFile(*process.RawMapping) (process.ReadAtCloser, error) {
	return os.Open(p.fifo)
}

// TestBlockingExecutablesNeverStallTheTracer: while every open blocks, the
// tracer's ExecutableReporter calls still return at once (the tracer's
// process sync goes on, and so do traces), at most openWorkers opens are
// stuck, openQueueLen wait, and the rest are skipped and counted as
// open_busy. Once the filesystem answers, the queued ones are sent.
func TestBlockingExecutablesNeverStallTheTracer(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "fuse")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	sink := &recordingSink{acceptExecs: true, stats: SinkStats{Connected: true}}
	t.Cleanup(func() { sink.closeFiles(t) })
	m := testMetrics(t)
	x := newExecutableSender(sink, newAdmission(1e6, 1e6, 1e6, time.Now), 1e6, openWorkers, m, slog.New(slog.DiscardHandler))
	q := newDropQueue[traceEntry](minQueueBytes, 1<<20)
	r := &traceReporter{queue: q, m: m, exec: x}

	const skipped = 10
	n := openWorkers + openQueueLen + skipped
	report := func(i int) {
		r.ReportExecutable(&reporter.ExecutableMetadata{
			MappingFile: libcFile,
			Process:     blockingProcess{fakeProcess{pid: 42}, fifo},
			Mapping:     &process.RawMapping{Path: fmt.Sprintf("/fuse/lib%d.so", i), Vaddr: 0x1000, Length: 0x1000, Flags: elf.PF_X | elf.PF_R},
		})
	}
	for i := range openWorkers {
		report(i)
	}
	waitUntil(t, "the openers to block", func() bool { return m.executablesOpening.Load() == openWorkers })
	for i := openWorkers; i < n; i++ {
		report(i)
	}
	// Every call returned: the tracer was never held. Traces still flow.
	tr, meta := benchTrace()
	if err := r.ReportTraceEvent(tr, meta); err != nil || q.Stats().Items != 1 {
		t.Fatalf("trace after blocked opens: %v, %d queued", err, q.Stats().Items)
	}
	if got := int(m.executables[execOpenBusy].Load()); got != skipped {
		t.Errorf("open_busy = %d, want %d (%d reported, %d openers, queue %d)", got, skipped, n, openWorkers, openQueueLen)
	}
	if got := m.executables[execSent].Load(); got != 0 {
		t.Errorf("sent %d while the filesystem blocks", got)
	}

	// The filesystem answers: the stuck opens return and the queue drains.
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	x.wait()
	if got, want := int(m.executables[execSent].Load()), openWorkers+openQueueLen; got != want {
		t.Errorf("sent %d once the filesystem answered, want %d", got, want)
	}
	if got := m.executablesOpening.Load(); got != 0 {
		t.Errorf("%v opens still in progress", got)
	}
	x.close()
}

// waitUntil polls cond; the bound only keeps a broken test from hanging.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
