package symbolize

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// heldCostFile is the executable BenchmarkHeldExecutable holds: the
// kubelet test/cluster builds (unstripped, 127 MiB), else this test
// binary (TANDEM_BENCH_HELD_FILE overrides).
func heldCostFile() string {
	if p := os.Getenv("TANDEM_BENCH_HELD_FILE"); p != "" {
		return p
	}
	if p := "/var/cache/tandem/kubernetes/v1.37.2/bin/kubelet"; fileExists(p) {
		return p
	}
	p, _ := os.Executable()
	return p
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// BenchmarkHeldExecutable measures what holding an executable's
// descriptor costs, for the bounds --max-held-executables and
// --max-held-executable-bytes (docs/executables.md):
//
//   - linked: 4096 descriptors of a linked file held by a Symbolizer.
//     heap-B/held is the encoder's Go heap per held descriptor,
//     filp-B/held the kernel's struct file (the machine's filp slab
//     objects, /proc/slabinfo, root only), disk-B/held the disk they keep
//     from being reclaimed (statfs: none, the file is linked; what other
//     processes wrote meanwhile is noise).
//   - deleted: one copy of the file, deleted while held: disk-B is what
//     the descriptor kept from being reclaimed until it was closed.
//   - table: the file's symbols read (one Resolve): table-B is what the
//     cache (--symbolizer-cache-bytes) counts, rss-file-B the file's pages
//     the encoder still maps once the table is built (none: the sections
//     are unmapped), whether or not the descriptor is held.
func BenchmarkHeldExecutable(b *testing.B) {
	path := heldCostFile()
	st, err := os.Stat(path)
	if err != nil {
		b.Skip(err)
	}
	b.Logf("held file %s, %d bytes", path, st.Size())
	b.Run("linked", func(b *testing.B) {
		const n = 4096
		for b.Loop() {
			cfg := DefaultConfig()
			cfg.MaxFiles, cfg.MaxHeldBytes, cfg.SweepInterval = n, 1<<62, 1<<40
			s, err := New(cfg, nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			free0 := freeBytes(b, path)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			filp0, objsize := slab(b, "filp")
			for i := range n {
				f, err := os.Open(path)
				if err != nil {
					b.Fatal(err)
				}
				s.Add(notice(uint64(i+1), path), f)
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			filp1, _ := slab(b, "filp")
			free1 := freeBytes(b, path)
			b.ReportMetric(float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/n, "heap-B/held")
			b.ReportMetric(float64((filp1-filp0)*objsize)/n, "filp-B/held")
			b.ReportMetric(float64(free0-free1)/n, "disk-B/held")
			s.Close()
		}
	})
	b.Run("deleted", func(b *testing.B) {
		for b.Loop() {
			dir := b.TempDir()
			cp := filepath.Join(dir, "copy")
			data, err := os.ReadFile(path)
			if err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(cp, data, 0o755); err != nil {
				b.Fatal(err)
			}
			data = nil
			f, err := os.Open(cp)
			if err != nil {
				b.Fatal(err)
			}
			if err := os.Remove(cp); err != nil {
				b.Fatal(err)
			}
			held := freeBytes(b, dir)
			f.Close()
			released := freeBytes(b, dir)
			b.ReportMetric(float64(released-held), "disk-B")
		}
	})
	b.Run("table", func(b *testing.B) {
		addr := functionAddresses(b, path)[0]
		for b.Loop() {
			s, err := New(DefaultConfig(), nil, nil)
			if err != nil {
				b.Fatal(err)
			}
			f, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			rss0 := status(b, "RssFile")
			s.Add(notice(1, path), f)
			if fr, _ := s.Resolve(notice(1, path).FileID, addr, nil); len(fr) == 0 {
				b.Fatalf("%s: nothing at %#x", path, addr)
			}
			s.mu.Lock()
			loaded := s.loaded
			s.mu.Unlock()
			b.ReportMetric(float64(loaded), "table-B")
			b.ReportMetric(float64(status(b, "RssFile")-rss0), "rss-file-B")
			s.Close()
		}
	})
}

// freeBytes is the space unprivileged users may still use on path's
// filesystem.
func freeBytes(b *testing.B, path string) int64 {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		b.Fatal(err)
	}
	return int64(st.Bavail) * st.Bsize
}

// slab returns the active objects of a kernel slab cache and their size.
func slab(b *testing.B, name string) (active, objsize int64) {
	data, err := os.ReadFile("/proc/slabinfo")
	if err != nil {
		b.Skipf("kernel memory per descriptor: %v (root only)", err)
	}
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) > 3 && f[0] == name {
			active, _ = strconv.ParseInt(f[1], 10, 64)
			objsize, _ = strconv.ParseInt(f[3], 10, 64)
			return active, objsize
		}
	}
	b.Skipf("/proc/slabinfo: no %s cache", name)
	return 0, 0
}

// status returns a /proc/self/status field in bytes.
func status(b *testing.B, key string) int64 { return kBField(b, "/proc/self/status", key) }

func kBField(b *testing.B, file, key string) int64 {
	data, err := os.ReadFile(file)
	if err != nil {
		b.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != key {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			b.Fatal(err)
		}
		return n << 10
	}
	b.Fatalf("%s: no %s", file, key)
	return 0
}
