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

// executableSender opens the executables the tracer reports and hands them
// with a schema.ExecutableNotice to the sink. It runs on the tracer's
// process-sync goroutine: it opens one file (or copies the VDSO into a
// memfd), encodes a small notice and enqueues; it never waits for the sink.
type executableSender struct {
	sink      Sink
	adm       *admission
	m         *samplerMetrics
	logger    *slog.Logger
	vdsoSent  atomic.Bool
	parkLimit int
	// dropped counts descriptors opened but not handed over (closed),
	// reported in band by the batcher.
	dropped atomic.Uint64

	mu     sync.Mutex
	parked []parkedExecutable // while the sink is not connected
	closed bool

	// open is replaced in tests.
	open func(md *reporter.ExecutableMetadata, vdso bool) (*os.File, error)
}

// parkedExecutable is a notice whose descriptor waits for the sink to
// connect.
type parkedExecutable struct {
	payload []byte
	f       *os.File
	vdso    bool
}

func newExecutableSender(sink Sink, adm *admission, parkLimit int, m *samplerMetrics, logger *slog.Logger) *executableSender {
	return &executableSender{sink: sink, adm: adm, parkLimit: parkLimit, m: m, logger: logger, open: openExecutable}
}

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
	if md.Mapping == nil || md.Process == nil {
		x.count(execUnsupported)
		return
	}
	vdso := md.Mapping.IsVDSO()
	switch {
	case vdso && x.vdsoSent.Load():
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
	f, err := x.open(md, vdso)
	if err != nil {
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
		x.drop()
		return
	}
	if !x.sink.SendExecutable(p.payload, p.f) {
		x.drop()
		return
	}
	if p.vdso {
		x.vdsoSent.Store(true)
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

// close closes the parked descriptors (counted as dropped) and parks
// nothing more.
func (x *executableSender) close() {
	x.mu.Lock()
	parked := x.parked
	x.parked, x.closed = nil, true
	x.mu.Unlock()
	for _, p := range parked {
		_ = p.f.Close()
		x.drop()
	}
	x.m.executablesParked.Set(0)
}

func (x *executableSender) drop() {
	x.count(execDropped)
	x.dropped.Add(1)
}
