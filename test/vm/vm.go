package vm

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Config is one VM.
type Config struct {
	Kernel    Kernel
	Initramfs string // an uncompressed cpio archive (Initramfs.WriteTo)
	// ResultsDisk is created (ResultsBytes, sparse) and attached as the
	// guest's first virtio disk, /dev/vda.
	ResultsDisk  string
	ResultsBytes int64
	MemoryMiB    int
	CPUs         int
	// Append is added to the kernel's command line.
	Append string
	// Console receives a copy of everything the guest prints.
	Console io.Writer
}

// Machine is how qemu emulates one guest architecture.
type Machine struct {
	QEMU    string   // the emulator binary
	Package string   // the apt package that has it
	Board   []string // the machine's options
	CPU     string   // the CPU model under TCG
	Console string   // the serial console's device in the guest
	Cmdline string   // kernel parameters the machine needs
	// TCGThread is qemu's TCG threading ("single": one host thread runs
	// every emulated CPU in turn; "" is qemu's default, a thread per CPU).
	TCGThread string
}

// Machines are the guest architectures (GOARCH) the kernel test boots.
// On x86, no_timer_check skips the boot's IO-APIC timer test, which an
// emulated CPU on a loaded host can fail ("IO-APIC + timer doesn't work",
// a panic at 0.04 s; seen here).
// Under TCG, x86 guests run single-threaded (one host thread runs both
// emulated CPUs in turn): with a host thread per CPU, the kernel's live
// code patching (a breakpoint, an IPI to every CPU, the new bytes) now and
// then left the other CPU running the breakpoint after the patch had
// ended ("Oops: int3" in __schedule and sched_clock_tick, 6.12 and
// 6.12-cloud, on a loaded host); docs/benchmarks/kernel.md has the cost.
// Under TCG, arm64's "max" CPU emulates pointer authentication with the
// architected QARMA algorithm, which is slow; pauth-impdef uses qemu's
// cheap one, same behaviour for the guest.
var Machines = map[string]Machine{
	"amd64": {QEMU: "qemu-system-x86_64", Package: "qemu-system-x86", CPU: "max", Console: "ttyS0", Cmdline: "no_timer_check", TCGThread: "single"},
	"arm64": {QEMU: "qemu-system-aarch64", Package: "qemu-system-arm", Board: []string{"-M", "virt"}, CPU: "max,pauth-impdef=on", Console: "ttyAMA0"},
}

// MachineFor returns the machine of a guest architecture ("" is amd64).
func MachineFor(arch string) (Machine, error) {
	if arch == "" {
		arch = "amd64"
	}
	m, ok := Machines[arch]
	if !ok {
		return Machine{}, fmt.Errorf("no qemu machine for guest architecture %s", arch)
	}
	return m, nil
}

// VM is a running qemu.
type VM struct {
	cmd    *exec.Cmd
	accel  string
	events chan Event
	done   chan struct{}
	err    error // qemu's exit, once done is closed
	start  time.Time

	mu   sync.Mutex
	tail bytes.Buffer // the console's last bytes, for failure reports

	warn warningWatch
}

// sameArch: the guest's architecture is the host's (KVM can run it).
func sameArch(arch string) bool {
	if arch == "" {
		arch = "amd64"
	}
	return arch == runtime.GOARCH
}

// kvmGetAPIVersion is the KVM_GET_API_VERSION ioctl; a working KVM answers
// kvmAPIVersion.
const (
	kvmGetAPIVersion = 0xAE00
	kvmAPIVersion    = 12
)

// KVMUsable reports whether hardware-assisted virtualization works here:
// the CPU has vmx or svm and /dev/kvm opens and answers. /dev/kvm alone is
// not enough (a nested guest may have the device without the CPU flags,
// and qemu -enable-kvm then aborts or hangs).
func KVMUsable() bool {
	cpuinfo, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return false
	}
	flags := false
	for _, l := range strings.Split(string(cpuinfo), "\n") {
		if strings.HasPrefix(l, "flags") {
			f := " " + l + " "
			flags = strings.Contains(f, " vmx ") || strings.Contains(f, " svm ")
			break
		}
	}
	if !flags {
		return false
	}
	fd, err := unix.Open("/dev/kvm", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	v, err := unix.IoctlRetInt(fd, kvmGetAPIVersion)
	return err == nil && v == kvmAPIVersion
}

// Start boots the VM. Kill (or Wait) must be called, whatever happens.
func Start(cfg Config) (*VM, error) {
	m, err := MachineFor(cfg.Kernel.Arch)
	if err != nil {
		return nil, err
	}
	qemu, err := exec.LookPath(m.QEMU)
	if err != nil {
		return nil, fmt.Errorf("%s not found (apt-get install %s): %w", m.QEMU, m.Package, err)
	}
	disk, err := os.Create(cfg.ResultsDisk)
	if err != nil {
		return nil, fmt.Errorf("create the results disk: %w", err)
	}
	err = disk.Truncate(cfg.ResultsBytes)
	if cerr := disk.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("size the results disk: %w", err)
	}
	accel := []string{"-accel", "tcg" + tcgThreadOption(m), "-cpu", m.CPU}
	if sameArch(cfg.Kernel.Arch) && KVMUsable() {
		accel = []string{"-accel", "kvm", "-cpu", "host"}
	}
	args := append(append(append([]string(nil), m.Board...), accel...),
		"-m", strconv.Itoa(cfg.MemoryMiB), "-smp", strconv.Itoa(cfg.CPUs),
		"-nodefaults", "-display", "none", "-monitor", "none", "-serial", "stdio", "-no-reboot",
		"-kernel", cfg.Kernel.Image, "-initrd", cfg.Initramfs,
		// panic=-1 with -no-reboot: a kernel panic ends qemu at once.
		// loglevel=5 (quiet would be 4) prints warnings (WARNING: is
		// KERN_WARNING) on the console, where kernelWarnings finds them.
		"-append", strings.Join(strings.Fields("console="+m.Console+" loglevel=5 panic=-1 rdinit=/init "+m.Cmdline+" "+cfg.Append), " "),
		"-drive", "file="+cfg.ResultsDisk+",format=raw,if=virtio,cache=unsafe")
	cmd := exec.Command(qemu, args...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	// Its own process group (Kill ends it all), and killed with the test
	// binary if that dies first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	v := &VM{cmd: cmd, accel: accel[1], events: make(chan Event, 64), done: make(chan struct{}), start: time.Now()}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", m.QEMU, err)
	}
	console := cfg.Console
	if console == nil {
		console = io.Discard
	}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		scanEvents(pr, io.MultiWriter(console, v.tailWriter()), v.events, &v.warn)
	}()
	go func() {
		err := cmd.Wait()
		pw.Close()
		<-scanned
		v.err = err
		close(v.done)
	}()
	return v, nil
}

// TCGThreadEnv overrides the machine's TCGThread for measurements
// ("single" or "multi").
const TCGThreadEnv = "TANDEM_VM_TCG_THREAD"

// tcgThreadOption is qemu's -accel tcg suboption for m's TCG threading.
func tcgThreadOption(m Machine) string {
	thread := m.TCGThread
	if v := os.Getenv(TCGThreadEnv); v != "" {
		thread = v
	}
	if thread == "" {
		return ""
	}
	return ",thread=" + thread
}

// Accel names the accelerator in use: kvm, or tcg with its options.
func (v *VM) Accel() string { return v.accel }

// Elapsed is the time since qemu started.
func (v *VM) Elapsed() time.Duration { return time.Since(v.start) }

// Console returns the console's last lines.
func (v *VM) Console(lines int) string {
	v.mu.Lock()
	defer v.mu.Unlock()
	all := strings.Split(strings.TrimRight(v.tail.String(), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

type tailWriter struct{ v *VM }

func (v *VM) tailWriter() io.Writer { return tailWriter{v} }

func (t tailWriter) Write(p []byte) (int, error) {
	t.v.mu.Lock()
	defer t.v.mu.Unlock()
	t.v.tail.Write(p)
	if t.v.tail.Len() > 256<<10 {
		b := t.v.tail.Bytes()
		t.v.tail = *bytes.NewBuffer(append([]byte(nil), b[len(b)-128<<10:]...))
	}
	return len(p), nil
}

// ErrGuestFailed is a failure the guest reported (EventFailed).
var ErrGuestFailed = errors.New("the guest reported a failure")

// ErrKernelWarning is a kernel warning on the guest's console.
var ErrKernelWarning = errors.New("kernel warning on the guest console")

// KernelWarnings returns the kernel warnings the console showed so far,
// each with its excerpt.
func (v *VM) KernelWarnings() []Warning { return v.warn.warnings() }

// Await waits for the event named name and returns it. It fails when the
// guest reports EventFailed first, when the console shows a kernel
// warning (with its excerpt), when qemu exits, or after within, saying
// that the VM did not reach what (for example "boot") in time.
func (v *VM) Await(name, what string, within time.Duration) (Event, error) {
	timer := time.NewTimer(within)
	defer timer.Stop()
	check := func(e Event) (bool, error) {
		switch e.Name {
		case name:
			return true, nil
		case EventFailed:
			return true, fmt.Errorf("%w while waiting for %s: %s", ErrGuestFailed, what, e.Detail)
		case EventKernelWarning:
			// The kernel prints the task and stack after the message:
			// give it a few seconds to fill the excerpt.
			select {
			case <-v.warn.filled():
			case <-v.done:
			case <-time.After(10 * time.Second):
			}
			return true, fmt.Errorf("%w while waiting for %s, %v after qemu started:\n%s", ErrKernelWarning, what, v.Elapsed().Round(time.Second), FormatWarnings(v.KernelWarnings()))
		}
		return false, nil
	}
	for {
		select {
		case e := <-v.events:
			if done, err := check(e); done {
				return e, err
			}
		case <-v.done:
			// Events the scanner sent before qemu's exit come first.
			select {
			case e := <-v.events:
				if done, err := check(e); done {
					return e, err
				}
				continue
			default:
			}
			return Event{}, fmt.Errorf("qemu exited (%v) before the VM reached %s, %v after it started", v.err, what, v.Elapsed().Round(time.Second))
		case <-timer.C:
			return Event{}, fmt.Errorf("the VM did not reach %s in %v (accelerator %s)", what, within, v.accel)
		}
	}
}

// Wait waits for qemu to exit (the guest powers off) and kills it after
// within.
func (v *VM) Wait(within time.Duration) error {
	select {
	case <-v.done:
		return v.err
	case <-time.After(within):
		v.Kill()
		return fmt.Errorf("the VM did not power off within %v (killed)", within)
	}
}

// Kill ends qemu (its whole process group) and waits for it.
func (v *VM) Kill() {
	select {
	case <-v.done:
		return
	default:
	}
	_ = syscall.Kill(-v.cmd.Process.Pid, syscall.SIGKILL)
	<-v.done
}

// ReadResults reads the tar archive the guest wrote onto the results
// disk: file contents by path.
func ReadResults(disk string) (map[string][]byte, error) {
	f, err := os.Open(disk)
	if err != nil {
		return nil, fmt.Errorf("open the results disk: %w", err)
	}
	defer f.Close()
	out := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			if len(out) == 0 {
				return nil, errors.New("the results disk holds no files (did the guest write them?)")
			}
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("read the results disk: %w", err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return out, fmt.Errorf("read %s from the results disk: %w", h.Name, err)
		}
		out[h.Name] = b
	}
}
