package sampler

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"go.opentelemetry.io/ebpf-profiler/libpf"
	"go.opentelemetry.io/ebpf-profiler/process"
	"go.opentelemetry.io/ebpf-profiler/reporter"
	"go.opentelemetry.io/ebpf-profiler/reporter/samples"

	"github.com/tandem-profiler/tandem/schema"
	"github.com/tandem-profiler/tandem/test/privtest"
	"github.com/tandem-profiler/tandem/test/waittest"
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
		md := execMeta(fmt.Sprintf("/fuse/lib%d.so", i))
		md.Process = blockingProcess{fakeProcess{pid: 42}, fifo}
		r.ReportExecutable(md)
	}
	for i := range openWorkers {
		report(i)
	}
	waittest.For(t, "the openers to block", func() bool { return m.executablesOpening.Load() == openWorkers })
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

func TestBound(t *testing.T) {
	tests := []struct {
		name, in string
		n        int
		want     string
	}{
		{"short", "abc", 8, "abc"},
		{"exact", "abcd", 4, "abcd"},
		{"ascii cut", "abcdef", 4, "abcd"},
		{"before a two-byte character", "abcé", 3, "abc"},
		{"inside a two-byte character", "abcé", 4, "abc"},
		{"inside a four-byte character", "ab😀cd", 4, "ab"},
		{"after a four-byte character", "ab😀cd", 6, "ab😀"},
		{"invalid bytes cut as they are", "ab\xff\xfe\xfd\xfc\xfb", 5, "ab\xff\xfe\xfd"},
		{"continuation bytes only", "\x80\x80\x80\x80\x80\x80", 5, "\x80\x80\x80\x80\x80"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, cut := bound(tt.in, tt.n)
			if got != tt.want || cut != (len(tt.in) > tt.n) || len(got) > tt.n {
				t.Errorf("bound(%q, %d) = %q, %v; want %q", tt.in, tt.n, got, cut, tt.want)
			}
		})
	}
}

// TestProcessCacheBoundedUnderFlood starts real short-lived processes and
// samples each once, as a fork bomb of tiny processes would look to the
// sampler, then floods the cache with processes that stay alive: the cache
// never holds more than its bound, exited processes go first, and a full
// cache is swept at most every fullSweepInterval.
func TestProcessCacheBoundedUnderFlood(t *testing.T) {
	const limit = 32
	m := testMetrics(t)
	c := newProcessCache()
	c.max, c.m = limit, m
	c.readCgroup = func(uint32) (string, error) { return "0::/system.slice/flood.service\n", nil }
	clock := time.Unix(0, 0)
	c.now = func() time.Time { clock = clock.Add(fullSweepInterval); return clock }

	name, exe := libpf.Intern("flood\n"), libpf.Intern("/bin/true")
	const short = 200
	for range short {
		cmd := exec.Command("/bin/true")
		if err := cmd.Run(); err != nil {
			t.Fatal(err)
		}
		c.get(&traceEntry{pid: uint32(cmd.Process.Pid), procName: name, exe: exe})
		if c.len() > limit {
			t.Fatalf("%d processes cached, bound %d", c.len(), limit)
		}
	}
	if got := m.processesEvicted.Load(); got < short-limit {
		t.Errorf("%d exited processes swept out of %d, want at least %d", got, short, short-limit)
	}
	if got := m.processesCacheFull.Load(); got != 0 {
		t.Errorf("%d live processes dropped while only exited ones filled the cache", got)
	}

	// Processes that stay alive: a full cache drops entries, and sweeps
	// (one syscall per entry) only once per fullSweepInterval.
	checks := 0
	c.exists = func(uint32) bool { checks++; return true }
	c.now = func() time.Time { return clock } // time stands still
	for pid := uint32(1 << 20); pid < 1<<20+10_000; pid++ {
		c.get(&traceEntry{pid: pid, procName: name, exe: exe})
		if c.len() > limit {
			t.Fatalf("%d processes cached, bound %d", c.len(), limit)
		}
	}
	if m.processesCacheFull.Load() == 0 {
		t.Error("a cache full of live processes dropped none")
	}
	if checks > limit {
		t.Errorf("%d existence checks with the clock stopped, want at most one sweep (%d)", checks, limit)
	}
}

// TestWorkloadStringsBounded gives every string a workload controls a
// hostile length (and invalid UTF-8): names, paths, environment values,
// unit and service names, custom labels, function and file names. The
// batch still decodes (the encoder would reject a string over 64 KiB),
// every string is within its bound, and the cuts are counted.
func TestWorkloadStringsBounded(t *testing.T) {
	huge := func(c string) string { return strings.Repeat(c, 100<<10) + "\xff" }
	unit := strings.Repeat("u", 100<<10) + ".service"
	bt, sink := newTestBatcher(t, DefaultConfig(), map[uint32]string{7: "0::/system.slice/" + unit + "\n"})
	r := &traceReporter{queue: bt.queue, m: bt.m}
	meta := &samples.TraceEventMeta{
		Comm: libpf.Intern(huge("t")), ProcessName: libpf.Intern(huge("p") + "\n"),
		ExecutablePath: libpf.Intern("/" + huge("e")), ContainerID: libpf.Intern(huge("c")),
		PID: 7, TID: 7, Origin: libpf.Origin(schema.OriginCPUSampling),
		EnvVars:        map[libpf.String]libpf.String{libpf.Intern("SECRET"): libpf.Intern(huge("v"))},
		APMServiceName: huge("s"),
	}
	report(t, r, &libpf.Trace{
		Frames:       frames(pythonFrame(huge("f"), huge("src"), 1, 0)),
		CustomLabels: map[libpf.String]libpf.String{libpf.Intern(huge("k")): libpf.Intern(huge("l"))},
	}, meta)
	bt.cycle(true)
	if err := sink.err(); err != nil {
		t.Fatalf("the batch does not decode: %v", err)
	}
	if len(sink.batches) != 1 || len(sink.batches[0].Samples) != 1 {
		t.Fatalf("%d batches", len(sink.batches))
	}
	b := &sink.batches[0]
	p, s := b.Processes[0], b.Samples[0]
	f := b.Frames[b.Stack(s.Stack)[0]]
	for _, c := range []struct {
		what string
		id   uint32
		max  int
	}{
		{"comm", p.Comm, maxLabelBytes},
		{"executable path", p.ExecutablePath, maxPathBytes},
		{"container id", p.ContainerID, maxLabelBytes},
		{"systemd unit", p.SystemdUnit, maxLabelBytes},
		{"service name", p.ServiceName, maxLabelBytes},
		{"environment value", p.EnvVars[0].Value, maxLabelBytes},
		{"thread name", s.ThreadName, maxLabelBytes},
		{"custom label key", s.Labels[0].Key, maxLabelBytes},
		{"custom label value", s.Labels[0].Value, maxLabelBytes},
		{"function name", f.FunctionName, maxTextBytes},
		{"source file", f.SourceFile, maxTextBytes},
	} {
		got := b.Strings[c.id]
		if len(got) == 0 || len(got) > c.max {
			t.Errorf("%s: %d bytes, want 1..%d", c.what, len(got), c.max)
		}
	}
	if got := bt.m.stringsTruncated.Load(); got < 10 {
		t.Errorf("strings_truncated_total = %d, want every cut counted", got)
	}
}

// TestExecutableDescriptorsReadOnly: what the sampler passes to the encoder
// for a mapped file is opened read-only, so a compromised encoder cannot
// write to another user's executable through it. Uses a mapping of this
// test binary, opened the way the sampler opens every one
// (/proc/PID/map_files, which needs root).
func TestExecutableDescriptorsReadOnly(t *testing.T) {
	if os.Geteuid() != 0 {
		privtest.SkipOrFail(t, "opening /proc/PID/map_files needs root")
	}
	pr, mapping := ownMapping(t, func(m *process.RawMapping) bool {
		return m.IsFileBacked() && !m.IsVDSO() && m.Path != ""
	})
	if mapping == nil {
		t.Fatal("no file-backed mapping in this process")
	}
	f, err := openExecutable(&reporter.ExecutableMetadata{Process: pr, Mapping: mapping}, false)
	if err != nil {
		t.Fatalf("open %s: %v", mapping.Path, err)
	}
	defer f.Close()
	flags, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0)
	if err != nil {
		t.Fatal(err)
	}
	if flags&unix.O_ACCMODE != unix.O_RDONLY {
		t.Errorf("descriptor of %s has access mode %#o, want read-only", mapping.Path, flags&unix.O_ACCMODE)
	}
	if _, err := f.WriteAt([]byte{0}, 0); err == nil {
		t.Errorf("wrote to %s through the descriptor the encoder would get", mapping.Path)
	}
}
