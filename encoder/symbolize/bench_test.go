package symbolize

import (
	"debug/dwarf"
	"debug/elf"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// benchFiles are the executables docs/benchmarks/symbols.md reports on: this machine's
// libc and libpython, and a Go binary (bin/tandem-encoder, from make
// build; TANDEM_BENCH_GO_BINARY overrides).
func benchFiles(b *testing.B) map[string]string {
	goBin := os.Getenv("TANDEM_BENCH_GO_BINARY")
	if goBin == "" {
		goBin, _ = filepath.Abs("../../bin/tandem-encoder")
	}
	return map[string]string{
		"libc":           "/lib/x86_64-linux-gnu/libc.so.6",
		"libpython":      "/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0",
		"tandem-encoder": goBin,
	}
}

func openBench(b *testing.B, path string) (*os.File, int64) {
	b.Helper()
	f, err := os.Open(path)
	if err != nil {
		b.Skipf("%s: %v", path, err)
	}
	b.Cleanup(func() { f.Close() })
	st, err := f.Stat()
	if err != nil {
		b.Fatal(err)
	}
	return f, st.Size()
}

// BenchmarkLoad is the cost of reading one executable's tables the first
// time, and what the table keeps (table-B: Table.Bytes, what the cache
// counts; heap-B: the live heap it adds, measured).
func BenchmarkLoad(b *testing.B) {
	for _, name := range []string{"libc", "libpython", "tandem-encoder"} {
		b.Run(name, func(b *testing.B) {
			f, size := openBench(b, benchFiles(b)[name])
			for b.Loop() {
				// The table is dropped at once, so the heap measured
				// below holds only the one loaded after the loop.
				if _, err := Load(f, size, Limits{}); err != nil {
					b.Fatal(err)
				}
			}
			reportTable(b, func() (*Table, error) { return Load(f, size, Limits{}) })
		})
	}
}

// reportTable reports what one table load keeps: table-B (Table.Bytes,
// what the cache counts), heap-B (the live heap it adds, after a GC) and
// its ELF symbols.
func reportTable(b *testing.B, load func() (*Table, error)) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	t, err := load()
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(t.Bytes()), "table-B")
	b.ReportMetric(float64(after.HeapAlloc)-float64(before.HeapAlloc), "heap-B")
	b.ReportMetric(float64(t.Symbols()), "symbols")
	runtime.KeepAlive(t)
}

// BenchmarkLookup is the cost of naming one newly seen location once its
// table is cached: addresses inside random functions of the file.
func BenchmarkLookup(b *testing.B) {
	for _, name := range []string{"libc", "libpython", "tandem-encoder"} {
		b.Run(name, func(b *testing.B) {
			path := benchFiles(b)[name]
			f, size := openBench(b, path)
			t, err := Load(f, size, Limits{})
			if err != nil {
				b.Fatal(err)
			}
			benchLookup(b, t, functionAddresses(b, path))
		})
	}
}

// functionAddresses returns 4096 addresses a few bytes into random
// function symbols of the file (debug/elf as the oracle).
func functionAddresses(b *testing.B, path string) []uint64 {
	ef, err := elf.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer ef.Close()
	syms, err := ef.Symbols()
	if err != nil {
		syms, err = ef.DynamicSymbols()
	}
	if err != nil {
		b.Fatal(err)
	}
	var funcs []elf.Symbol
	for _, s := range syms {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Value != 0 && s.Size > 4 {
			funcs = append(funcs, s)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	out := make([]uint64, 4096)
	for i := range out {
		s := funcs[r.IntN(len(funcs))]
		out[i] = s.Value + r.Uint64N(s.Size)
	}
	return out
}

// BenchmarkDWARFLines is what reading DWARF line tables would add, for the
// decision not to: debug/elf's DWARF data plus one pass over every line
// table of the Go binary (built with DWARF by make build).
func BenchmarkDWARFLines(b *testing.B) {
	path := benchFiles(b)["tandem-encoder"]
	if _, err := os.Stat(path); err != nil {
		b.Skip(err)
	}
	benchDWARFLines(b, path)
}

// benchDWARFLines opens path with debug/elf and reads every row of every
// DWARF line table, per iteration.
func benchDWARFLines(b *testing.B, path string) {
	rows := 0
	for b.Loop() {
		ef, err := elf.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		d, err := ef.DWARF()
		if err != nil {
			b.Skipf("no DWARF: %v", err)
		}
		rows = 0
		r := d.Reader()
		for {
			e, err := r.Next()
			if err != nil || e == nil {
				break
			}
			lr, err := d.LineReader(e)
			if err != nil || lr == nil {
				r.SkipChildren()
				continue
			}
			var entry dwarf.LineEntry
			for lr.Next(&entry) == nil {
				rows++
			}
			r.SkipChildren()
		}
		ef.Close()
	}
	b.ReportMetric(float64(rows), "line-rows")
}

// lookupAll names every address once and returns how many it named: what
// callgrind counts per file
// (--toggle-collect=github.com/tandem-profiler/tandem/encoder/symbolize.lookupAll).
//
//go:noinline
func lookupAll(t *Table, addrs []uint64) int {
	named := 0
	var dst []Frame
	for _, a := range addrs {
		if dst = t.Lookup(a, dst[:0]); len(dst) > 0 {
			named++
		}
	}
	return named
}

// libcDebugFile returns this machine's libc and its libc6-dbg debug file
// (by build id), skipping when it is not installed.
func libcDebugFile(b *testing.B) (libc, debug string) {
	libc = benchFiles(b)["libc"]
	f, size := openBench(b, libc)
	t, err := LoadWithDebug(f, size, Limits{}, DebugSearch{Dirs: []string{DefaultDebugDir}, ExecutablePath: libc})
	if err != nil || t.Debug.Path == "" {
		b.Skipf("no debug file for %s under %s (apt-get install libc6-dbg): %v", libc, DefaultDebugDir, err)
	}
	return libc, t.Debug.Path
}

// BenchmarkLoadDebugFile is what a separate debug file adds to the first
// read of a stripped executable (libc, with Debian's libc6-dbg): none (no
// search), a miss (the search places stat'ed, nothing there), found by
// build id, found by .gnu_debuglink (the file's CRC32 read whole); and
// what the table then keeps (table-B, heap-B as in BenchmarkLoad).
func BenchmarkLoadDebugFile(b *testing.B) {
	libc, debug := libcDebugFile(b)
	empty := b.TempDir()
	// libc's .gnu_debuglink names its build id file's base name: placed
	// under a debug dir at libc's directory, the debuglink finds it (and
	// the build id path there misses).
	byLink := b.TempDir()
	name, err := debuglinkName(libc)
	if err != nil {
		b.Skip(err)
	}
	data, err := os.ReadFile(debug)
	if err != nil {
		b.Fatal(err)
	}
	linked := filepath.Join(byLink, filepath.Dir(libc), name)
	if err := os.MkdirAll(filepath.Dir(linked), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(linked, data, 0o644); err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		dirs []string
		via  string
	}{
		{"none", nil, ""},
		{"miss", []string{empty}, ""},
		{"build-id", []string{DefaultDebugDir}, ViaBuildID},
		{"debuglink", []string{byLink}, ViaDebuglink},
	} {
		b.Run("libc/"+tc.name, func(b *testing.B) {
			f, size := openBench(b, libc)
			search := DebugSearch{Dirs: tc.dirs, ExecutablePath: libc}
			for b.Loop() {
				t, err := LoadWithDebug(f, size, Limits{}, search)
				if err != nil || t.Debug.Via != tc.via {
					b.Fatalf("via %q, want %q: %v", t.Debug.Via, tc.via, err)
				}
			}
			reportTable(b, func() (*Table, error) { return LoadWithDebug(f, size, Limits{}, search) })
		})
	}
}

// debuglinkName reads an executable's .gnu_debuglink name.
func debuglinkName(path string) (string, error) {
	ef, err := elf.Open(path)
	if err != nil {
		return "", err
	}
	defer ef.Close()
	s := ef.Section(".gnu_debuglink")
	if s == nil {
		return "", os.ErrNotExist
	}
	data, err := s.Data()
	if err != nil {
		return "", err
	}
	name, _, err := parseDebuglink(data, ef.ByteOrder)
	return name, err
}

// BenchmarkDWARFLinesLibcDebug is what reading DWARF line tables from
// libc6-dbg's debug file would add, for the decision not to: one pass over
// its (compressed) line tables with debug/dwarf.
func BenchmarkDWARFLinesLibcDebug(b *testing.B) {
	_, debug := libcDebugFile(b)
	benchDWARFLines(b, debug)
}

// benchLookup looks up addrs in turn, one per op, and reports the share
// of them named.
func benchLookup(b *testing.B, t *Table, addrs []uint64) {
	var dst []Frame
	i := 0
	for b.Loop() {
		dst = t.Lookup(addrs[i%len(addrs)], dst[:0])
		i++
	}
	b.ReportMetric(float64(lookupAll(t, addrs))/float64(len(addrs)), "named")
}

// BenchmarkLookupDebugFile is BenchmarkLookup on libc's table with its
// libc6-dbg symbols, at addresses inside random functions of the debug
// file's .symtab (internal ones included); named is the share named,
// named-without the share libc's own table (.dynsym) names: its exported
// functions.
func BenchmarkLookupDebugFile(b *testing.B) {
	libc, debug := libcDebugFile(b)
	f, size := openBench(b, libc)
	t, err := LoadWithDebug(f, size, Limits{}, DebugSearch{Dirs: []string{DefaultDebugDir}, ExecutablePath: libc})
	if err != nil {
		b.Fatal(err)
	}
	addrs := functionAddresses(b, debug)
	benchLookup(b, t, addrs)
	bare, err := Load(f, size, Limits{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(lookupAll(bare, addrs))/float64(len(addrs)), "named-without")
}
