package pprofout_test

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tandem-profiler/tandem/encoder/pprofout"
	"github.com/tandem-profiler/tandem/test/privtest"
)

// unwritableDirEnv hands the child run of TestNewSinkUnwritableDir its
// directory.
const unwritableDirEnv = "TANDEM_TEST_UNWRITABLE_DIR"

// TestNewSinkUnwritableDir: an existing directory this user cannot write
// fails NewSink at once, naming it and the fix (it failed only at the
// first flush, and replay exited after its give-up time). Root writes
// anywhere, so as root the check runs in a copy of this test binary
// started as uid 65534 (setpriv) on a directory only root may write.
func TestNewSinkUnwritableDir(t *testing.T) {
	if dir := os.Getenv(unwritableDirEnv); dir != "" {
		checkUnwritable(t, dir)
		return
	}
	if os.Getuid() != 0 {
		dir := t.TempDir()
		if err := os.Chmod(dir, 0o555); err != nil {
			t.Fatal(err)
		}
		checkUnwritable(t, dir)
		return
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		privtest.SkipOrFail(t, "setpriv (util-linux) is needed to check an unwritable directory as root: %v", err)
	}
	// A directory uid 65534 can enter but not write, holding a copy of
	// this test binary it can run.
	base := t.TempDir()
	for d := base; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	self := filepath.Join(base, "pprofout.test")
	copyFile(t, os.Args[0], self)
	dir := filepath.Join(base, "profiles")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--", self, "-test.run=^TestNewSinkUnwritableDir$", "-test.v")
	cmd.Env = append(os.Environ(), unwritableDirEnv+"="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestNewSinkUnwritableDir") {
		t.Fatalf("the check as uid 65534: %v\n%s", err, out)
	}
}

func checkUnwritable(t *testing.T, dir string) {
	t.Helper()
	_, err := pprofout.NewSink(pprofout.Config{Dir: dir}, nil)
	if err == nil || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "not writable") {
		t.Fatalf("NewSink(%s) = %v, want an error naming the directory as not writable", dir, err)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
