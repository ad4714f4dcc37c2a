package symbolize

import (
	"os"
	"path/filepath"
	"testing"

	"go.opentelemetry.io/ebpf-profiler/libpf"

	"github.com/tandem-profiler/tandem/schema"
)

// TestFileIDMatchesTracer: FileIDOf names files as the tracer does.
func TestFileIDMatchesTracer(t *testing.T) {
	small := filepath.Join(t.TempDir(), "small")
	if err := os.WriteFile(small, []byte("\x7fELF tiny"), 0o600); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{exe, small, "testdata/workload.elf"} {
		want, err := libpf.FileIDFromExecutableFile(path)
		if err != nil {
			t.Fatal(err)
		}
		f := open(t, path)
		st, _ := f.Stat()
		got, err := FileIDOf(f, st.Size())
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got != (schema.FileID{Hi: want.Hi(), Lo: want.Lo()}) {
			t.Errorf("%s: %s, tracer says %s", path, got.Hex(), want.StringNoQuotes())
		}
	}
}

func TestReopen(t *testing.T) {
	path, err := filepath.Abs("testdata/workload.elf")
	if err != nil {
		t.Fatal(err)
	}
	id, err := libpf.FileIDFromExecutableFile(path)
	if err != nil {
		t.Fatal(err)
	}
	good := schema.ExecutableNotice{FileID: schema.FileID{Hi: id.Hi(), Lo: id.Lo()}, Path: path}
	f, err := Reopen(&good)
	if err != nil {
		t.Fatalf("Reopen(%s): %v", path, err)
	}
	f.Close()
	other := good
	other.FileID.Lo++
	if _, err := Reopen(&other); err == nil {
		t.Error("a file with another file id was accepted")
	}
	for _, n := range []schema.ExecutableNotice{
		{FileID: good.FileID, Path: "[vdso]"},
		{FileID: good.FileID, Path: "relative/path"},
		{FileID: good.FileID, Path: "/nonexistent/tandem"},
		{FileID: good.FileID, Path: "/dev/null"},
	} {
		if f, err := Reopen(&n); err == nil {
			f.Close()
			t.Errorf("Reopen(%q) accepted", n.Path)
		}
	}
}
