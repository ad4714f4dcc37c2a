package main

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/tandem-profiler/tandem/internal/cli"
	"github.com/tandem-profiler/tandem/test/privtest"
)

// asEncoderEnv makes the test binary run its arguments as tandem-encoder
// (TestMain): a child with another uid or fewer capabilities than the test.
const asEncoderEnv = "TANDEM_ENCODER_TEST_ARGS"

func TestPrepareDir(t *testing.T) {
	uid, gid := strconv.Itoa(os.Getuid()), strconv.Itoa(os.Getgid())
	dir := t.TempDir()
	out := filepath.Join(dir, "profiles")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := run(t, "prepare-dir", out, "--uid", uid, "--gid", gid, "--mode", "0710"); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(out); err != nil || st.Mode().Perm() != 0o710 {
		t.Errorf("after prepare-dir --mode 0710: %v, %v", st.Mode(), err)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(out, link); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		args  []string
		want  string
		usage bool
	}{
		{"missing", []string{filepath.Join(dir, "none")}, "does not exist: create it first", false},
		{"a symbolic link", []string{link}, "not a directory (a symbolic link is not followed)", false},
		{"a file", []string{file}, "not a directory", false},
		{"two directories", []string{out, dir}, "prepare-dir takes one directory", true},
		{"no directory", nil, "prepare-dir takes one directory", true},
		{"a mode beyond permissions", []string{out, "--mode", "2750"}, `--mode="2750": want octal permission bits`, true},
		{"a decimal mode", []string{out, "--mode", "750x"}, "want octal permission bits", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := run(t, append([]string{"prepare-dir", "--uid", uid, "--gid", gid}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one saying %q", err, tc.want)
			}
			if got := cli.Status(err) == 2; got != tc.usage {
				t.Errorf("usage error (exit 2): %v, want %v", got, tc.usage)
			}
		})
	}
}

// TestPrepareDirAsTheChartsInitContainer runs prepare-dir as the chart's
// init container does, root with CAP_CHOWN and CAP_FOWNER only, on a
// directory as the kubelet creates a hostPath (root's, 0755), where the
// encoder's uid cannot write, and again on the directory it prepared (a
// restarted pod: no longer root's, and root without CAP_DAC_OVERRIDE may
// not read it). The encoder's uid writes afterwards; nothing in the
// directory changes.
func TestPrepareDirAsTheChartsInitContainer(t *testing.T) {
	privtest.RequireRoot(t)
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		privtest.SkipOrFail(t, "setpriv (util-linux) is needed to drop capabilities: %v", err)
	}
	const encoderUID = 65532
	// Not t.TempDir: its parent is 0700, which the encoder's uid cannot
	// pass through.
	base, err := os.MkdirTemp("", "tandem-prepare-dir-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "profiles")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	asEncoder := func(name string) error {
		cmd := exec.Command("touch", filepath.Join(dir, name))
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: encoderUID, Gid: encoderUID}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			return errors.New(strings.TrimSpace(string(out)))
		}
		return nil
	}
	// prepare runs prepare-dir as root with only caps in its bounding
	// set, as a container with drop: [ALL] and add: caps.
	prepare := func(caps string) (string, error) {
		cmd := exec.Command(setpriv, "--bounding-set=-all"+caps, "--inh-caps=-all", "--", os.Args[0])
		cmd.Env = append(os.Environ(), asEncoderEnv+"=prepare-dir "+dir+" --uid 65532 --gid 65532 --mode 0750")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if err := asEncoder("before"); err == nil {
		t.Fatal("the encoder's uid writes to a root-owned 0755 directory: nothing to prepare")
	}
	if out, err := prepare(""); err == nil || !strings.Contains(out, "CAP_CHOWN") {
		t.Errorf("prepare-dir without capabilities: %v\n%s\nwant an error naming CAP_CHOWN", err, out)
	}
	check := func() {
		t.Helper()
		st, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		sys := st.Sys().(*syscall.Stat_t)
		if sys.Uid != encoderUID || sys.Gid != encoderUID || st.Mode().Perm() != 0o750 {
			t.Errorf("prepared directory: %d:%d %v, want 65532:65532 %v", sys.Uid, sys.Gid, st.Mode().Perm(), fs.FileMode(0o750))
		}
	}
	for _, run := range []string{"first", "again"} {
		if out, err := prepare(",+chown,+fowner"); err != nil {
			t.Fatalf("prepare-dir (%s run) with CAP_CHOWN and CAP_FOWNER: %v\n%s", run, err, out)
		}
		check()
		if err := asEncoder(run); err != nil {
			t.Errorf("the encoder's uid cannot write to the prepared directory (%s run): %v", run, err)
		}
	}
	// Only the directory itself changes: the file written after the first
	// run is still the encoder's.
	st, err := os.Stat(filepath.Join(dir, "first"))
	if err != nil {
		t.Fatal(err)
	}
	if sys := st.Sys().(*syscall.Stat_t); sys.Uid != encoderUID {
		t.Errorf("a file in the directory changed owner to %d", sys.Uid)
	}
}
