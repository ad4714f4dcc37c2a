// Command cluster brings the cluster test's single-node Kubernetes
// cluster (test/cluster) up on this machine with Tandem's chart installed
// from the image make image built, and leaves it running (make
// cluster-up); or takes it down and checks the host is as it was (make
// cluster-down). Up writes <dir>/env in shell syntax: KUBECONFIG,
// CONTAINERD_ADDRESS, PROFILES_DIR (where the encoder's pprof files land),
// KUBECTL and CTR.
package main

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tandem-profiler/tandem/test/cluster"
	"github.com/tandem-profiler/tandem/tools/helmchart"
	"github.com/tandem-profiler/tandem/tools/kubernetes"
	"github.com/tandem-profiler/tandem/tools/ociimage"
	"golang.org/x/sys/unix"
)

func main() {
	fs := flag.NewFlagSet("cluster", flag.ExitOnError)
	dir := fs.String("dir", ".build/cluster", "the cluster's directory (state, logs, env, profiles)")
	archive := fs.String("image", "bin/tandem-image.oci.tar", "the image archive make image wrote")
	if len(os.Args) < 2 || (os.Args[1] != "up" && os.Args[1] != "down") {
		fmt.Fprintln(os.Stderr, "usage: cluster up|down [flags]")
		os.Exit(2)
	}
	_ = fs.Parse(os.Args[2:])
	abs, err := filepath.Abs(*dir)
	if err == nil {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if os.Args[1] == "up" {
			err = up(ctx, abs, *archive)
		} else {
			err = down(abs)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster "+os.Args[1]+":", err)
		os.Exit(1)
	}
}

func down(dir string) error {
	c, err := cluster.Load(filepath.Join(dir, "state"))
	if err != nil {
		return fmt.Errorf("%w (no cluster is up)", err)
	}
	c.Config.Log = os.Stderr
	if err := c.Down(); err != nil {
		return err
	}
	return os.RemoveAll(filepath.Join(dir, "env"))
}

// imageName returns the name an OCI archive gives its image (the
// annotation ctr import names it by).
func imageName(archive string) (string, error) {
	f, err := os.Open(archive)
	if err != nil {
		return "", fmt.Errorf("%w (make image writes it)", err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err != nil {
			return "", fmt.Errorf("%s: no index.json: %w", archive, err)
		}
		if h.Name != "index.json" {
			continue
		}
		var index struct {
			Manifests []struct{ Annotations map[string]string }
		}
		if err := json.NewDecoder(tr).Decode(&index); err != nil {
			return "", fmt.Errorf("%s: index.json: %w", archive, err)
		}
		for _, m := range index.Manifests {
			if n := m.Annotations["io.containerd.image.name"]; n != "" {
				return n, nil
			}
		}
		return "", fmt.Errorf("%s: the image has no name", archive)
	}
}

func up(ctx context.Context, dir, archive string) error {
	closeInheritedOnExec()
	ref, err := imageName(archive)
	if err != nil {
		return err
	}
	repo, tag, ok := strings.Cut(ref[strings.LastIndex(ref, "/")+1:], ":")
	if !ok {
		return fmt.Errorf("image %s has no tag", ref)
	}
	repo = ref[:strings.LastIndex(ref, "/")+1] + repo
	if _, err := os.Stat(filepath.Join(dir, "state", "state.json")); err == nil {
		return fmt.Errorf("a cluster is up already (%s): make cluster-down first", dir)
	}
	bin, err := kubernetes.Lookup(kubernetes.Config{})
	if err != nil {
		return err
	}
	// What a previous cluster left (logs, data) goes.
	if err := os.RemoveAll(filepath.Join(dir, "state")); err != nil {
		return err
	}
	profiles := filepath.Join(dir, "profiles")
	if err := os.MkdirAll(profiles, 0o755); err != nil {
		return err
	}
	// The encoder (uid 65532) writes its files there.
	if err := os.Chown(profiles, ociimage.NonRootUID, ociimage.NonRootUID); err != nil {
		return err
	}
	cfg := cluster.DefaultConfig(filepath.Join(dir, "state"), bin)
	cfg.Log = os.Stderr
	c, err := cluster.Up(ctx, cfg)
	if err != nil {
		return err
	}
	fail := func(err error) error { return errors.Join(err, c.Down()) }
	if err := c.ImportImage(ctx, archive); err != nil {
		return fail(err)
	}
	const namespace = "tandem"
	if err := c.NamespaceFor(ctx, namespace); err != nil {
		return fail(err)
	}
	helm, err := c.Helm(namespace)
	if err != nil {
		return fail(err)
	}
	const profilesDir = "/var/lib/tandem/profiles"
	values := map[string]any{
		"image": map[string]any{"repository": repo, "tag": tag, "pullPolicy": "Never"},
		// pprof files into a host directory: an outputs list (the chart's
		// own pprof output is an emptyDir) and a hostPath for the encoder.
		"output": map[string]any{"outputs": []any{map[string]any{"name": "local", "format": "pprof", "dir": profilesDir}}},
		"encoder": map[string]any{
			"profilingDuration": "10s",
			"extraVolumes":      []any{map[string]any{"name": "host-profiles", "hostPath": map[string]any{"path": profiles, "type": "Directory"}}},
			"extraVolumeMounts": []any{map[string]any{"name": "host-profiles", "mountPath": profilesDir}},
		},
	}
	root, err := filepath.Abs(".")
	if err != nil {
		return fail(err)
	}
	start := time.Now()
	ch, err := cluster.LoadChart(filepath.Join(root, helmchart.Dir))
	if err != nil {
		return fail(err)
	}
	if err := cluster.HelmInstall(helm, ch, namespace, "tandem", values); err != nil {
		return fail(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := c.WaitDaemonSet(wctx, namespace, "tandem"); err != nil {
		return fail(err)
	}
	fmt.Fprintf(os.Stderr, "cluster: chart installed, DaemonSet ready in %v\n", time.Since(start).Round(100*time.Millisecond))
	env := fmt.Sprintf(`# make cluster-up: source this file (. %[1]s/env), make cluster-down removes the cluster
export KUBECONFIG=%[2]s
export CONTAINERD_ADDRESS=%[3]s
export PROFILES_DIR=%[4]s
export KUBECTL=%[5]s
export CTR="ctr --address %[3]s --namespace k8s.io"
`, dir, c.Kubeconfig(), c.ContainerdAddress(), profiles, c.Bin("kubectl"))
	return os.WriteFile(filepath.Join(dir, "env"), []byte(env), 0o644)
}

// closeInheritedOnExec keeps the descriptors this process inherited from
// reaching the cluster's daemons, which outlive it: a lock held around
// make cluster-up (flock LOCKFILE make cluster-up) would otherwise stay
// held by etcd, the kubelet and the rest until make cluster-down.
func closeInheritedOnExec() {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
}
