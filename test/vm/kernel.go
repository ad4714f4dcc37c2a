package vm

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Kernel is an installed kernel image and its modules.
type Kernel struct {
	Image   string // /boot/vmlinuz-RELEASE
	Release string // e.g. 6.1.0-57-amd64
	Modules string // /lib/modules/RELEASE
	Arch    string // the guest's GOARCH; "" is amd64
}

// ErrNoKernel means no kernel matching the pattern is installed.
var ErrNoKernel = errors.New("no kernel installed")

// FindKernel returns the newest installed kernel whose release matches
// pattern (a filepath.Match pattern such as "6.1.*-amd64"), looking in
// /boot and /lib/modules under root ("/" normally).
func FindKernel(root, pattern string) (Kernel, error) {
	images, err := filepath.Glob(filepath.Join(root, "boot", "vmlinuz-"+pattern))
	if err != nil {
		return Kernel{}, fmt.Errorf("find kernel %s: %w", pattern, err)
	}
	var found []Kernel
	for _, img := range images {
		rel := strings.TrimPrefix(filepath.Base(img), "vmlinuz-")
		mods := filepath.Join(root, "lib", "modules", rel)
		if _, err := os.Stat(filepath.Join(mods, "modules.dep")); err != nil {
			continue
		}
		found = append(found, Kernel{Image: img, Release: rel, Modules: mods})
	}
	if len(found) == 0 {
		return Kernel{}, fmt.Errorf("%w: no %s/boot/vmlinuz-%s with its modules in /lib/modules (apt-get install linux-image-amd64)", ErrNoKernel, strings.TrimSuffix(root, "/"), pattern)
	}
	sort.Slice(found, func(i, j int) bool { return releaseLess(found[i].Release, found[j].Release) })
	return found[len(found)-1], nil
}

// releaseLess orders releases such as 6.1.0-9-amd64 < 6.1.0-57-amd64 by
// their numeric fields.
func releaseLess(a, b string) bool {
	fa, fb := numericFields(a), numericFields(b)
	for i := 0; i < len(fa) && i < len(fb); i++ {
		if fa[i] != fb[i] {
			return fa[i] < fb[i]
		}
	}
	return len(fa) < len(fb)
}

func numericFields(s string) []int {
	var out []int
	n, in := 0, false
	for _, r := range s {
		if r >= '0' && r <= '9' {
			n, in = n*10+int(r-'0'), true
			continue
		}
		if in {
			out = append(out, n)
		}
		n, in = 0, false
	}
	if in {
		out = append(out, n)
	}
	return out
}

// ModuleFiles returns the files of the named modules (names as modprobe
// takes them, e.g. "virtio_blk") and of every module they depend on, in an
// order that loads each after its dependencies, as paths relative to
// k.Modules. Built-in modules (modules.builtin) are left out.
func (k Kernel) ModuleFiles(names ...string) ([]string, error) {
	deps, err := readModulesDep(filepath.Join(k.Modules, "modules.dep"))
	if err != nil {
		return nil, err
	}
	builtin := map[string]bool{}
	if b, err := os.ReadFile(filepath.Join(k.Modules, "modules.builtin")); err == nil {
		for _, l := range strings.Fields(string(b)) {
			builtin[moduleName(l)] = true
		}
	}
	byName := map[string]string{}
	for file := range deps {
		byName[moduleName(file)] = file
	}
	var order []string
	seen := map[string]bool{}
	var visit func(file string)
	visit = func(file string) {
		if seen[file] {
			return
		}
		seen[file] = true
		for _, d := range deps[file] {
			visit(d)
		}
		order = append(order, file)
	}
	for _, n := range names {
		n = strings.ReplaceAll(n, "-", "_")
		file, ok := byName[n]
		switch {
		case ok:
			visit(file)
		case builtin[n]:
		default:
			return nil, fmt.Errorf("module %s is neither in %s/modules.dep nor built in", n, k.Modules)
		}
	}
	return order, nil
}

// moduleName turns kernel/drivers/block/virtio_blk.ko into virtio_blk.
func moduleName(file string) string {
	base := filepath.Base(file)
	if i := strings.Index(base, ".ko"); i >= 0 {
		base = base[:i]
	}
	return strings.ReplaceAll(base, "-", "_")
}

// readModulesDep parses modules.dep: "file: dep dep ...".
func readModulesDep(path string) (map[string][]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read the module dependencies: %w", err)
	}
	defer f.Close()
	deps := map[string][]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		file, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			return nil, fmt.Errorf("%s:%d: no ':' (not a modules.dep line)", path, line)
		}
		deps[strings.TrimSpace(file)] = strings.Fields(rest)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return deps, nil
}
