package sampler

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// capability numbers from linux/capability.h.
const (
	capDACOverride       = 1
	capDACReadSearch     = 2
	capSysPtrace         = 19
	capSysAdmin          = 21
	capSysResource       = 24
	capSyslog            = 34
	capPerfmon           = 38
	capBPF               = 39
	capCheckpointRestore = 40
)

var capNames = map[int]string{
	capDACOverride:       "CAP_DAC_OVERRIDE",
	capDACReadSearch:     "CAP_DAC_READ_SEARCH",
	capSysPtrace:         "CAP_SYS_PTRACE",
	capSysAdmin:          "CAP_SYS_ADMIN",
	capSysResource:       "CAP_SYS_RESOURCE",
	capSyslog:            "CAP_SYSLOG",
	capPerfmon:           "CAP_PERFMON",
	capBPF:               "CAP_BPF",
	capCheckpointRestore: "CAP_CHECKPOINT_RESTORE",
}

// capSet is a capability bit mask as in /proc/PID/status.
type capSet uint64

func (c capSet) has(capability int) bool { return c&(1<<capability) != 0 }

// parseCapEff returns the CapEff mask of a /proc/PID/status file.
func parseCapEff(status []byte) (capSet, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		line := sc.Bytes()
		rest, ok := bytes.CutPrefix(line, []byte("CapEff:"))
		if !ok {
			continue
		}
		v, err := strconv.ParseUint(string(bytes.TrimSpace(rest)), 16, 64)
		if err != nil {
			return 0, fmt.Errorf("parse CapEff %q: %w", rest, err)
		}
		return capSet(v), nil
	}
	return 0, fmt.Errorf("no CapEff line in status")
}

// capNeeds describes the host facts that decide which capabilities the
// tracer needs.
type capNeeds struct {
	// kptrRestrict is /proc/sys/kernel/kptr_restrict and perfParanoid
	// /proc/sys/kernel/perf_event_paranoid. /proc/kallsyms shows addresses
	// to everyone only with kptr_restrict=0 and perf_event_paranoid <= 1,
	// to CAP_SYSLOG with kptr_restrict <= 1, and to nobody with 2.
	kptrRestrict int
	perfParanoid int
	// mountTracefs: tracefs is not mounted and the sampler must mount it.
	mountTracefs bool
}

// capRequirement is one thing the tracer does and the capabilities (any
// one of anyOf) it needs for it: the one table behind both the check at
// start and the --help text, so the two cannot disagree.
type capRequirement struct {
	anyOf  []int
	reason func(capNeeds) string
	// applies says whether the host needs it; nil: always. when says in
	// words when it applies, for the help text ("" for always).
	applies func(capNeeds) bool
	when    string
}

func fixedReason(r string) func(capNeeds) string { return func(capNeeds) string { return r } }

// What the profiler does and what it needs:
//   - load programs and maps, BTF: CAP_BPF;
//   - perf events on every CPU, tracing programs (probe reads),
//     tracepoints: CAP_PERFMON;
//   - read other processes' memory (interpreter unwinding, VDSO), environ,
//     /proc/PID/root: CAP_SYS_PTRACE;
//   - open executables through /proc/PID/map_files (FileIDs, ELF parsing
//     and the descriptors handed to the encoder): CAP_CHECKPOINT_RESTORE,
//     or CAP_SYS_ADMIN on kernels before 5.9;
//   - kernel symbol addresses in /proc/kallsyms (kernel frames, system
//     analysis): CAP_SYSLOG unless kptr_restrict=0 and
//     perf_event_paranoid <= 1;
//   - mounting tracefs when it is missing: CAP_SYS_ADMIN.
var capRequirements = []capRequirement{
	{anyOf: []int{capBPF}, reason: fixedReason("load eBPF programs and maps")},
	{anyOf: []int{capPerfmon}, reason: fixedReason("open perf events on every CPU and attach tracing programs")},
	{anyOf: []int{capSysPtrace}, reason: fixedReason("read the memory, environment and root of other processes")},
	{anyOf: []int{capCheckpointRestore, capSysAdmin}, reason: fixedReason("open executables through /proc/PID/map_files")},
	{
		anyOf: []int{capSyslog},
		reason: func(n capNeeds) string {
			return fmt.Sprintf("read kernel symbol addresses in /proc/kallsyms (kernel.kptr_restrict=%d, kernel.perf_event_paranoid=%d)",
				n.kptrRestrict, n.perfParanoid)
		},
		applies: func(n capNeeds) bool { return n.kptrRestrict == 1 || (n.kptrRestrict == 0 && n.perfParanoid > 1) },
		when:    "where kernel.kptr_restrict or kernel.perf_event_paranoid hide kernel addresses",
	},
	{
		anyOf:   []int{capSysAdmin},
		reason:  fixedReason("mount tracefs at /sys/kernel/tracing (or mount it before starting)"),
		applies: func(n capNeeds) bool { return n.mountTracefs },
		when:    "when tracefs is not mounted",
	},
}

// missingCapabilities returns what the tracer needs and have lacks.
func missingCapabilities(have capSet, needs capNeeds) []MissingCapability {
	var out []MissingCapability
	for _, r := range capRequirements {
		if r.applies != nil && !r.applies(needs) {
			continue
		}
		if slices.ContainsFunc(r.anyOf, have.has) {
			continue
		}
		out = append(out, MissingCapability{Names: capNamesOf(r.anyOf), Reason: r.reason(needs)})
	}
	return out
}

func capNamesOf(caps []int) []string {
	names := make([]string, len(caps))
	for i, c := range caps {
		names[i] = capNames[c]
	}
	return names
}

// RequiredCapabilities describes, for help texts, every capability the
// start-up check may ask for and when.
func RequiredCapabilities() string {
	var always, sometimes []string
	for _, r := range capRequirements {
		names := capNamesOf(r.anyOf)
		s := names[0]
		if len(names) > 1 {
			s += " (or " + strings.Join(names[1:], " or ") + ")"
		}
		if r.applies == nil {
			always = append(always, s)
			continue
		}
		sometimes = append(sometimes, s+" "+r.when)
	}
	return strings.Join(always, ", ") + "; also " + strings.Join(sometimes, ", and ")
}

// kallsymsVisibility reads the start of a /proc/kallsyms listing: whether
// it has any symbol line and whether any of them shows a non-zero address.
// The kernel prints zeros when it hides addresses from the reader.
func kallsymsVisibility(r io.Reader) (lines, addresses bool, err error) {
	sc := bufio.NewScanner(r)
	for n := 0; n < 64 && sc.Scan(); n++ {
		addr, _, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		lines = true
		if strings.Trim(addr, "0") != "" {
			return true, true, nil
		}
	}
	return lines, false, sc.Err()
}

// checkKallsyms fails, naming the cause and the fix, when the tracer would
// find no kernel symbol addresses: it cannot load without them, and its own
// message ("check capabilities") does not say which sandbox setting hides
// them.
func checkKallsyms(path string, needs capNeeds) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open %s: %w: the tracer needs kernel symbol addresses; a sandbox hides the file (systemd's ProtectKernelTunables=yes does: use ReadOnlyPaths=/proc/sys /sys instead)", path, err)
	}
	defer f.Close()
	lines, addresses, err := kallsymsVisibility(f)
	switch {
	case err != nil:
		return fmt.Errorf("read %s: %w", path, err)
	case !lines:
		return fmt.Errorf("%s is empty here: a sandbox hides it (systemd's ProtectKernelTunables=yes does: use ReadOnlyPaths=/proc/sys /sys instead), and the tracer needs kernel symbol addresses", path)
	case !addresses:
		return fmt.Errorf("%s shows only zero addresses to the sampler (kernel.kptr_restrict=%d, kernel.perf_event_paranoid=%d): give it CAP_SYSLOG and keep CAP_SYSLOG in its bounding set (systemd's ProtectKernelLogs=yes removes it)",
			path, needs.kptrRestrict, needs.perfParanoid)
	}
	return nil
}
