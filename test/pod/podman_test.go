package pod

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// podman runs podman on a store private to one test: its own root,
// runroot, volumes and containers.conf, all under dir, so nothing outside
// the test's scratch directory is read or changed. The runtime settings
// are the ones this kind of machine needs: runc (crun refuses its hybrid
// cgroups), the cgroupfs manager, and no default rlimits (without
// CAP_SYS_RESOURCE the runtime cannot set them).
type podman struct {
	dir  string
	conf string
}

func newPodman(t *testing.T, dir string) *podman {
	t.Helper()
	p := &podman{dir: dir, conf: filepath.Join(dir, "containers.conf")}
	if err := os.WriteFile(p.conf, []byte("[containers]\ndefault_ulimits = []\nlog_driver = \"k8s-file\"\n# hostPID: true, which podman 4.3's kube play does not read\npidns = \"host\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *podman) command(args ...string) *exec.Cmd {
	global := []string{
		"--root", filepath.Join(p.dir, "root"),
		"--runroot", filepath.Join(p.dir, "runroot"),
		"--tmpdir", filepath.Join(p.dir, "tmp"),
		"--volumepath", filepath.Join(p.dir, "volumes"),
		"--storage-driver", "vfs",
		"--runtime", "runc",
		"--cgroup-manager", "cgroupfs",
		"--events-backend", "file",
	}
	cmd := exec.Command("podman", append(global, args...)...)
	cmd.Env = append(os.Environ(), "CONTAINERS_CONF="+p.conf)
	return cmd
}

// run runs podman and returns its standard output; a failure names the
// command and carries its standard error.
func (p *podman) run(args ...string) (string, error) {
	cmd := p.command(args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("podman %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

func (p *podman) must(t *testing.T, args ...string) string {
	t.Helper()
	out, err := p.run(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// container is the part of podman inspect's answer the test reads.
type container struct {
	ID    string
	Name  string
	State struct {
		Status    string
		Running   bool
		Pid       int
		ExitCode  int
		StartedAt string
	}
	RestartCount int
	Mounts       []struct {
		Type        string
		Source      string
		Destination string
		RW          bool
	}
	HostConfig struct {
		Privileged     bool
		ReadonlyRootfs bool
		CapAdd         []string
		RestartPolicy  struct{ Name string }
	}
	EffectiveCaps []string
}

func (p *podman) inspect(t *testing.T, name string) container {
	t.Helper()
	var cs []container
	if err := json.Unmarshal([]byte(p.must(t, "container", "inspect", name)), &cs); err != nil || len(cs) != 1 {
		t.Fatalf("podman container inspect %s: %v (%d containers)", name, err, len(cs))
	}
	return cs[0]
}

// mountSource is where the host sees the container's mount at dest.
func (c container) mountSource(t *testing.T, dest string) string {
	t.Helper()
	for _, m := range c.Mounts {
		if m.Destination == dest {
			return m.Source
		}
	}
	t.Fatalf("container %s mounts nothing at %s", c.Name, dest)
	return ""
}
