package sampler

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"go.opentelemetry.io/ebpf-profiler/rlimit"
)

const (
	tracefsPath       = "/sys/kernel/tracing"
	legacyTracefsPath = "/sys/kernel/debug/tracing"
	kprobePMUPath     = "/sys/bus/event_source/devices/kprobe"
	kptrRestrictPath  = "/proc/sys/kernel/kptr_restrict"
	perfParanoidPath  = "/proc/sys/kernel/perf_event_paranoid"
	kallsymsPath      = "/proc/kallsyms"
	btfPath           = "/sys/kernel/btf/vmlinux"
	lockdownPath      = "/sys/kernel/security/lockdown"
	// kprobesEnabledPath is debugfs's switch for every kprobe on the
	// machine (KPROBES_ENABLED in the kernel's docs).
	kprobesEnabledPath = "/sys/kernel/debug/kprobes/enabled"
)

// minKernel is the oldest kernel the profiler supports.
var minKernel = [2]int{5, 10}

// checkHost runs every check that can be done before loading the tracer,
// in order, and prepares tracefs. It returns the first failing check's
// error (later checks would only repeat the cause).
//
// A kernel the tracer cannot use is refused here, at once, with one line
// naming what is missing and the kernel's release, rather than by a
// verifier log or a failed attach later.
func checkHost(cfg *Config, logger *slog.Logger) error {
	release, err := kernelRelease()
	if err != nil {
		return err
	}
	if err := probeBPFSyscall(); err != nil {
		return fmt.Errorf("kernel %s: %w", release, err)
	}
	if err := checkKernelVersion(release); err != nil {
		return err
	}
	if err := checkLockdown(lockdownPath); err != nil {
		return fmt.Errorf("kernel %s: %w", release, err)
	}
	if _, err := os.Stat(btfPath); err != nil {
		// The tracer reads task_struct's layout from BTF and, without it,
		// finds it by disassembling kernel functions (binary analysis).
		logger.Warn("no kernel BTF: the tracer finds the kernel's structure offsets by binary analysis instead",
			"path", btfPath, "kernel", release, "err", err)
	}
	tracefs, mounted := findTracefs()
	needs := capNeeds{
		kptrRestrict: readIntFile(kptrRestrictPath),
		perfParanoid: readIntFile(perfParanoidPath),
		mountTracefs: !mounted,
	}
	if needs.kptrRestrict >= 2 {
		return fmt.Errorf("kernel.kptr_restrict=%d hides kernel symbol addresses from every process: set it to 0 or 1 (sysctl kernel.kptr_restrict=1)", needs.kptrRestrict)
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return fmt.Errorf("read capabilities: %w", err)
	}
	have, err := parseCapEff(status)
	if err != nil {
		return fmt.Errorf("read capabilities: %w", err)
	}
	if missing := missingCapabilities(have, needs); len(missing) > 0 {
		return &CapabilityError{Missing: missing}
	}
	if err := checkKallsyms(kallsymsPath, needs); err != nil {
		return err
	}
	if !have.has(capDACReadSearch) && !have.has(capDACOverride) {
		logger.Warn("neither CAP_DAC_READ_SEARCH nor CAP_DAC_OVERRIDE: executables not readable by the sampler's uid cannot be unwound or handed to the encoder")
	}
	if err := checkMemlock(); err != nil {
		return err
	}
	if !mounted {
		if err := unix.Mount("tracefs", tracefsPath, "tracefs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("mount tracefs at %s (needed for the scheduler tracepoints): %w", tracefsPath, err)
		}
		tracefs = tracefsPath
		logger.Info("mounted tracefs", "path", tracefsPath)
	}
	if cfg.OffCPUThreshold > 0 {
		via, err := checkKprobes(tracefs)
		if err == nil {
			err = checkKprobesArmed(kprobesEnabledPath)
		}
		if err != nil {
			return fmt.Errorf("kernel %s: %w", release, err)
		}
		logger.Info("kprobes present: off-CPU profiling hooks finish_task_switch", "via", via,
			"probability", cfg.OffCPUThreshold)
	}
	return nil
}

// probeBPFSyscall fails only when the bpf syscall does not exist.
func probeBPFSyscall() error {
	_, _, errno := unix.Syscall(unix.SYS_BPF, uintptr(unix.BPF_PROG_TYPE_UNSPEC), 0, 0)
	if errno == unix.ENOSYS {
		return fmt.Errorf("%w: this kernel has no bpf syscall (CONFIG_BPF_SYSCALL not set)", ErrNoBPF)
	}
	return nil
}

func kernelRelease() (string, error) {
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		return "", fmt.Errorf("uname: %w", err)
	}
	return unix.ByteSliceToString(uts.Release[:]), nil
}

// parseKernelVersion extracts major and minor from a release string such
// as "6.18.44-fc-v782".
func parseKernelVersion(release string) (major, minor int, err error) {
	var n int
	n, err = fmt.Sscanf(release, "%d.%d", &major, &minor)
	if n != 2 {
		return 0, 0, fmt.Errorf("parse kernel release %q: %w", release, err)
	}
	return major, minor, nil
}

func checkKernelVersion(release string) error {
	major, minor, err := parseKernelVersion(release)
	if err != nil {
		return err
	}
	if major < minKernel[0] || (major == minKernel[0] && minor < minKernel[1]) {
		return fmt.Errorf("%w: kernel %s, the profiler needs %d.%d or newer", ErrKernelTooOld, release, minKernel[0], minKernel[1])
	}
	return nil
}

// checkLockdown fails when the kernel is locked down for confidentiality
// (lockdown=confidentiality, or a distribution's policy): that mode
// forbids reading kernel memory from BPF, perf events on the kernel and
// kprobes, all of which the tracer needs. The file reads e.g. "none
// integrity [confidentiality]"; without securityfs it is not checked.
func checkLockdown(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	if strings.Contains(string(b), "[confidentiality]") {
		return fmt.Errorf("%w: the kernel is locked down for confidentiality (%s: %s), which forbids the BPF kernel-memory reads, perf events and kprobes the tracer needs; boot without lockdown=confidentiality",
			ErrLockedDown, path, strings.TrimSpace(string(b)))
	}
	return nil
}

// findTracefs returns where tracefs is mounted.
func findTracefs() (string, bool) {
	for _, p := range []string{tracefsPath, legacyTracefsPath} {
		var st unix.Statfs_t
		if err := unix.Statfs(p, &st); err == nil && st.Type == unix.TRACEFS_MAGIC {
			return p, true
		}
	}
	return "", false
}

// checkKprobes fails when the kernel offers neither the kprobe PMU nor
// tracefs kprobe_events: the off-CPU programs hook finish_task_switch with
// a kprobe. It returns the interface found.
func checkKprobes(tracefs string) (string, error) {
	if _, err := os.Stat(kprobePMUPath); err == nil {
		return kprobePMUPath, nil
	}
	if tracefs != "" {
		events := filepath.Join(tracefs, "kprobe_events")
		if _, err := os.Stat(events); err == nil {
			return events, nil
		}
	}
	return "", fmt.Errorf("%w: off-CPU profiling (--off-cpu-threshold) hooks finish_task_switch with a kprobe, but this kernel has no kprobe PMU (%s) and no %s/kprobe_events (CONFIG_KPROBES is not set); drop --off-cpu-threshold or use a kernel with kprobes", ErrNoKprobes, kprobePMUPath, tracefsOrDefault(tracefs))
}

// checkKprobesArmed fails when every kprobe is disarmed (0 written to
// debugfs's kprobes/enabled): the kprobe PMU still takes the off-CPU
// kprobe, which then never fires, so off-CPU profiling would record
// nothing and say nothing. Without debugfs it is not checked.
func checkKprobesArmed(path string) error {
	b, err := os.ReadFile(path)
	if err != nil || strings.TrimSpace(string(b)) != "0" {
		return nil
	}
	return fmt.Errorf("%w: every kprobe is disarmed (%s is 0), so off-CPU profiling's kprobe on finish_task_switch would attach and never fire; arm them (echo 1 > %s) or drop --off-cpu-threshold",
		ErrNoKprobes, path, path)
}

func tracefsOrDefault(p string) string {
	if p == "" {
		return tracefsPath
	}
	return p
}

// checkMemlock calls the profiler's own rlimit.MaximizeMemlock, as the
// tracer will (seven times). Built with Tandem's shim (make build) it
// tolerates EPERM on kernels >= 5.11, where BPF memory is charged to the
// memory cgroup; built without it, EPERM is fatal in the tracer, so say so
// now, with both fixes.
func checkMemlock() error {
	restore, err := rlimit.MaximizeMemlock()
	if err == nil {
		restore()
		return nil
	}
	if errors.Is(err, unix.EPERM) {
		var lim unix.Rlimit
		_ = unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim)
		return fmt.Errorf("%w (hard limit %s, no CAP_SYS_RESOURCE) and this binary was built without Tandem's memlock shim: build it with `make build`, or run it with LimitMEMLOCK=infinity (systemd) / --ulimit memlock=-1 (docker) or with CAP_SYS_RESOURCE: %w",
			ErrMemlock, formatRlimit(lim.Max), err)
	}
	return fmt.Errorf("%w: %w", ErrMemlock, err)
}

func formatRlimit(v uint64) string {
	if v == unix.RLIM_INFINITY {
		return "unlimited"
	}
	return strconv.FormatUint(v, 10) + " bytes"
}

func readIntFile(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

func readBootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
