package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

// stopOrder is the order Down stops the components in: the kubelet first
// (it would restart what CRI removes), containerd after its sandboxes
// are gone, the namespace holder last of those in the namespace.
var stopOrder = []string{"kubelet", "kube-proxy", "containerd", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd", "namespace"}

// stop ends one process: SIGTERM, then SIGKILL after grace.
func (c *Cluster) stop(name string, grace time.Duration) error {
	p := c.proc(name)
	if p == nil || !c.alive(name) {
		return nil
	}
	_ = syscall.Kill(p.PID, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for c.alive(name) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(p.PID, syscall.SIGKILL)
			if time.Now().After(deadline.Add(5 * time.Second)) {
				return fmt.Errorf("%s (pid %d) survived SIGKILL", name, p.PID)
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// Down stops the cluster and restores the host, then checks that the
// host is as Up found it: every difference is in the error.
func (c *Cluster) Down() error {
	start := time.Now()
	var errs []error
	if err := c.stop("kubelet", 20*time.Second); err != nil {
		errs = append(errs, err)
	}
	if c.alive("containerd") {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		if err := c.removeSandboxes(ctx); err != nil {
			errs = append(errs, fmt.Errorf("remove the pods' sandboxes: %w", err))
		}
		cancel()
	}
	for _, name := range stopOrder[1:] {
		if err := c.stop(name, 15*time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	// Shims outlive containerd: any left means a container was not
	// removed.
	for _, p := range processesMentioning(c.Config.Dir) {
		errs = append(errs, fmt.Errorf("process left behind (killed now): %s", p))
		var pid int
		fmt.Sscan(p, &pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	errs = append(errs, c.restoreHost()...)
	after, err := snapshotHost()
	if err != nil {
		errs = append(errs, err)
	} else {
		for _, d := range compare(c.Before, after) {
			errs = append(errs, errors.New(d))
		}
	}
	if err := os.Remove(c.path("state.json")); err != nil && !os.IsNotExist(err) {
		errs = append(errs, err)
	}
	c.logf("down in %v", time.Since(start).Round(10*time.Millisecond))
	if len(errs) > 0 {
		return fmt.Errorf("cluster down: the host is not as it was: %w", errors.Join(errs...))
	}
	return nil
}

// restoreHost removes the bridge, the nftables tables kube-proxy made,
// the cgroups under the kubelet's root, what the runc shims left in
// /run/containerd, and any mount left under Dir. What it has to undo
// beyond the bridge and cgroup root Up made is reported.
func (c *Cluster) restoreHost() []error {
	var errs []error
	if err := exec.Command("ip", "link", "show", c.Config.Bridge).Run(); err == nil {
		if err := command(context.Background(), "ip", "link", "delete", c.Config.Bridge); err != nil {
			errs = append(errs, err)
		}
	}
	for _, family := range []string{"ip", "ip6"} {
		if exec.Command("nft", "list", "table", family, "kube-proxy").Run() == nil {
			if err := command(context.Background(), "nft", "delete", "table", family, "kube-proxy"); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if c.CgroupRoot != "" {
		for _, h := range cgroupHierarchies() {
			if err := removeCgroupTree(filepath.Join(h, c.CgroupRoot)); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if !c.RunContainerd {
		if err := os.RemoveAll("/run/containerd"); err != nil {
			errs = append(errs, err)
		}
	}
	// Mounts under Dir were made in the cluster's namespace; one in the
	// host's would be a leak (reported by the comparison, undone here).
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	mounts := sortedLines(mi, func(l string) string {
		if f := strings.Fields(l); len(f) > 4 && strings.HasPrefix(f[4], c.Config.Dir+"/") {
			return f[4]
		}
		return ""
	})
	for i := len(mounts) - 1; i >= 0; i-- {
		_ = syscall.Unmount(mounts[i], syscall.MNT_DETACH)
	}
	for key, v := range c.Before.Sysctls {
		if now, _ := readSysctl(key); now != v {
			errs = append(errs, fmt.Errorf("sysctl %s was changed to %s (restored to %s)", key, now, v))
			_ = os.WriteFile(filepath.Join("/proc/sys", key), []byte(v), 0o644)
		}
	}
	return errs
}

// removeCgroupTree removes a cgroup directory and those below it, deepest
// first (a cgroup directory is removed with rmdir, not its files).
func removeCgroupTree(root string) error {
	var dirs []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("walk cgroup %s: %w", root, err)
	}
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	var errs []error
	for _, d := range dirs {
		if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}
