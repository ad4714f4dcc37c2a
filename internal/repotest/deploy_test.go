package repotest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// TestSystemdUnitsVerify runs systemd-analyze verify on the units, with
// ExecStart pointed at stand-in executables (the real ones are installed
// under /usr/local/bin on a node).
func TestSystemdUnitsVerify(t *testing.T) {
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("systemd-analyze is needed to lint deploy/systemd")
		}
		t.Skip("systemd-analyze not installed")
	}
	root := moduleRoot(t)
	dir := t.TempDir()
	units := []string{"tandem-encoder.socket", "tandem-encoder.service", "tandem-sampler.service"}
	for _, bin := range []string{"tandem-encoder", "tandem-sampler"} {
		if err := os.WriteFile(filepath.Join(dir, bin), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var paths []string
	for _, u := range units {
		data, err := os.ReadFile(filepath.Join(root, "deploy", "systemd", u))
		if err != nil {
			t.Fatal(err)
		}
		data = bytes.ReplaceAll(data, []byte("/usr/local/bin/"), []byte(dir+"/"))
		p := filepath.Join(dir, u)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	out, err := exec.Command(analyze, append([]string{"verify", "--man=no"}, paths...)...).CombinedOutput()
	// Units may reference targets this container does not have; only
	// problems in our own units count.
	var problems []string
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "tandem") {
			problems = append(problems, line)
		}
	}
	if len(problems) > 0 {
		t.Fatalf("systemd-analyze verify (%v):\n%s", err, strings.Join(problems, "\n"))
	}
}

// TestDaemonSetPrivilegeSplit decodes the DaemonSet with the Kubernetes API
// types (unknown fields are errors) and checks the privilege split: the
// encoder container is unprivileged, the sampler has only the capabilities
// the tracer needs, and both share the socket volume.
func TestDaemonSetPrivilegeSplit(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(moduleRoot(t), "deploy", "kubernetes", "daemonset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var ds *appsv1.DaemonSet
	for _, doc := range bytes.Split(data, []byte("\n---\n")) {
		var meta struct{ Kind string }
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("parse manifest: %v", err)
		}
		if meta.Kind != "DaemonSet" {
			continue
		}
		ds = &appsv1.DaemonSet{}
		if err := yaml.UnmarshalStrict(doc, ds); err != nil {
			t.Fatalf("DaemonSet does not match the Kubernetes API: %v", err)
		}
	}
	if ds == nil {
		t.Fatal("no DaemonSet in deploy/kubernetes/daemonset.yaml")
	}
	spec := ds.Spec.Template.Spec
	if !spec.HostPID {
		t.Error("hostPID must be true: the sampler profiles every process on the node")
	}
	if spec.HostNetwork {
		t.Error("hostNetwork must be false")
	}
	byName := map[string]corev1.Container{}
	for _, c := range spec.Containers {
		byName[c.Name] = c
	}
	enc, ok := byName["encoder"]
	if !ok {
		t.Fatal("no encoder container")
	}
	sc := enc.SecurityContext
	if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
		t.Error("encoder must run as a non-root uid")
	}
	if sc == nil || sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) != 0 {
		t.Error("encoder must drop all capabilities and add none")
	}
	if sc == nil || sc.Privileged != nil && *sc.Privileged || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("encoder must not be privileged nor escalate")
	}
	smp, ok := byName["sampler"]
	if !ok {
		t.Fatal("no sampler container")
	}
	if smp.SecurityContext == nil || smp.SecurityContext.Privileged != nil && *smp.SecurityContext.Privileged {
		t.Error("sampler must not be a privileged container: it gets named capabilities instead")
	}
	allowed := []corev1.Capability{"BPF", "PERFMON", "SYS_PTRACE", "CHECKPOINT_RESTORE", "SYSLOG", "DAC_READ_SEARCH", "SYS_ADMIN"}
	for _, c := range smp.SecurityContext.Capabilities.Add {
		if !slices.Contains(allowed, c) {
			t.Errorf("sampler adds capability %s, which the tracer does not need", c)
		}
	}
	// Both mount the socket volume at the same place.
	mount := func(c corev1.Container) string {
		for _, m := range c.VolumeMounts {
			if m.Name == "socket" {
				return m.MountPath
			}
		}
		return ""
	}
	if mount(enc) == "" || mount(enc) != mount(smp) {
		t.Errorf("socket volume mounted at %q (encoder) and %q (sampler), want the same path", mount(enc), mount(smp))
	}
}
