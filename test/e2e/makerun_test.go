package e2e

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tandem-profiler/tandem/test/harness"
	"github.com/tandem-profiler/tandem/test/otlptest"
	"github.com/tandem-profiler/tandem/test/privtest"
)

// TestMakeRunDedicatedUser runs deploy/local/run-pair.sh (what make run
// runs), unmodified, in a private mount namespace whose /etc is an overlay,
// so that the system user it creates does not outlive the test. It must
// create (or reuse) the user tandem the way deploy/systemd/tandem.sysusers
// does, run the encoder as that user (never nobody), keep the socket in a
// directory only that user and root can write, write profiles the user
// who ran sudo can read and delete, restart an encoder that dies (as
// systemd and the pod do), and stop cleanly on Ctrl-C, removing the socket.
func TestMakeRunDedicatedUser(t *testing.T) {
	t.Parallel()
	requirePrivileges(t)
	for _, tool := range []string{"unshare", "setpriv", "systemd-sysusers"} {
		if lookPath(tool) == "" {
			privtest.SkipOrFail(t, "make run's test needs %s", tool)
		}
	}
	bin := binaries(t)

	// A copy of the repository's layout the script expects: its own
	// directory two levels down, bin/ and the sysusers file. Readable by
	// the encoder's user (0755).
	repo, err := os.MkdirTemp("", "tandem-makerun-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(repo) })
	if err := os.Chmod(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	// The checkout belongs to the user who runs sudo make run.
	if err := os.Chown(repo, invokingUID, invokingUID); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"deploy/local", "deploy/systemd", "bin"} {
		if err := os.MkdirAll(filepath.Join(repo, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	copyFile(t, filepath.Join(harness.ModuleRoot(t), "deploy/local/run-pair.sh"), filepath.Join(repo, "deploy/local/run-pair.sh"), 0o755)
	copyFile(t, filepath.Join(harness.ModuleRoot(t), "deploy/systemd/tandem.sysusers"), filepath.Join(repo, "deploy/systemd/tandem.sysusers"), 0o644)
	for _, b := range []string{"tandem-sampler", "tandem-encoder"} {
		if err := os.Symlink(filepath.Join(bin, b), filepath.Join(repo, "bin", b)); err != nil {
			t.Fatal(err)
		}
	}
	overlay := t.TempDir()
	upper, work := filepath.Join(overlay, "upper"), filepath.Join(overlay, "work")
	for _, d := range []string{upper, work} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The socket's directory is not under the checkout (the sampler
	// refuses one below a directory its user can write), as
	// /run/tandem-local is not.
	runParent, err := os.MkdirTemp("", "tandem-makerun-run-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(runParent) })
	if err := os.Chmod(runParent, 0o755); err != nil {
		t.Fatal(err)
	}
	runDir, outDir := filepath.Join(runParent, "run"), filepath.Join(repo, "profiles")
	env := []string{
		"TANDEM_RUN_DIR=" + runDir, "TANDEM_OUTPUT_DIR=" + outDir,
		"TANDEM_PROFILING_DURATION=2s", "TANDEM_HTTP_ADDRESS=" + otlptest.FreeAddr(t),
		// As sudo sets them for the user who ran `sudo make run`.
		"SUDO_UID=" + strconv.Itoa(invokingUID), "SUDO_GID=" + strconv.Itoa(invokingUID), "SUDO_USER=someone",
	}
	script := filepath.Join(repo, "deploy/local/run-pair.sh")
	p := startEnv(t, "make run", 0, env, "unshare", "--mount", "--propagation", "private", "--",
		"/bin/sh", "-c", `mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1,workdir=$2" /etc && shift 2 && exec "$@"`,
		"sh", upper, work, script)
	// The script's children run in their own sessions: if the test fails
	// before Ctrl-C, kill whatever still runs from this copy.
	t.Cleanup(func() { killUnder(repo) })

	socket := filepath.Join(runDir, "tandem.sock")
	harness.WaitFor(t, "the encoder's socket", time.Minute, func() bool { return fileExists(socket) }, p)
	uid := passwdUID(t, filepath.Join(upper, "passwd"), "tandem")
	if uid == 0 || uid == encoderUID {
		t.Fatalf("user tandem has uid %d: want a dedicated system user, neither root nor nobody", uid)
	}
	for path, wantMode := range map[string]os.FileMode{runDir: os.ModeDir | 0o750, socket: 0} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if owner := fi.Sys().(*syscall.Stat_t).Uid; owner != uid {
			t.Errorf("%s is owned by uid %d, want tandem's %d", path, owner, uid)
		}
		if wantMode != 0 && fi.Mode() != wantMode {
			t.Errorf("%s has mode %v, want %v", path, fi.Mode(), wantMode)
		}
	}

	// The pair profiles: the encoder, as tandem, writes pprof files.
	var profile string
	harness.WaitFor(t, "a profile in "+outDir, 2*time.Minute, func() bool {
		m, _ := filepath.Glob(filepath.Join(outDir, "*.pb.gz"))
		if len(m) > 0 {
			profile = m[0]
		}
		return profile != ""
	}, p)
	if fi, err := os.Stat(profile); err != nil || fi.Size() == 0 || fi.Sys().(*syscall.Stat_t).Uid != uid {
		t.Errorf("profile %s: %v, want a non-empty file written by uid %d", profile, err, uid)
	}
	// The user who ran sudo reads it while the pair runs (make run prints
	// a view command for them).
	if out, err := asInvokingUser("head", "-c", "2", profile); err != nil {
		t.Errorf("the user who ran sudo cannot read %s: %v\n%s", profile, err, out)
	}

	// The encoder dies: make run starts another, which takes over the
	// socket, and profiles go on.
	old := pidsOf(repo, "bin/tandem-encoder")
	if len(old) != 1 {
		t.Fatalf("encoder processes %v, want one", old)
	}
	before, _ := filepath.Glob(filepath.Join(outDir, "*.pb.gz"))
	if err := syscall.Kill(old[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	harness.WaitFor(t, "a restarted encoder", time.Minute, func() bool {
		now := pidsOf(repo, "bin/tandem-encoder")
		return len(now) == 1 && now[0] != old[0]
	}, p)
	harness.WaitFor(t, "a profile from the restarted encoder", 2*time.Minute, func() bool {
		m, _ := filepath.Glob(filepath.Join(outDir, "*.pb.gz"))
		return len(m) > len(before)
	}, p)

	// Ctrl-C: both stop, the script exits 0.
	if err := p.Cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(time.Minute):
		t.Fatal("run-pair.sh did not stop within a minute of SIGINT")
	}
	if p.Err() != nil {
		t.Errorf("run-pair.sh exited with %v after SIGINT", p.Err())
	}
	if left := killUnder(repo); left > 0 {
		t.Errorf("%d processes of the pair outlived run-pair.sh", left)
	}
	if fileExists(socket) {
		t.Errorf("the socket %s was left behind", socket)
	}
	// ... and deletes the profiles in their checkout.
	if out, err := asInvokingUser("rm", "-r", outDir); err != nil {
		t.Errorf("the user who ran sudo cannot delete %s: %v\n%s", outDir, err, out)
	}
}

// invokingUID is the user (and group) the test says ran `sudo make run`:
// no account needs to exist for a uid.
const invokingUID = 4242

// asInvokingUser runs a command as invokingUID, with that group alone.
func asInvokingUser(args ...string) ([]byte, error) {
	id := strconv.Itoa(invokingUID)
	return exec.Command("setpriv", append([]string{"--reuid=" + id, "--regid=" + id, "--clear-groups", "--"}, args...)...).CombinedOutput()
}

// pidsOf returns the processes run as .../name whose command line names a
// path under dir.
func pidsOf(dir, name string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		argv0, _, _ := strings.Cut(string(cmdline), "\x00")
		if strings.HasSuffix(argv0, "/"+name) && strings.Contains(string(cmdline), dir+"/") {
			pids = append(pids, pid)
		}
	}
	return pids
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, mode); err != nil {
		t.Fatal(err)
	}
}

// passwdUID returns name's uid from the overlay's passwd, or from the
// host's when the user already existed (the script then reuses it).
func passwdUID(t *testing.T, overlayPasswd, name string) uint32 {
	t.Helper()
	for _, file := range []string{overlayPasswd, "/etc/passwd"} {
		f, err := os.Open(file)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Split(sc.Text(), ":")
			if len(fields) > 2 && fields[0] == name {
				f.Close()
				n, err := strconv.ParseUint(fields[2], 10, 32)
				if err != nil {
					t.Fatalf("%s: uid %q", file, fields[2])
				}
				return uint32(n)
			}
		}
		f.Close()
	}
	t.Fatalf("no user %s was created (looked in %s and /etc/passwd)", name, overlayPasswd)
	return 0
}

// killUnder kills the processes whose command line names a path under dir
// and returns how many there were.
func killUnder(dir string) int {
	ents, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(cmdline), dir+"/") {
			continue
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}
