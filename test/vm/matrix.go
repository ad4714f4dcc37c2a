package vm

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Target is one kernel of the test matrix: a Debian 12 kernel package
// that apt serves here, fetched into the kernel cache by ./kernelcache
// (make tools) and booted in qemu by the kernel test.
type Target struct {
	// Name is the target's name in the cache (a symbolic link to the
	// package's directory), in TANDEM_VM_KERNELS and in subtest names.
	Name string
	// Arch is the guest's GOARCH: amd64 or arm64.
	Arch string
	// Meta is the apt metapackage that depends on the newest kernel of
	// the series (linux-image-amd64 -> linux-image-6.1.0-57-amd64).
	Meta string
	// Default: part of make test; the others run in make test-kernels.
	Default bool
	// Adds says what this kernel adds to the matrix (docs/kernels.md).
	Adds string
}

// Matrix is every kernel the kernel test knows, in the order it runs them.
var Matrix = []Target{
	{Name: "6.1", Arch: "amd64", Meta: "linux-image-amd64", Default: true,
		Adds: "Debian 12's default kernel"},
	{Name: "6.12", Arch: "amd64", Meta: "linux-image-6.12-amd64", Default: true,
		Adds: "the 6.12 series Debian 12 also ships (bookworm-security)"},
	{Name: "arm64-6.1", Arch: "arm64", Meta: "linux-image-arm64", Default: true,
		Adds: "the other CPU: the arm64 binaries and tracer programs"},
	{Name: "6.12-cloud", Arch: "amd64", Meta: "linux-image-6.12-cloud-amd64",
		Adds: "the cloud flavour: a smaller config, virtio built in"},
	{Name: "6.12-rt", Arch: "amd64", Meta: "linux-image-6.12-rt-amd64",
		Adds: "PREEMPT_RT: preemptible scheduling under the off-CPU probe"},
}

// Busybox is the cache name of busybox-static for arch: the guest's shell
// and tools come from Debian's package for the guest's architecture.
func Busybox(arch string) string { return "busybox-" + arch }

// BusyboxPackage is the apt package the guest's busybox comes from.
const BusyboxPackage = "busybox-static"

// CacheEnv names the environment variable that moves the kernel cache.
const CacheEnv = "TANDEM_KERNEL_CACHE"

// DefaultCache is where make tools keeps the kernels: outside any
// repository, shared by every worktree, keyed by package version.
const DefaultCache = "/var/cache/tandem/kernels"

// CacheDir returns the kernel cache's directory.
func CacheDir() string {
	if d := os.Getenv(CacheEnv); d != "" {
		return d
	}
	return DefaultCache
}

// ErrNotCached means a target is not in the kernel cache.
var ErrNotCached = errors.New("not in the kernel cache")

// CachedKernel returns target's kernel from the cache at dir.
func CachedKernel(dir string, target Target) (Kernel, error) {
	root, err := cached(dir, target.Name)
	if err != nil {
		return Kernel{}, err
	}
	k, err := FindKernel(root, "*")
	if err != nil {
		return Kernel{}, fmt.Errorf("kernel %s in %s: %w", target.Name, root, err)
	}
	k.Arch = target.Arch
	return k, nil
}

// CachedBusybox returns the static busybox for arch from the cache at dir.
func CachedBusybox(dir, arch string) (string, error) {
	root, err := cached(dir, Busybox(arch))
	if err != nil {
		return "", err
	}
	p := filepath.Join(root, "bin", "busybox")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s: %w", Busybox(arch), err)
	}
	return p, nil
}

// cached resolves the cache's link name to its package directory, which
// must be complete (CompleteMarker written after extraction).
func cached(dir, name string) (string, error) {
	root, err := filepath.EvalSymlinks(filepath.Join(dir, name))
	if err == nil {
		_, err = os.Stat(filepath.Join(root, CompleteMarker))
	}
	if err != nil {
		return "", fmt.Errorf("%s %w %s (make tools fetches it): %w", name, ErrNotCached, dir, err)
	}
	return root, nil
}

// CompleteMarker is written into a package's directory once it is fully
// extracted (and, for a kernel, its modules indexed).
const CompleteMarker = ".complete"

// SelectTargets returns the targets named in spec: a comma-separated list
// of names, "all" for the whole matrix, or "" for the Default ones.
func SelectTargets(spec string) ([]Target, error) {
	spec = strings.TrimSpace(spec)
	var out []Target
	switch spec {
	case "":
		for _, t := range Matrix {
			if t.Default {
				out = append(out, t)
			}
		}
		return out, nil
	case "all":
		return append(out, Matrix...), nil
	}
	for _, name := range strings.Split(spec, ",") {
		name = strings.TrimSpace(name)
		found := false
		for _, t := range Matrix {
			if t.Name == name {
				out = append(out, t)
				found = true
			}
		}
		if !found {
			var names []string
			for _, t := range Matrix {
				names = append(names, t.Name)
			}
			return nil, fmt.Errorf("no kernel %q in the matrix (%s, or all)", name, strings.Join(names, ", "))
		}
	}
	return out, nil
}
