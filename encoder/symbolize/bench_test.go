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

// benchFiles are the executables BENCHMARKS.md reports on: this machine's
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
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			t, _ := Load(f, size, Limits{})
			runtime.GC()
			runtime.ReadMemStats(&after)
			b.ReportMetric(float64(t.Bytes()), "table-B")
			b.ReportMetric(float64(after.HeapAlloc)-float64(before.HeapAlloc), "heap-B")
			b.ReportMetric(float64(t.Symbols()), "symbols")
			runtime.KeepAlive(t)
		})
	}
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
			addrs := functionAddresses(b, path)
			var dst []Frame
			i := 0
			for b.Loop() {
				dst = t.Lookup(addrs[i%len(addrs)], dst[:0])
				i++
			}
			b.ReportMetric(float64(lookupAll(t, addrs))/float64(len(addrs)), "named")
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
