package cluster

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// coveredSysctls are the files the kubelet (vm.*, kernel.*), the bridge
// plugin (ip_forward) and kube-proxy (conntrack, route_localnet) may
// write: in the cluster's mount namespace each is covered by a file of
// the cluster's, so they write that file and the host keeps its value.
var coveredSysctls = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
	"net/ipv4/ip_forward", "net/ipv4/conf/all/route_localnet",
	"net/netfilter/nf_conntrack_max", "net/netfilter/nf_conntrack_tcp_timeout_established",
	"net/netfilter/nf_conntrack_tcp_timeout_close_wait",
}

// HostState is what Down compares: the parts of the host the cluster
// touches.
type HostState struct {
	Sysctls  map[string]string
	Mounts   []string // mount points
	Links    []string // network link names
	Netns    []string // /run/netns entries
	Nftables string   // nft list ruleset
	Iptables string   // iptables-save of the legacy backend, if any
	Cgroups  []string // top-level directories of every cgroup hierarchy
}

func readSysctl(key string) (string, bool) {
	b, err := os.ReadFile(filepath.Join("/proc/sys", key))
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(string(b)), true
}

func sortedLines(b []byte, field func(string) string) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if f := field(sc.Text()); f != "" {
			out = append(out, f)
		}
	}
	sort.Strings(out)
	return out
}

// cgroupHierarchies are the mounted cgroup hierarchies' directories.
func cgroupHierarchies() []string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	return sortedLines(b, func(line string) string {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			return ""
		}
		if f := strings.Fields(post); len(f) > 0 && (f[0] == "cgroup" || f[0] == "cgroup2") {
			if p := strings.Fields(pre); len(p) > 4 {
				return p[4]
			}
		}
		return ""
	})
}

func snapshotHost() (HostState, error) {
	var h HostState
	h.Sysctls = map[string]string{}
	for _, k := range coveredSysctls {
		if v, ok := readSysctl(k); ok {
			h.Sysctls[k] = v
		}
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return h, err
	}
	h.Mounts = sortedLines(mi, func(l string) string {
		if f := strings.Fields(l); len(f) > 4 {
			return f[4]
		}
		return ""
	})
	links, err := exec.Command("ip", "-o", "link", "show").Output()
	if err != nil {
		return h, fmt.Errorf("ip link show: %w", err)
	}
	h.Links = sortedLines(links, func(l string) string {
		if f := strings.Fields(l); len(f) > 1 {
			name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
			return name
		}
		return ""
	})
	if ents, err := os.ReadDir("/run/netns"); err == nil {
		for _, e := range ents {
			h.Netns = append(h.Netns, e.Name())
		}
	}
	nft, err := exec.Command("nft", "list", "ruleset").Output()
	if err != nil {
		return h, fmt.Errorf("nft list ruleset (make tools installs nftables): %w", err)
	}
	h.Nftables = string(nft)
	if _, err := exec.LookPath("iptables-legacy-save"); err == nil {
		out, _ := exec.Command("iptables-legacy-save").Output()
		h.Iptables = stripComments(string(out))
	}
	for _, root := range cgroupHierarchies() {
		ents, err := os.ReadDir(root)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if e.IsDir() {
				h.Cgroups = append(h.Cgroups, filepath.Join(root, e.Name()))
			}
		}
	}
	sort.Strings(h.Cgroups)
	return h, nil
}

// stripComments drops iptables-save's dated comment lines and counters.
func stripComments(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "#") {
			continue
		}
		if strings.HasPrefix(l, ":") {
			if i := strings.LastIndex(l, " ["); i > 0 {
				l = l[:i]
			}
		}
		b.WriteString(l + "\n")
	}
	return b.String()
}

// diffList returns what after has that before has not, and the reverse.
func diffList(before, after []string) (added, removed []string) {
	in := map[string]int{}
	for _, s := range before {
		in[s]++
	}
	for _, s := range after {
		if in[s] > 0 {
			in[s]--
		} else {
			added = append(added, s)
		}
	}
	for s, n := range in {
		for ; n > 0; n-- {
			removed = append(removed, s)
		}
	}
	sort.Strings(removed)
	return added, removed
}

// compare lists every difference between before and after.
func compare(before, after HostState) []string {
	var out []string
	for k, v := range before.Sysctls {
		if after.Sysctls[k] != v {
			out = append(out, fmt.Sprintf("sysctl %s is %q, was %q", strings.ReplaceAll(k, "/", "."), after.Sysctls[k], v))
		}
	}
	for _, l := range []struct {
		what          string
		before, after []string
	}{
		{"mount", before.Mounts, after.Mounts},
		{"network link", before.Links, after.Links},
		{"network namespace", before.Netns, after.Netns},
		{"cgroup", before.Cgroups, after.Cgroups},
	} {
		added, removed := diffList(l.before, l.after)
		for _, a := range added {
			out = append(out, fmt.Sprintf("%s %s left behind", l.what, a))
		}
		for _, r := range removed {
			out = append(out, fmt.Sprintf("%s %s removed", l.what, r))
		}
	}
	if before.Nftables != after.Nftables {
		out = append(out, "nftables ruleset changed:\n"+lineDiff(before.Nftables, after.Nftables))
	}
	if before.Iptables != after.Iptables {
		out = append(out, "iptables (legacy) rules changed:\n"+lineDiff(before.Iptables, after.Iptables))
	}
	sort.Strings(out)
	return out
}

func lineDiff(a, b string) string {
	added, removed := diffList(strings.Split(a, "\n"), strings.Split(b, "\n"))
	var s strings.Builder
	for _, l := range removed {
		s.WriteString("- " + l + "\n")
	}
	for _, l := range added {
		s.WriteString("+ " + l + "\n")
	}
	return s.String()
}

// procStart is a process's start time (clock ticks after boot), which
// tells a process from a later one with the same pid.
func procStart(pid int) (uint64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 || f[0] == "Z" {
		return 0, false // gone, or a zombie its parent has not reaped
	}
	v, err := strconv.ParseUint(f[19], 10, 64)
	return v, err == nil
}

// processesMentioning lists the processes whose command line names dir
// (every process of the cluster does: its config, socket or data is
// there), but this one.
func processesMentioning(dir string) []string {
	var out []string
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || !bytes.Contains(cmdline, []byte(dir)) {
			continue
		}
		if _, alive := procStart(pid); !alive {
			continue
		}
		out = append(out, fmt.Sprintf("%d %s", pid, strings.Join(strings.Fields(strings.ReplaceAll(string(cmdline), "\x00", " ")), " ")))
	}
	return out
}
