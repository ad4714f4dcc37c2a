package pprofout_test

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// TestSinkMaxBytes: with MaxBytes, each write deletes the sink's oldest
// files until the rest fit, keeps the file it wrote even when that alone
// is larger, counts what it deleted, and touches no other file.
func TestSinkMaxBytes(t *testing.T) {
	dir := t.TempDir()
	others := []string{"notes.txt", "other-20260101T000000.000Z.pb.gz", "tandem-old.pb"}
	for _, name := range others {
		if err := os.WriteFile(filepath.Join(dir, name), make([]byte, 1000), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	sink, err := pprofout.NewSink(pprofout.Config{Dir: dir, Prefix: "tandem", MaxBytes: 250}, nil)
	if err != nil {
		t.Fatal(err)
	}
	end := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	var paths []string
	for i := range 5 {
		p, err := sink.WriteEncoded(make([]byte, 100), end.Add(time.Duration(i)*10*time.Second).UnixNano())
		if err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	// 100 bytes each, 250 at most: the last two stay.
	for i, p := range paths {
		_, err := os.Stat(p)
		if kept := err == nil; kept != (i >= 3) {
			t.Errorf("file %d (%s): kept %v, want %v", i, filepath.Base(p), kept, i >= 3)
		}
	}
	if got := sink.Deleted(); got != 3 {
		t.Errorf("Deleted() = %d, want 3", got)
	}
	big, err := sink.WriteEncoded(make([]byte, 400), end.Add(time.Minute).UnixNano())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(big); err != nil {
		t.Errorf("the file just written, larger than MaxBytes alone, was deleted: %v", err)
	}
	if got := sink.Deleted(); got != 5 {
		t.Errorf("Deleted() = %d after a file larger than the bound, want 5 (every older one)", got)
	}
	for _, name := range others {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s, not the sink's, was touched: %v", name, err)
		}
	}
}
