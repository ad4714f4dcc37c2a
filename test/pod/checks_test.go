package pod

import (
	"bufio"
	"errors"
	"fmt"
	"math/bits"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"golang.org/x/sys/unix"

	"github.com/tandem-profiler/tandem/test/waittest"
)

// hotFunction is where the host workload (test/e2e/testdata/gobusy)
// spends its time.
const hotFunction = "main.tandemGoHotLoop"

// podWatch waits for something the pod does, and stops waiting as soon
// as one of its containers has exited (unless a restart is expected).
type podWatch struct {
	t          *testing.T
	p          *podman
	containers []string
	restarting bool
	// dirs are listed (name, owner, size, time) in a failure report.
	dirs []string
}

// waitBound is the longest one wait lasts.
const waitBound = 2 * time.Minute

// waitFor polls cond until it holds; it fails as soon as a container it
// watches is no longer running (unless one is restarting on purpose).
func (w *podWatch) waitFor(what string, cond func() bool) {
	w.t.Helper()
	var watch []waittest.Watched
	if !w.restarting {
		for _, name := range w.containers {
			watch = append(watch, watchedContainer{w, name})
		}
	}
	waittest.Poll{Within: waitBound, Every: 250 * time.Millisecond, Watch: watch, Report: w.logs}.For(w.t, what, cond)
}

// watchedContainer is one of the pod's containers, watched while a test waits.
type watchedContainer struct {
	w    *podWatch
	name string
}

func (c watchedContainer) Gone() (string, bool) {
	st := c.w.p.inspect(c.w.t, c.name).State
	if st.Running {
		return "", false
	}
	return fmt.Sprintf("container %s is %s (exit code %d)", c.name, st.Status, st.ExitCode), true
}

// logs returns the last lines each container wrote, for a failure report.
func (w *podWatch) logs() string {
	var b strings.Builder
	for _, name := range w.containers {
		// podman logs writes what the container wrote to stderr to its own.
		out, err := w.p.command("logs", "--tail", "30", name).CombinedOutput()
		info, _ := w.p.run("container", "inspect", "--format", "caps {{.EffectiveCaps}} security {{.HostConfig.SecurityOpt}} restarts {{.RestartCount}}", name)
		fmt.Fprintf(&b, "\n--- %s (%s; %v):\n%s", name, strings.TrimSpace(info), err, out)
	}
	for _, dir := range w.dirs {
		out, err := exec.Command("ls", "-la", "--full-time", dir).CombinedOutput()
		fmt.Fprintf(&b, "\n--- ls %s (%v):\n%s", dir, err, out)
	}
	return b.String()
}

// profileNames reports whether a pprof file in dir written after since
// has a sample in function fn. The encoder writes each file under a
// temporary name and renames it, so every *.pb.gz is complete.
func profileNames(t *testing.T, dir string, since time.Time, fn string) bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.pb.gz"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil || !st.ModTime().After(since) {
			continue
		}
		prof := readProfile(t, f)
		for _, s := range prof.Sample {
			for _, loc := range s.Location {
				for _, l := range loc.Line {
					if l.Function != nil && l.Function.Name == fn {
						return true
					}
				}
			}
		}
	}
	return false
}

func readProfile(t *testing.T, path string) *profile.Profile {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	prof, err := profile.Parse(f)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	return prof
}

// sampleTotals sums the sample counts of every pprof file in dir: all of
// them, and those with a frame in fn.
func sampleTotals(t *testing.T, dir, fn string) (all, inFn int64, files int) {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.pb.gz"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range paths {
		prof := readProfile(t, path)
		for _, s := range prof.Sample {
			all += s.Value[0]
			found := false
			for _, loc := range s.Location {
				for _, l := range loc.Line {
					found = found || (l.Function != nil && l.Function.Name == fn)
				}
			}
			if found {
				inFn += s.Value[0]
			}
		}
	}
	return all, inFn, len(paths)
}

// procStatus reads /proc/<pid>/status into key -> value.
func procStatus(t *testing.T, pid int) map[string]string {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("read the status of pid %d: %v", pid, err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		out[k] = strings.TrimSpace(v)
	}
	return out
}

func capMask(t *testing.T, hex string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(hex, 16, 64)
	if err != nil {
		t.Fatalf("capability mask %q: %v", hex, err)
	}
	return v
}

// capabilityBits are the numbers of the capabilities the chart may name.
var capabilityBits = map[string]int{
	"BPF": unix.CAP_BPF, "PERFMON": unix.CAP_PERFMON, "SYS_PTRACE": unix.CAP_SYS_PTRACE,
	"CHECKPOINT_RESTORE": unix.CAP_CHECKPOINT_RESTORE, "SYSLOG": unix.CAP_SYSLOG,
	"DAC_READ_SEARCH": unix.CAP_DAC_READ_SEARCH, "SYS_ADMIN": unix.CAP_SYS_ADMIN,
	"SYS_RESOURCE": unix.CAP_SYS_RESOURCE, "NET_ADMIN": unix.CAP_NET_ADMIN,
}

// samplerCaps returns the capability mask the pod's sampler container adds.
func samplerCaps(t *testing.T, podSpec []byte) uint64 {
	t.Helper()
	var pod corev1.Pod
	if err := yaml.UnmarshalStrict(podSpec, &pod); err != nil {
		t.Fatal(err)
	}
	for _, c := range pod.Spec.Containers {
		if c.Name != "sampler" {
			continue
		}
		var mask uint64
		for _, name := range c.SecurityContext.Capabilities.Add {
			bit, ok := capabilityBits[string(name)]
			if !ok {
				t.Fatalf("the chart adds %s, which the test has no number for", name)
			}
			mask |= 1 << bit
		}
		return mask
	}
	t.Fatal("the pod has no sampler container")
	return 0
}

// rootReadOnly fails unless the container's root filesystem refuses a
// write from root on the host (through /proc/<pid>/root) with EROFS and
// is mounted ro.
func rootReadOnly(t *testing.T, name string, pid int) {
	t.Helper()
	probe := fmt.Sprintf("/proc/%d/root/podtest-write-probe", pid)
	err := os.WriteFile(probe, []byte("x"), 0o644)
	if err == nil {
		os.Remove(probe)
		t.Errorf("%s: root wrote %s: the root filesystem is writable", name, probe)
	} else if !errors.Is(err, unix.EROFS) {
		t.Errorf("%s: writing %s: %v, want EROFS (read-only file system)", name, probe, err)
	}
}

func checkEncoderContainer(t *testing.T, c container) {
	st := procStatus(t, c.State.Pid)
	for _, key := range []string{"Uid", "Gid"} {
		for _, id := range strings.Fields(st[key]) {
			if id != "65532" {
				t.Errorf("encoder %s %s, want 65532 (real, effective, saved, filesystem)", key, st[key])
				break
			}
		}
	}
	if m := capMask(t, st["CapEff"]); m != 0 {
		t.Errorf("encoder CapEff %#x, want 0", m)
	}
	if m := capMask(t, st["CapBnd"]); m != 0 {
		t.Errorf("encoder CapBnd %#x, want 0 (drop ALL)", m)
	}
	if st["NoNewPrivs"] != "1" {
		t.Errorf("encoder NoNewPrivs %s, want 1", st["NoNewPrivs"])
	}
	if st["Seccomp"] != "2" {
		t.Errorf("encoder Seccomp %s, want 2 (filtered: RuntimeDefault)", st["Seccomp"])
	}
	if c.HostConfig.Privileged {
		t.Error("encoder container is privileged")
	}
	rootReadOnly(t, "encoder", c.State.Pid)
}

func checkSamplerContainer(t *testing.T, c container, want uint64) {
	st := procStatus(t, c.State.Pid)
	if uids := strings.Fields(st["Uid"]); len(uids) == 0 || uids[1] != "0" {
		t.Errorf("sampler Uid %s, want root", st["Uid"])
	}
	// The container holds exactly the chart's capabilities (its bounding
	// set); the sampler may give up some of them itself once the tracer
	// is loaded, never gain one.
	if got := capMask(t, st["CapBnd"]); got != want {
		t.Errorf("sampler CapBnd %#x (%d capabilities), want exactly the chart's %#x (%d)", got, bits.OnesCount64(got), want, bits.OnesCount64(want))
	}
	for _, key := range []string{"CapEff", "CapPrm"} {
		if got := capMask(t, st[key]); got&^want != 0 {
			t.Errorf("sampler %s %#x holds capabilities beyond the chart's %#x", key, got, want)
		}
	}
	if st["NoNewPrivs"] != "1" {
		t.Errorf("sampler NoNewPrivs %s, want 1 (allowPrivilegeEscalation: false)", st["NoNewPrivs"])
	}
	if c.HostConfig.Privileged {
		t.Error("sampler container is privileged")
	}
	rootReadOnly(t, "sampler", c.State.Pid)
}

// checkBalance replays the sampler's own recording of everything it sent
// through the encoder binary into pprof files and compares them with what
// the pod's two encoders wrote: the same number of samples, so nothing
// was lost at the kill and nothing was written twice after the resend.
func checkBalance(t *testing.T, encoderBin, rec, live, out string) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(encoderBin, "replay", "--output-dir", out, "--profiling-duration", "1h", rec)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("replay the sampler's recording: %v\n%s", err, b)
	}
	recorded, recordedHot, _ := sampleTotals(t, out, hotFunction)
	written, writtenHot, files := sampleTotals(t, live, hotFunction)
	t.Logf("the sampler recorded %d samples (%d in %s); the two encoders wrote %d (%d) in %d files", recorded, recordedHot, hotFunction, written, writtenHot, files)
	if recorded == 0 || recordedHot == 0 {
		t.Fatal("the recording holds no samples of the workload")
	}
	if written != recorded || writtenHot != recordedHot {
		t.Errorf("written %d samples (%d in %s), recorded %d (%d): %+d lost or written twice", written, writtenHot, hotFunction, recorded, recordedHot, written-recorded)
	}
}

// checkNothingLeft: after kube down, podman knows no container, pod or
// volume, and no mount under the test's directory remains.
func checkNothingLeft(t *testing.T, p *podman, dir string) {
	for _, args := range [][]string{{"ps", "-a", "-q"}, {"pod", "ps", "-q"}, {"volume", "ls", "-q"}} {
		if out := strings.TrimSpace(p.must(t, args...)); out != "" {
			t.Errorf("podman %s after kube down: %s", strings.Join(args, " "), out)
		}
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mounts), "\n") {
		if strings.Contains(line, dir) {
			t.Errorf("a mount is left: %s", line)
		}
	}
}
