package sampler

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"
	"go.opentelemetry.io/ebpf-profiler/support"
	"golang.org/x/sys/unix"
)

// spanMapName is the tracer's span map shared with OBI (the profiler's
// eBPF source, interpreter_dispatcher.ebpf.c: an LRU hash from
// bpf_get_current_pid_tgid(), pid<<32|tid, to the 16-byte trace id and
// 8-byte span id of the span the thread runs).
const spanMapName = "traces_ctx_v1"

// SpanMapPath is where the tracer shares its span map under a BPF
// filesystem root: the path OBI (or a test standing in for it) pins to or
// opens.
func SpanMapPath(bpffsRoot string) string {
	return filepath.Join(bpffsRoot, "otel", spanMapName)
}

// spanMapShare is what the sampler knows about the shared span map before
// the tracer loads.
type spanMapShare struct {
	path    string
	existed bool // pinned by another program (OBI) before the tracer loaded
}

// prepareSpanMapShare checks that root is a mounted BPF filesystem, which
// the tracer needs to share the map (it would otherwise only log a
// warning and profile without any span ids), and whether the map is
// already pinned.
func prepareSpanMapShare(root string) (spanMapShare, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil {
		return spanMapShare{}, fmt.Errorf("--obi-process-ctx: BPF filesystem root %s: %w (mount one: mount -t bpf bpf %s, or mount the host's /sys/fs/bpf into the container)", root, err, root)
	}
	if uint32(st.Type) != unix.BPF_FS_MAGIC {
		return spanMapShare{}, fmt.Errorf("--obi-process-ctx: %s is not a BPF filesystem (type %#x): give --bpffs-root the bpf mount OBI pins its maps in (usually /sys/fs/bpf), or mount one there (mount -t bpf bpf %s)", root, uint32(st.Type), root)
	}
	s := spanMapShare{path: SpanMapPath(root)}
	switch _, err := os.Stat(s.path); {
	case err == nil:
		s.existed = true
	case !errors.Is(err, fs.ErrNotExist):
		return s, fmt.Errorf("--obi-process-ctx: look for the shared span map: %w", err)
	}
	return s, nil
}

// checkPinned reports an error unless the span map is pinned now: the
// tracer logs, and goes on, when it cannot pin it.
func (s spanMapShare) checkPinned() error {
	if _, err := os.Stat(s.path); err != nil {
		return fmt.Errorf("--obi-process-ctx: the tracer did not share its span map at %s (%w): is %s writable by the sampler?", s.path, err, filepath.Dir(filepath.Dir(s.path)))
	}
	return nil
}

// SpanMapSpec returns the tracer's declaration of the span map, read from
// its embedded eBPF collection: what a program sharing the map (OBI) must
// create, or find pinned, for the tracer's programs to accept it.
func SpanMapSpec() (*ebpf.MapSpec, error) {
	coll, err := support.LoadCollectionSpec()
	if err != nil {
		return nil, fmt.Errorf("load the tracer's eBPF collection: %w", err)
	}
	spec, ok := coll.Maps[spanMapName]
	if !ok {
		return nil, fmt.Errorf("the tracer's eBPF collection declares no %s map", spanMapName)
	}
	return spec.Copy(), nil
}
