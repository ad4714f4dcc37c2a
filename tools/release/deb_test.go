package release

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tandem-profiler/tandem/test/privtest"
)

// TestDebInstall checks the .deb with lintian, installs it with dpkg,
// verifies its installed units with systemd-analyze, and purges it: the
// purge leaves no file the install added, and no tandem user or group.
// It changes the machine (root, dpkg): run it under the priv lock.
func TestDebInstall(t *testing.T) {
	privtest.RequireRoot(t)
	for _, tool := range []string{"lintian", "dpkg", "systemd-analyze", "systemd-sysusers"} {
		if _, err := exec.LookPath(tool); err != nil {
			privtest.SkipOrFail(t, "%s is needed to check the .deb (make tools installs it)", tool)
		}
	}
	if exec.Command("dpkg-query", "--show", PackageName).Run() == nil {
		privtest.SkipOrFail(t, "package %s is installed: the test installs and purges its own (dpkg --purge %s)", PackageName, PackageName)
	}
	if exec.Command("getent", "passwd", "tandem").Run() == nil || exec.Command("getent", "group", "tandem").Run() == nil {
		privtest.SkipOrFail(t, "a tandem user or group exists (make run makes one): the purge check needs a machine without it (userdel tandem)")
	}
	dir, m, src := buildOnce(t)
	var deb string
	for _, p := range m.Packages {
		if strings.HasSuffix(p, "_"+runtimeArch()+".deb") {
			deb = filepath.Join(dir, p)
		}
	}
	if deb == "" {
		t.Fatalf("no %s .deb in %v", runtimeArch(), m.Packages)
	}

	run := func(name string, args ...string) string {
		t.Helper()
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	// Every lintian finding above "info" fails, with the overrides the
	// package carries none of.
	out, err := exec.Command("lintian", "--fail-on", "error,warning", "--tag-display-limit", "0", deb).CombinedOutput()
	if err != nil {
		t.Errorf("lintian %s: %v\n%s", filepath.Base(deb), err, out)
	} else if len(out) > 0 {
		t.Logf("lintian (informational):\n%s", out)
	}

	before := snapshot(t)
	t.Cleanup(func() {
		// Leave the machine as found even when the test fails midway.
		if exec.Command("dpkg-query", "--show", PackageName).Run() == nil {
			_ = exec.Command("dpkg", "--purge", PackageName).Run()
		}
	})
	run("dpkg", "--install", deb)
	for _, cmd := range Commands {
		got := strings.TrimSpace(run(filepath.Join(BinDir, cmd), "--version"))
		if want := cmd + " version " + src.Version; got != want {
			t.Errorf("installed %s --version: %q, want %q", cmd, got, want)
		}
	}
	if out := run("getent", "passwd", "tandem"); !strings.Contains(out, ":/var/lib/tandem:") {
		t.Errorf("the package's tandem user: %q, want home /var/lib/tandem (tandem.sysusers)", out)
	}
	var units []string
	for _, u := range Units {
		units = append(units, filepath.Join(unitDir["deb"], u))
	}
	out, err = exec.Command("systemd-analyze", append([]string{"verify", "--man=no"}, units...)...).CombinedOutput()
	var problems []string
	for _, line := range strings.Split(string(out), "\n") {
		// Units may name targets this machine lacks; only our units count.
		if strings.Contains(line, "tandem") {
			problems = append(problems, line)
		}
	}
	if len(problems) > 0 {
		t.Errorf("systemd-analyze verify of the installed units (%v):\n%s", err, strings.Join(problems, "\n"))
	}
	installed := snapshot(t)
	if added := diff(installed, before); len(added) == 0 {
		t.Fatal("the install added no file")
	}

	run("dpkg", "--purge", PackageName)
	if left := diff(snapshot(t), before); len(left) > 0 {
		t.Errorf("the purge left %d paths the install added:\n%s", len(left), strings.Join(left, "\n"))
	}
	for _, db := range []string{"passwd", "group"} {
		if exec.Command("getent", db, "tandem").Run() == nil {
			t.Errorf("the purge left tandem in the %s database", db)
		}
	}
}

// snapshotRoots are where a package's files, state and users live;
// dpkg's and apt's own records and logs change with any install and are
// left out.
var (
	snapshotRoots = []string{"/etc", "/usr", "/lib", "/var/lib", "/run/tandem", "/opt"}
	snapshotSkip  = []string{"/var/lib/dpkg", "/var/lib/apt", "/usr/share/man/index.db", "/var/cache"}
)

// snapshot lists every path under snapshotRoots, with /etc/passwd,
// /etc/group and friends' contents' tandem lines.
func snapshot(t *testing.T) []string {
	t.Helper()
	var paths []string
	for _, root := range snapshotRoots {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if os.IsNotExist(err) || os.IsPermission(err) {
					return nil
				}
				return err
			}
			if slices.Contains(snapshotSkip, p) {
				return filepath.SkipDir
			}
			paths = append(paths, p)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, db := range []string{"/etc/passwd", "/etc/group", "/etc/shadow", "/etc/gshadow"} {
		data, _ := os.ReadFile(db)
		for _, line := range strings.Split(string(data), "\n") {
			if strings.HasPrefix(line, "tandem:") {
				paths = append(paths, db+": "+line)
			}
		}
	}
	return paths
}

// diff returns what a holds and b does not.
func diff(a, b []string) []string {
	in := map[string]bool{}
	for _, p := range b {
		in[p] = true
	}
	var out []string
	for _, p := range a {
		if !in[p] {
			out = append(out, p)
		}
	}
	return out
}
