package confine

import (
	"fmt"
	"strings"
)

// Capability is a Linux capability number (linux/capability.h).
type Capability int

// The capabilities the rules talk about.
const (
	CapDACOverride       Capability = 1
	CapDACReadSearch     Capability = 2
	CapSetPCap           Capability = 8
	CapSysPtrace         Capability = 19
	CapSysAdmin          Capability = 21
	CapSyslog            Capability = 34
	CapPerfmon           Capability = 38
	CapBPF               Capability = 39
	CapCheckpointRestore Capability = 40
)

var capabilityNames = map[Capability]string{
	CapDACOverride:       "CAP_DAC_OVERRIDE",
	CapDACReadSearch:     "CAP_DAC_READ_SEARCH",
	CapSetPCap:           "CAP_SETPCAP",
	CapSysPtrace:         "CAP_SYS_PTRACE",
	CapSysAdmin:          "CAP_SYS_ADMIN",
	CapSyslog:            "CAP_SYSLOG",
	CapPerfmon:           "CAP_PERFMON",
	CapBPF:               "CAP_BPF",
	CapCheckpointRestore: "CAP_CHECKPOINT_RESTORE",
}

func (c Capability) String() string {
	if n, ok := capabilityNames[c]; ok {
		return n
	}
	return fmt.Sprintf("CAP_%d", int(c))
}

// CapSet is a set of capabilities as a bit mask, the form of
// /proc/PID/status.
type CapSet uint64

// Has reports whether c is in the set.
func (s CapSet) Has(c Capability) bool { return s&(1<<c) != 0 }

// Of returns the set holding caps.
func Of(caps ...Capability) CapSet {
	var s CapSet
	for _, c := range caps {
		s |= 1 << c
	}
	return s
}

func (s CapSet) String() string {
	var names []string
	for c := Capability(0); c < 64; c++ {
		if s.Has(c) {
			names = append(names, c.String())
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ",")
}

// Kept is a capability a role keeps once started, and why.
type Kept struct {
	Cap Capability
	Why string
}

// SamplerCapabilities is what the sampler's steady state needs (the
// tracer's start-up needs more: see sampler.missingCapabilities). The
// rest is dropped from all five sets. The e2e tests run the sampler with
// exactly this set after start-up.
var SamplerCapabilities = []Kept{
	{CapBPF, "create and update the tracer's eBPF maps for new executables (kernels before 6.4 check it on every bpf call)"},
	{CapSysPtrace, "read interpreter memory, environments and /proc/PID/root of other processes"},
	{CapCheckpointRestore, "open executables through /proc/PID/map_files (CAP_SYS_ADMIN on kernels before 5.9, which lack this one)"},
	{CapDACReadSearch, "open executables and /proc files of other users"},
	{CapSyslog, "reread kernel symbol addresses in /proc/kallsyms when a module loads"},
}

// Capabilities returns the set role keeps once started: the sampler
// drops the rest; the encoder is started with none (systemd, the pod) and
// the end-to-end tests check that it holds none. lastCap is the
// kernel's highest capability (/proc/sys/kernel/cap_last_cap): a kernel
// that does not know CAP_CHECKPOINT_RESTORE gates /proc/PID/map_files on
// CAP_SYS_ADMIN, which the sampler then keeps.
func Capabilities(role Role, lastCap Capability) CapSet {
	if role != Sampler {
		return 0
	}
	var s CapSet
	for _, k := range SamplerCapabilities {
		s |= Of(k.Cap)
	}
	if lastCap < CapCheckpointRestore {
		s |= Of(CapSysAdmin)
	}
	return s
}
