package cluster

import (
	"strings"
	"testing"
)

func TestCompare(t *testing.T) {
	before := HostState{
		Sysctls:  map[string]string{"kernel/panic": "0", "net/ipv4/ip_forward": "0"},
		Mounts:   []string{"/", "/proc"},
		Links:    []string{"eth0", "lo"},
		Nftables: "table ip filter {\n}\n",
		Cgroups:  []string{"/sys/fs/cgroup/memory/user"},
	}
	same := before
	if d := compare(before, same); len(d) != 0 {
		t.Errorf("the same state differs: %q", d)
	}
	after := HostState{
		Sysctls:  map[string]string{"kernel/panic": "10", "net/ipv4/ip_forward": "0"},
		Mounts:   []string{"/", "/proc", "/tmp/x/kubelet/pods/a"},
		Links:    []string{"eth0", "lo", "veth1234"},
		Nftables: "table ip filter {\n}\ntable ip kube-proxy {\n}\n",
		Cgroups:  []string{"/sys/fs/cgroup/memory/tandem-cluster", "/sys/fs/cgroup/memory/user"},
	}
	got := strings.Join(compare(before, after), "\n")
	for _, want := range []string{
		`sysctl kernel.panic is "10", was "0"`,
		"mount /tmp/x/kubelet/pods/a left behind",
		"network link veth1234 left behind",
		"cgroup /sys/fs/cgroup/memory/tandem-cluster left behind",
		"+ table ip kube-proxy {",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("differences lack %q:\n%s", want, got)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig("/tmp/c", "/bin").Validate(); err != nil {
		t.Errorf("default config: %v", err)
	}
	bad := DefaultConfig("", "")
	bad.Bridge, bad.PodCIDR = "a-much-too-long-name", "10.0.0.0/30"
	err := bad.Validate()
	for _, want := range []string{"no Dir", "no BinDir", "Bridge is longer", "PodCIDR"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to say %q", err, want)
		}
	}
	if got := firstHost("10.213.0.0/24"); got != "10.213.0.1" {
		t.Errorf("firstHost = %s", got)
	}
}
