package sampler

import (
	"bytes"
	"debug/elf"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"go.opentelemetry.io/ebpf-profiler/libpf"
	"go.opentelemetry.io/ebpf-profiler/process"
	"go.opentelemetry.io/ebpf-profiler/reporter"
)

// fakeProcess is a process.Process that only knows its PID.
type fakeProcess struct {
	process.Process
	pid libpf.PID
}

func (p fakeProcess) PID() libpf.PID { return p.pid }

func execMeta(path string) *reporter.ExecutableMetadata {
	return &reporter.ExecutableMetadata{
		MappingFile: libcFile,
		Process:     fakeProcess{pid: 42},
		Mapping:     &process.RawMapping{Path: path, Vaddr: 0x1000, Length: 0x1000, Flags: elf.PF_X | elf.PF_R},
	}
}

func closed(f *os.File) bool { return f.Fd() == ^uintptr(0) }

type execFixture struct {
	x      *executableSender
	sink   *recordingSink
	clk    *fakeClock
	m      *samplerMetrics
	mu     sync.Mutex // the opener's workers append to opened
	opened []*os.File
}

// report reports md and waits until the sender handled it.
func (fx *execFixture) report(md *reporter.ExecutableMetadata) {
	fx.x.report(md)
	fx.x.wait()
}

func newExecFixture(t *testing.T, rate float64, burst, total, park int) *execFixture {
	t.Helper()
	fx := &execFixture{sink: &recordingSink{acceptExecs: true, stats: SinkStats{Connected: true}},
		clk: &fakeClock{t: time.Unix(0, 0)}, m: testMetrics(t)}
	fx.x = newExecutableSender(fx.sink, newAdmission(rate, burst, total, fx.clk.now), park, 1, fx.m, slog.New(slog.DiscardHandler))
	t.Cleanup(fx.x.close)
	dir := t.TempDir()
	fx.x.open = func(md *reporter.ExecutableMetadata, vdso bool) (*os.File, error) {
		f, err := os.Create(filepath.Join(dir, filepath.Base(md.Mapping.Path)))
		if err != nil {
			return nil, err
		}
		fx.mu.Lock()
		fx.opened = append(fx.opened, f)
		fx.mu.Unlock()
		return f, nil
	}
	t.Cleanup(func() { fx.sink.closeFiles(t) })
	return fx
}

func (fx *execFixture) count(result string) int {
	return int(fx.m.executables[result].Load())
}

func TestExecutableSenderBoundsAndNotice(t *testing.T) {
	fx := newExecFixture(t, 1, 3, 4, 16)
	for i := range 5 {
		fx.report(execMeta("/usr/lib/lib" + string(rune('a'+i)) + ".so"))
	}
	if got := len(fx.opened); got != 3 {
		t.Fatalf("opened %d files in a burst of 3, want 3", got)
	}
	if fx.count(execSent) != 3 || fx.count(execRateLimited) != 2 {
		t.Errorf("sent %d, rate-limited %d; want 3, 2", fx.count(execSent), fx.count(execRateLimited))
	}
	fx.clk.advance(time.Hour)
	fx.report(execMeta("/usr/lib/libf.so"))
	fx.report(execMeta("/usr/lib/libg.so"))
	if fx.count(execSent) != 4 || fx.count(execTotalLimited) != 1 {
		t.Errorf("sent %d, total-limited %d; want 4, 1 (total bound 4)", fx.count(execSent), fx.count(execTotalLimited))
	}
	n := fx.sink.notices[0]
	if n.Path != "/usr/lib/liba.so" || n.FileName != "libc.so.6" || n.GNUBuildID != "93ac61ec5a8e" ||
		n.FileID.Hi != 0x1111 || n.FileID.Lo != 0x2222 || n.PID != 42 || !n.HasDescriptor || n.IsVDSO {
		t.Errorf("notice %+v", n)
	}
}

func TestExecutableSenderClosesDroppedDescriptors(t *testing.T) {
	fx := newExecFixture(t, 100, 100, 100, 16)
	fx.sink.acceptExecs = false // the sink's queue is full
	fx.report(execMeta("/bin/a"))
	if len(fx.opened) != 1 || !closed(fx.opened[0]) {
		t.Fatal("a descriptor the sink refused was not closed")
	}
	if fx.count(execDropped) != 1 {
		t.Errorf("dropped %d, want 1", fx.count(execDropped))
	}
	// Anonymous and memfd mappings are not opened at all.
	fx.report(execMeta(""))
	fx.report(execMeta("/memfd:jit"))
	if len(fx.opened) != 1 || fx.count(execUnsupported) != 2 {
		t.Errorf("opened %d, unsupported %d; want 1, 2", len(fx.opened), fx.count(execUnsupported))
	}
}

func TestExecutableSenderParksUntilConnected(t *testing.T) {
	fx := newExecFixture(t, 100, 100, 100, 2)
	fx.sink.stats.Connected = false
	for _, p := range []string{"/bin/a", "/bin/b", "/bin/c"} {
		fx.report(execMeta(p))
	}
	if len(fx.sink.notices) != 0 || fx.count(execDropped) != 1 || !closed(fx.opened[2]) {
		t.Fatalf("while disconnected: %d sent, %d dropped; want 0, 1 (park limit 2), the third closed", len(fx.sink.notices), fx.count(execDropped))
	}
	fx.x.flushParked() // still disconnected: nothing happens
	if len(fx.sink.notices) != 0 {
		t.Fatal("flushed while disconnected")
	}
	fx.sink.mu.Lock()
	fx.sink.stats.Connected = true
	fx.sink.mu.Unlock()
	fx.x.flushParked()
	if len(fx.sink.notices) != 2 || fx.sink.notices[0].Path != "/bin/a" || fx.count(execSent) != 2 {
		t.Fatalf("after connecting: %d sent", len(fx.sink.notices))
	}

	// close() closes whatever is still parked.
	fx.sink.mu.Lock()
	fx.sink.stats.Connected = false
	fx.sink.mu.Unlock()
	fx.report(execMeta("/bin/d"))
	fx.x.close()
	if last := fx.opened[len(fx.opened)-1]; !closed(last) {
		t.Error("close left a parked descriptor open")
	}
	opened, dropped := len(fx.opened), fx.count(execDropped)
	fx.report(execMeta("/bin/e")) // after close: not even opened
	if len(fx.opened) != opened || fx.count(execDropped) != dropped+1 {
		t.Errorf("after close: %d opened, %d dropped; want %d, %d", len(fx.opened), fx.count(execDropped), opened, dropped+1)
	}
}

func TestExecutableSenderVDSOOnce(t *testing.T) {
	fx := newExecFixture(t, 100, 100, 100, 16)
	fx.report(execMeta(process.VdsoPathName))
	fx.report(execMeta(process.VdsoPathName))
	if len(fx.sink.notices) != 1 || !fx.sink.notices[0].IsVDSO || fx.count(execDuplicate) != 1 {
		t.Errorf("vdso: %d notices, %d duplicates; want 1, 1", len(fx.sink.notices), fx.count(execDuplicate))
	}
}

// ownMapping returns the first mapping of this test process that match
// accepts, or nil, and the process (closed when t ends). The path is
// interned: IterateMappings hands out paths in a buffer it recycles.
func ownMapping(t *testing.T, match func(*process.RawMapping) bool) (process.Process, *process.RawMapping) {
	t.Helper()
	pr := process.New(libpf.PID(os.Getpid()), libpf.PID(os.Getpid()))
	t.Cleanup(func() { pr.Close() })
	var found *process.RawMapping
	if _, err := pr.IterateMappings(func(m process.RawMapping) bool {
		if found == nil && match(&m) {
			m.Path = libpf.Intern(m.Path).String()
			found = &m
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	return pr, found
}

// The VDSO has no file: it is copied out of the process into a sealed
// memfd. Uses this test process's own VDSO.
func TestVDSOMemfd(t *testing.T) {
	pr, vdso := ownMapping(t, (*process.RawMapping).IsVDSO)
	if vdso == nil {
		t.Skip("no VDSO mapping in this process")
	}
	f, err := vdsoMemfd(pr, vdso)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	if uint64(len(data)) != vdso.Length || !bytes.HasPrefix(data, []byte(elf.ELFMAG)) {
		t.Fatalf("memfd holds %d bytes starting %q, want %d bytes of ELF", len(data), data[:min(4, len(data))], vdso.Length)
	}
	if _, err := f.WriteAt([]byte{0}, 0); err == nil {
		t.Error("the VDSO memfd is writable")
	}
	seals, err := unix.FcntlInt(f.Fd(), unix.F_GET_SEALS, 0)
	if err != nil || seals&unix.F_SEAL_WRITE == 0 {
		t.Errorf("seals %#x, %v; want F_SEAL_WRITE", seals, err)
	}
	// Its FileID is the one the tracer computes for the VDSO.
	want, err := pr.CalculateMappingFileID(vdso)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	got, err := libpf.FileIDFromExecutableReader(f)
	if err != nil || got != want {
		t.Errorf("memfd FileID %v (%v), want %v", got, err, want)
	}
}
