package ipc

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDirProblem(t *testing.T) {
	const enc = 999
	owners := []uint32{0, enc}
	tests := []struct {
		name     string
		mode     fs.FileMode
		uid, gid uint32
		own      bool
		want     string // "" safe, else a fragment of the problem
	}{
		{"root 0755", 0o755, 0, 0, true, ""},
		{"encoder 0750", 0o750, enc, enc, true, ""},
		{"encoder 0700", 0o700, enc, enc, true, ""},
		{"root group-writable by root", 0o775, 0, 0, true, ""},
		{"foreign owner", 0o755, 1000, 1000, true, "owned by uid 1000"},
		{"nobody owner", 0o750, 65534, 65534, true, "owned by uid 65534"},
		{"world-writable", 0o777, 0, 0, true, "writable by everyone"},
		{"emptyDir-like", fs.ModeSetgid | 0o777, 0, 65534, true, "writable by everyone"},
		{"group-writable", 0o770, enc, 100, true, "writable by group 100"},
		{"sticky own directory", fs.ModeSticky | 0o777, 0, 0, true, "writable by everyone"},
		{"sticky ancestor (/tmp)", fs.ModeSticky | 0o777, 0, 0, false, ""},
		{"sticky ancestor of a foreign owner", fs.ModeSticky | 0o777, 1000, 0, false, "owned by uid 1000"},
		{"world-writable ancestor", 0o777, 0, 0, false, "writable by everyone"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := dirProblem(tt.mode, tt.uid, tt.gid, owners, tt.own)
			if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
				t.Errorf("dirProblem = %q, want %q", got, tt.want)
			}
		})
	}
}

// TestCheckSocketDir checks real directories: the socket's own, one above
// it, and one reached through a symbolic link.
func TestCheckSocketDir(t *testing.T) {
	mk := func(t *testing.T, dir string, mode fs.FileMode) string {
		t.Helper()
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	tests := []struct {
		name  string
		setup func(t *testing.T, base string) string // returns the socket path
		bad   string                                 // the directory named, "" when safe
	}{
		{"private directory", func(t *testing.T, base string) string {
			return filepath.Join(mk(t, filepath.Join(base, "run"), 0o755), "tandem.sock")
		}, ""},
		{"directory not created yet", func(t *testing.T, base string) string {
			return filepath.Join(base, "missing", "tandem.sock")
		}, ""},
		{"world-writable directory", func(t *testing.T, base string) string {
			return filepath.Join(mk(t, filepath.Join(base, "run"), 0o777), "tandem.sock")
		}, "run"},
		{"world-writable parent", func(t *testing.T, base string) string {
			mk(t, filepath.Join(base, "open", "run"), 0o755)
			mk(t, filepath.Join(base, "open"), 0o777)
			return filepath.Join(base, "open", "run", "tandem.sock")
		}, "open"},
		{"sticky parent", func(t *testing.T, base string) string {
			mk(t, filepath.Join(base, "tmp", "run"), 0o700)
			mk(t, filepath.Join(base, "tmp"), fs.ModeSticky|0o777)
			return filepath.Join(base, "tmp", "run", "tandem.sock")
		}, ""},
		{"symbolic link to a world-writable directory", func(t *testing.T, base string) string {
			target := mk(t, filepath.Join(base, "shared"), 0o777)
			if err := os.Symlink(target, filepath.Join(base, "link")); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(base, "link", "tandem.sock")
		}, "shared"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			err := CheckSocketDir(tt.setup(t, base), nil)
			if tt.bad == "" {
				if err != nil {
					t.Fatalf("CheckSocketDir: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrUnsafeSocketDir) {
				t.Fatalf("CheckSocketDir = %v, want ErrUnsafeSocketDir", err)
			}
			for _, want := range []string{filepath.Join(base, tt.bad) + " ", "chmod 0755", SocketDirCheckFlag + "=false"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %q", err, want)
				}
			}
		})
	}
}
