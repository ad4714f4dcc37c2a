package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/tandem-profiler/tandem/test/otlptest"
	"github.com/tandem-profiler/tandem/test/parcatest"
	"github.com/tandem-profiler/tandem/test/privtest"
	"github.com/tandem-profiler/tandem/test/registrytest"
	tkube "github.com/tandem-profiler/tandem/tools/kubernetes"
	"github.com/tandem-profiler/tandem/tools/release"
	"golang.org/x/sys/unix"
)

const (
	workloadImage = "localhost/tandem-workload:clustertest"
	// hotFunction is where the workload (test/e2e/testdata/gobusy) spends
	// its time.
	hotFunction = "main.tandemGoHotLoop"
	releaseName = "tandem"
	tandemNS    = "tandem" // the release's namespace (helm install -n)
	workloadNS  = "workload"
	workload    = "busy"
	// encoderUser is the encoder's service account as the API sees it.
	encoderUser = "system:serviceaccount:" + tandemNS + ":" + releaseName
)

// requireCluster skips outside CI (fails in CI) without root, BTF or a
// cached Kubernetes build, and returns the build's bin directory.
func requireCluster(t *testing.T) string {
	t.Helper()
	privtest.RequireRoot(t)
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		privtest.SkipOrFail(t, "the cluster test needs a kernel with BTF (/sys/kernel/btf/vmlinux)")
	}
	bin, err := tkube.Lookup(tkube.Config{})
	if err != nil {
		privtest.SkipOrFail(t, "%v", err)
	}
	// The chart mounts the host's tracefs into the sampler.
	if _, err := os.Stat("/sys/kernel/tracing/events"); err != nil {
		if err := unix.Mount("tracefs", "/sys/kernel/tracing", "tracefs", 0, ""); err != nil {
			t.Fatalf("mount tracefs at /sys/kernel/tracing: %v", err)
		}
	}
	return bin
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// builds are what the test builds beside the cluster's bring-up: the
// release as make release writes it (the image of both platforms, the
// chart, the packages), the amd64 encoder binary (to replay the
// sampler's recording) and the workload's image archive.
type builds struct {
	release, encoder, busy string
}

// build builds the release of the checked-out tree (tools/release) and
// the workload's image (its static hot loop on no base) under dir.
func build(dir string) (builds, error) {
	root, err := filepath.Abs("../..")
	if err != nil {
		return builds{}, err
	}
	src, err := release.Describe(root)
	if err != nil {
		return builds{}, err
	}
	b := builds{release: filepath.Join(dir, "release"), busy: filepath.Join(dir, "busy.oci.tar")}
	scratch := filepath.Join(dir, "release-scratch")
	if _, err := release.Build(src, b.release, scratch); err != nil {
		return builds{}, err
	}
	b.encoder = filepath.Join(scratch, "bin", "linux_amd64", "tandem-encoder")
	if _, err := os.Stat(b.encoder); err != nil {
		return builds{}, fmt.Errorf("the release's amd64 encoder: %w", err)
	}
	gobusy := filepath.Join(dir, "gobusy")
	gb := exec.Command("go", "build", "-o", gobusy, "./test/e2e/testdata/gobusy/main.go")
	gb.Dir = root
	gb.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := gb.CombinedOutput(); err != nil {
		return builds{}, fmt.Errorf("build gobusy: %w\n%s", err, out)
	}
	err = WriteImage(b.busy, workloadImage, Image{
		Files:      []File{{Path: "/gobusy", Source: gobusy, Mode: 0o755}},
		Entrypoint: []string{"/gobusy"}, User: "65532:65532",
	})
	return b, err
}

// chartValues are the values the test installs with: the image pushed to
// the test's registry, pinned by digest as docs/install.md says for
// one's own registry (containerd pulls it); profiles to the test's OTLP
// receiver and Parca store on the node's address (through the bridge),
// Parca's labels made from the __meta_kubernetes_* names by relabelling;
// short intervals, and the sampler recording what it produced.
func chartValues(p *release.Pushed, receiver, parca string, frequency int) map[string]any {
	return map[string]any{
		"image": map[string]any{"repository": p.ImageRepository, "digest": p.ImageDigest},
		"output": map[string]any{"outputs": []any{
			map[string]any{"name": "collector", "format": "otlp", "address": receiver, "insecure": true},
			map[string]any{"name": "parca", "format": "arrow-v2", "address": parca, "insecure": true},
		}},
		"relabelConfigs": []any{
			relabel("__meta_kubernetes_namespace", "namespace"),
			relabel("__meta_kubernetes_pod_name", "pod"),
			relabel("__meta_kubernetes_pod_container_name", "container"),
			relabel("__meta_kubernetes_pod_controller_kind", "controller_kind"),
			relabel("__meta_kubernetes_pod_node_name", "node"),
		},
		"sampler": map[string]any{
			"tracers":           "perl",
			"samplingFrequency": frequency,
			"extraArgs":         []any{"--record=/run/tandem/sampler.rec", "--flush-interval=500ms"},
		},
		"encoder": map[string]any{"profilingDuration": "2s"},
	}
}

func relabel(source, target string) map[string]any {
	return map[string]any{"source_labels": []any{source}, "target_label": target}
}

// waiter polls conditions on the cluster, and on failure reports the
// pods, events and component logs that explain it.
type waiter struct {
	t *testing.T
	c *Cluster
}

func (w waiter) until(what string, limit time.Duration, cond func(ctx context.Context) (bool, error)) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var last error
	for {
		for _, name := range []string{"kube-apiserver", "kubelet", "containerd"} {
			if !w.c.alive(name) {
				w.t.Fatalf("waiting for %s: %s exited%s", what, name, w.report())
			}
		}
		ok, err := cond(ctx)
		if ok {
			return
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			w.t.Fatalf("gave up waiting %v for %s (last error: %v)%s", limit, what, last, w.report())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (w waiter) report() string {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var b strings.Builder
	client := w.c.Client()
	for _, ns := range []string{tandemNS, workloadNS} {
		pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			fmt.Fprintf(&b, "\n--- pods in %s: %v", ns, err)
			continue
		}
		for _, p := range pods.Items {
			fmt.Fprintf(&b, "\n--- pod %s/%s: %s", ns, p.Name, p.Status.Phase)
			for _, cs := range p.Status.ContainerStatuses {
				fmt.Fprintf(&b, "\n  %s ready=%v restarts=%d state=%+v last=%+v", cs.Name, cs.Ready, cs.RestartCount, cs.State, cs.LastTerminationState)
				logs, _ := client.CoreV1().Pods(ns).GetLogs(p.Name, &corev1.PodLogOptions{Container: cs.Name, TailLines: ptr.To[int64](20)}).DoRaw(ctx)
				fmt.Fprintf(&b, "\n  log:\n%s", logs)
			}
		}
		evs, _ := client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if evs != nil {
			for _, e := range evs.Items {
				fmt.Fprintf(&b, "\n  event %s %s: %s", e.InvolvedObject.Name, e.Reason, e.Message)
			}
		}
	}
	fmt.Fprintf(&b, "\n--- kubelet log:\n%s", w.c.LogTail("kubelet", 15))
	return b.String()
}

// createWorkload runs the hot loop as a Deployment in a namespace that
// enforces Pod Security "restricted".
func createWorkload(ctx context.Context, t *testing.T, c *Cluster) {
	t.Helper()
	client := c.Client()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: workloadNS, Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}
	if _, err := client.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{"app": workload}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: workload, Namespace: workloadNS},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](1),
					Containers: []corev1.Container{{
						Name: workload, Image: workloadImage, ImagePullPolicy: corev1.PullNever,
						Args: []string{"1h"},
						SecurityContext: &corev1.SecurityContext{
							RunAsNonRoot: ptr.To(true), AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
							Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
							SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
						},
					}},
				},
			},
		},
	}
	if _, err := client.AppsV1().Deployments(workloadNS).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// followLogs copies the logs of the pod's containers, from now until each
// ends, into files under dir, and returns a function that waits for the
// copies to end (bounded) and returns the files' last lines.
func followLogs(t *testing.T, c *Cluster, pod *corev1.Pod, dir string) func() string {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var wg sync.WaitGroup
	var paths []string
	for _, ct := range pod.Spec.Containers {
		path := filepath.Join(dir, ct.Name+".log")
		paths = append(paths, path)
		stream, err := c.Client().CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: ct.Name, Follow: true, TailLines: ptr.To[int64](5)}).Stream(ctx)
		if err != nil {
			t.Fatalf("follow the logs of %s/%s: %v", pod.Name, ct.Name, err)
		}
		f, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer stream.Close()
			defer f.Close()
			_, _ = io.Copy(f, stream)
		}()
	}
	return func() string {
		ended := make(chan struct{})
		go func() { wg.Wait(); close(ended) }()
		select {
		case <-ended:
		case <-time.After(10 * time.Second):
			cancel()
			<-ended
		}
		var b strings.Builder
		for _, p := range paths {
			data, _ := os.ReadFile(p)
			lines := strings.Split(strings.TrimSpace(string(data)), "\n")
			fmt.Fprintf(&b, "\n--- %s (last lines):\n%s", p, strings.Join(lines[max(0, len(lines)-12):], "\n"))
		}
		return b.String()
	}
}

// tandemPod returns the DaemonSet's one pod that is not being deleted.
func tandemPod(ctx context.Context, c *Cluster) (*corev1.Pod, error) {
	pods, err := c.Client().CoreV1().Pods(tandemNS).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=tandem"})
	if err != nil {
		return nil, err
	}
	for i := range pods.Items {
		if pods.Items[i].DeletionTimestamp == nil {
			return &pods.Items[i], nil
		}
	}
	return nil, errors.New("no tandem pod")
}

func containerStatus(p *corev1.Pod, name string) *corev1.ContainerStatus {
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == name {
			return &p.Status.ContainerStatuses[i]
		}
	}
	return nil
}

func containerPID(ctx context.Context, t *testing.T, c *Cluster, p *corev1.Pod, name string) int {
	t.Helper()
	cs := containerStatus(p, name)
	if cs == nil || cs.ContainerID == "" {
		t.Fatalf("pod %s has no %s container status", p.Name, name)
	}
	pid, err := c.ContainerPID(ctx, strings.TrimPrefix(cs.ContainerID, "containerd://"))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// daemonSetReady: desired = ready = updated = 1, with the chart's real
// probes deciding readiness.
func daemonSetReady(c *Cluster) func(ctx context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) { return c.DaemonSetReady(ctx, tandemNS, releaseName) }
}

// workloadNamed returns the receiver's resources, from the from'th on,
// that name the workload's namespace and, with hot, carry a sample in
// its hot function.
func workloadNamed(recv *otlptest.Receiver, from int, hot bool) []otlptest.Resource {
	var out []otlptest.Resource
	res := recv.Resources()
	for _, r := range res[min(from, len(res)):] {
		if r.Attributes["k8s.namespace.name"] != workloadNS {
			continue
		}
		if !hot {
			out = append(out, r)
			continue
		}
	samples:
		for _, s := range r.Profiles[0].Samples {
			for _, f := range s.Frames {
				if f.Function == hotFunction {
					out = append(out, r)
					break samples
				}
			}
		}
	}
	return out
}

// encoderMetrics returns the encoder's metrics (its --http-address on the
// pod's IP, reached through the bridge) whose names start with one of
// prefixes, or the error.
func encoderMetrics(ctx context.Context, c *Cluster, pod *corev1.Pod, prefixes ...string) string {
	p, err := c.Client().CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	hc := &http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get("http://" + net.JoinHostPort(p.Status.PodIP, "7071") + "/metrics")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var out []string
	for _, l := range strings.Split(string(body), "\n") {
		for _, pfx := range prefixes {
			if strings.HasPrefix(l, pfx) {
				out = append(out, l)
			}
		}
	}
	return strings.Join(out, "; ")
}

// leafFrames summarises the leaf frames of the resources' samples: how
// many samples each function (or, unnamed, frame type and mapping) has.
func leafFrames(res []otlptest.Resource) string {
	counts := map[string]int{}
	for _, r := range res {
		for _, p := range r.Profiles {
			for _, s := range p.Samples {
				if len(s.Frames) == 0 {
					counts["(no frames)"] += len(s.Timestamps)
					continue
				}
				f := s.Frames[0]
				key := f.Function
				if key == "" {
					key = fmt.Sprintf("%s@%#x in %q (build id %q, %d frames)", f.Type, f.Address, f.MappingFile, f.BuildID, len(s.Frames))
				}
				counts[key] += len(s.Timestamps)
			}
		}
	}
	return fmt.Sprint(counts)
}

// TestCluster installs the chart into a real single-node cluster with
// Helm's library and checks what issue 27 lists: the DaemonSet ready with
// its real probes; the workload's samples named through the encoder's
// service-account token and the chart's ClusterRole; the encoder's every
// API request node-scoped and allowed (audit log); the service account
// allowed exactly what rbac.yaml lists; no Pod Security warning naming
// the encoder; the sampler holding exactly the chart's capabilities; the
// encoder SIGKILLed and restarted by the kubelet; a helm upgrade rolling
// the pod with the old pod's last samples delivered (produced = delivered,
// nothing lost); helm uninstall leaving nothing; and the host as it was.
func TestCluster(t *testing.T) {
	binDir := requireCluster(t)
	start := time.Now()
	dir := t.TempDir()
	ctx := context.Background()

	type built struct {
		builds
		err error
	}
	builtc := make(chan built, 1)
	go func() {
		var b built
		b.builds, b.err = build(dir)
		builtc <- b
	}()

	cfg := DefaultConfig(filepath.Join(dir, "cluster"), binDir)
	cfg.Log = testLog{t}
	c, err := Up(ctx, cfg)
	if err != nil {
		<-builtc
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Down(); err != nil {
			t.Error(err)
		}
	})
	up := time.Since(start)
	b := <-builtc
	if b.err != nil {
		t.Fatal(b.err)
	}
	if err := c.ImportImage(ctx, b.busy); err != nil {
		t.Fatal(err)
	}
	// The release in a registry on loopback, as a user pushes it to their
	// own: the chart comes from there with Helm's registry client, the
	// image is pulled from there by containerd.
	host := registrytest.Start(t)
	pushed := registrytest.Push(t, b.release, host)
	if err := c.TrustRegistry(host); err != nil {
		t.Fatal(err)
	}
	ch, err := PullChart(pushed.Chart, pushed.ChartVersion)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cluster up %v; release built and pushed %v after the start (chart %s --version %s, image %s@%s)", up.Round(100*time.Millisecond),
		time.Since(start).Round(100*time.Millisecond), pushed.Chart, pushed.ChartVersion, pushed.ImageRepository, pushed.ImageDigest)
	w := waiter{t: t, c: c}

	createWorkload(ctx, t, c)
	w.until("the workload Deployment available", 2*time.Minute, func(ctx context.Context) (bool, error) {
		d, err := c.Client().AppsV1().Deployments(workloadNS).Get(ctx, workload, metav1.GetOptions{})
		return err == nil && d.Status.AvailableReplicas == 1, err
	})

	// The receiver listens on the node's address: pods reach it through
	// the bridge.
	recv := otlptest.StartReceiverAt(t, c.NodeIP+":0")
	parca := parcatest.StartServerAt(t, c.NodeIP+":0")
	warn := &Warnings{}
	rest.SetDefaultWarningHandler(warn)
	t.Cleanup(func() { rest.SetDefaultWarningHandler(rest.WarningLogger{}) })
	// The namespace as docs/kubernetes.md says to make it where Pod
	// Security is enforced; the chart's objects go in it.
	if err := c.NamespaceFor(ctx, tandemNS); err != nil {
		t.Fatal(err)
	}
	helm, err := c.Helm(tandemNS)
	if err != nil {
		t.Fatal(err)
	}
	installed := time.Now()
	if err := HelmInstall(helm, ch, tandemNS, releaseName, chartValues(pushed, recv.Addr(), parca.Addr(), 19)); err != nil {
		t.Fatal(err)
	}
	installWarnings := warn.Take()
	w.until("the DaemonSet desired = ready = 1", 3*time.Minute, daemonSetReady(c))
	ready := time.Since(installed)
	w.until("samples of the workload named with its pod", 2*time.Minute, func(context.Context) (bool, error) {
		return len(workloadNamed(recv, 0, false)) > 0, nil
	})
	firstNamed := time.Since(installed)
	t.Logf("helm install: DaemonSet ready after %v, the workload's first named samples delivered after %v", ready.Round(100*time.Millisecond), firstNamed.Round(100*time.Millisecond))

	t.Run("pod security", func(t *testing.T) { checkWarnings(t, installWarnings) })
	t.Run("workload identity", func(t *testing.T) { checkNamed(ctx, t, c, recv) })
	w.until("Parca rows of the workload's pod, labelled from __meta_kubernetes_*", time.Minute, func(context.Context) (bool, error) {
		return len(parcaRowsOf(parca, workloadNS)) > 0, nil
	})
	t.Run("arrow labels", func(t *testing.T) { checkArrowLabels(ctx, t, c, parca) })

	pod, err := tandemPod(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	samplerPID := containerPID(ctx, t, c, pod, "sampler")
	encoderPID := containerPID(ctx, t, c, pod, "encoder")
	t.Run("sampler container", func(t *testing.T) { checkSampler(t, samplerPID, ch, pushed) })
	t.Run("encoder container", func(t *testing.T) { checkEncoder(t, encoderPID) })
	t.Run("rbac", func(t *testing.T) { checkRBAC(ctx, t, c, ch, pushed) })
	t.Run("memory", func(t *testing.T) { logMemory(ctx, t, c, pod) })

	// The sampler's recording lives in the pod's socket emptyDir, gone
	// with the pod: hold it open through the sampler's root to read it
	// whole once the pod has ended.
	rec, err := os.Open(fmt.Sprintf("/proc/%d/root/run/tandem/sampler.rec", samplerPID))
	if err != nil {
		t.Fatalf("open the sampler's recording: %v", err)
	}
	defer rec.Close()

	// SIGKILL the encoder: the kubelet restarts the container, the
	// sampler reconnects and resends what was not acknowledged.
	if err := unix.Kill(encoderPID, unix.SIGKILL); err != nil {
		t.Fatalf("kill the encoder (pid %d): %v", encoderPID, err)
	}
	killed := len(recv.Resources())
	w.until("the kubelet restarting the encoder", 2*time.Minute, func(ctx context.Context) (bool, error) {
		p, err := c.Client().CoreV1().Pods(tandemNS).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cs := containerStatus(p, "encoder")
		return cs != nil && cs.RestartCount == 1 && cs.Ready, nil
	})
	// The restarted encoder names the workload's Go frames: the sampler
	// passes the executables it holds again, before it resends.
	w.until("samples of the workload's pod, its Go frames named, from the restarted encoder", 2*time.Minute, func(context.Context) (bool, error) {
		return len(workloadNamed(recv, killed, true)) > 0, nil
	})
	t.Logf("resources of the workload: %d before the kill (%d naming %s), %d after (%d naming it)",
		len(workloadNamed(recv, 0, false))-len(workloadNamed(recv, killed, false)), len(workloadNamed(recv, 0, true))-len(workloadNamed(recv, killed, true)), hotFunction,
		len(workloadNamed(recv, killed, false)), len(workloadNamed(recv, killed, true)))
	t.Logf("the workload's leaf frames: %s", leafFrames(workloadNamed(recv, 0, false)))
	t.Logf("the restarted encoder's symbolizer: %s", encoderMetrics(ctx, c, pod, "tandem_encoder_symbolizer_", "tandem_encoder_executables"))

	// The old pod's last words (its final flush, the sampler's goodbye),
	// kept for the balance's report: its logs go with it.
	oldLogs := followLogs(t, c, pod, filepath.Join(dir, "old-pod"))

	// helm upgrade with another sampling frequency and the chart's other
	// output, pprof files in a host directory: the DaemonSet rolls the
	// pod; the old pod's samples are those with the old period.
	profiles := filepath.Join(dir, "profiles")
	upgraded := chartValues(pushed, recv.Addr(), parca.Addr(), 23)
	upgraded["output"] = map[string]any{"pprof": map[string]any{"hostPath": profiles}}
	if err := HelmUpgrade(helm, ch, tandemNS, releaseName, upgraded); err != nil {
		t.Fatal(err)
	}
	w.until("the old tandem pod gone", 2*time.Minute, func(ctx context.Context) (bool, error) {
		_, err := c.Client().CoreV1().Pods(tandemNS).Get(ctx, pod.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	w.until("the upgraded DaemonSet ready", 3*time.Minute, daemonSetReady(c))
	t.Run("samples balance", func(t *testing.T) { checkBalance(t, rec, b.encoder, recv, filepath.Join(dir, "replay"), oldLogs) })
	rec.Close()
	// The kubelet made the hostPath directory root's; the chart's init
	// container (prepare-dir) gave it to the encoder, which writes there.
	w.until("a pprof file in the host directory naming the workload's hot function", 2*time.Minute, func(context.Context) (bool, error) {
		return pprofNames(profiles, hotFunction)
	})
	t.Run("pprof host directory", func(t *testing.T) { checkProfilesDir(t, profiles) })

	t.Run("audit log", func(t *testing.T) { checkAudit(t, c) })

	if err := HelmUninstall(helm, releaseName); err != nil {
		t.Fatal(err)
	}
	w.until("helm uninstall to leave nothing", 2*time.Minute, func(ctx context.Context) (bool, error) {
		return uninstalled(ctx, c)
	})
	// The release's namespace is the user's: kept, as the chart promises.
	if _, err := c.Client().CoreV1().Namespaces().Get(ctx, tandemNS, metav1.GetOptions{}); err != nil {
		t.Errorf("helm uninstall removed the release's namespace, which may hold the user's Secrets: %v", err)
	}
	for _, ns := range []string{tandemNS, workloadNS} {
		if err := c.Client().CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
			t.Error(err)
		}
	}
	t.Logf("wall time before teardown: %v", time.Since(start).Round(100*time.Millisecond))
}

// uninstalled: no object of the release is left.
func uninstalled(ctx context.Context, c *Cluster) (bool, error) {
	client := c.Client()
	checks := []func() error{
		func() error {
			_, err := client.RbacV1().ClusterRoles().Get(ctx, releaseName+"-encoder", metav1.GetOptions{})
			return err
		},
		func() error {
			_, err := client.RbacV1().ClusterRoleBindings().Get(ctx, releaseName+"-encoder", metav1.GetOptions{})
			return err
		},
	}
	for _, check := range checks {
		if err := check(); !apierrors.IsNotFound(err) {
			return false, err
		}
	}
	pods, err := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + releaseName})
	if err != nil || len(pods.Items) > 0 {
		return false, err
	}
	sas, err := client.CoreV1().ServiceAccounts("").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + releaseName})
	return err == nil && len(sas.Items) == 0, err
}
