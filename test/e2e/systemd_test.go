package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tandem-profiler/tandem/internal/synth"
	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/schema"
	"github.com/tandem-profiler/tandem/test/harness"
	"github.com/tandem-profiler/tandem/test/otlptest"
	"github.com/tandem-profiler/tandem/test/privtest"
	"github.com/tandem-profiler/tandem/test/proctest"
	"github.com/tandem-profiler/tandem/test/streamtest"
)

// testSystemd is a real systemd running as PID 1 of its own PID and mount
// namespaces (testdata/systemd-boot.sh), with the shipped units installed.
type testSystemd struct {
	cmd *exec.Cmd
	pid int // host pid of the namespace's PID 1
}

// bootSystemd starts the namespaced systemd and waits until it runs. It is
// killed, with everything it started, when the test ends.
func bootSystemd(t *testing.T, bin string, env ...string) *testSystemd {
	t.Helper()
	for _, tool := range []string{"unshare", "nsenter", "systemd-sysusers", "systemctl"} {
		if lookPath(tool) == "" {
			privtest.SkipOrFail(t, "needs %s", tool)
		}
	}
	if !fileExists("/lib/systemd/systemd") {
		privtest.SkipOrFail(t, "needs systemd (/lib/systemd/systemd)")
	}
	root := harness.ModuleRoot(t)
	cmd := exec.Command("unshare", "--pid", "--fork", "--mount", "--propagation", "private",
		"/bin/sh", filepath.Join(root, "test/e2e/testdata/systemd-boot.sh"))
	cmd.Env = append(os.Environ(), "TANDEM_BIN="+bin, "TANDEM_UNITS="+filepath.Join(root, "deploy/systemd"))
	cmd.Env = append(cmd.Env, env...)
	out := &proctest.Output{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start unshare: %v", err)
	}
	s := &testSystemd{cmd: cmd}
	t.Cleanup(func() {
		if t.Failed() && s.pid != 0 {
			t.Logf("systemd boot output:\n%s", out.Tail(40))
			for _, u := range []string{"tandem-encoder", "tandem-sampler"} {
				b, _ := os.ReadFile(s.path("/run/tandem-test/logs/" + u + ".log"))
				t.Logf("%s log:\n%s", u, proctest.Tail(string(b), 40))
			}
		}
		if s.pid != 0 {
			_ = syscall.Kill(s.pid, syscall.SIGKILL) // ends the whole namespace
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		// PrivateTmp= directories are made in the host's /tmp and /var/tmp.
		for _, dir := range []string{"/tmp", "/var/tmp"} {
			matches, _ := filepath.Glob(filepath.Join(dir, "systemd-private-*-tandem-*"))
			for _, m := range matches {
				_ = os.RemoveAll(m)
			}
		}
	})
	harness.WaitFor(t, "the namespace's PID 1", 30*time.Second, func() bool {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid))
		s.pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return s.pid != 0
	})
	harness.WaitFor(t, "systemd to finish starting", 60*time.Second, func() bool {
		state, _ := s.systemctl("is-system-running")
		return state == "running"
	})
	return s
}

// path names p inside the namespace's mounts.
func (s *testSystemd) path(p string) string { return fmt.Sprintf("/proc/%d/root%s", s.pid, p) }

func (s *testSystemd) systemctl(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "nsenter", append([]string{"-t", strconv.Itoa(s.pid), "-m", "-p", "systemctl"}, args...)...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func (s *testSystemd) mustSystemctl(t *testing.T, args ...string) {
	t.Helper()
	if out, err := s.systemctl(args...); err != nil {
		t.Fatalf("systemctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func (s *testSystemd) prop(t *testing.T, unit, name string) string {
	t.Helper()
	out, err := s.systemctl("show", "--value", "-p", name, unit)
	if err != nil {
		t.Fatalf("systemctl show %s %s: %v\n%s", unit, name, err, out)
	}
	return out
}

// procStatus reads /proc/PID/status of a process in the namespace.
func (s *testSystemd) procStatus(t *testing.T, nsPID string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(s.path("/proc/" + nsPID + "/status"))
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			m[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	return m
}

// idOf returns the numeric id of name in an /etc/passwd or /etc/group file.
func idOf(t *testing.T, file, name string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Split(line, ":"); len(f) > 2 && f[0] == name {
			return f[2]
		}
	}
	t.Fatalf("%s has no %q", file, name)
	return ""
}

// TestSystemdUnits runs deploy/systemd's units, unmodified, under a real
// systemd, installed as docs/systemd.md says (sysusers, /etc/default): the
// socket's owner and mode; the encoder socket-activated, ready
// (Type=notify) and pinging its watchdog, sandboxed as the unit says (user
// tandem, no capabilities, no new privileges, a seccomp filter); every
// sample of a stream exported exactly once across a kill -9 of the
// encoder, which systemd restarts on the same socket; and the sampler
// reaching the encoder from its own sandbox (private network, only its
// capabilities) with kernel symbols readable.
//
// This systemd is PID 1 of a PID namespace, so the sampler's tracer stops
// at its self-analysis (it matches its pid in the namespace against the
// kernel's); everything before that is checked. The pair profiling real
// workloads is TestPairProfilesThisMachine.
func TestSystemdUnits(t *testing.T) {
	t.Parallel()
	requirePrivileges(t)
	bin := binaries(t)
	recv := otlptest.StartReceiver(t)
	httpAddr := otlptest.FreeAddr(t)
	s := bootSystemd(t, bin,
		"ENCODER_ARGS=--remote-store-address="+recv.Addr()+" --remote-store-insecure --debuginfo-upload-disable --profiling-duration=1s --http-address="+httpAddr,
		"SAMPLER_ARGS=--profiling-cpu-sampling-frequency=19",
		"WATCHDOG_SEC=2s")

	// The socket: root:tandem 0660 under /run/tandem.
	s.mustSystemctl(t, "start", "tandem-encoder.socket")
	sock := s.path("/run/tandem/tandem.sock")
	fi, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if gid := idOf(t, s.path("/etc/group"), "tandem"); fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o660 || st.Uid != 0 || strconv.Itoa(int(st.Gid)) != gid {
		t.Errorf("socket is %v owned by %d:%d, want a 0660 socket owned by 0:%s", fi.Mode(), st.Uid, st.Gid, gid)
	}
	if got := s.prop(t, "tandem-encoder.service", "ActiveState"); got != "inactive" {
		t.Errorf("encoder is %s before any connection, want inactive (socket-activated)", got)
	}

	// A synthetic sampler: the stream in two halves, a kill -9 between.
	cfg := synth.DefaultConfig()
	cfg.Samples = 4000
	_, hello, batches := streamtest.Session(t, cfg)
	ccfg := ipc.DefaultClientConfig()
	ccfg.Path = sock
	ccfg.PeerUIDs = []uint32{0} // under socket activation the listener is systemd's
	ccfg.MinBackoff = 20 * time.Millisecond
	client, err := ipc.NewClient(ccfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	sent := map[string]int{}
	for _, b := range batches {
		for _, smp := range b.Samples {
			sent[sampleKey(strconv.Itoa(int(b.Processes[smp.Process].PID)), strconv.Itoa(int(smp.TID)), uint64(smp.TimestampUnixNano))]++
		}
	}
	sampler := streamtest.Start(t, client, hello)
	send := func(bs []*schema.Batch) {
		t.Helper()
		sampler.WaitAcked(t, sampler.Send(t, bs...), 60*time.Second, nil, nil) // systemd restarts the encoder
	}
	half := len(batches) / 2
	send(batches[:half])

	// Activated, ready, sandboxed, watched.
	if got := s.prop(t, "tandem-encoder.service", "ActiveState") + "/" + s.prop(t, "tandem-encoder.service", "SubState"); got != "active/running" {
		t.Errorf("encoder is %s, want active/running (Type=notify: READY=1 sent)", got)
	}
	mainPID := s.prop(t, "tandem-encoder.service", "MainPID")
	status := s.procStatus(t, mainPID)
	uid := idOf(t, s.path("/etc/passwd"), "tandem")
	for field, want := range map[string]string{
		"Uid": strings.Repeat(uid+" ", 3) + uid, "CapEff": "0000000000000000", "CapBnd": "0000000000000000",
		"CapAmb": "0000000000000000", "NoNewPrivs": "1", "Seccomp": "2",
	} {
		if status[field] != want {
			t.Errorf("encoder %s = %q, want %q", field, status[field], want)
		}
	}
	harness.WaitFor(t, "a WATCHDOG=1 from the encoder (WatchdogSec=2s)", 30*time.Second, func() bool {
		return s.prop(t, "tandem-encoder.service", "WatchdogTimestampMonotonic") != "0"
	})
	if !harness.HTTPOK(httpAddr + "/readyz") {
		t.Error("encoder /readyz is not 200")
	}

	// kill -9: systemd restarts it (Restart=on-failure) on the same socket,
	// the client reconnects, and the second half goes through.
	s.mustSystemctl(t, "kill", "--signal=SIGKILL", "tandem-encoder.service")
	harness.WaitFor(t, "systemd to restart the killed encoder", 60*time.Second, func() bool {
		return s.prop(t, "tandem-encoder.service", "NRestarts") == "1" &&
			s.prop(t, "tandem-encoder.service", "ActiveState") == "active"
	})
	if pid := s.prop(t, "tandem-encoder.service", "MainPID"); pid == mainPID {
		t.Errorf("encoder MainPID is still %s after kill -9", pid)
	}
	send(batches[half:])

	got := receivedKeys(recv.Samples(t))
	var lost, dup int
	for k, n := range sent {
		if got[k] < n {
			lost += n - got[k]
		} else {
			dup += got[k] - n
		}
	}
	t.Logf("%d samples in %d batches sent, one kill -9 between halves: %d lost, %d duplicated", cfg.Samples, len(batches), lost, dup)
	if lost != 0 || dup != 0 || len(got) != len(sent) {
		t.Errorf("across the restart %d samples were lost and %d duplicated (%d distinct keys received, %d sent)", lost, dup, len(got), len(sent))
	}

	// The real sampler, from its own unit. Type=notify: systemd holds it
	// "activating" until READY=1 (sent once the tracer samples), so start
	// it without waiting for that, and wait on signals, not log text:
	// the encoder counting the sampler's connection, and systemd's view of
	// the unit (ready, or its main process exited).
	accepted := harness.EncoderMetric(t, httpAddr, "tandem_ipc_server_connections_accepted_total")
	s.mustSystemctl(t, "start", "--no-block", "tandem-sampler.service")
	samplerLog := s.path("/run/tandem-test/logs/tandem-sampler.log")
	var samplerState string
	harness.WaitFor(t, "the sampler to connect to the encoder and be ready or exit", 90*time.Second, func() bool {
		if harness.EncoderMetric(t, httpAddr, "tandem_ipc_server_connections_accepted_total") <= accepted {
			return false
		}
		samplerState = s.prop(t, "tandem-sampler.service", "ActiveState")
		return samplerState == "active" || samplerState == "failed" || s.prop(t, "tandem-sampler.service", "NRestarts") != "0"
	})
	b, _ := os.ReadFile(samplerLog)
	log := string(b)
	switch {
	case samplerState == "active":
		t.Log("sampler: ready (READY=1) and connected from its sandbox")
	case strings.Contains(log, "system analysis request was not handled"):
		t.Log("sampler: connected from its sandbox; the tracer stopped at its self-analysis, as it must in a PID namespace")
	case strings.Contains(log, "tandem-sampler: "):
		t.Errorf("the sampler failed under its unit for another reason than this test's PID namespace:\n%s", proctest.Tail(log, 10))
	}
	for _, bad := range []string{"kallsyms", "missing capabilit", "permission denied", "operation not permitted"} {
		if strings.Contains(strings.ToLower(log), bad) {
			t.Errorf("sampler log mentions %q under its unit:\n%s", bad, proctest.Tail(log, 10))
		}
	}
	s.mustSystemctl(t, "stop", "tandem-sampler.service")
}
