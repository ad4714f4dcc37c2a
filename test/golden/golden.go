package golden

import (
	"flag"
	"os"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files the tests compare with")

// Check fails t unless got equals the contents of the file at path. With
// -update it writes got to path first. why is appended to a failure: what
// a difference means and whether rewriting the file is the fix.
func Check(t testing.TB, path, got, why string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatalf("update golden file: %v", err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file: %v (run the test with -args -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs:\n got %s\nwant %s%s", path, got, want, why)
	}
}

// Updating reports whether the test binary runs with -update, for tests
// that write checked-in files of their own kind.
func Updating() bool { return *update }
