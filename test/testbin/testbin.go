package testbin

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/tandem-profiler/tandem/test/privtest"
)

// C compiles one C source file with gcc and the given flags (say "-g0" for
// an executable without debug info, "-g" with DWARF) into dir/name (dir ""
// is a fresh temporary directory) and returns the executable's path.
// The program is dynamically linked unless the flags say otherwise.
func C(t testing.TB, dir, name, src string, flags ...string) string {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		privtest.SkipOrFail(t, "needs gcc to build a C program (apt-get install gcc): %v", err)
	}
	if dir == "" {
		dir = t.TempDir()
	}
	srcPath := filepath.Join(dir, name+".c")
	if err := os.WriteFile(srcPath, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, name)
	args := append(append([]string{"-o", out}, flags...), srcPath)
	if b, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %v: %v\n%s", args, err, b)
	}
	return out
}

// Go builds a one-file Go program (package main) with the toolchain that
// runs the tests and the given build flags (say "-ldflags=-w" for no
// DWARF) into dir/name (dir "": a fresh temporary directory), with cgo off
// and outside any module or vendor directory, and returns its path.
func Go(t testing.TB, dir, name, src string, flags ...string) string {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	srcDir := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(srcDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(srcDir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(srcDir, "go.mod"), []byte("module "+name+"\n\ngo 1.22\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, name)
	cmd := exec.Command("go", append(append([]string{"build", "-o", out}, flags...), ".")...)
	cmd.Dir = srcDir
	cmd.Env = append(os.Environ(), "GOFLAGS=", "CGO_ENABLED=0", "GOWORK=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %v: %v\n%s", flags, err, b)
	}
	return out
}
