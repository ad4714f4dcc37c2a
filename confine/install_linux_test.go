package confine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"golang.org/x/sys/unix"

	"github.com/tandem-profiler/tandem/test/privtest"
)

// childEnv makes the test binary a confined child (see TestMain).
const childEnv = "TANDEM_CONFINE_CHILD"

func TestMain(m *testing.M) {
	if role := os.Getenv(childEnv); role != "" {
		os.Exit(confinedChild(role, os.Args[len(os.Args)-2], os.Args[len(os.Args)-1]))
	}
	os.Exit(m.Run())
}

// childReport is what a confined child found.
type childReport struct {
	Report  Report
	Probes  map[string]string // probe -> "ok" or the errno's name
	Threads []ThreadStatus
}

// confinedChild prepares what can only be prepared before (a BPF map, a
// process to trace), installs role's confinement, then tries each call.
func confinedChild(roleName, allowed, outside string) int {
	role := Sampler
	if roleName == Encoder.String() {
		role = Encoder
	}
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, err)
		return 3
	}
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 1})
	if err != nil {
		return fail(fmt.Errorf("create a BPF map before confinement: %w", err))
	}
	sleeper := exec.Command("sleep", "60")
	if err := sleeper.Start(); err != nil {
		return fail(err)
	}
	defer func() { _ = sleeper.Process.Kill(); _, _ = sleeper.Process.Wait() }()

	rep, err := Install(Config{Role: role, WritableDirs: []string{allowed}})
	if err != nil {
		return fail(err)
	}
	out := childReport{Report: rep, Probes: map[string]string{}}
	probe := func(name string, f func() error) {
		err := f()
		var errno syscall.Errno
		switch {
		case err == nil:
			out.Probes[name] = "ok"
		case errors.As(err, &errno):
			out.Probes[name] = unix.ErrnoName(errno)
		default:
			out.Probes[name] = err.Error()
		}
	}
	probe("socket AF_INET", func() error { return socketProbe(unix.AF_INET) })
	probe("socket AF_UNIX", func() error { return socketProbe(unix.AF_UNIX) })
	// Had it worked, /bin/true would have replaced the child, which then
	// reports nothing.
	probe("execve", func() error { return syscall.Exec("/bin/true", []string{"true"}, nil) })
	probe("ptrace attach", func() error {
		if err := unix.PtraceAttach(sleeper.Process.Pid); err != nil {
			return err
		}
		return unix.PtraceDetach(sleeper.Process.Pid)
	})
	probe("write outside", func() error { return os.WriteFile(filepath.Join(outside, "x"), []byte("x"), 0o600) })
	probe("write allowed", func() error { return os.WriteFile(filepath.Join(allowed, "x"), []byte("x"), 0o600) })
	probe("read another process's maps", func() error {
		_, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", sleeper.Process.Pid))
		return err
	})
	probe("read /proc/self/maps", func() error {
		b, err := os.ReadFile("/proc/self/maps")
		if err == nil && len(b) == 0 {
			err = errors.New("empty")
		}
		return err
	})
	probe("bpf map lookup", func() error {
		var v uint64
		return m.Lookup(uint32(0), &v)
	})
	probe("bpf map create", func() error {
		m2, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Hash, KeySize: 8, ValueSize: 8, MaxEntries: 4})
		if err == nil {
			m2.Close()
		}
		return err
	})
	probe("bpf prog load", func() error {
		p, err := ebpf.NewProgram(&ebpf.ProgramSpec{
			Type: ebpf.SocketFilter, License: "GPL",
			Instructions: asm.Instructions{asm.LoadImm(asm.R0, 0, asm.DWord), asm.Return()},
		})
		if err == nil {
			p.Close()
		}
		return err
	})
	probe("process_vm_readv", func() error {
		var src, dst [8]byte
		local := []unix.Iovec{{Base: &dst[0], Len: 8}}
		remote := []unix.RemoteIovec{{Base: uintptr(unsafe.Pointer(&src[0])), Len: 8}}
		_, err := unix.ProcessVMReadv(os.Getpid(), local, remote, 0)
		return err
	})
	if out.Threads, err = ReadStatus(os.Getpid()); err != nil {
		return fail(err)
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		return fail(err)
	}
	return 0
}

func socketProbe(family int) error {
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err == nil {
		unix.Close(fd)
	}
	return err
}

// TestConfinedChild runs a child process under each role's real rule set
// and checks that every call the role must not make fails and every call
// it needs works, on every thread.
func TestConfinedChild(t *testing.T) {
	privtest.RequireRoot(t)
	tests := []struct {
		role Role
		want map[string]string
	}{
		{Sampler, map[string]string{
			"socket AF_INET": "EPERM",
			"socket AF_UNIX": "ok",
			"execve":         "EPERM",
			"ptrace attach":  "EPERM",
			// No Landlock for the sampler: a Landlock domain may not
			// inspect processes outside it, which is the tracer's job.
			"read another process's maps": "ok",
			"read /proc/self/maps":        "ok",
			"bpf map lookup":              "ok",
			"bpf map create":              "ok",
			"bpf prog load":               "EPERM",
			"process_vm_readv":            "ok",
		}},
		{Encoder, map[string]string{
			"socket AF_INET":       "ok",
			"socket AF_UNIX":       "ok",
			"execve":               "EPERM",
			"ptrace attach":        "EPERM",
			"write outside":        "EACCES",
			"write allowed":        "ok",
			"read /proc/self/maps": "ok",
			"bpf map lookup":       "EPERM",
			"bpf map create":       "EPERM",
			"bpf prog load":        "EPERM",
			"process_vm_readv":     "EPERM",
		}},
	}
	lastCap, err := readLastCap()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.role.String(), func(t *testing.T) {
			allowed, outside := t.TempDir(), t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^$", allowed, outside)
			cmd.Env = append(os.Environ(), childEnv+"="+tt.role.String())
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			stdout, err := cmd.Output()
			if err != nil {
				t.Fatalf("confined child: %v\n%s", err, stderr.Bytes())
			}
			var rep childReport
			if err := json.Unmarshal(stdout, &rep); err != nil {
				t.Fatalf("child report %q: %v (stderr %s)", stdout, err, stderr.Bytes())
			}
			t.Logf("%s: %+v", tt.role, rep.Report)
			if tt.role == Encoder && rep.Report.LandlockABI == 0 {
				t.Errorf("this kernel enforces no Landlock: the write probes prove nothing")
			}
			for name, want := range tt.want {
				if got := rep.Probes[name]; got != want {
					t.Errorf("%s: got %s, want %s", name, got, want)
				}
			}
			wantCaps := Capabilities(tt.role, lastCap)
			if len(rep.Threads) < 2 {
				t.Errorf("the child has %d threads: TSYNC untested", len(rep.Threads))
			}
			for _, th := range rep.Threads {
				if th.Seccomp != 2 || th.NoNewPrivs != 1 || th.SeccompFilters != rep.Report.SeccompFilters {
					t.Errorf("thread %d: Seccomp %d, NoNewPrivs %d, Seccomp_filters %d; want 2, 1, %d",
						th.TID, th.Seccomp, th.NoNewPrivs, th.SeccompFilters, rep.Report.SeccompFilters)
				}
				if tt.role == Sampler && (th.CapEff != wantCaps || th.CapPrm != wantCaps || th.CapBnd != wantCaps || th.CapInh != 0 || th.CapAmb != 0) {
					t.Errorf("thread %d: CapEff %v CapPrm %v CapBnd %v CapInh %v CapAmb %v; want %v in the first three, none in the others",
						th.TID, th.CapEff, th.CapPrm, th.CapBnd, th.CapInh, th.CapAmb, wantCaps)
				}
			}
		})
	}
}
