package sampler

import (
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
)

// TestSpanMapLayout checks the span map the tracer's eBPF programs read
// against what OBI writes (its trace-profile correlation spec, and the
// tracer's interpreter_dispatcher.ebpf.c): an LRU hash keyed by the u64
// bpf_get_current_pid_tgid() (tgid<<32 | tid), whose value is the 16-byte
// trace id followed by the 8-byte span id, packed. Should an upgrade of the
// tracer change it, the e2e test's stand-in for OBI and docs/formats.md need to
// follow.
func TestSpanMapLayout(t *testing.T) {
	spec, err := SpanMapSpec()
	if err != nil {
		t.Fatal(err)
	}
	if spec.Type != ebpf.LRUHash || spec.KeySize != 8 || spec.ValueSize != 24 {
		t.Fatalf("%s: type %v, key %d bytes, value %d bytes; want LRUHash, 8, 24", spanMapName, spec.Type, spec.KeySize, spec.ValueSize)
	}
	if spec.MaxEntries != 1<<14 {
		t.Errorf("%s holds %d entries, want 16384", spanMapName, spec.MaxEntries)
	}
	key, ok := btf.UnderlyingType(spec.Key).(*btf.Int)
	if !ok || key.Size != 8 {
		t.Errorf("key type %v, want a 64-bit integer", spec.Key)
	}
	value, ok := btf.UnderlyingType(spec.Value).(*btf.Struct)
	if !ok {
		t.Fatalf("value type %v, want a struct", spec.Value)
	}
	want := []struct {
		name         string
		offset, size uint32
	}{{"trace_id", 0, 16}, {"span_id", 16, 8}}
	if len(value.Members) != len(want) {
		t.Fatalf("value %s has members %v, want trace_id and span_id", value.Name, value.Members)
	}
	for i, w := range want {
		m := value.Members[i]
		size, err := btf.Sizeof(m.Type)
		if err != nil {
			t.Fatal(err)
		}
		if m.Name != w.name || m.Offset.Bytes() != w.offset || uint32(size) != w.size {
			t.Errorf("value member %d: %s at %d, %d bytes; want %s at %d, %d bytes", i, m.Name, m.Offset.Bytes(), size, w.name, w.offset, w.size)
		}
	}
}

// TestSpanMapShareNeedsBPFFS: sharing the span map on a directory that is
// not a BPF filesystem fails before the tracer loads, naming the fix (the
// tracer itself would only log a warning and profile without span ids).
func TestSpanMapShareNeedsBPFFS(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct{ root, want string }{
		{dir, "is not a BPF filesystem"},
		{dir + "/missing", "mount -t bpf bpf " + dir + "/missing"},
	} {
		_, err := prepareSpanMapShare(tt.root)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "--obi-process-ctx") {
			t.Errorf("prepareSpanMapShare(%s) = %v, want an error naming --obi-process-ctx and %q", tt.root, err, tt.want)
		}
	}
}
