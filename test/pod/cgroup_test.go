package pod

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// mountCgroupControllers mounts the cgroup v1 hierarchies whose directory
// is in /sys/fs/cgroup but holds no mount (on a hybrid host, a half-done
// setup can leave net_cls,net_prio, perf_event or hugetlb so): podman's
// cgroupfs manager creates the pod's cgroup in every controller directory
// it finds, and fails on one that is a bare directory of the read-only
// tmpfs. Such a directory gets the hierarchy of its controllers (the one
// already in the kernel, if an earlier mount left it), and is unmounted
// again when the test ends.
func mountCgroupControllers(t *testing.T) {
	t.Helper()
	const root = "/sys/fs/cgroup"
	enabled := map[string]bool{}
	f, err := os.Open("/proc/cgroups")
	if err != nil {
		return // no cgroup v1 at all
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 4 && fields[3] == "1" {
			enabled[fields[0]] = true
		}
	}
	f.Close()
	var rootStat syscall.Stat_t
	if err := syscall.Stat(root, &rootStat); err != nil {
		return
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || e.Type()&os.ModeSymlink != 0 {
			continue
		}
		dir := filepath.Join(root, e.Name())
		var st syscall.Stat_t
		if err := syscall.Stat(dir, &st); err != nil || st.Dev != rootStat.Dev {
			continue // a mount of its own
		}
		all := true
		for _, c := range strings.Split(e.Name(), ",") {
			all = all && enabled[c]
		}
		if !all || enabled[e.Name()] && (e.Name() == "cpu" || e.Name() == "cpuacct") {
			continue
		}
		// cpu,cpuacct: both are mounted on their own here, a combined
		// hierarchy cannot be; podman looks for each by its own name.
		if strings.Contains(e.Name(), "cpu") {
			continue
		}
		if err := unix.Mount("cgroup", dir, "cgroup", 0, e.Name()); err != nil {
			t.Fatalf("%s is a bare directory where podman expects the %s hierarchy, and mounting it failed: %v", dir, e.Name(), err)
		}
		t.Logf("mounted the cgroup v1 hierarchy %s at %s (a bare directory podman would fail on)", e.Name(), dir)
		t.Cleanup(func() {
			if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
				t.Errorf("unmount %s: %v", dir, err)
			}
		})
	}
}
