package obitest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/tandem-profiler/tandem/sampler"
	"github.com/tandem-profiler/tandem/schema"
)

// MountBPFFS mounts a new BPF filesystem instance on a temporary
// directory (a fresh instance: nothing of the host's /sys/fs/bpf is
// visible or touched) and unmounts it at cleanup.
func MountBPFFS(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "tandem-bpffs-")
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("bpf", dir, "bpf", 0, "mode=0700"); err != nil {
		os.Remove(dir)
		t.Fatalf("mount a BPF filesystem on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount the BPF filesystem %s: %v", dir, err)
		}
		os.Remove(dir)
	})
	return dir
}

// SpanMap is the span map as OBI holds it: created and pinned by the
// test, shared with the tracer.
type SpanMap struct {
	m    *ebpf.Map
	Path string
}

// PinSpanMap creates the span map from the tracer's declaration and pins
// it under root (root/otel/traces_ctx_v1), as OBI does before the
// profiler starts. The map is unpinned and closed at cleanup.
func PinSpanMap(t testing.TB, root string) *SpanMap {
	t.Helper()
	spec, err := sampler.SpanMapSpec()
	if err != nil {
		t.Fatal(err)
	}
	m, err := ebpf.NewMap(spec)
	if err != nil {
		t.Fatalf("create the span map: %v", err)
	}
	path := sampler.SpanMapPath(root)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		m.Close()
		t.Fatal(err)
	}
	if err := m.Pin(path); err != nil {
		m.Close()
		t.Fatalf("pin the span map at %s: %v", path, err)
	}
	t.Cleanup(func() {
		_ = m.Unpin()
		m.Close()
	})
	return &SpanMap{m: m, Path: path}
}

// OpenSpanMap opens the span map pinned under root by someone else (the
// tracer, when it started before OBI), as OBI does when it finds the pin.
// The map is closed at cleanup; the pin stays.
func OpenSpanMap(t testing.TB, root string) *SpanMap {
	t.Helper()
	path := sampler.SpanMapPath(root)
	m, err := ebpf.LoadPinnedMap(path, nil)
	if err != nil {
		t.Fatalf("open the pinned span map %s: %v", path, err)
	}
	t.Cleanup(func() { m.Close() })
	return &SpanMap{m: m, Path: path}
}

// ID is the kernel's id of the map, to find it among another process's
// descriptors (fdinfo map_id).
func (s *SpanMap) ID() (uint32, error) {
	info, err := s.m.Info()
	if err != nil {
		return 0, err
	}
	id, ok := info.ID()
	if !ok {
		return 0, fmt.Errorf("the kernel does not report map ids")
	}
	return uint32(id), nil
}

// Set records that thread tid of process pid runs the span l.
func (s *SpanMap) Set(pid, tid uint32, l schema.TraceLink) error {
	var v [24]byte
	copy(v[:16], l.TraceID[:])
	copy(v[16:], l.SpanID[:])
	return s.m.Put(uint64(pid)<<32|uint64(tid), v[:])
}

// Get returns what the map holds for a thread.
func (s *SpanMap) Get(pid, tid uint32) (schema.TraceLink, error) {
	v := make([]byte, 24)
	if err := s.m.Lookup(uint64(pid)<<32|uint64(tid), v); err != nil {
		return schema.TraceLink{}, err
	}
	var l schema.TraceLink
	copy(l.TraceID[:], v[:16])
	copy(l.SpanID[:], v[16:])
	return l, nil
}

// SetProcess records the span l for every thread process pid has now,
// and returns how many it set. Threads started later need another call.
func (s *SpanMap) SetProcess(pid uint32, l schema.TraceLink) (int, error) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, task := range tasks {
		tid, err := strconv.ParseUint(task.Name(), 10, 32)
		if err != nil {
			continue
		}
		if err := s.Set(pid, uint32(tid), l); err != nil {
			return n, fmt.Errorf("set the span of thread %d of %d: %w", tid, pid, err)
		}
		n++
	}
	return n, nil
}
