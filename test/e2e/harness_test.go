package e2e

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tandem-profiler/tandem/confine"
	"github.com/tandem-profiler/tandem/test/otlptest"
	"github.com/tandem-profiler/tandem/test/privtest"
	"github.com/tandem-profiler/tandem/test/proctest"
	"github.com/tandem-profiler/tandem/test/sdnotifytest"
)

// encoderUID is the unprivileged uid the encoder runs as ("nobody").
const encoderUID = 65534

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

func moduleRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// requirePrivileges skips outside CI when the test cannot load eBPF, and
// fails inside CI, where it must.
func requirePrivileges(t *testing.T) {
	t.Helper()
	var why string
	switch {
	case os.Geteuid() != 0:
		why = "needs root to load eBPF programs"
	case !fileExists("/sys/kernel/btf/vmlinux"):
		why = "kernel has no BTF (/sys/kernel/btf/vmlinux)"
	case lookPath("python3") == "":
		why = "needs python3 for the Python workload"
	}
	if why != "" {
		privtest.SkipOrFail(t, "end-to-end test cannot run: %s", why)
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

func lookPath(name string) string {
	p, _ := exec.LookPath(name)
	return p
}

// binaries builds tandem-sampler, tandem-encoder and the Go workload once,
// with the memlock overlay, into a directory every uid can read.
func binaries(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		root := moduleRoot(t)
		buildDir, buildErr = os.MkdirTemp("", "tandem-e2e-bin-")
		if buildErr != nil {
			return
		}
		if buildErr = os.Chmod(buildDir, 0o755); buildErr != nil {
			return
		}
		prep := exec.Command("make", "-s", "prepare")
		prep.Dir = root
		if out, err := prep.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("make prepare: %v\n%s", err, out)
			return
		}
		// The Makefile's flags, so these builds share its build cache.
		env := append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=vendor -trimpath -tags=grpcnotrace -overlay="+filepath.Join(root, ".build", "overlay.json"))
		for _, b := range []struct{ out, pkg string }{
			{"tandem-sampler", "./cmd/sampler"},
			{"tandem-encoder", "./cmd/encoder"},
			{"gobusy", "./test/e2e/testdata/gobusy/main.go"},
		} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(buildDir, b.out), b.pkg)
			cmd.Dir = root
			cmd.Env = env
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("build %s: %v\n%s", b.pkg, err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildDir
}

// sharedDir makes a directory the unprivileged encoder can write to: owned
// by the encoder's uid and writable by nobody else (but root), as
// make run's, so that the sampler's socket-directory check accepts it.
func sharedDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "tandem-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chown(dir, encoderUID, encoderUID); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// proc is a child process whose output is kept for failure reports.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *proctest.Output
	done chan struct{}
	err  error
}

func start(t *testing.T, name string, uid int, bin string, args ...string) *proc {
	t.Helper()
	return startEnv(t, name, uid, nil, bin, args...)
}

// startReadySampler starts tandem-sampler (as root) with a NOTIFY_SOCKET
// in dir and waits for its READY=1, which it sends once the tracer
// samples; it fails as soon as the sampler exits.
func startReadySampler(t *testing.T, dir, bin string, args ...string) *proc {
	t.Helper()
	notify := sdnotifytest.Listen(t, dir)
	p := startEnv(t, "sampler", 0, []string{notify.Env()}, bin, args...)
	if err := notify.WaitFor("READY=1", p.done, 2*time.Minute); err != nil {
		t.Fatalf("the sampler did not become ready: %v (exit: %v)", err, p.err)
	}
	// It confines itself before READY=1: every test below runs against a
	// confined sampler, and a call the tracer needs that the filter
	// denies shows as a failure there.
	if _, err := confine.CheckConfined(p.cmd.Process.Pid, confine.Sampler); err != nil {
		t.Fatalf("the ready sampler is not confined: %v", err)
	}
	return p
}

// startEnv is start with extra environment entries.
func startEnv(t *testing.T, name string, uid int, env []string, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, out: &proctest.Output{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	if env != nil {
		p.cmd.Env = append(os.Environ(), env...)
	}
	p.cmd.Stdout = p.out
	p.cmd.Stderr = p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if uid != 0 {
		p.cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("---- %s output ----\n%s", name, p.out.Tail(60))
		}
	})
	return p
}

func (p *proc) kill() {
	select {
	case <-p.done:
	default:
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// stop sends SIGTERM and waits for a clean exit.
func (p *proc) stop(t *testing.T, within time.Duration) {
	t.Helper()
	if p.exited() && p.err != nil {
		t.Fatalf("%s had exited (%v) before the test stopped it; its last output:\n%s", p.name, p.err, p.out.Tail(30))
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(within):
		t.Fatalf("%s did not exit within %v of SIGTERM", p.name, within)
	}
	if p.err != nil {
		t.Fatalf("%s exited with %v after SIGTERM", p.name, p.err)
	}
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// waitFor polls cond until it holds, and fails the test once within has
// passed or as soon as one of the watched processes (those that must stay
// up meanwhile) has exited, with its exit status and last output lines.
func waitFor(t *testing.T, what string, within time.Duration, cond func() bool, watch ...*proc) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		for _, p := range watch {
			if p.exited() {
				t.Fatalf("%s exited (%v) while the test waited for %s; its last output:\n%s", p.name, p.err, what, p.out.Tail(30))
			}
		}
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// encoderMetric reads one counter from the encoder's /metrics, summing its
// label sets; a metric that was never touched reads as 0.
func encoderMetric(t *testing.T, addr, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("read encoder metrics: %v", err)
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || (len(line) > len(name) && line[len(name)] != ' ' && line[len(name)] != '{') {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}

// freeAddr returns a loopback address that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// workloads starts the three known workloads for d.
type workloads struct {
	python, gobusy, sha *proc
}

func startWorkloads(t *testing.T, bin string, d time.Duration) workloads {
	t.Helper()
	root := moduleRoot(t)
	secs := strconv.FormatFloat(d.Seconds(), 'f', 1, 64)
	return workloads{
		python: start(t, "python workload", 0, pythonInterpreter(t), filepath.Join(root, "test/e2e/testdata/busy.py"), secs),
		gobusy: start(t, "go workload", 0, filepath.Join(bin, "gobusy"), d.String()),
		sha:    start(t, "sha256sum workload", 0, "timeout", secs, "sha256sum", "/dev/zero"),
	}
}

func (w workloads) wait(t *testing.T, within time.Duration) {
	t.Helper()
	for _, p := range []*proc{w.python, w.gobusy, w.sha} {
		select {
		case <-p.done:
		case <-time.After(within):
			t.Fatalf("%s still running after %v", p.name, within)
		}
	}
}

func execCommand(bin string, args ...string) (string, error) {
	out, err := exec.Command(bin, args...).CombinedOutput()
	return string(out), err
}

// pythonInterpreter resolves python3 to the interpreter binary itself: a
// version-manager shim (pyenv) would exec it under another name first.
func pythonInterpreter(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("python3", "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		t.Fatalf("locate python3: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// inetSockets returns the sockets of pid that are AF_INET or AF_INET6: the
// socket inodes among its descriptors that appear in its network
// namespace's tcp, udp and raw tables. It also returns how many of its
// sockets are Unix sockets, to show the check looked at real sockets.
func inetSockets(t *testing.T, pid int) (inet []string, unixCount int) {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d", pid)
	fds, err := os.ReadDir(dir + "/fd")
	if err != nil {
		t.Fatalf("read %s/fd: %v", dir, err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		target, err := os.Readlink(dir + "/fd/" + fd.Name())
		if err == nil && strings.HasPrefix(target, "socket:[") {
			inodes[strings.TrimSuffix(strings.TrimPrefix(target, "socket:["), "]")] = true
		}
	}
	tableInodes := func(table string) map[string]bool {
		out := map[string]bool{}
		data, err := os.ReadFile(dir + "/net/" + table)
		if err != nil {
			return out
		}
		lines := strings.Split(string(data), "\n")
		for _, line := range lines[1:] {
			f := strings.Fields(line)
			if table == "unix" && len(f) >= 7 {
				out[f[6]] = true
			} else if len(f) >= 10 {
				out[f[9]] = true
			}
		}
		return out
	}
	for _, table := range []string{"tcp", "tcp6", "udp", "udp6", "raw", "raw6", "udplite", "udplite6"} {
		for ino := range tableInodes(table) {
			if inodes[ino] {
				inet = append(inet, table+":"+ino)
			}
		}
	}
	for ino := range tableInodes("unix") {
		if inodes[ino] {
			unixCount++
		}
	}
	return inet, unixCount
}

// sampleKey identifies one observation: pid, thread and timestamp.
func sampleKey(pid, tid string, ts uint64) string {
	return pid + "/" + tid + "/" + strconv.FormatUint(ts, 10)
}

// receivedKeys counts every observation the receiver got by sampleKey; a
// count above 1 is a duplicate.
func receivedKeys(samples []otlptest.Sample) map[string]int {
	keys := map[string]int{}
	for _, s := range samples {
		for _, ts := range s.Timestamps {
			keys[sampleKey(s.Resource["process.pid"], s.Attributes["thread.id"], ts)]++
		}
	}
	return keys
}

// duplicates counts the observations received more than once.
func duplicates(keys map[string]int) int {
	n := 0
	for _, c := range keys {
		n += c - 1
	}
	return n
}

// checkNothingLostOrDuplicated checks the samples a receiver got across
// encoder restarts (what names them): none twice, and the Go workload g,
// which ran for ran, got at least 85% of what its own CPU time gives at hz.
// A thread on CPU is sampled hz times per CPU second, so the workload's CPU
// time says what an uninterrupted run gets (the machine may be shared:
// wall time would not); anything lost shows up as a shortfall.
func checkNothingLostOrDuplicated(t *testing.T, samples []otlptest.Sample, g *proc, ran time.Duration, what string) {
	t.Helper()
	seen := receivedKeys(samples)
	dups := duplicates(seen)
	var hot int64
	for _, s := range samples {
		if s.Resource["service.name"] == "gobusy" {
			hot += s.Total()
		}
	}
	if dups != 0 {
		t.Errorf("%d samples arrived twice", dups)
	}
	cpu := g.cmd.ProcessState.UserTime() + g.cmd.ProcessState.SystemTime()
	want := float64(hz) * cpu.Seconds()
	t.Logf("gobusy: %d samples over %v (%v on CPU); the uninterrupted rate gives %.0f; %d distinct samples, %d duplicates",
		hot, ran.Round(time.Second), cpu.Round(10*time.Millisecond), want, len(seen), dups)
	if float64(hot) < 0.85*want {
		t.Errorf("gobusy got %d samples, want at least 85%% of %.0f: samples were lost across %s", hot, want, what)
	}
}
