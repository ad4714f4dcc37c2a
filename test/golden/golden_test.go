package golden

import (
	"os"
	"path/filepath"
	"testing"
)

// recorder is a testing.TB that keeps whether it failed instead of failing.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Errorf(string, ...any) { r.failed = true }
func (r *recorder) Fatalf(string, ...any) { r.failed = true }

func TestCheck(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.golden")
	if err := os.WriteFile(path, []byte("a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, path, got string
		update, fail    bool
	}{
		{name: "same", path: path, got: "a\n"},
		{name: "different", path: path, got: "b\n", fail: true},
		{name: "missing", path: filepath.Join(dir, "none.golden"), got: "a\n", fail: true},
		{name: "update", path: filepath.Join(dir, "new.golden"), got: "c\n", update: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			*update = tt.update
			defer func() { *update = false }()
			r := &recorder{TB: t}
			Check(r, tt.path, tt.got, "")
			if r.failed != tt.fail {
				t.Errorf("failed = %v, want %v", r.failed, tt.fail)
			}
			if tt.update {
				if b, err := os.ReadFile(tt.path); err != nil || string(b) != tt.got {
					t.Errorf("after -update the file holds %q (%v), want %q", b, err, tt.got)
				}
			}
		})
	}
}
