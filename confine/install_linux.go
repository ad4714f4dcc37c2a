package confine

import (
	"errors"
	"fmt"
	"runtime"
	"syscall"
	"unsafe"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"github.com/landlock-lsm/go-landlock/landlock"
	llsyscall "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Install confines the whole process, every thread, for cfg.Role: it
// drops every capability but the sampler's steady set from all five sets
// (the encoder keeps what it started with: none where it is deployed; run
// as root by hand, root's file access, still bounded by Landlock),
// restricts the encoder's writes with Landlock (best effort: a kernel
// without it enforces nothing, Report.LandlockABI says so), sets
// no_new_privs and installs the role's seccomp filters.
//
// The sampler gets no Landlock domain: the kernel lets a process in a
// domain inspect only processes in the same domain or below (ptrace
// access checks), and those checks gate /proc/PID/maps, /proc/PID/exe,
// /proc/PID/mem and process_vm_readv, that is the tracer's whole job.
// Its writes are bounded by the deployment (a read-only root file
// system, ProtectSystem=strict) and its filter. It cannot be undone. It fails
// when any part the kernel supports cannot be installed.
//
// Install needs a binary built without cgo (syscall.AllThreadsSyscall).
func Install(cfg Config) (Report, error) {
	var rep Report
	if err := cfg.Validate(); err != nil {
		return rep, fmt.Errorf("confine %s: %w", cfg.Role, err)
	}
	lastCap, err := readLastCap()
	if err != nil {
		return rep, err
	}
	if cfg.Role == Sampler {
		if rep.Capabilities, rep.Bounding, err = dropCapabilities(Capabilities(cfg.Role, lastCap), lastCap); err != nil {
			return rep, fmt.Errorf("confine %s: drop capabilities: %w", cfg.Role, err)
		}
	}
	if cfg.Role != Sampler {
		if rep.LandlockABI, err = restrictWrites(&cfg); err != nil {
			return rep, fmt.Errorf("confine %s: restrict writes (Landlock): %w", cfg.Role, err)
		}
	}
	if err := allThreads(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0); err != nil {
		return rep, fmt.Errorf("confine %s: set no_new_privs: %w", cfg.Role, err)
	}
	if rep.SeccompFilters, err = installFilters(cfg.Role); err != nil {
		return rep, fmt.Errorf("confine %s: install seccomp filter: %w", cfg.Role, err)
	}
	return rep, nil
}

// readLastCap finds the kernel's highest capability by asking for each
// one's bounding bit (EINVAL past the last): /proc/sys/kernel/cap_last_cap
// is hidden under systemd's ProcSubset=pid.
func readLastCap() (Capability, error) {
	for c := Capability(63); c >= 0; c-- {
		if _, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0); err == nil {
			return c, nil
		} else if !errors.Is(err, syscall.EINVAL) {
			return 0, fmt.Errorf("read the bounding set: %w", err)
		}
	}
	return 0, errors.New("the kernel knows no capability")
}

// allThreads runs a system call on every thread of the process: the
// kernel keeps capabilities and no_new_privs per thread.
func allThreads(trap, a1, a2, a3 uintptr) error {
	if _, _, errno := syscall.AllThreadsSyscall(trap, a1, a2, a3); errno != 0 {
		if errno == syscall.ENOTSUP {
			return fmt.Errorf("%w (the binary was built with cgo; build with CGO_ENABLED=0)", errno)
		}
		return errno
	}
	return nil
}

// dropCapabilities keeps keep (as far as the process has it) and drops
// every other capability: bounding set first, while CAP_SETPCAP may still
// be effective, then ambient, then inheritable, permitted and effective.
func dropCapabilities(keep CapSet, lastCap Capability) (kept, bounding CapSet, err error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return 0, 0, fmt.Errorf("capget: %w", err)
	}
	permitted := CapSet(data[0].Permitted) | CapSet(data[1].Permitted)<<32
	kept = keep & permitted
	for c := Capability(0); c <= lastCap; c++ {
		if kept.Has(c) {
			continue
		}
		inSet, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0)
		if err != nil {
			return 0, 0, fmt.Errorf("read bounding set: %w", err)
		}
		if inSet == 0 {
			continue
		}
		if err := allThreads(unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, uintptr(c), 0); err != nil {
			if errors.Is(err, syscall.EPERM) && !permitted.Has(CapSetPCap) {
				bounding |= Of(c)
				continue
			}
			return 0, 0, fmt.Errorf("drop %v from the bounding set: %w", c, err)
		}
	}
	bounding |= kept
	if err := allThreads(unix.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0); err != nil && !errors.Is(err, syscall.EINVAL) {
		return 0, 0, fmt.Errorf("clear the ambient set: %w", err)
	}
	effective := CapSet(data[0].Effective) | CapSet(data[1].Effective)<<32
	inheritable := CapSet(data[0].Inheritable) | CapSet(data[1].Inheritable)<<32
	if permitted == kept && effective == kept && inheritable == 0 {
		// Nothing to drop (the encoder as its own user): capset may be
		// filtered (systemd's @privileged holds it).
		return kept, bounding, nil
	}
	for i := range data {
		v := uint32(kept >> (32 * i))
		data[i] = unix.CapUserData{Effective: v, Permitted: v}
	}
	hdr = unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	err = allThreads(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0)
	runtime.KeepAlive(&hdr)
	runtime.KeepAlive(&data)
	if err != nil {
		return 0, 0, fmt.Errorf("capset: %w", err)
	}
	return kept, bounding, nil
}

// writeRights are the Landlock rights Install handles: every way to
// change the file system, and execution. Reads are not handled: the
// sampler must read /proc and every executable, through other mount
// namespaces too.
const writeRights = llsyscall.AccessFSExecute | llsyscall.AccessFSWriteFile |
	llsyscall.AccessFSRemoveDir | llsyscall.AccessFSRemoveFile |
	llsyscall.AccessFSMakeChar | llsyscall.AccessFSMakeDir | llsyscall.AccessFSMakeReg |
	llsyscall.AccessFSMakeSock | llsyscall.AccessFSMakeFifo | llsyscall.AccessFSMakeBlock |
	llsyscall.AccessFSMakeSym | llsyscall.AccessFSTruncate

// dirRights are granted below a writable directory; fileRights on a
// writable file (Landlock accepts only file rights on files).
const (
	dirRights  = writeRights &^ llsyscall.AccessFSExecute
	fileRights = llsyscall.AccessFSWriteFile | llsyscall.AccessFSTruncate
)

func restrictWrites(cfg *Config) (int, error) {
	abi, err := llsyscall.LandlockGetABIVersion()
	if err != nil {
		abi = 0 // no Landlock here: best effort enforces nothing
	}
	var rules []landlock.Rule
	if len(cfg.WritableDirs) > 0 {
		rules = append(rules, landlock.PathAccess(dirRights, cfg.WritableDirs...).IgnoreIfMissing())
	}
	if len(cfg.WritableFiles) > 0 {
		rules = append(rules, landlock.PathAccess(fileRights, cfg.WritableFiles...))
	}
	c := landlock.Config{HandledAccessFS: writeRights}.BestEffort()
	if err := c.RestrictPaths(rules...); err != nil {
		return abi, err
	}
	return abi, nil
}

// installFilters installs the architecture guard and the role's filter,
// on every thread (TSYNC). It returns how many filters it added.
func installFilters(role Role) (int, error) {
	native, err := arch.GetInfo("")
	if err != nil {
		return 0, err
	}
	if err := loadArchGuard(uint32(native.ID)); err != nil {
		return 0, fmt.Errorf("architecture guard: %w", err)
	}
	policy, err := Policy(role)
	if err != nil {
		return 1, err
	}
	if err := seccomp.LoadFilter(seccomp.Filter{NoNewPrivs: true, Flag: seccomp.FilterFlagTSync, Policy: policy}); err != nil {
		return 1, err
	}
	return 2, nil
}

// ArchGuard is the filter that denies every call made through an
// architecture other than nativeArch (an audit arch number): the main
// filter matches native numbers only, and the library's program lets a
// foreign architecture's calls through to its default action (allow).
func ArchGuard(nativeArch uint32) ([]bpf.RawInstruction, error) {
	return bpf.Assemble([]bpf.Instruction{
		bpf.LoadAbsolute{Off: 4, Size: 4}, // seccomp_data.arch
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: nativeArch, SkipFalse: 1},
		bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW},
		bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | errnoEPERM},
	})
}

func loadArchGuard(nativeArch uint32) error {
	raw, err := ArchGuard(nativeArch)
	if err != nil {
		return err
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		filter[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	r, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&prog)))
	runtime.KeepAlive(filter)
	switch {
	case errno != 0:
		return fmt.Errorf("seccomp: %w", errno)
	case r != 0:
		return fmt.Errorf("seccomp: thread %d could not be synchronised", r)
	}
	return nil
}
