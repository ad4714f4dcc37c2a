package harness

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/tandem-profiler/tandem/test/proctest"
	"github.com/tandem-profiler/tandem/test/waittest"
)

// NobodyUID is the unprivileged uid ("nobody") the tests run the encoder as.
const NobodyUID = 65534

// ProcConfig is a child process to start.
type ProcConfig struct {
	_ struct{}
	// Name names it in failures and output reports.
	Name string
	// Path and Args are the executable and its arguments (Args without
	// the program name).
	Path string
	Args []string
	// UID, if not 0, runs it as that uid and gid (the test runs as root).
	UID int
	// Env is added to the test's environment.
	Env []string
	// ExtraFiles are passed as descriptors 3, 4, ... (socket activation).
	ExtraFiles []*os.File
	// Dir is its working directory ("": the test's).
	Dir string
}

// Proc is a running child process, in a process group of its own, whose
// output is kept for failure reports. It implements waittest.Watched: a
// wait watching it fails as soon as it exits.
type Proc struct {
	Name string
	Cmd  *exec.Cmd
	Out  *proctest.Output
	done chan struct{}
	err  error
}

var _ waittest.Watched = (*Proc)(nil)

// Launch starts a child and returns it. Unlike Start it neither fails a
// test nor kills the child at the test's end: use it off the test's
// goroutine (a supervisor that restarts a child), and Kill the child.
func Launch(cfg ProcConfig) (*Proc, error) {
	p := &Proc{Name: cfg.Name, Out: &proctest.Output{}, done: make(chan struct{})}
	p.Cmd = exec.Command(cfg.Path, cfg.Args...)
	if cfg.Env != nil {
		p.Cmd.Env = append(os.Environ(), cfg.Env...)
	}
	p.Cmd.Dir = cfg.Dir
	p.Cmd.Stdout, p.Cmd.Stderr = p.Out, p.Out
	p.Cmd.ExtraFiles = cfg.ExtraFiles
	// Its own group: Kill reaches what it started too.
	p.Cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if cfg.UID != 0 {
		p.Cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(cfg.UID), Gid: uint32(cfg.UID)}
	}
	if err := p.Cmd.Start(); err != nil {
		close(p.done)
		p.err = err
		return p, fmt.Errorf("start %s: %w", cfg.Name, err)
	}
	go func() {
		p.err = p.Cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Start starts a child for the test: it fails t if the child cannot
// start, and at the test's end kills the child's process group and, if t
// failed, logs the child's last output.
func Start(t testing.TB, cfg ProcConfig) *Proc {
	t.Helper()
	p, err := Launch(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			t.Logf("---- %s output ----\n%s", p.Name, p.Out.Tail(60))
		}
	})
	return p
}

// Pid is the child's process id.
func (p *Proc) Pid() int { return p.Cmd.Process.Pid }

// Done is closed once the child has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is the child's exit (nil for status 0), once Done is closed.
func (p *Proc) Err() error {
	<-p.done
	return p.err
}

// Exited reports whether the child has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Gone reports whether the child has exited, with its exit status
// (waittest.Watched). Its output is logged when the test fails (Start).
func (p *Proc) Gone() (string, bool) {
	if !p.Exited() {
		return "", false
	}
	return fmt.Sprintf("%s exited (%v)", p.Name, p.err), true
}

// Kill kills the child's process group and waits for the child.
func (p *Proc) Kill() {
	if !p.Exited() {
		_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// Wait waits for the child to exit by itself and fails t if it has not
// within that time.
func (p *Proc) Wait(t testing.TB, within time.Duration) error {
	t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(within):
		t.Fatalf("%s still running after %v", p.Name, within)
		return nil
	}
}

// Stop sends SIGTERM and waits for a clean exit. It fails t if the child
// had already exited with an error, does not exit within that time, or
// exits with an error.
func (p *Proc) Stop(t testing.TB, within time.Duration) {
	t.Helper()
	if p.Exited() && p.err != nil {
		t.Fatalf("%s had exited (%v) before the test stopped it; its last output:\n%s", p.Name, p.err, p.Out.Tail(30))
	}
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(within):
		t.Fatalf("%s did not exit within %v of SIGTERM", p.Name, within)
	}
	if p.err != nil {
		t.Fatalf("%s exited with %v after SIGTERM", p.Name, p.err)
	}
}

// WaitFor polls cond every 100 ms until it holds, failing t after within,
// or as soon as one of watch (the children that must stay up meanwhile)
// has exited, with its status and last output. The interval spares the
// CPU the processes under test share with the test.
func WaitFor(t testing.TB, what string, within time.Duration, cond func() bool, watch ...*Proc) {
	t.Helper()
	w := make([]waittest.Watched, len(watch))
	for i, p := range watch {
		w[i] = p
	}
	waittest.Poll{Within: within, Every: 100 * time.Millisecond, Watch: w}.For(t, what, cond)
}
