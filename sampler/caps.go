package sampler

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
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

// missingCapabilities returns what the tracer needs and have lacks.
//
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
func missingCapabilities(have capSet, needs capNeeds) []MissingCapability {
	var out []MissingCapability
	need := func(reason string, anyOf ...int) {
		for _, c := range anyOf {
			if have.has(c) {
				return
			}
		}
		names := make([]string, len(anyOf))
		for i, c := range anyOf {
			names[i] = capNames[c]
		}
		out = append(out, MissingCapability{Names: names, Reason: reason})
	}
	need("load eBPF programs and maps", capBPF)
	need("open perf events on every CPU and attach tracing programs", capPerfmon)
	need("read the memory, environment and root of other processes", capSysPtrace)
	need("open executables through /proc/PID/map_files", capCheckpointRestore, capSysAdmin)
	if needs.kptrRestrict == 1 || (needs.kptrRestrict == 0 && needs.perfParanoid > 1) {
		need(fmt.Sprintf("read kernel symbol addresses in /proc/kallsyms (kernel.kptr_restrict=%d, kernel.perf_event_paranoid=%d)",
			needs.kptrRestrict, needs.perfParanoid), capSyslog)
	}
	if needs.mountTracefs {
		need("mount tracefs at /sys/kernel/tracing (or mount it before starting)", capSysAdmin)
	}
	return out
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
