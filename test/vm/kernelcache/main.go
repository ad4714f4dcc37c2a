// Command kernelcache fetches the kernel test's kernels (vm.Matrix) and
// the guests' static busybox into the kernel cache (vm.CacheDir,
// /var/cache/tandem/kernels), without installing anything: each package
// is downloaded with apt-get download and unpacked with dpkg -x into a
// directory named by package, version and architecture, its modules
// indexed with depmod -b, and the target's name made a symbolic link to
// it. A kernel package's maintainer scripts (initramfs, bootloader) never
// run, and the host's /boot is untouched.
//
// The host's architecture is resolved against apt's lists every run (a
// new Debian kernel replaces the cached one; directories no name links to
// are removed). A foreign architecture (arm64 on an amd64 host) needs
// `dpkg --add-architecture` and an apt-get update; that is done only when
// one of its packages is missing from the cache (or with -refresh), and
// the architecture is removed again afterwards. `make tools` runs it.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/tandem-profiler/tandem/test/vm"
)

// entry is one package to cache under a name.
type entry struct {
	name, arch, pkg string
	kernel          bool // pkg is a metapackage whose first dependency is the kernel
}

func main() {
	refresh := flag.Bool("refresh", false, "resolve foreign-architecture packages against apt too (adds the architecture for the time of the run)")
	flag.Parse()
	if err := run(vm.CacheDir(), *refresh); err != nil {
		fmt.Fprintln(os.Stderr, "kernelcache:", err)
		os.Exit(1)
	}
}

func entries() []entry {
	var out []entry
	arches := map[string]bool{}
	for _, t := range vm.Matrix {
		out = append(out, entry{name: t.Name, arch: t.Arch, pkg: t.Meta, kernel: true})
		if !arches[t.Arch] {
			arches[t.Arch] = true
			out = append(out, entry{name: vm.Busybox(t.Arch), arch: t.Arch, pkg: vm.BusyboxPackage})
		}
	}
	return out
}

func run(dir string, refresh bool) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create the kernel cache: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return err
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("lock the kernel cache: %w", err)
	}
	native := runtime.GOARCH
	var foreign []entry
	for _, e := range entries() {
		if e.arch != native {
			if _, err := os.Stat(filepath.Join(dir, e.name, vm.CompleteMarker)); err != nil || refresh {
				foreign = append(foreign, e)
			}
			continue
		}
		if err := fetch(dir, e); err != nil {
			return err
		}
	}
	if len(foreign) > 0 {
		if err := withArchitectures(foreign, func() error {
			for _, e := range foreign {
				if err := fetch(dir, e); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return prune(dir)
}

// withArchitectures adds the entries' architectures to dpkg for the time
// of f (apt can then resolve and download their packages) and removes
// them again, with apt's lists refreshed both times.
func withArchitectures(es []entry, f func() error) error {
	have, err := output("dpkg", "--print-foreign-architectures")
	if err != nil {
		return err
	}
	var added []string
	for _, e := range es {
		if !strings.Contains(" "+strings.Join(strings.Fields(have), " ")+" "+strings.Join(added, " ")+" ", " "+e.arch+" ") {
			if _, err := output("dpkg", "--add-architecture", e.arch); err != nil {
				return err
			}
			added = append(added, e.arch)
		}
	}
	err = aptUpdate()
	if err == nil {
		err = f()
	}
	if len(added) > 0 {
		for _, a := range added {
			if _, rerr := output("dpkg", "--remove-architecture", a); rerr != nil {
				err = errors.Join(err, rerr)
			}
		}
		err = errors.Join(err, aptUpdate())
	}
	return err
}

func aptUpdate() error {
	fmt.Println("kernelcache: apt-get update")
	_, err := output("apt-get", "update", "-qq")
	return err
}

// resolve returns the package and version apt would install for e.
func resolve(e entry) (pkg, version string, err error) {
	fields, err := aptShow(e.pkg + ":" + e.arch)
	if err != nil {
		return "", "", err
	}
	if !e.kernel {
		return e.pkg, fields["Version"], nil
	}
	dep := strings.TrimSpace(strings.Split(strings.Split(fields["Depends"], ",")[0], "|")[0])
	dep, _, _ = strings.Cut(dep, " ")
	if !strings.HasPrefix(dep, "linux-image-") {
		return "", "", fmt.Errorf("%s: the first dependency %q is not a kernel image", e.pkg, dep)
	}
	fields, err = aptShow(dep + ":" + e.arch)
	if err != nil {
		return "", "", err
	}
	return dep, fields["Version"], nil
}

var updated bool

// aptShow returns the candidate's control fields; it refreshes apt's
// lists once when the package is unknown (a fresh machine has none).
func aptShow(pkg string) (map[string]string, error) {
	out, err := output("apt-cache", "show", "--no-all-versions", pkg)
	if err != nil && !updated {
		updated = true
		if uerr := aptUpdate(); uerr != nil {
			return nil, uerr
		}
		out, err = output("apt-cache", "show", "--no-all-versions", pkg)
	}
	if err != nil {
		return nil, err
	}
	fields := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ": "); ok && !strings.HasPrefix(k, " ") {
			if _, dup := fields[k]; !dup {
				fields[k] = v
			}
		}
	}
	if fields["Version"] == "" {
		return nil, fmt.Errorf("apt-cache show %s: no Version", pkg)
	}
	return fields, nil
}

// fetch makes dir/e.name a link to the unpacked package apt would install.
func fetch(dir string, e entry) error {
	pkg, version, err := resolve(e)
	if err != nil {
		return fmt.Errorf("%s: %w", e.name, err)
	}
	key := strings.NewReplacer(":", "%3a", "/", "_").Replace(pkg + "_" + version + "_" + e.arch)
	final := filepath.Join(dir, key)
	state := "cached"
	if _, err := os.Stat(filepath.Join(final, vm.CompleteMarker)); err != nil {
		state = "fetched"
		if err := unpack(dir, final, pkg+":"+e.arch+"="+version, e.kernel); err != nil {
			return fmt.Errorf("%s (%s %s): %w", e.name, pkg, version, err)
		}
	}
	link := filepath.Join(dir, "."+e.name+".link")
	_ = os.Remove(link)
	if err := os.Symlink(key, link); err != nil {
		return err
	}
	if err := os.Rename(link, filepath.Join(dir, e.name)); err != nil {
		return err
	}
	fmt.Printf("kernelcache: %-13s %s %s (%s, %s)\n", e.name, pkg, version, e.arch, state)
	return nil
}

// unpack downloads spec (pkg:arch=version), unpacks it and, for a kernel,
// indexes its modules, then renames the result to final.
func unpack(dir, final, spec string, kernel bool) error {
	tmp, err := os.MkdirTemp(dir, ".fetch-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	dl := exec.Command("apt-get", "download", "-q", "-o", "APT::Sandbox::User=root", spec)
	dl.Dir = tmp
	if out, err := dl.CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get download %s: %v\n%s", spec, err, out)
	}
	debs, _ := filepath.Glob(filepath.Join(tmp, "*.deb"))
	if len(debs) != 1 {
		return fmt.Errorf("apt-get download %s left %d .deb files", spec, len(debs))
	}
	root := filepath.Join(tmp, "root")
	if _, err := output("dpkg", "-x", debs[0], root); err != nil {
		return err
	}
	if kernel {
		images, _ := filepath.Glob(filepath.Join(root, "boot", "vmlinuz-*"))
		if len(images) != 1 {
			return fmt.Errorf("%s holds %d kernel images", spec, len(images))
		}
		release := strings.TrimPrefix(filepath.Base(images[0]), "vmlinuz-")
		// Debian's packages leave modules.dep to the postinst.
		if _, err := output("depmod", "-b", root, release); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(root, vm.CompleteMarker), []byte(spec+"\n"), 0o644); err != nil {
		return err
	}
	_ = os.RemoveAll(final) // an incomplete earlier attempt
	return os.Rename(root, final)
}

// prune removes the package directories no name links to any more.
func prune(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	used := map[string]bool{}
	for _, e := range ents {
		if e.Type()&os.ModeSymlink != 0 {
			if target, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil {
				used[filepath.Base(target)] = true
			}
		}
	}
	for _, e := range ents {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") && !used[e.Name()] {
			fmt.Printf("kernelcache: remove %s (no longer linked)\n", e.Name())
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

func output(name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}
