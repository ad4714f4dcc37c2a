package sampler

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"go.opentelemetry.io/ebpf-profiler/process"
	"go.opentelemetry.io/ebpf-profiler/reporter"

	"github.com/tandem-profiler/tandem/schema"
)

// maxVDSOSize bounds the copy of the VDSO (two or three pages in practice).
const maxVDSOSize = 1 << 20

// Bounds of the opener. Opening an executable goes through the workload's
// filesystem, which may block for as long as it likes (a FUSE daemon that
// never answers, a hung NFS server): it happens on openWorkers goroutines,
// never on the tracer's, behind a queue of openQueueLen. When the workers
// are stuck and the queue is full, new executables are counted as
// open_busy and skipped; at most openWorkers goroutines stay blocked.
const (
	openWorkers  = 2
	openQueueLen = 64
)

// executableSender opens the executables the tracer reports and hands them
// with a schema.ExecutableNotice to the sink. report runs on the tracer's
// process-sync goroutine and only queues (see openWorkers); the workers
// open one file (or copy the VDSO into a memfd), encode a small notice and
// hand it to the sink, never waiting for it.
type executableSender struct {
	sink      Sink
	adm       *admission
	m         *samplerMetrics
	logger    *slog.Logger
	parkLimit int
	// dropped counts descriptors opened but not handed over (closed),
	// reported in band by the batcher.
	dropped atomic.Uint64

	mu     sync.Mutex
	parked []parkedExecutable // while the sink is not connected
	closed bool

	// vdsoQueued: a VDSO is queued, parked or sent; later ones are
	// duplicates. Reset when it is dropped, so that a later one is tried.
	vdsoQueued atomic.Bool

	jobs       chan openJob
	done       chan struct{} // closed by close: the workers return
	pending    sync.WaitGroup
	opening    atomic.Int64 // workers inside open
	busyLogged atomic.Bool

	// open is replaced in tests.
	open func(md *reporter.ExecutableMetadata, vdso bool) (*os.File, error)
}

// openJob is a reported executable waiting for a worker. It holds copies:
// the tracer may reuse what it passed once ReportExecutable returns.
type openJob struct {
	md      reporter.ExecutableMetadata
	mapping process.RawMapping
	vdso    bool
}

// parkedExecutable is a notice whose descriptor waits for the sink to
// connect.
type parkedExecutable struct {
	payload []byte
	f       *os.File
	vdso    bool
}

// newExecutableSender starts workers opener goroutines; close stops them.
func newExecutableSender(sink Sink, adm *admission, parkLimit, workers int, m *samplerMetrics, logger *slog.Logger) *executableSender {
	x := &executableSender{
		sink: sink, adm: adm, parkLimit: parkLimit, m: m, logger: logger, open: openExecutable,
		jobs: make(chan openJob, openQueueLen), done: make(chan struct{}),
	}
	for range max(workers, 1) {
		go x.worker()
	}
	return x
}

func (x *executableSender) worker() {
	for {
		select {
		case <-x.done:
			return
		case j := <-x.jobs:
			x.setOpening(1)
			x.openAndSend(&j)
			x.setOpening(-1)
			x.pending.Done()
		}
	}
}

// setOpening counts a worker into or out of open; the lock keeps the gauge
// in step with the count.
func (x *executableSender) setOpening(d int64) {
	x.mu.Lock()
	x.m.executablesOpening.Set(float64(x.opening.Add(d)))
	x.mu.Unlock()
}

// wait returns once every queued executable was handled (tests).
func (x *executableSender) wait() { x.pending.Wait() }

var errNotAFile = errors.New("mapping reader is not a file")

// openExecutable opens the mapping's file through /proc/PID/map_files (the
// profiler's OpenMappingFile), or copies the VDSO out of the process.
func openExecutable(md *reporter.ExecutableMetadata, vdso bool) (*os.File, error) {
	if vdso {
		return vdsoMemfd(md.Process, md.Mapping)
	}
	rac, err := md.Process.OpenMappingFile(md.Mapping)
	if err != nil {
		return nil, err
	}
	f, ok := rac.(*os.File)
	if !ok {
		_ = rac.Close()
		return nil, errNotAFile
	}
	return f, nil
}

// vdsoMemfd copies the VDSO image of the process into a sealed, read-only
// memfd.
func vdsoMemfd(p process.Process, m *process.RawMapping) (*os.File, error) {
	if m.Length == 0 || m.Length > maxVDSOSize {
		return nil, fmt.Errorf("vdso mapping of %d bytes", m.Length)
	}
	data := make([]byte, m.Length)
	rm := p.GetRemoteMemory()
	if !rm.Valid() {
		return nil, errors.New("no remote memory access")
	}
	if _, err := rm.ReadAt(data, int64(m.Vaddr)); err != nil {
		return nil, fmt.Errorf("read vdso: %w", err)
	}
	fd, err := unix.MemfdCreate(process.VdsoPathName, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fmt.Errorf("memfd_create: %w", err)
	}
	f := os.NewFile(uintptr(fd), "memfd:"+process.VdsoPathName)
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("write vdso memfd: %w", err)
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS,
		unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE|unix.F_SEAL_SEAL); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("seal vdso memfd: %w", err)
	}
	if _, err := f.Seek(0, 0); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("rewind vdso memfd: %w", err)
	}
	return f, nil
}

func (x *executableSender) count(result string) {
	x.m.executable(result)
}

// report handles one ExecutableReporter call.
func (x *executableSender) report(md *reporter.ExecutableMetadata) {
	select {
	case <-x.done:
		x.count(execDropped) // after close: nothing is opened
		return
	default:
	}
	if md.Mapping == nil || md.Process == nil {
		x.count(execUnsupported)
		return
	}
	vdso := md.Mapping.IsVDSO()
	switch {
	case vdso && x.vdsoQueued.Load():
		x.count(execDuplicate)
		return
	case !vdso && !md.Mapping.IsFileBacked():
		x.count(execUnsupported)
		return
	}
	switch x.adm.take() {
	case rejectedRate:
		x.count(execRateLimited)
		return
	case rejectedTotal:
		x.count(execTotalLimited)
		return
	}
	if vdso && !x.vdsoQueued.CompareAndSwap(false, true) {
		x.count(execDuplicate)
		return
	}
	j := openJob{md: *md, mapping: *md.Mapping, vdso: vdso}
	j.md.Mapping = &j.mapping
	x.pending.Add(1)
	select {
	case x.jobs <- j:
		return
	default:
	}
	x.pending.Done()
	x.count(execOpenBusy)
	if vdso {
		x.vdsoQueued.Store(false)
	}
	if !x.busyLogged.Swap(true) {
		x.logger.Warn("executables skipped: opening is slow or stuck (a blocking filesystem?); counted as open_busy",
			"path", md.Mapping.Path, "pid", md.Process.PID(), "opening", x.opening.Load(), "queued", len(x.jobs))
	}
}

// openAndSend opens a queued executable and hands it to the sink. It runs
// on a worker.
func (x *executableSender) openAndSend(j *openJob) {
	md, vdso := &j.md, j.vdso
	select {
	case <-x.done:
		x.count(execDropped)
		return
	default:
	}
	f, err := x.open(md, vdso)
	if err != nil {
		if vdso {
			x.vdsoQueued.Store(false)
		}
		if errors.Is(err, errNotAFile) {
			x.count(execUnsupported)
		} else {
			x.count(execOpenFailed)
		}
		x.logger.Debug("open executable", "path", md.Mapping.Path, "pid", md.Process.PID(), "err", err)
		return
	}
	file := md.MappingFile.Value()
	n := schema.ExecutableNotice{
		FileID:            schema.FileID{Hi: file.FileID.Hi(), Lo: file.FileID.Lo()},
		FileName:          file.FileName.String(),
		Path:              md.Mapping.Path,
		GNUBuildID:        file.GnuBuildID,
		GoBuildID:         file.GoBuildID,
		DebuglinkFileName: md.DebuglinkFileName,
		PID:               uint32(md.Process.PID()),
		HasDescriptor:     true,
		IsVDSO:            vdso,
	}
	payload, err := schema.EncodeExecutableNotice(&n, nil)
	if err != nil {
		_ = f.Close()
		if vdso {
			x.vdsoQueued.Store(false)
		}
		x.count(execUnsupported)
		x.logger.Error("encode executable notice", "path", n.Path, "err", err)
		return
	}
	x.send(parkedExecutable{payload: payload, f: f, vdso: vdso})
}

// send hands the executable to the sink when it is connected, and parks it
// otherwise (a sink drops descriptors while no reader is attached).
func (x *executableSender) send(p parkedExecutable) {
	if !x.sink.Stats().Connected {
		x.mu.Lock()
		if !x.closed && len(x.parked) < x.parkLimit {
			x.parked = append(x.parked, p)
			x.mu.Unlock()
			x.m.executablesParked.Set(float64(len(x.parked)))
			return
		}
		x.mu.Unlock()
		_ = p.f.Close()
		x.drop(p.vdso)
		return
	}
	if !x.sink.SendExecutable(p.payload, p.f) {
		x.drop(p.vdso)
		return
	}
	x.count(execSent)
}

// flushParked sends the parked executables once the sink is connected. It
// is called periodically by the batching goroutine.
func (x *executableSender) flushParked() {
	x.mu.Lock()
	if len(x.parked) == 0 || !x.sink.Stats().Connected {
		x.mu.Unlock()
		return
	}
	parked := x.parked
	x.parked = nil
	x.mu.Unlock()
	x.m.executablesParked.Set(0)
	for _, p := range parked {
		x.send(p)
	}
}

// close stops the workers (one blocked in open stops when open returns,
// closing what it opened), closes the parked descriptors (counted as
// dropped) and parks nothing more.
func (x *executableSender) close() {
	x.mu.Lock()
	parked := x.parked
	wasClosed := x.closed
	x.parked, x.closed = nil, true
	x.mu.Unlock()
	if !wasClosed {
		close(x.done)
	}
	for _, p := range parked {
		_ = p.f.Close()
		x.drop(p.vdso)
	}
	x.m.executablesParked.Set(0)
	for {
		select {
		case <-x.jobs: // never opened: no descriptor to close
			x.count(execDropped)
			x.pending.Done()
		default:
			return
		}
	}
}

func (x *executableSender) drop(vdso bool) {
	if vdso {
		x.vdsoQueued.Store(false)
	}
	x.count(execDropped)
	x.dropped.Add(1)
}
