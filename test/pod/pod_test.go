package pod

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/tandem-profiler/tandem/test/harness"
	"github.com/tandem-profiler/tandem/test/privtest"
	"github.com/tandem-profiler/tandem/tools/helmchart"
	"github.com/tandem-profiler/tandem/tools/ociimage"
	"golang.org/x/sys/unix"
)

// imageRef names the image in the test's private store only.
const imageRef = "localhost/tandem:podtest"

// requirePod skips outside CI (fails in CI) without root, BTF, podman or
// runc: make tools installs podman and runc.
func requirePod(t *testing.T) {
	t.Helper()
	privtest.RequireRoot(t)
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		privtest.SkipOrFail(t, "the pod test needs a kernel with BTF (/sys/kernel/btf/vmlinux)")
	}
	for _, bin := range []string{"podman", "runc"} {
		if _, err := exec.LookPath(bin); err != nil {
			privtest.SkipOrFail(t, "the pod test needs %s (make tools installs it)", bin)
		}
	}
	mountCgroupControllers(t)
	// The sampler reads tracefs through a read-only host path; the host
	// may not have mounted it.
	if _, err := os.Stat("/sys/kernel/tracing/events"); err != nil {
		if err := unix.Mount("tracefs", "/sys/kernel/tracing", "tracefs", 0, ""); err != nil {
			t.Fatalf("mount tracefs at /sys/kernel/tracing: %v", err)
		}
	}
}

// build builds the static binaries and the image archive as make image
// does, and the workload, into dir.
func build(t *testing.T, dir string) (archive, encoder, workload string) {
	t.Helper()
	root := harness.ModuleRoot(t)
	bin := filepath.Join(dir, "bin")
	script := exec.Command(filepath.Join(root, "deploy/container/build-static.sh"), bin)
	script.Dir = root
	script.Env = append(os.Environ(), "VERSION=podtest")
	if out, err := script.CombinedOutput(); err != nil {
		t.Fatalf("build-static.sh: %v\n%s", err, out)
	}
	harness.Build(t, harness.BuildConfig{Dir: bin}, harness.Target{Out: "gobusy", Package: "./test/e2e/testdata/gobusy/main.go"})
	workload = filepath.Join(bin, "gobusy")
	img, err := ociimage.Build(ociimage.Config{
		SamplerBinary: filepath.Join(bin, "tandem-sampler"), EncoderBinary: filepath.Join(bin, "tandem-encoder"),
		Version: "podtest", Revision: "podtest", Source: "https://github.com/tandem-profiler/tandem", Licenses: "Apache-2.0",
		Arch: runtime.GOARCH, Created: time.Unix(0, 0),
	})
	if err != nil {
		t.Fatal(err)
	}
	archive = filepath.Join(dir, "tandem-image.oci.tar")
	if err := ociimage.WriteArchive(img, imageRef, archive); err != nil {
		t.Fatal(err)
	}
	return archive, filepath.Join(bin, "tandem-encoder"), workload
}

// podValues are the chart values the pod runs with: the image loaded into
// the private store, no Kubernetes API (there is none), short aggregation
// intervals, and the sampler recording what it produced, so that what the
// encoder wrote can be balanced against it.
const podValues = `
image: {repository: localhost/tandem, tag: podtest, pullPolicy: Never}
kubernetesMetadata: {enabled: false}
sampler:
  tracers: perl
  extraArgs: [--record=/run/tandem/sampler.rec, --flush-interval=500ms]
encoder:
  profilingDuration: 2s
`

// podYAML renders the chart with podValues as the Pod podman plays, the
// pprof files' node directory (output.pprof.hostPath, made root's by
// podman as by a kubelet, prepared by the chart's init container) being
// profilesDir.
func podYAML(t *testing.T, socketDir, profilesDir string) []byte {
	t.Helper()
	values := map[string]any{}
	if err := yaml.Unmarshal([]byte(podValues), &values); err != nil {
		t.Fatal(err)
	}
	values["output"] = map[string]any{"pprof": map[string]any{"hostPath": profilesDir}}
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	pod, err := PodYAML(PodConfig{ChartDir: filepath.Join(harness.ModuleRoot(t), helmchart.Dir), Values: values, SocketDir: socketDir, NodeName: host})
	if err != nil {
		t.Fatal(err)
	}
	return pod
}

// TestPod plays the chart's pod with podman and a host workload, then
// checks what the issue asks of it: profiles name the workload's
// functions; the kernel's view of each container (uid, capabilities,
// no_new_privs, seccomp, a read-only root); the encoder killed and
// restarted with the sampler resending, every sample the sampler recorded
// written exactly once across both encoders; both containers' peak memory;
// and kube down leaving no container, pod, volume or mount.
func TestPod(t *testing.T) {
	requirePod(t)
	start := time.Now()
	dir := t.TempDir()
	p := newPodman(t, dir)
	archive, encoderBin, workload := build(t, dir)
	p.must(t, "load", "-i", archive)
	built := time.Since(start)

	socketDir := filepath.Join(dir, "socket")
	if err := os.Mkdir(socketDir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(socketDir, 0o777); err != nil { // past the umask
		t.Fatal(err)
	}
	podFile := filepath.Join(dir, "pod.yaml")
	// Where the chart's hostPath puts the pprof files; podman creates it
	// root's, mode 0755, as a kubelet does.
	profilesDir := filepath.Join(dir, "profiles")
	podSpec := podYAML(t, socketDir, profilesDir)
	if err := os.WriteFile(podFile, podSpec, 0o644); err != nil {
		t.Fatal(err)
	}
	// The workload runs on the host, outside the pod, for the whole test.
	wl := exec.Command(workload, "10m")
	if err := wl.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = wl.Process.Kill(); _ = wl.Wait() })

	down := false
	t.Cleanup(func() {
		if !down {
			if _, err := p.run("kube", "down", podFile); err != nil {
				t.Errorf("cleanup: %v", err)
			}
		}
	})
	p.must(t, "kube", "play", "--network", "none", podFile)
	played := time.Now()
	smpName, encName := PodName+"-sampler", PodName+"-encoder"
	pw := &podWatch{t: t, p: p, containers: []string{smpName, encName}}

	enc := p.inspect(t, encName)
	profiles := enc.mountSource(t, "/var/lib/tandem/profiles")
	if profiles != profilesDir {
		t.Errorf("the encoder's profiles are in %s, want the chart's hostPath %s", profiles, profilesDir)
	}
	// The chart's init container gave the directory podman made root's
	// to the encoder (prepare-dir); the encoder wrote into it.
	if st, err := os.Stat(profilesDir); err != nil {
		t.Error(err)
	} else if sys := st.Sys().(*syscall.Stat_t); sys.Uid != 65532 || sys.Gid != 65532 || st.Mode().Perm() != 0o750 {
		t.Errorf("the profiles' host directory is %d:%d %v, want 65532:65532 -rwxr-x--- (the init container's prepare-dir)", sys.Uid, sys.Gid, st.Mode().Perm())
	}
	pw.dirs = []string{socketDir, profiles}
	pw.waitFor("a pprof file naming the workload's hot function", func() bool {
		return profileNames(t, profiles, time.Time{}, hotFunction)
	})
	t.Logf("first profile naming %s %v after kube play", hotFunction, time.Since(played).Round(100*time.Millisecond))

	smp := p.inspect(t, smpName)
	t.Run("encoder container", func(t *testing.T) { checkEncoderContainer(t, enc) })
	t.Run("sampler container", func(t *testing.T) { checkSamplerContainer(t, smp, samplerCaps(t, podSpec)) })

	encHWMBefore := procStatus(t, enc.State.Pid)["VmHWM"]

	// The encoder killed: restarted by its restart policy, the sampler
	// reconnects and resends what was not acknowledged. SIGKILL from the
	// host, as the OOM killer would: podman 4.3 takes podman kill for a
	// stop by the user and does not restart the container.
	pw.restarting = true
	if err := unix.Kill(enc.State.Pid, unix.SIGKILL); err != nil {
		t.Fatalf("kill the encoder (pid %d): %v", enc.State.Pid, err)
	}
	killed := time.Now()
	var restarted container
	pw.waitFor("the encoder container restarted", func() bool {
		restarted = p.inspect(t, encName)
		return restarted.State.Running && restarted.State.Pid != 0 && restarted.State.Pid != enc.State.Pid
	})
	pw.restarting = false
	pw.waitFor("a pprof file from the restarted encoder naming the workload's hot function", func() bool {
		return profileNames(t, profiles, killed, hotFunction)
	})
	t.Logf("encoder restarted (pid %d -> %d, restart policy %q)", enc.State.Pid, restarted.State.Pid, restarted.HostConfig.RestartPolicy.Name)

	// Peak memory of each container's process, before they stop.
	smpHWM, encHWM := procStatus(t, smp.State.Pid)["VmHWM"], procStatus(t, restarted.State.Pid)["VmHWM"]
	smpRSS, encRSS := procStatus(t, smp.State.Pid)["VmRSS"], procStatus(t, restarted.State.Pid)["VmRSS"]
	t.Logf("memory: sampler VmRSS %s, VmHWM %s; encoder (restarted) VmRSS %s, VmHWM %s; encoder before the kill VmHWM %s",
		smpRSS, smpHWM, encRSS, encHWM, encHWMBefore)

	// A graceful stop, the sampler first: it delivers what it holds and
	// the encoder writes it; then the encoder writes its last flush.
	p.must(t, "stop", "-t", "20", smpName)
	p.must(t, "stop", "-t", "20", encName)
	rec := filepath.Join(socketDir, "sampler.rec")
	t.Run("samples balance", func(t *testing.T) { checkBalance(t, encoderBin, rec, profiles, filepath.Join(dir, "replayed")) })

	p.must(t, "kube", "down", podFile)
	down = true
	t.Run("kube down leaves nothing", func(t *testing.T) { checkNothingLeft(t, p, dir) })
	t.Logf("wall time: %v (build and load %v)", time.Since(start).Round(100*time.Millisecond), built.Round(100*time.Millisecond))
}
