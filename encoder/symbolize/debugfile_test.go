package symbolize

import (
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tandem-profiler/tandem/schema"
	"github.com/tandem-profiler/tandem/test/privtest"
	"github.com/tandem-profiler/tandem/test/promtest"
)

// splitBuild is testdata/static.c built with -g, its debug file split off
// with objcopy --only-keep-debug, and the program stripped (and given a
// .gnu_debuglink when asked), as distributions ship them.
type splitBuild struct {
	exe, debug string
	buildID    string            // hex, "" when built without one
	oracle     map[string]uint64 // objdump's names of the unstripped build
}

func run(t testing.TB, name string, args ...string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		privtest.SkipOrFail(t, "%s not installed (make tools installs binutils and gcc): %v", name, err)
	}
	if b, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, b)
	}
}

func buildSplit(t testing.TB, buildID, debuglink bool, cflags ...string) splitBuild {
	t.Helper()
	dir := t.TempDir()
	full := filepath.Join(dir, "full")
	style := "--build-id=none"
	if buildID {
		style = "--build-id=sha1"
	}
	run(t, "gcc", append([]string{"-g", "-O1", "-Wl," + style, "-o", full, "testdata/static.c"}, cflags...)...)
	b := splitBuild{exe: filepath.Join(dir, "bin", "prog"), debug: filepath.Join(dir, "prog.debug"), oracle: objdumpSymbols(t, full)}
	if buildID {
		ef, err := elf.Open(full)
		if err != nil {
			t.Fatal(err)
		}
		data, err := ef.Section(".note.gnu.build-id").Data()
		ef.Close()
		if err != nil || len(data) < 16+20 {
			t.Fatalf("build id note %x: %v", data, err)
		}
		b.buildID = hex.EncodeToString(data[16:])
	}
	run(t, "objcopy", "--only-keep-debug", full, b.debug)
	if err := os.Mkdir(filepath.Dir(b.exe), 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, "strip", "--strip-all", "-o", b.exe, full)
	if debuglink {
		run(t, "objcopy", "--add-gnu-debuglink="+b.debug, b.exe)
	}
	return b
}

// place copies src to dst, creating its directories.
func place(t testing.TB, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func loadWithDebug(t testing.TB, path string, search DebugSearch) *Table {
	t.Helper()
	return loadWithDebugLimits(t, path, Limits{}, search)
}

func loadWithDebugLimits(t testing.TB, path string, lim Limits, search DebugSearch) *Table {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	tab, err := LoadWithDebug(f, st.Size(), lim, search)
	if err != nil {
		t.Fatalf("LoadWithDebug(%s): %v", path, err)
	}
	return tab
}

var staticFuncs = []string{"tandem_static_leaf", "tandem_static_middle", "main"}

// TestDebugFile: a stripped program's internal (static) functions are
// named from its separate debug file, found by build id or by
// .gnu_debuglink in each of its places, and only from the right file.
func TestDebugFile(t *testing.T) {
	withID := buildSplit(t, true, false)
	linked := buildSplit(t, false, true)
	both := buildSplit(t, true, true)
	other := buildSplit(t, true, false, "-DTANDEM_OTHER_BUILD=1", "-O2") // another build id
	if other.buildID == withID.buildID {
		t.Fatal("two builds with one build id")
	}
	for _, tc := range []struct {
		name   string
		b      splitBuild
		setup  func(t *testing.T, debugDir string) // places the debug file
		via    string                              // "": not named
		reject string                              // in Problems, "" for none
		noDirs bool
		noExe  bool // no executable path in the search
	}{
		{name: "build id", b: withID, via: ViaBuildID, setup: func(t *testing.T, d string) {
			place(t, withID.debug, filepath.Join(d, ".build-id", withID.buildID[:2], withID.buildID[2:]+".debug"))
		}},
		{name: "debuglink under the debug dir", b: linked, via: ViaDebuglink, setup: func(t *testing.T, d string) {
			place(t, linked.debug, filepath.Join(d, filepath.Dir(linked.exe), "prog.debug"))
		}},
		{name: "debuglink next to the executable", b: linked, via: ViaDebuglink, setup: func(t *testing.T, d string) {
			place(t, linked.debug, filepath.Join(filepath.Dir(linked.exe), "prog.debug"))
			t.Cleanup(func() { os.Remove(filepath.Join(filepath.Dir(linked.exe), "prog.debug")) })
		}},
		{name: "debuglink in .debug", b: linked, via: ViaDebuglink, setup: func(t *testing.T, d string) {
			place(t, linked.debug, filepath.Join(filepath.Dir(linked.exe), ".debug", "prog.debug"))
			t.Cleanup(func() { os.RemoveAll(filepath.Join(filepath.Dir(linked.exe), ".debug")) })
		}},
		{name: "another build's file at the build id", b: withID, reject: "build id", setup: func(t *testing.T, d string) {
			place(t, other.debug, filepath.Join(d, ".build-id", withID.buildID[:2], withID.buildID[2:]+".debug"))
		}},
		{name: "debuglink CRC32 mismatch", b: linked, reject: "CRC32", setup: func(t *testing.T, d string) {
			p := filepath.Join(d, filepath.Dir(linked.exe), "prog.debug")
			place(t, linked.debug, p)
			f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.Write([]byte{0})
			f.Close()
		}},
		{name: "debuglink with the same build id: no CRC32 needed", b: both, via: ViaDebuglink, setup: func(t *testing.T, d string) {
			p := filepath.Join(d, filepath.Dir(both.exe), "prog.debug")
			place(t, both.debug, p)
			f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.Write([]byte{0}) // another CRC32, the same build id
			f.Close()
		}},
		{name: "debuglink not a regular file", b: linked, reject: "not a regular file", setup: func(t *testing.T, d string) {
			p := filepath.Join(d, filepath.Dir(linked.exe), "prog.debug")
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "no debug dirs: no search", b: withID, noDirs: true, setup: func(t *testing.T, d string) {
			place(t, withID.debug, filepath.Join(d, ".build-id", withID.buildID[:2], withID.buildID[2:]+".debug"))
		}},
		{name: "debuglink without the executable's path", b: linked, noExe: true, setup: func(t *testing.T, d string) {
			place(t, linked.debug, filepath.Join(d, filepath.Dir(linked.exe), "prog.debug"))
		}},
		{name: "nothing installed", b: withID, setup: func(*testing.T, string) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			debugDir := t.TempDir()
			tc.setup(t, debugDir)
			search := DebugSearch{Dirs: []string{filepath.Join(t.TempDir(), "missing"), debugDir}, ExecutablePath: tc.b.exe}
			if tc.noDirs {
				search.Dirs = nil
			}
			if tc.noExe {
				search.ExecutablePath = ""
			}
			tab := loadWithDebug(t, tc.b.exe, search)
			if tab.Debug.Via != tc.via {
				t.Errorf("found via %q, want %q (%+v, problems: %v)", tab.Debug.Via, tc.via, tab.Debug, tab.Problems)
			}
			if tc.reject != "" && (tab.Debug.Rejected != 1 || tab.Problems == nil || !strings.Contains(tab.Problems.Error(), tc.reject)) {
				t.Errorf("want one rejection for %q; %+v, problems: %v", tc.reject, tab.Debug, tab.Problems)
			}
			if tc.reject == "" && tab.Debug.Rejected != 0 {
				t.Errorf("rejected: %v", tab.Problems)
			}
			for _, fn := range staticFuncs {
				addr, ok := tc.b.oracle[fn]
				if !ok {
					t.Fatalf("objdump does not know %s", fn)
				}
				got := name(tab, addr+1)
				if tc.via != "" && got != fn {
					t.Errorf("%s+1 (%#x): got %q", fn, addr+1, got)
				}
				if tc.via == "" && got == fn {
					t.Errorf("%s named without its debug file", fn)
				}
			}
		})
	}
}

// TestDebugFileNotForSymtab: an executable with a .symtab of its own is
// not searched for.
func TestDebugFileNotForSymtab(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "prog")
	run(t, "gcc", "-g0", "-O1", "-Wl,--build-id=sha1", "-o", exe, "testdata/static.c")
	tab := loadWithDebug(t, exe, DebugSearch{Dirs: []string{dir}, ExecutablePath: exe})
	if tab.Debug.Searched {
		t.Errorf("searched for a debug file: %+v", tab.Debug)
	}
}

// TestSymbolizerDebugFile: the Symbolizer finds debug files under
// Config.DebugDirs and counts them by how they were found.
func TestSymbolizerDebugFile(t *testing.T) {
	withID := buildSplit(t, true, false)
	linked := buildSplit(t, false, true)
	debugDir := t.TempDir()
	place(t, withID.debug, filepath.Join(debugDir, ".build-id", withID.buildID[:2], withID.buildID[2:]+".debug"))
	place(t, linked.debug, filepath.Join(debugDir, filepath.Dir(linked.exe), "prog.debug"))
	cfg := DefaultConfig()
	cfg.DebugDirs = []string{debugDir}
	reg := prometheus.NewRegistry()
	s, err := New(cfg, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Add(notice(1, withID.exe), open(t, withID.exe))
	s.Add(notice(2, linked.exe), open(t, linked.exe))
	for id, b := range map[uint64]splitBuild{1: withID, 2: linked} {
		addr := b.oracle["tandem_static_leaf"] + 1
		if got, _ := s.Resolve(schema.FileID{Hi: id, Lo: id}, addr, nil); len(got) != 1 || got[0].Function != "tandem_static_leaf" {
			t.Errorf("file %d: got %+v", id, got)
		}
	}
	gathered := func(via string) float64 {
		return promtest.Value(t, reg, "tandem_encoder_symbolizer_debug_files_total", "via", via)
	}
	if gathered(ViaBuildID) != 1 || gathered(ViaDebuglink) != 1 {
		t.Errorf("debug files by build id %v, by debuglink %v; want 1 and 1", gathered(ViaBuildID), gathered(ViaDebuglink))
	}
	if n := testutil.ToFloat64(s.m.debugRejected); n != 0 {
		t.Errorf("%v rejected", n)
	}

	cfg.DebugDirs = []string{"relative/dir"}
	if _, err := New(cfg, nil, nil); err == nil || !strings.Contains(err.Error(), "absolute") {
		t.Errorf("relative debug dir: %v", err)
	}
}

func TestParseDebuglink(t *testing.T) {
	le := binary.LittleEndian
	for _, tc := range []struct {
		name string
		data []byte
		want string
		crc  uint32
		err  string
	}{
		{name: "padded", data: []byte("ab.debug\x00\x00\x00\x00\x78\x56\x34\x12"), want: "ab.debug", crc: 0x12345678},
		{name: "no padding needed", data: []byte("abc\x00\x01\x00\x00\x00"), want: "abc", crc: 1},
		{name: "no NUL", data: []byte("abc"), err: "NUL"},
		{name: "no CRC", data: []byte("abc\x00\x01\x00"), err: "no CRC"},
		{name: "directory", data: []byte("../x\x00\x00\x00\x00\x01\x00\x00\x00"), err: "directory"},
		{name: "dot dot", data: []byte("..\x00\x00\x01\x00\x00\x00"), err: "not a file"},
		{name: "empty", data: []byte("\x00\x00\x00\x00\x01\x00\x00\x00"), err: "not a file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, crc, err := parseDebuglink(tc.data, le)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %q, %v; want an error about %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want || crc != tc.crc {
				t.Fatalf("got %q %#x %v", got, crc, err)
			}
		})
	}
}

func TestDebuglinkPaths(t *testing.T) {
	got := debuglinkPaths("/usr/lib/../lib/x/libfoo.so", "libfoo.so.debug", []string{"/usr/lib/debug", "/d"})
	want := []string{"/usr/lib/x/libfoo.so.debug", "/usr/lib/x/.debug/libfoo.so.debug",
		"/usr/lib/debug/usr/lib/x/libfoo.so.debug", "/d/usr/lib/x/libfoo.so.debug"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("got %v, want %v", got, want)
	}
	// A debuglink naming the executable itself is not read for its CRC.
	if got := debuglinkPaths("/bin/prog", "prog", nil); len(got) != 1 || got[0] != "/bin/.debug/prog" {
		t.Errorf("got %v", got)
	}
	if got := debuglinkPaths("prog", "prog.debug", []string{"/d"}); len(got) != 0 {
		t.Errorf("relative executable path: got %v", got)
	}
	if got := buildIDPath("/d", []byte{0xab, 0xcd, 0xef}); got != "/d/.build-id/ab/cdef.debug" {
		t.Errorf("build id path %s", got)
	}
}

func TestParseBuildIDNote(t *testing.T) {
	le := binary.LittleEndian
	note := func(name string, typ uint32, desc []byte, pad int) []byte {
		b := le.AppendUint32(nil, uint32(len(name)))
		b = le.AppendUint32(b, uint32(len(desc)))
		b = le.AppendUint32(b, typ)
		b = append(b, name...)
		for len(b)%pad != 0 {
			b = append(b, 0)
		}
		b = append(b, desc...)
		for len(b)%pad != 0 {
			b = append(b, 0)
		}
		return b
	}
	id := []byte{1, 2, 3, 4, 5}
	for _, tc := range []struct {
		name  string
		data  []byte
		align uint64
		want  []byte
	}{
		{name: "alone", data: note("GNU\x00", 3, id, 4), align: 4, want: id},
		{name: "after another note", data: append(note("GNU\x00", 5, []byte{9, 9, 9}, 8), note("GNU\x00", 3, id, 8)...), align: 8, want: id},
		{name: "another owner", data: note("Go\x00\x00", 3, id, 4), align: 4},
		{name: "too short an id", data: note("GNU\x00", 3, id[:1], 4), align: 4},
		{name: "descsz past the end", data: note("GNU\x00", 3, id, 4)[:20], align: 4},
		{name: "last padding cut", data: note("GNU\x00", 3, id, 4)[:21], align: 4, want: id},
		{name: "truncated header", data: []byte{4, 0, 0}, align: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := parseBuildIDNote(tc.data, le, tc.align); string(got) != string(tc.want) {
				t.Errorf("got %x, want %x", got, tc.want)
			}
		})
	}
}

// TestDebugFileSeeds: the fuzzer's seeds are a stripped program and its
// debug file that name its static functions (found by build id and by
// debuglink alike).
func TestDebugFileSeeds(t *testing.T) {
	exe := "testdata/static.elf"
	ef, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	data, err := ef.Section(".note.gnu.build-id").Data()
	ef.Close()
	if err != nil {
		t.Fatal(err)
	}
	id := hex.EncodeToString(data[16:])
	abs, err := filepath.Abs(exe)
	if err != nil {
		t.Fatal(err)
	}
	byID, byLink := t.TempDir(), t.TempDir()
	place(t, "testdata/static.debug", filepath.Join(byID, ".build-id", id[:2], id[2:]+".debug"))
	place(t, "testdata/static.debug", filepath.Join(byLink, filepath.Dir(abs), "static.debug"))
	for dir, via := range map[string]string{byID: ViaBuildID, byLink: ViaDebuglink} {
		tab := loadWithDebug(t, exe, DebugSearch{Dirs: []string{dir}, ExecutablePath: abs})
		if tab.Debug.Via != via || tab.Symbols() < 3 {
			t.Errorf("via %s: %+v, %d symbols, problems %v", via, tab.Debug, tab.Symbols(), tab.Problems)
		}
	}
}

// TestLibcDebugFile: with Debian's libc6-dbg installed (make tools
// installs it), libc's internal functions, absent from its .dynsym, are
// named from /usr/lib/debug/.build-id.
func TestLibcDebugFile(t *testing.T) {
	path := "/lib/x86_64-linux-gnu/libc.so.6"
	if runtime.GOARCH == "arm64" {
		path = "/lib/aarch64-linux-gnu/libc.so.6"
	}
	bare := loadWithDebug(t, path, DebugSearch{})
	tab := loadWithDebug(t, path, DebugSearch{Dirs: []string{DefaultDebugDir}, ExecutablePath: path})
	if tab.Debug.Via != ViaBuildID {
		privtest.SkipOrFail(t, "no debug file for %s under %s (apt-get install libc6-dbg; make tools does): %+v, %v", path, DefaultDebugDir, tab.Debug, tab.Problems)
	}
	df, err := elf.Open(tab.Debug.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer df.Close()
	syms, err := df.Symbols()
	if err != nil {
		t.Fatal(err)
	}
	// The oracle: the debug file's local functions, read by debug/elf.
	named := 0
	for _, want := range []string{"_int_malloc", "_int_free", "msort_with_tmp.part.0", "malloc_consolidate"} {
		for _, s := range syms {
			if s.Name != want || elf.ST_TYPE(s.Info) != elf.STT_FUNC || s.Size < 2 {
				continue
			}
			if got := name(bare, s.Value+1); got == want {
				t.Errorf("%s named without the debug file", want)
			}
			if got := name(tab, s.Value+1); got != want {
				t.Errorf("%s at %#x: got %q", want, s.Value, got)
			}
			named++
		}
	}
	if named < 3 {
		t.Fatalf("checked %d internal libc functions, want at least 3", named)
	}
	t.Logf("libc: %d symbols (%d bytes) without its debug file, %d (%d bytes) with %s",
		bare.Symbols(), bare.Bytes(), tab.Symbols(), tab.Bytes(), tab.Debug.Path)
}

// TestDebuglinkCRCTimeout: a debuglink's CRC32 that overruns
// Limits.DebugCRCTimeout rejects the debug file, and the executable keeps
// its own table.
func TestDebuglinkCRCTimeout(t *testing.T) {
	dir := t.TempDir()
	full, debug, exe := filepath.Join(dir, "full"), filepath.Join(dir, "prog.debug"), filepath.Join(dir, "bin", "prog")
	run(t, "gcc", "-g", "-O1", "-Wl,--build-id=none", "-o", full, "testdata/static.c")
	run(t, "objcopy", "--only-keep-debug", full, debug)
	// Past one CRC chunk, so the time limit is looked at before the end.
	pad := filepath.Join(dir, "pad")
	if err := os.WriteFile(pad, make([]byte, 3*crcChunk), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, "objcopy", "--add-section", ".tandem_pad="+pad, debug)
	if err := os.Mkdir(filepath.Dir(exe), 0o755); err != nil {
		t.Fatal(err)
	}
	run(t, "strip", "--strip-all", "-o", exe, full)
	run(t, "objcopy", "--add-gnu-debuglink="+debug, exe)
	debugDir := t.TempDir()
	place(t, debug, filepath.Join(debugDir, filepath.Dir(exe), "prog.debug"))
	search := DebugSearch{Dirs: []string{debugDir}, ExecutablePath: exe}

	for _, tc := range []struct {
		timeout time.Duration
		via     string
	}{{0, ViaDebuglink}, {time.Hour, ViaDebuglink}, {time.Nanosecond, ""}} {
		tab := loadWithDebugLimits(t, exe, Limits{DebugCRCTimeout: tc.timeout}, search)
		if tab.Debug.Via != tc.via {
			t.Errorf("timeout %v: via %q, want %q (%v)", tc.timeout, tab.Debug.Via, tc.via, tab.Problems)
		}
		if tc.via == "" && (tab.Debug.Rejected != 1 || !strings.Contains(fmt.Sprint(tab.Problems), "not done within")) {
			t.Errorf("timeout %v: want the file rejected for its CRC32 time: %+v, %v", tc.timeout, tab.Debug, tab.Problems)
		}
	}
}
