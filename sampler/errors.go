package sampler

import (
	"errors"
	"strings"
)

// Sentinel errors. Run wraps them with the details; test with errors.Is.
var (
	// ErrNotSupported: the sampler only runs on Linux with eBPF.
	ErrNotSupported = errors.New("sampler not supported on this platform")
	// ErrMissingCapabilities: the process lacks capabilities the tracer
	// needs (see CapabilityError for the list).
	ErrMissingCapabilities = errors.New("missing capabilities")
	// ErrMemlock: RLIMIT_MEMLOCK cannot be raised and the binary was built
	// without Tandem's memlock shim.
	ErrMemlock = errors.New("cannot raise RLIMIT_MEMLOCK")
	// ErrNoKprobes: off-CPU profiling was requested on a kernel without
	// kprobes.
	ErrNoKprobes = errors.New("kprobes unavailable")
	// ErrKernelTooOld: the kernel is older than 5.10.
	ErrKernelTooOld = errors.New("kernel too old")
	// ErrLockedDown: the kernel is locked down for confidentiality, which
	// forbids what the tracer does.
	ErrLockedDown = errors.New("kernel locked down")
	// ErrNoBPF: the bpf syscall does not exist.
	ErrNoBPF = errors.New("bpf syscall unavailable")
	// ErrTracerFailed: the tracer stopped on an unrecoverable error.
	ErrTracerFailed = errors.New("tracer stopped on an unrecoverable error")
)

// CapabilityError names every missing capability and why it is needed.
type CapabilityError struct {
	Missing []MissingCapability
}

// MissingCapability is one missing capability (or a set of which any one
// would do) and what the tracer needs it for.
type MissingCapability struct {
	Names  []string // e.g. {"CAP_CHECKPOINT_RESTORE", "CAP_SYS_ADMIN"}: any one suffices
	Reason string
}

func (e *CapabilityError) Error() string {
	var b strings.Builder
	b.WriteString("missing capabilities:")
	for i, m := range e.Missing {
		if i > 0 {
			b.WriteString(";")
		}
		b.WriteString(" ")
		b.WriteString(strings.Join(m.Names, " or "))
		b.WriteString(" (")
		b.WriteString(m.Reason)
		b.WriteString(")")
	}
	b.WriteString("; grant them to the sampler (e.g. systemd AmbientCapabilities=, Kubernetes securityContext.capabilities.add) or run it as root with full capabilities")
	return b.String()
}

// Unwrap makes errors.Is(err, ErrMissingCapabilities) true.
func (e *CapabilityError) Unwrap() error { return ErrMissingCapabilities }
