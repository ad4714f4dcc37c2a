package sampler

import (
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unique"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"go.opentelemetry.io/ebpf-profiler/libpf"
	"go.opentelemetry.io/ebpf-profiler/reporter/samples"

	"github.com/tandem-profiler/tandem/internal/counters"
	"github.com/tandem-profiler/tandem/schema"
)

// Test fixtures built through the profiler's public libpf API.
var (
	libcFile = libpf.NewFrameMappingFile(libpf.FrameMappingFileData{
		FileID:     libpf.NewFileID(0x1111, 0x2222),
		FileName:   libpf.Intern("libc.so.6"),
		GnuBuildID: "93ac61ec5a8e",
	})
	libcMapping = libpf.NewFrameMapping(libpf.FrameMappingData{
		File: libcFile, Start: 0x28000, End: 0x1bd000, FileOffset: 0x28000,
	})
	goFile = libpf.NewFrameMappingFile(libpf.FrameMappingFileData{
		FileID:     libpf.NewFileID(0x3333, 0x4444),
		FileName:   libpf.Intern("gobusy"),
		GnuBuildID: "2548868",
		GoBuildID:  "tpipaP1uA40dQAYPcphh",
	})
	goMapping = libpf.NewFrameMapping(libpf.FrameMappingData{
		File: goFile, Start: 0x401000, End: 0x4a0000, FileOffset: 0x1000,
	})
	vmlinuxFile = libpf.NewFrameMappingFile(libpf.FrameMappingFileData{
		FileID:     libpf.NewFileID(0x5555, 0x6666),
		FileName:   libpf.Intern("vmlinux"),
		GnuBuildID: "48dc540c",
	})
	vmlinuxMapping = libpf.NewFrameMapping(libpf.FrameMappingData{File: vmlinuxFile})
)

func nativeFrame(addr uint64) libpf.Frame {
	return libpf.Frame{Type: libpf.NativeFrame, AddressOrLineno: libpf.AddressOrLineno(addr), Mapping: libcMapping}
}

func kernelFrame(addr uint64, fn string) libpf.Frame {
	return libpf.Frame{Type: libpf.KernelFrame, AddressOrLineno: libpf.AddressOrLineno(addr),
		Mapping: vmlinuxMapping, FunctionName: libpf.Intern(fn)}
}

func pythonFrame(fn, file string, line uint64, off uint32) libpf.Frame {
	return libpf.Frame{Type: libpf.PythonFrame, FunctionName: libpf.Intern(fn),
		SourceFile: libpf.Intern(file), SourceLine: libpf.SourceLineno(line), FunctionOffset: off}
}

func goFrame(addr uint64, fn, file string, line uint64) libpf.Frame {
	return libpf.Frame{Type: libpf.GoFrame, AddressOrLineno: libpf.AddressOrLineno(addr), Mapping: goMapping,
		FunctionName: libpf.Intern(fn), SourceFile: libpf.Intern(file), SourceLine: libpf.SourceLineno(line)}
}

func frames(fs ...libpf.Frame) libpf.Frames {
	var out libpf.Frames
	for i := range fs {
		out.Append(&fs[i])
	}
	return out
}

func TestClassifyFrame(t *testing.T) {
	tests := []struct {
		name  string
		frame libpf.Frame
		want  schema.Frame
	}{
		{"native", nativeFrame(0x1885b8), schema.Frame{Kind: schema.FrameNative, AddressOrLine: 0x1885b8}},
		{"kernel", kernelFrame(0x6b8a6c, "vfs_read"), schema.Frame{Kind: schema.FrameKernel, AddressOrLine: 0x6b8a6c}},
		{"python", pythonFrame("f", "busy.py", 4, 3), schema.Frame{Kind: schema.FrameCPython, SourceLine: 4, FunctionOffset: 3}},
		{"go", goFrame(0x49e159, "main.fib", "main.go", 8), schema.Frame{Kind: schema.FrameGo, AddressOrLine: 0x49e159, SourceLine: 8}},
		{"v8 column", libpf.Frame{Type: libpf.V8Frame, SourceLine: 12, SourceColumn: 7},
			schema.Frame{Kind: schema.FrameV8, SourceLine: 12, SourceColumn: 7}},
		{"error native", libpf.Frame{Type: libpf.NativeFrame.Error(), AddressOrLineno: 42},
			schema.Frame{Kind: schema.FrameNative, Error: true, AddressOrLine: 42}},
		{"abort marker", libpf.Frame{Type: libpf.UnknownFrame.Error(), AddressOrLineno: 7},
			schema.Frame{Kind: schema.FrameUnknown, Error: true, AddressOrLine: 7}},
		{"huge line clamped", libpf.Frame{Type: libpf.HotSpotFrame, SourceLine: math.MaxUint64},
			schema.Frame{Kind: schema.FrameHotSpot, SourceLine: math.MaxUint32}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, classifyFrame(&tt.frame)); diff != "" {
				t.Errorf("classifyFrame (-want +got):\n%s", diff)
			}
		})
	}
}

// newTestBatcher returns a batcher over a recording sink, with /proc
// replaced by the given cgroup contents.
func newTestBatcher(t *testing.T, cfg Config, cgroups map[uint32]string) (*batcher, *recordingSink) {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	sink := &recordingSink{stats: SinkStats{Connected: true}}
	q := newDropQueue[traceEntry](cfg.QueueBytes, cfg.BatchMaxSamples)
	bt := newBatcher(&cfg, q, sink, slog.New(slog.DiscardHandler), testMetrics(t))
	bt.procs.readCgroup = func(pid uint32) (string, error) { return cgroups[pid], nil }
	bt.procs.exists = func(uint32) bool { return true }
	return bt, sink
}

func report(t *testing.T, r *traceReporter, tr *libpf.Trace, meta *samples.TraceEventMeta) {
	t.Helper()
	if err := r.ReportTraceEvent(tr, meta); err != nil {
		t.Fatal(err)
	}
}

func TestBatcherBuildsBatch(t *testing.T) {
	cfg := DefaultConfig()
	bt, sink := newTestBatcher(t, cfg, map[uint32]string{
		100: "0::/system.slice/docker-" + testContainerID + ".scope\n",
		200: "0::/system.slice/nginx.service\n",
	})
	r := &traceReporter{queue: bt.queue, m: bt.m}

	pyStack := frames(kernelFrame(0x10, "vfs_read"), nativeFrame(0x1885b8), pythonFrame("f", "busy.py", 4, 3), nativeFrame(0x27249))
	meta := &samples.TraceEventMeta{
		Timestamp: 1_700_000_000_000_000_000, Comm: libpf.Intern("worker"), ProcessName: libpf.Intern("python3\n"),
		ExecutablePath: libpf.Intern("/usr/bin/python3.11"), PID: 100, TID: 101, CPU: 1,
		Origin:         libpf.Origin(schema.OriginCPUSampling),
		EnvVars:        map[libpf.String]libpf.String{libpf.Intern("B"): libpf.Intern("2"), libpf.Intern("A"): libpf.Intern("1")},
		APMServiceName: "checkout",
	}
	report(t, r, &libpf.Trace{Frames: pyStack, CustomLabels: map[libpf.String]libpf.String{
		libpf.Intern("zone"): libpf.Intern("eu"), libpf.Intern("req"): libpf.Intern("GET"),
	}}, meta)
	report(t, r, &libpf.Trace{Frames: slices.Clone(pyStack)}, meta) // same stack, other slice
	off := *meta
	off.Origin, off.Value, off.PID, off.TID = libpf.Origin(schema.OriginOffCPU), 12345, 200, 200
	off.ProcessName, off.ExecutablePath, off.EnvVars, off.APMServiceName = libpf.Intern("nginx\n"), libpf.Intern("/usr/sbin/nginx"), nil, ""
	off.ContainerID = libpf.Intern("from-tracer")
	report(t, r, &libpf.Trace{Frames: frames(goFrame(0x49e159, "main.fib", "main.go", 8))}, &off)

	bt.cycle(true)
	if err := sink.err(); err != nil {
		t.Fatal(err)
	}
	if len(sink.batches) != 1 || !slices.Equal(sink.seqs, []uint64{1}) {
		t.Fatalf("got %d batches, seqs %v; want one batch, seq 1", len(sink.batches), sink.seqs)
	}
	b := &sink.batches[0]
	if b.Sequence != 1 || len(b.Samples) != 3 || b.NumStacks() != 2 || len(b.Processes) != 2 {
		t.Fatalf("batch seq %d samples %d stacks %d processes %d; want 1, 3, 2, 2", b.Sequence, len(b.Samples), b.NumStacks(), len(b.Processes))
	}

	// Frames of the first stack, leaf first, kernel first.
	s0 := b.Samples[0]
	var got []string
	for _, fi := range b.Stack(s0.Stack) {
		got = append(got, describeFrame(b, b.Frames[fi]))
	}
	want := []string{
		"kernel 0x10 file=vmlinux gnu=48dc540c fn=vfs_read",
		"native 0x1885b8 file=libc.so.6 gnu=93ac61ec5a8e",
		"cpython 0x0 fn=f src=busy.py:4",
		"native 0x27249 file=libc.so.6 gnu=93ac61ec5a8e",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stack (-want +got):\n%s", diff)
	}
	if b.Samples[1].Stack != s0.Stack {
		t.Errorf("identical frames gave stacks %d and %d", s0.Stack, b.Samples[1].Stack)
	}
	libc := b.Mappings[b.Frames[b.Stack(s0.Stack)[1]].Mapping-1]
	wantMapping := schema.Mapping{FileID: schema.FileID{Hi: 0x1111, Lo: 0x2222}, Start: 0x28000, End: 0x1bd000, FileOffset: 0x28000}
	libc.FileName, libc.GNUBuildID = 0, 0
	if libc != wantMapping {
		t.Errorf("libc mapping = %+v, want %+v", libc, wantMapping)
	}
	if py := b.Frames[b.Stack(s0.Stack)[2]]; py.FunctionOffset != 3 || py.Mapping != 0 {
		t.Errorf("python frame offset %d mapping %d, want 3, 0", py.FunctionOffset, py.Mapping)
	}

	// Sample fields.
	if s0.TimestampUnixNano != 1_700_000_000_000_000_000 || s0.TID != 101 || s0.CPU != 1 ||
		b.String(s0.ThreadName) != "worker" || s0.Origin != schema.OriginCPUSampling || s0.Value != 1 {
		t.Errorf("cpu sample = %+v (thread %q)", s0, b.String(s0.ThreadName))
	}
	var labels []string
	for _, kv := range s0.Labels {
		labels = append(labels, b.String(kv.Key)+"="+b.String(kv.Value))
	}
	if !slices.Equal(labels, []string{"req=GET", "zone=eu"}) {
		t.Errorf("labels = %v, want sorted [req=GET zone=eu]", labels)
	}
	s2 := b.Samples[2]
	if s2.Origin != schema.OriginOffCPU || s2.Value != 12345 {
		t.Errorf("off-CPU sample origin %v value %d, want off_cpu 12345", s2.Origin, s2.Value)
	}
	gof := b.Frames[b.Stack(s2.Stack)[0]]
	if b.String(b.Mappings[gof.Mapping-1].GoBuildID) != "tpipaP1uA40dQAYPcphh" || b.String(gof.FunctionName) != "main.fib" {
		t.Errorf("go frame %s", describeFrame(b, gof))
	}

	// Process labels.
	p := b.Processes[s0.Process]
	var env []string
	for _, kv := range p.EnvVars {
		env = append(env, b.String(kv.Key)+"="+b.String(kv.Value))
	}
	gotProc := []string{b.String(p.Comm), b.String(p.ExecutablePath), b.String(p.ContainerID), b.String(p.SystemdUnit), b.String(p.ServiceName)}
	if diff := cmp.Diff([]string{"python3", "/usr/bin/python3.11", testContainerID, "", "checkout"}, gotProc); diff != "" || !slices.Equal(env, []string{"A=1", "B=2"}) {
		t.Errorf("process 100 (-want +got):\n%s env %v", diff, env)
	}
	p = b.Processes[s2.Process]
	gotProc = []string{b.String(p.Comm), b.String(p.ExecutablePath), b.String(p.ContainerID), b.String(p.SystemdUnit)}
	if diff := cmp.Diff([]string{"nginx", "/usr/sbin/nginx", "from-tracer", "nginx.service"}, gotProc); diff != "" {
		t.Errorf("process 200 (-want +got):\n%s", diff)
	}
}

const testContainerID = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// Trace.Hash only covers (FileID, address) per frame, so two Python stacks
// that differ only in interpreted frames share it; the stream keys stacks
// on the frames themselves.
func TestStackIdentityIgnoresTraceHash(t *testing.T) {
	bt, sink := newTestBatcher(t, DefaultConfig(), nil)
	r := &traceReporter{queue: bt.queue, m: bt.m}
	meta := &samples.TraceEventMeta{PID: 1, TID: 1, Origin: libpf.Origin(schema.OriginCPUSampling)}
	hash := libpf.NewTraceHash(1, 2)
	report(t, r, &libpf.Trace{Hash: hash, Frames: frames(pythonFrame("f", "busy.py", 3, 0), nativeFrame(0x10))}, meta)
	report(t, r, &libpf.Trace{Hash: hash, Frames: frames(pythonFrame("g", "busy.py", 9, 0), nativeFrame(0x10))}, meta)
	bt.cycle(true)
	b := &sink.batches[0]
	if b.Samples[0].Stack == b.Samples[1].Stack {
		t.Fatal("stacks with different Python frames but the same Trace.Hash were merged")
	}
}

func TestBatcherFlushesFullBatches(t *testing.T) {
	cfg := DefaultConfig()
	cfg.BatchMaxSamples = 2
	bt, sink := newTestBatcher(t, cfg, nil)
	r := &traceReporter{queue: bt.queue, m: bt.m}
	for i := range 5 {
		report(t, r, &libpf.Trace{Frames: frames(nativeFrame(uint64(i)))},
			&samples.TraceEventMeta{PID: libpf.PID(i), Origin: libpf.Origin(schema.OriginCPUSampling)})
	}
	bt.cycle(false) // full batches only
	if n := len(sink.batches); n != 2 {
		t.Fatalf("after a partial cycle: %d batches, want 2", n)
	}
	bt.cycle(true)
	var sizes []int
	for _, b := range sink.batches {
		sizes = append(sizes, len(b.Samples))
	}
	if !slices.Equal(sizes, []int{2, 2, 1}) || !slices.Equal(sink.seqs, []uint64{1, 2, 3}) {
		t.Errorf("batch sizes %v seqs %v, want [2 2 1] [1 2 3]", sizes, sink.seqs)
	}
	// Batch-local tables: every batch carries its own process table.
	for i, b := range sink.batches {
		if len(b.Processes) != len(b.Samples) {
			t.Errorf("batch %d: %d processes for %d samples of distinct pids", i, len(b.Processes), len(b.Samples))
		}
	}
}

// TestBatcherReportsLosses: every loss reaches a report, and while one
// report is pending (unacknowledged) new losses fold into the next one.
func TestBatcherReportsLosses(t *testing.T) {
	cfg := DefaultConfig()
	cfg.QueueBytes = minQueueBytes
	bt, sink := newTestBatcher(t, cfg, nil)
	setStats := func(f func(*SinkStats)) {
		sink.mu.Lock()
		f(&sink.stats)
		sink.mu.Unlock()
	}
	// Disconnected, three batches lost: reported at once (loss reports are
	// never dropped by the sink, so they need not wait for a connection).
	setStats(func(s *SinkStats) {
		*s = SinkStats{Connected: false, LostFrames: 3, LostSamples: 30, LostBytes: 3000}
	})
	r := &traceReporter{queue: bt.queue, m: bt.m}
	tr := &libpf.Trace{Frames: frames(nativeFrame(1), nativeFrame(2))}
	per := entrySize(tr)
	n := minQueueBytes/per + 10
	for range n {
		report(t, r, tr, &samples.TraceEventMeta{PID: 1, Origin: libpf.Origin(schema.OriginCPUSampling)})
	}
	bt.cycle(true)
	kept := minQueueBytes / per
	if len(sink.batches) != 1 || len(sink.batches[0].Samples) != kept {
		t.Fatalf("batches %d, want 1 with %d samples", len(sink.batches), kept)
	}
	if len(sink.losses) != 1 {
		t.Fatalf("loss reports %d, want 1", len(sink.losses))
	}
	want := schema.LossReport{Sequence: 2, Losses: []schema.Loss{{
		Stage: schema.LossSamplerQueue, Reason: "queue_full", Samples: uint64(n - kept), Bytes: uint64((n - kept) * per),
	}, {
		Stage: schema.LossResendBuffer, Reason: "resend_buffer_full", Samples: 30, Bytes: 3000,
	}}}
	if diff := cmp.Diff(want, sink.losses[0]); diff != "" {
		t.Errorf("loss report (-want +got):\n%s", diff)
	}
	if got := float64(bt.m.queueDropped.Load()); got != float64(n-kept) {
		t.Errorf("queue dropped counter %v, want %d", got, n-kept)
	}

	// Nothing new: no report.
	bt.cycle(true)
	if len(sink.losses) != 1 {
		t.Fatalf("loss reports %d after a quiet cycle, want 1", len(sink.losses))
	}

	// The report is pending: new losses of every kind wait and fold.
	var dropped uint64 = 4
	bt.droppedDescriptors = func() uint64 { return dropped }
	for i := range 3 {
		setStats(func(s *SinkStats) {
			*s = SinkStats{Connected: true, LostFrames: 4 + uint64(i), LostSamples: 40 + 10*uint64(i), LostBytes: 4000 + 1000*uint64(i), PendingLossReports: 1}
		})
		for range 5 {
			report(t, r, tr, &samples.TraceEventMeta{PID: 1, Origin: libpf.Origin(schema.OriginCPUSampling)})
		}
		bt.queue.Push(traceEntry{}, minQueueBytes) // evicts the five
		bt.cycle(true)
	}
	if len(sink.losses) != 1 {
		t.Fatalf("loss reports %d while one is pending, want 1", len(sink.losses))
	}
	if got := float64(bt.m.queueDropped.Load()); got != float64(n-kept+15) {
		t.Errorf("queue dropped counter %v while a report is pending, want %d: counters do not wait", got, n-kept+15)
	}

	// Acknowledged: one report carries everything since the first.
	setStats(func(s *SinkStats) { s.PendingLossReports = 0 })
	bt.cycle(true)
	if len(sink.losses) != 2 {
		t.Fatalf("loss reports %d once acknowledged, want 2", len(sink.losses))
	}
	got := sink.losses[1]
	want = schema.LossReport{Sequence: got.Sequence, Losses: []schema.Loss{{
		Stage: schema.LossSamplerQueue, Reason: "queue_full", Samples: 15, Bytes: got.Losses[0].Bytes,
	}, {
		Stage: schema.LossResendBuffer, Reason: "resend_buffer_full", Samples: 30, Bytes: 3000,
	}, {
		Stage: schema.LossExecutableQueue, Reason: "executable_not_delivered", Descriptors: 4,
	}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("folded report (-want +got):\n%s", diff)
	}

	// The last cycle reports even while one is pending.
	setStats(func(s *SinkStats) {
		*s = SinkStats{LostFrames: 7, LostSamples: 77, LostBytes: 7000, PendingLossReports: 1}
	})
	bt.stopping = true
	bt.cycle(true)
	if len(sink.losses) != 3 {
		t.Fatalf("loss reports %d after the last cycle, want 3", len(sink.losses))
	}
	want = schema.LossReport{Sequence: sink.losses[2].Sequence, Losses: []schema.Loss{{
		Stage: schema.LossResendBuffer, Reason: "resend_buffer_full", Samples: 17, Bytes: 1000,
	}}}
	if diff := cmp.Diff(want, sink.losses[2]); diff != "" {
		t.Errorf("last report (-want +got):\n%s", diff)
	}
	// Batches and loss reports share one increasing space.
	if !slices.IsSorted(sink.seqs) || len(slices.Compact(slices.Clone(sink.seqs))) != len(sink.seqs) || sink.seqs[0] != 1 {
		t.Errorf("sequences %v: want one strictly increasing space from 1", sink.seqs)
	}
	var reported uint64
	for _, l := range sink.losses {
		for _, x := range l.Losses {
			if x.Stage == schema.LossResendBuffer {
				reported += x.Samples
			}
		}
	}
	if reported != 77 {
		t.Errorf("resend_buffer samples reported %d in all, the sink lost 77", reported)
	}
}

func TestProcessCacheRefreshAndSweep(t *testing.T) {
	c := newProcessCache()
	reads := 0
	c.readCgroup = func(uint32) (string, error) { reads++; return "0::/system.slice/a.service\n", nil }
	alive := map[uint32]bool{1: true, 2: true}
	c.exists = func(pid uint32) bool { return alive[pid] }

	e := &traceEntry{pid: 1, procName: libpf.Intern("a\n"), exe: libpf.Intern("/bin/a")}
	if p := c.get(e); p.comm != "a" || p.unit != "a.service" {
		t.Fatalf("procInfo %+v", p)
	}
	c.get(e)
	if reads != 1 {
		t.Errorf("cgroup read %d times for one process, want 1", reads)
	}
	// exec (or PID reuse): the tracer reports another executable.
	e2 := &traceEntry{pid: 1, procName: libpf.Intern("b\n"), exe: libpf.Intern("/bin/b")}
	if p := c.get(e2); p.comm != "b" || p.exe != "/bin/b" || reads != 2 {
		t.Errorf("after exec: %+v, %d reads", p, reads)
	}
	c.get(&traceEntry{pid: 2})
	delete(alive, 1)
	if n := c.sweep(); n != 1 || c.len() != 1 {
		t.Errorf("sweep removed %d, %d left; want 1, 1", n, c.len())
	}
}

// TestProcessCacheNoticesExec covers a process that exec'd after the tracer
// read its metadata: the tracer still says "pyenv-exec", the main thread's
// comm says "python3", and /proc has the truth.
func TestProcessCacheNoticesExec(t *testing.T) {
	c := newProcessCache()
	c.readCgroup = func(uint32) (string, error) { return "", nil }
	reads := 0
	c.readIdentity = func(uint32) (string, string, error) { reads++; return "python3", "/usr/bin/python3.11", nil }
	stale := libpf.Intern("pyenv-exec\n")
	exe := libpf.Intern("/usr/bin/bash")

	// A thread other than the main one may legitimately be named otherwise.
	if p := c.get(&traceEntry{pid: 7, tid: 8, procName: stale, exe: exe, comm: libpf.Intern("worker")}); p.comm != "pyenv-exec" || reads != 0 {
		t.Fatalf("non-main thread changed the process: %+v, %d reads", p, reads)
	}
	// Same name (also when the thread name is the truncated prefix): no read.
	c.get(&traceEntry{pid: 7, tid: 7, procName: stale, exe: exe, comm: libpf.Intern("pyenv-exec")})
	if reads != 0 {
		t.Fatalf("matching names read /proc %d times", reads)
	}
	for range 3 {
		p := c.get(&traceEntry{pid: 7, tid: 7, procName: stale, exe: exe, comm: libpf.Intern("python3")})
		if p.comm != "python3" || p.exe != "/usr/bin/python3.11" {
			t.Fatalf("after exec: comm %q exe %q, want python3 /usr/bin/python3.11", p.comm, p.exe)
		}
	}
	if reads != 1 {
		t.Errorf("/proc read %d times for one exec, want 1", reads)
	}
}

// TestProcessCacheNamesKernelThreads: the tracer has no process name for
// a kernel thread; its main thread's comm names it (parca-agent's comm
// label, the OTLP service.name fallback), without reading /proc.
func TestProcessCacheNamesKernelThreads(t *testing.T) {
	c := newProcessCache()
	c.readCgroup = func(uint32) (string, error) { return "", nil }
	c.readIdentity = func(uint32) (string, string, error) { t.Fatal("read /proc for a kernel thread"); return "", "", nil }
	if p := c.get(&traceEntry{pid: 77, tid: 77, comm: libpf.Intern("kdamond.0")}); p.comm != "kdamond.0" {
		t.Errorf("kernel thread comm %q, want kdamond.0", p.comm)
	}
	// A process first seen on another thread is named by its main thread
	// when that one shows up.
	if p := c.get(&traceEntry{pid: 90, tid: 91, comm: libpf.Intern("worker")}); p.comm != "" {
		t.Errorf("named %q from a non-main thread", p.comm)
	}
	if p := c.get(&traceEntry{pid: 90, tid: 90, comm: libpf.Intern("server")}); p.comm != "server" {
		t.Errorf("comm %q after the main thread's sample, want server", p.comm)
	}
}

func BenchmarkReportTrace(b *testing.B) {
	q := newDropQueue[traceEntry](DefaultQueueBytes, DefaultBatchMaxSamples)
	r := &traceReporter{queue: q, m: testMetrics(b)}
	tr, meta := benchTrace()
	drain := make([]traceEntry, 0, 1024)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		_ = r.ReportTraceEvent(tr, meta)
		if i++; i%1000 == 0 {
			drain = q.Drain(drain[:0])
		}
	}
}

// BenchmarkClassify measures the batching goroutine's share: classifying a
// queued trace into the batch (frame, mapping and process tables warm, as
// in steady state), with a flush (encode) every 1000 samples.
func BenchmarkClassify(b *testing.B) {
	benchClassify(b, schema.TraceLink{})
}

// BenchmarkClassifyLinked is BenchmarkClassify with a trace link on every
// sample (the tracer found a span: OBI's map or an APM agent).
func BenchmarkClassifyLinked(b *testing.B) {
	benchClassify(b, schema.TraceLink{TraceID: [16]byte{0x4b, 15: 0x36}, SpanID: [8]byte{0xf0, 7: 0xb7}})
}

func benchClassify(b *testing.B, link schema.TraceLink) {
	cfg := DefaultConfig()
	cfg.BatchMaxSamples = 1000
	sink := &discardSink{}
	q := newDropQueue[traceEntry](cfg.QueueBytes, cfg.BatchMaxSamples)
	bt := newBatcher(&cfg, q, sink, slog.New(slog.DiscardHandler), testMetrics(b))
	bt.procs.readCgroup = func(uint32) (string, error) { return "0::/system.slice/a.service\n", nil }
	tr, meta := benchTrace()
	e := traceEntry{frames: tr.Frames, pid: uint32(meta.PID), tid: uint32(meta.TID), comm: meta.Comm,
		procName: meta.ProcessName, exe: meta.ExecutablePath, origin: meta.Origin, timestamp: 1, link: link}
	b.ReportAllocs()
	for b.Loop() {
		bt.add(&e)
		if len(bt.batch.Samples) >= cfg.BatchMaxSamples {
			bt.flush()
		}
	}
	b.ReportMetric(float64(sink.bytes+sink.chunkBytes)/float64(max(sink.samples, 1)), "B/sample")
}

// benchTrace is a trace of the reference corpus's shape (docs/benchmarks/method.md, Corpus): about 33
// frames (7 kernel, 15 native, 3 Python, 8 Go).
func benchTrace() (*libpf.Trace, *samples.TraceEventMeta) {
	var fs []libpf.Frame
	for i := range 7 {
		fs = append(fs, kernelFrame(uint64(0x1000+i*16), "kfunc"))
	}
	for i := range 15 {
		fs = append(fs, nativeFrame(uint64(0x20000+i*32)))
	}
	for i := range 3 {
		fs = append(fs, pythonFrame("fn", "app.py", uint64(10+i), 1))
	}
	for i := range 8 {
		fs = append(fs, libpf.Frame{Type: libpf.NativeFrame, AddressOrLineno: libpf.AddressOrLineno(0x401000 + i*64), Mapping: goMapping})
	}
	return &libpf.Trace{Frames: frames(fs...)}, &samples.TraceEventMeta{
		Timestamp: libpf.UnixTime64(time.Now().UnixNano()), Comm: libpf.Intern("worker"),
		ProcessName: libpf.Intern("app\n"), ExecutablePath: libpf.Intern("/usr/bin/app"),
		PID: 4242, TID: 4243, CPU: 1, Origin: libpf.Origin(schema.OriginCPUSampling),
	}
}

// discardSink counts what it is sent.
type discardSink struct{ samples, bytes, chunkBytes int }

func (d *discardSink) SetHello([]byte) {}
func (d *discardSink) SendDictionary(_ uint64, p []byte) error {
	d.chunkBytes += len(p)
	return nil
}
func (d *discardSink) SendReliable(_ uint64, _ Message, p []byte, n int, _ DictionaryNeed) {
	d.samples += n
	d.bytes += len(p)
}
func (d *discardSink) SendExecutable(_ []byte, f *os.File) bool { _ = f.Close(); return false }
func (d *discardSink) Stats() SinkStats                         { return SinkStats{Connected: true} }
func (d *discardSink) IsEncoder(uint32) bool                    { return false }
func (d *discardSink) EncoderStarting() bool                    { return false }

// BenchmarkClassifyVaried is BenchmarkClassify over 256 distinct stacks
// (varying leaf frames) from 16 processes, so that frame, stack and
// process tables fill up within each batch.
func BenchmarkClassifyVaried(b *testing.B) {
	cfg := DefaultConfig()
	cfg.BatchMaxSamples = 1000
	sink := &discardSink{}
	q := newDropQueue[traceEntry](cfg.QueueBytes, cfg.BatchMaxSamples)
	bt := newBatcher(&cfg, q, sink, slog.New(slog.DiscardHandler), testMetrics(b))
	bt.procs.readCgroup = func(uint32) (string, error) { return "0::/system.slice/a.service\n", nil }
	base, meta := benchTrace()
	entries := make([]traceEntry, 256)
	for i := range entries {
		fs := slices.Clone(base.Frames)
		leaf := nativeFrame(uint64(0x90000 + i*8))
		fs[7] = unique.Make(leaf) // first user frame
		py := pythonFrame("fn"+strconv.Itoa(i%32), "app.py", uint64(i%7), 1)
		fs[22] = unique.Make(py)
		entries[i] = traceEntry{frames: fs, pid: uint32(100 + i%16), tid: uint32(1000 + i%64), comm: meta.Comm,
			procName: meta.ProcessName, exe: meta.ExecutablePath, origin: meta.Origin, timestamp: int64(i)}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		bt.add(&entries[i%len(entries)])
		i++
		if len(bt.batch.Samples) >= cfg.BatchMaxSamples {
			bt.flush()
		}
	}
	b.ReportMetric(float64(sink.bytes+sink.chunkBytes)/float64(max(sink.samples, 1)), "B/sample")
}

// blockingSink blocks every SendReliable until release is closed.
type blockingSink struct {
	discardSink
	release chan struct{}
}

func (s *blockingSink) SendReliable(seq uint64, m Message, p []byte, n int, need DictionaryNeed) {
	<-s.release
	s.discardSink.SendReliable(seq, m, p, n, need)
}

// The tracer's callback never waits for the batcher or the sink: with the
// sink stuck, reports keep returning at once and the queue drops the
// oldest entries, counted.
func TestReporterNeverBlocksOnAStuckSink(t *testing.T) {
	defer goleak.VerifyNone(t)
	cfg := DefaultConfig()
	cfg.QueueBytes = minQueueBytes
	cfg.FlushInterval = 5 * time.Millisecond
	cfg.BatchMaxSamples = 10
	sink := &blockingSink{release: make(chan struct{})}
	q := newDropQueue[traceEntry](cfg.QueueBytes, cfg.BatchMaxSamples)
	m := testMetrics(t)
	bt := newBatcher(&cfg, q, sink, slog.New(slog.DiscardHandler), m)
	bt.procs.readCgroup = func(uint32) (string, error) { return "", nil }
	stop, done := make(chan struct{}), make(chan struct{})
	go func() { defer close(done); bt.run(stop) }()

	r := &traceReporter{queue: q, m: m}
	tr, meta := benchTrace()
	const n = 200000
	start := time.Now()
	var slowest time.Duration
	for range n {
		t0 := time.Now()
		_ = r.ReportTraceEvent(tr, meta)
		slowest = max(slowest, time.Since(t0))
	}
	elapsed := time.Since(start)
	st := q.Stats()
	t.Logf("%d reports in %v (%.0f ns each, slowest %v) with the sink stuck; %d dropped",
		n, elapsed, float64(elapsed.Nanoseconds())/n, slowest, st.DroppedItems)
	if st.DroppedItems == 0 {
		t.Error("nothing dropped although the sink is stuck and the queue is small")
	}
	if elapsed > 5*time.Second {
		t.Errorf("%d reports took %v with the sink stuck", n, elapsed)
	}
	close(sink.release)
	close(stop)
	<-done
	if sink.samples+int(st.DroppedItems) < n-int(q.Stats().Items) {
		t.Errorf("sent %d + dropped %d < reported %d", sink.samples, st.DroppedItems, n)
	}
}

// testMetrics returns metrics registered in a set of their own.
func testMetrics(t testing.TB) *samplerMetrics {
	t.Helper()
	m, err := newSamplerMetrics(new(counters.Set))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestBatcherDictionaryAcrossBatches (protocol 1.4): what one batch
// defined, later batches of the generation refer to by the same ids
// without sending it again; each batch needs every chunk of its
// generation so far; a batch that defines nothing new sends no chunk.
func TestBatcherDictionaryAcrossBatches(t *testing.T) {
	cfg := DefaultConfig()
	bt, sink := newTestBatcher(t, cfg, map[uint32]string{7: "0::/system.slice/app.service\n"})
	r := &traceReporter{queue: bt.queue, m: bt.m}
	meta := &samples.TraceEventMeta{PID: 7, TID: 8, Comm: libpf.Intern("worker"), ProcessName: libpf.Intern("app\n"),
		Origin: libpf.Origin(schema.OriginCPUSampling)}
	a := frames(kernelFrame(0x10, "vfs_read"), nativeFrame(0x1885b8), pythonFrame("f", "busy.py", 4, 3))
	b := frames(kernelFrame(0x10, "vfs_read"), pythonFrame("g", "busy.py", 9, 0))
	for _, batch := range []libpf.Frames{a, a, b, a} {
		report(t, r, &libpf.Trace{Frames: slices.Clone(batch)}, meta)
		bt.cycle(true)
	}
	if err := sink.err(); err != nil {
		t.Fatal(err)
	}
	wantNeeds := []DictionaryNeed{{1, 1}, {1, 1}, {1, 2}, {1, 2}}
	if !slices.Equal(sink.needs, wantNeeds) || len(sink.batches) != 4 {
		t.Fatalf("needs %v (%d batches), want %v", sink.needs, len(sink.batches), wantNeeds)
	}
	s := func(i int) schema.Sample { return sink.batches[i].Samples[0] }
	if s(0).Stack != s(1).Stack || s(0).Stack != s(3).Stack || s(2).Stack == s(0).Stack || s(0).ThreadName != s(2).ThreadName {
		t.Errorf("stacks %d %d %d %d, thread names %d %d: want one id per distinct entry across batches",
			s(0).Stack, s(1).Stack, s(2).Stack, s(3).Stack, s(0).ThreadName, s(2).ThreadName)
	}
	// The second batch of b shares the kernel frame with a: one frame and
	// one "vfs_read" in the whole dictionary.
	d := &sink.dict
	if len(d.Frames) != 4 || len(d.StackEnds) != 2 || strings.Count(strings.Join(d.Strings, "\n"), "vfs_read") != 1 {
		t.Errorf("dictionary has %d frames, %d stacks, strings %q; want 4 frames, 2 stacks, vfs_read once", len(d.Frames), len(d.StackEnds), d.Strings)
	}
	last := sink.batches[3]
	if got := describeFrame(&last, last.Frames[last.Stack(s(3).Stack)[2]]); got != "cpython 0x0 fn=f src=busy.py:4" {
		t.Errorf("leaf-last frame of the last batch = %q", got)
	}
	// Every batch carries its own processes, whose strings are dictionary ids.
	if p := last.Processes[s(3).Process]; last.String(p.Comm) != "app" || last.String(p.SystemdUnit) != "app.service" {
		t.Errorf("process of the last batch: %+v", p)
	}
	if got := bt.m.dictionaryBytes.Load(); got != float64(sink.chunkBytes) || got == 0 {
		t.Errorf("dictionary_bytes = %v, the sink received %d bytes of chunks", got, sink.chunkBytes)
	}
}

// TestBatcherDictionaryGenerations: at a cap the next batch starts a new
// generation whose first chunk starts at the first ids (the recording
// sink's Dictionary.Apply checks it) and needs only that generation's
// chunks; a chunk the sink refuses loses its batch, counted and reported,
// and starts a new generation too.
func TestBatcherDictionaryGenerations(t *testing.T) {
	bt, sink := newTestBatcher(t, DefaultConfig(), nil)
	bt.dict.maxEntries = 3 // strings: "" and two per native frame's mapping
	r := &traceReporter{queue: bt.queue, m: bt.m}
	meta := &samples.TraceEventMeta{PID: 1, TID: 1, Origin: libpf.Origin(schema.OriginCPUSampling)}
	for i := range 4 {
		report(t, r, &libpf.Trace{Frames: frames(nativeFrame(uint64(0x100 * (i + 1))))}, meta)
		bt.cycle(true)
	}
	if err := sink.err(); err != nil {
		t.Fatal(err)
	}
	if len(sink.needs) != 4 || sink.needs[0] != (DictionaryNeed{1, 1}) || sink.needs[3].Generation < 2 || sink.needs[3].Chunks != 1 {
		t.Fatalf("needs %v: want generation 1 first, and a later generation's first chunk", sink.needs)
	}
	if g := bt.m.dictionaryGenerations.Load(); g < 1 {
		t.Errorf("dictionary_generations_total = %d, want at least 1", g)
	}

	sink.mu.Lock()
	sink.dictErr = sinkError("log full")
	sink.mu.Unlock()
	gen := bt.dict.gen
	report(t, r, &libpf.Trace{Frames: frames(nativeFrame(0x9999))}, meta)
	bt.cycle(true)
	if bt.dict.gen != gen+1 || bt.m.classificationLost.Load() != 1 {
		t.Errorf("after a refused chunk: generation %d (was %d), %d samples counted lost; want a new generation, 1 lost",
			bt.dict.gen, gen, bt.m.classificationLost.Load())
	}
	if n := len(sink.losses); n != 1 || sink.losses[0].Losses[0].Stage != schema.LossClassification || sink.losses[0].Losses[0].Samples != 1 {
		t.Errorf("loss reports %+v, want one of 1 sample at classification", sink.losses)
	}
}

// TestReporterLeavesOutOwnOffCPU: the sampler's own off-CPU traces are
// counted and left out; its on-CPU traces and everyone else's off-CPU
// traces go on.
func TestReporterLeavesOutOwnOffCPU(t *testing.T) {
	bt, sink := newTestBatcher(t, DefaultConfig(), nil)
	const own = 4242
	r := &traceReporter{queue: bt.queue, m: bt.m, ownPID: own}
	for _, tc := range []struct {
		pid    libpf.PID
		origin schema.Origin
	}{
		{own, schema.OriginOffCPU},
		{own, schema.OriginCPUSampling},
		{own + 1, schema.OriginOffCPU},
		{own, schema.OriginOffCPU},
	} {
		report(t, r, &libpf.Trace{Frames: frames(nativeFrame(1))},
			&samples.TraceEventMeta{PID: tc.pid, TID: tc.pid, Origin: libpf.Origin(tc.origin), Value: 1000})
	}
	bt.cycle(true)
	var got []string
	for _, b := range sink.batches {
		for _, s := range b.Samples {
			got = append(got, fmt.Sprintf("%d/%d", b.Processes[s.Process].PID, s.Origin))
		}
	}
	want := []string{fmt.Sprintf("%d/%d", own, schema.OriginCPUSampling), fmt.Sprintf("%d/%d", own+1, schema.OriginOffCPU)}
	if !slices.Equal(got, want) {
		t.Errorf("reported %v, want %v", got, want)
	}
	if n := bt.m.ownOffCPU.Load(); n != 2 {
		t.Errorf("tandem_sampler_reporter_own_off_cpu_traces_total = %d, want 2", n)
	}
	if n := bt.m.traces.Load(); n != 4 {
		t.Errorf("tandem_sampler_reporter_traces_total = %d, want 4 (every trace the tracer reported)", n)
	}
}

// TestReporterLeavesOutEncoder: the encoder's traces, on-CPU and off-CPU,
// are counted and left out; nothing is left out while no encoder is
// known, nor with KeepEncoderSamples (no isEncoder).
func TestReporterLeavesOutEncoder(t *testing.T) {
	const encoder = 4343
	for _, tc := range []struct {
		name    string
		encoder uint32 // the sink's encoder pid, 0: none
		keep    bool
		want    []libpf.PID
		dropped uint64
	}{
		{"connected", encoder, false, []libpf.PID{encoder + 1}, 2},
		{"not connected", 0, false, []libpf.PID{encoder, encoder, encoder + 1}, 0},
		{"kept", encoder, true, []libpf.PID{encoder, encoder, encoder + 1}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bt, sink := newTestBatcher(t, DefaultConfig(), nil)
			sink.encoder.Store(tc.encoder)
			r := &traceReporter{queue: bt.queue, m: bt.m}
			if !tc.keep {
				bt.isEncoder = sink.IsEncoder
			}
			for _, e := range []struct {
				pid    libpf.PID
				origin schema.Origin
			}{{encoder, schema.OriginOffCPU}, {encoder, schema.OriginCPUSampling}, {encoder + 1, schema.OriginOffCPU}} {
				report(t, r, &libpf.Trace{Frames: frames(nativeFrame(1))},
					&samples.TraceEventMeta{PID: e.pid, TID: e.pid + 7, Origin: libpf.Origin(e.origin), Value: 1000})
			}
			bt.cycle(true)
			if got := sentPIDs(sink); !slices.Equal(got, tc.want) {
				t.Errorf("reported pids %v, want %v", got, tc.want)
			}
			if n := bt.m.encoderTraces.Load(); n != tc.dropped {
				t.Errorf("tandem_sampler_reporter_encoder_traces_total = %d, want %d", n, tc.dropped)
			}
		})
	}
}

// TestBatcherHoldsWhileEncoderStarts: while a socket-activated encoder
// starts (Sink.EncoderStarting), the batcher sends nothing; traces queued
// while the encoder was not known yet are left out (counted) once it is,
// and the others are sent. When stopping, nothing
// is held.
func TestBatcherHoldsWhileEncoderStarts(t *testing.T) {
	const encoder, workload = 5151, 6161
	for _, stopping := range []bool{false, true} {
		t.Run(fmt.Sprintf("stopping=%v", stopping), func(t *testing.T) {
			bt, sink := newTestBatcher(t, DefaultConfig(), nil)
			bt.isEncoder = sink.IsEncoder
			r := &traceReporter{queue: bt.queue, m: bt.m}
			sink.starting.Store(true)
			for _, pid := range []libpf.PID{encoder, workload, encoder} {
				report(t, r, &libpf.Trace{Frames: frames(nativeFrame(1))},
					&samples.TraceEventMeta{PID: pid, TID: pid, Origin: libpf.Origin(schema.OriginCPUSampling), Value: 1})
			}
			bt.stopping = stopping
			bt.cycle(true)
			if stopping {
				if got := sentPIDs(sink); !slices.Equal(got, []libpf.PID{encoder, workload, encoder}) {
					t.Errorf("sent pids %v while stopping, want all three: nothing is held at the end", got)
				}
				return
			}
			if got := sentPIDs(sink); len(got) != 0 {
				t.Fatalf("sent pids %v while the encoder was starting, want none", got)
			}
			sink.encoder.Store(encoder)
			sink.starting.Store(false)
			bt.cycle(true)
			if got := sentPIDs(sink); !slices.Equal(got, []libpf.PID{workload}) {
				t.Errorf("sent pids %v, want only the workload's", got)
			}
			if n := bt.m.encoderTraces.Load(); n != 2 {
				t.Errorf("tandem_sampler_reporter_encoder_traces_total = %d, want 2", n)
			}
		})
	}
}

// sentPIDs returns the pid of every sample sent, in order.
func sentPIDs(sink *recordingSink) []libpf.PID {
	sink.mu.Lock()
	defer sink.mu.Unlock()
	var got []libpf.PID
	for _, b := range sink.batches {
		for _, s := range b.Samples {
			got = append(got, libpf.PID(b.Processes[s.Process].PID))
		}
	}
	return got
}
