package symbolize

import (
	"bufio"
	"bytes"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/tandem-profiler/tandem/test/privtest"
)

// buildC compiles testdata/workload.c with gcc -g0 and extra flags, then
// strips it when asked.
func buildC(t testing.TB, strip bool, flags ...string) string {
	t.Helper()
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		privtest.SkipOrFail(t, "gcc not installed (make tools installs it): %v", err)
	}
	out := filepath.Join(t.TempDir(), "workload")
	args := append([]string{"-g0", "-O1", "-o", out, "testdata/workload.c"}, flags...)
	if b, err := exec.Command(gcc, args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %v: %v\n%s", args, err, b)
	}
	if strip {
		if b, err := exec.Command("strip", out).CombinedOutput(); err != nil {
			t.Fatalf("strip: %v\n%s", err, b)
		}
	}
	return out
}

// objdumpSymbols returns objdump's names for the function starts of an
// executable ("<name>:" lines), the independent oracle for PLT stubs.
func objdumpSymbols(t testing.TB, path string) map[string]uint64 {
	t.Helper()
	out, err := exec.Command("objdump", "-d", path).Output()
	if err != nil {
		privtest.SkipOrFail(t, "objdump -d %s: %v", path, err)
	}
	re := regexp.MustCompile(`^([0-9a-f]+) <([^>]+)>:$`)
	syms := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			a, _ := strconv.ParseUint(m[1], 16, 64)
			syms[m[2]] = a
		}
	}
	return syms
}

func loadFile(t testing.TB, path string) *Table {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() }) // a Go table reads its pclntab through f
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	tab, err := Load(f, st.Size(), Limits{})
	if err != nil {
		t.Fatalf("Load(%s): %v", path, err)
	}
	return tab
}

func name(tab *Table, addr uint64) string {
	fr := tab.Lookup(addr, nil)
	if len(fr) == 0 {
		return ""
	}
	return fr[len(fr)-1].Function
}

func TestCWorkload(t *testing.T) {
	plt := []string{"malloc@plt", "free@plt", "snprintf@plt", "strlen@plt"}
	for _, tc := range []struct {
		name    string
		strip   bool
		flags   []string
		named   []string // named at their address + 1
		unnamed []string // these functions have no symbol left
	}{
		{name: "symtab", named: append([]string{"tandem_leaf", "tandem_middle", "main"}, plt...)},
		{name: "stripped, exported", strip: true, flags: []string{"-rdynamic"}, named: append([]string{"tandem_leaf", "tandem_middle"}, plt...)},
		{name: "stripped", strip: true, named: plt, unnamed: []string{"tandem_leaf", "tandem_middle"}},
		{name: "ibt plt.sec", flags: []string{"-fcf-protection=full", "-Wl,-z,ibtplt"}, named: append([]string{"tandem_leaf"}, plt...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if strings.HasPrefix(tc.name, "ibt") && runtime.GOARCH != "amd64" {
				t.Skip("IBT PLTs are x86-64's")
			}
			path := buildC(t, tc.strip, tc.flags...)
			// The oracle is the unstripped build's objdump: same code, same addresses.
			oracle := objdumpSymbols(t, buildC(t, false, tc.flags...))
			tab := loadFile(t, path)
			for _, want := range tc.named {
				addr, ok := oracle[want]
				if !ok {
					t.Fatalf("objdump does not know %s: %v", want, oracle)
				}
				if got := name(tab, addr+1); got != want {
					t.Errorf("%#x (%s+1): got %q", addr+1, want, got)
				}
			}
			for _, fn := range tc.unnamed {
				if got := name(tab, oracle[fn]+1); got == fn {
					t.Errorf("%s named although stripped", fn)
				}
			}
			if got := tab.Lookup(0x10, nil); len(got) != 0 {
				t.Errorf("address 0x10 (ELF header) named %v", got)
			}
		})
	}
}

func TestLibc(t *testing.T) {
	path := "/lib/x86_64-linux-gnu/libc.so.6"
	if runtime.GOARCH == "arm64" {
		path = "/lib/aarch64-linux-gnu/libc.so.6"
	}
	ef, err := elf.Open(path)
	if err != nil {
		privtest.SkipOrFail(t, "no libc at %s: %v", path, err)
	}
	defer ef.Close()
	dyn, err := ef.DynamicSymbols()
	if err != nil {
		t.Fatal(err)
	}
	byAddr := map[uint64][]string{}
	for _, s := range dyn {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Value != 0 && s.Size > 1 {
			byAddr[s.Value] = append(byAddr[s.Value], s.Name)
		}
	}
	tab := loadFile(t, path)
	checked := 0
	for _, want := range []string{"malloc", "free", "qsort", "getpid", "fopen"} {
		for addr, names := range byAddr {
			found := false
			for _, n := range names {
				found = found || n == want
			}
			if !found {
				continue
			}
			got := name(tab, addr+1)
			found = false
			for _, n := range names {
				found = found || n == got
			}
			if !found {
				t.Errorf("%s at %#x: got %q, want one of %v", want, addr, got, names)
			}
			checked++
		}
	}
	if checked < 5 {
		t.Fatalf("checked %d libc functions, want 5", checked)
	}
	t.Logf("libc: %d symbols, %d bytes", tab.Symbols(), tab.Bytes())
}

//go:noinline
func outerForTest() []uintptr { return innerForTest() }

// innerForTest is inlined into outerForTest.
func innerForTest() []uintptr { return callerPC() }

// callerPC returns the return address into its caller.
//
//go:noinline
func callerPC() []uintptr {
	pcs := make([]uintptr, 8)
	return pcs[:runtime.Callers(2, pcs)]
}

// TestGo checks the pclntab reader against the runtime's own answers for
// this test binary: function, file, line and inlined calls.
func TestGo(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tab := loadFile(t, exe)
	if !tab.HasGo() {
		t.Fatal("no pclntab in the test binary")
	}
	// A plain function entry.
	pc := reflect.ValueOf(TestCWorkload).Pointer()
	rf := runtime.FuncForPC(pc)
	wantFile, wantLine := rf.FileLine(pc)
	got := tab.Lookup(uint64(pc), nil)
	if len(got) != 1 || got[0] != (Frame{Function: rf.Name(), File: wantFile, Line: uint32(wantLine)}) {
		t.Errorf("TestCWorkload entry: got %+v, want %s %s:%d", got, rf.Name(), wantFile, wantLine)
	}
	// Inlined calls: the runtime expands a return address the same way.
	pcs := outerForTest()
	frames := runtime.CallersFrames(pcs)
	var want []Frame
	for len(want) < 2 {
		fr, more := frames.Next()
		want = append(want, Frame{Function: fr.Function, File: fr.File, Line: uint32(fr.Line)})
		if !more {
			break
		}
	}
	// pcs[0] is the return address into the inlined innerForTest, plus
	// one (runtime.Callers' convention).
	got = tab.Lookup(uint64(pcs[0])-1, nil)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("inlined call: got %+v, want %+v", got, want)
	}
	if !strings.HasSuffix(got[0].Function, "innerForTest") {
		t.Errorf("innermost frame %q, want innerForTest", got[0].Function)
	}
}

func TestLoadErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "ELF headers"},
		{"not ELF", []byte("#!/bin/sh\necho hi\n"), "ELF headers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(bytes.NewReader(tc.data), int64(len(tc.data)), Limits{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error about %s", err, tc.want)
			}
		})
	}
	t.Run("section over the limit", func(t *testing.T) {
		path := buildC(t, false)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Load(bytes.NewReader(data), int64(len(data)), Limits{MaxSectionBytes: 64})
		if err == nil || !strings.Contains(err.Error(), "limit") {
			t.Fatalf("got %v, want a section-limit error", err)
		}
	})
}

func funcPC(f any) uintptr { return reflect.ValueOf(f).Pointer() }

// TestPclntabReadFromFile checks that a Go table keeps only its function
// table in memory and reads the rest from the file, that the names it
// returns stay valid, and that a file truncated or closed after loading
// makes lookups find nothing (no panic, no fault).
func TestPclntabReadFromFile(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "copy-of-test-binary")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tab, err := Load(f, int64(len(b)), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if !tab.HasGo() {
		t.Fatal("no pclntab in the test binary")
	}
	elf, err := elf.NewFile(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if size := elf.Section(".gopclntab").Size; uint64(tab.Bytes()) > size/4 {
		t.Errorf("the table holds %d bytes of a %d-byte pclntab: it should read it from the file", tab.Bytes(), size)
	}
	addr := uint64(reflect.ValueOf(TestCWorkload).Pointer())
	got := name(tab, addr+1)
	if !strings.HasSuffix(got, ".TestCWorkload") {
		t.Fatalf("name at %#x = %q, want ...TestCWorkload", addr, got)
	}

	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	if got := name(tab, uint64(reflect.ValueOf(TestPclntabReadFromFile).Pointer())+1); got != "" {
		t.Errorf("lookup in a truncated file named %q, want nothing", got)
	}
	f.Close()
	if got := name(tab, addr+1); got != "" {
		t.Errorf("lookup through a closed descriptor named %q, want nothing", got)
	}
	if !strings.HasSuffix(got, ".TestCWorkload") {
		t.Errorf("an earlier name changed: %q", got)
	}
}
