package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tandem-profiler/tandem/test/harness"
	"github.com/tandem-profiler/tandem/test/kubetest"
	"github.com/tandem-profiler/tandem/test/otlptest"
	"github.com/tandem-profiler/tandem/test/parcatest"
	"github.com/tandem-profiler/tandem/test/privtest"
)

const kubeNode = "node-e2e"

// kubeletCgroup creates the cgroup a kubelet (systemd driver) and
// containerd give a container of a BestEffort pod, under the cgroup v2
// root or, on a v1 host, the pids hierarchy, and removes it at the end.
// It returns the cgroup.procs file to move a process in.
func kubeletCgroup(t *testing.T, podUID, containerID string) string {
	t.Helper()
	root := "/sys/fs/cgroup"
	if !fileExists(filepath.Join(root, "cgroup.controllers")) {
		root = filepath.Join(root, "pids") // v1 (hybrid) host
	}
	slices := []string{
		"kubepods.slice",
		"kubepods-besteffort.slice",
		"kubepods-besteffort-pod" + strings.ReplaceAll(podUID, "-", "_") + ".slice",
		"cri-containerd-" + containerID + ".scope",
	}
	dir := root
	var made []string
	for _, s := range slices {
		dir = filepath.Join(dir, s)
		if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
			privtest.SkipOrFail(t, "cannot create a cgroup (%v): needs a writable cgroup filesystem", err)
		} else if err == nil {
			made = append(made, dir)
		}
	}
	t.Cleanup(func() {
		for i := len(made) - 1; i >= 0; i-- {
			// The workload has exited by now; a cgroup with no process
			// can be removed.
			for range 50 {
				if err := os.Remove(made[i]); err == nil || os.IsNotExist(err) {
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
	})
	return filepath.Join(dir, "cgroup.procs")
}

func randomHex(t *testing.T, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// TestKubernetesWorkloadIdentity runs the real pair with the encoder
// given --kubeconfig to a test API server (test/kubetest, node-scoped,
// token checked) and a workload in a cgroup laid out as a kubelet lays it
// out: the OTLP receiver sees the pod's k8s.* resource attributes on the
// workload's samples, the Parca-compatible store sees namespace, pod and
// container labels made by relabel rules over __meta_kubernetes_*, and
// the API server saw only node-scoped pod requests (and the one
// ReplicaSet GET that names the Deployment).
func TestKubernetesWorkloadIdentity(t *testing.T) {
	t.Parallel()
	requirePrivileges(t)
	containerID := randomHex(t, 32)
	u := randomHex(t, 16)
	podUID := u[:8] + "-" + u[8:12] + "-" + u[12:16] + "-" + u[16:20] + "-" + u[20:]
	procs := kubeletCgroup(t, podUID, containerID)

	api := kubetest.Start(t, "e2e-token", kubeNode)
	api.SetReplicaSet(&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-5c9d7", Namespace: "shop", UID: "uid-rs",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "uid-dep", Controller: ptr(true)}}}})
	dir := sharedDir(t)
	kubeconfig := api.Kubeconfig(t, dir)
	if err := os.Chmod(kubeconfig, 0o644); err != nil { // the encoder runs as another uid
		t.Fatal(err)
	}

	otlpRecv := otlptest.StartReceiver(t)
	parca := parcatest.StartServer(t)
	cfg := filepath.Join(dir, "tandem.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`outputs:
  - {name: collector, format: otlp, address: %q, insecure: true, compression: none}
  - {name: parca, format: arrow-v2, address: %q, insecure: true}
relabel_configs:
  - {source_labels: [__meta_kubernetes_namespace], target_label: namespace}
  - {source_labels: [__meta_kubernetes_pod_name], target_label: pod}
  - {source_labels: [__meta_kubernetes_pod_container_name], target_label: container}
  - {source_labels: [__meta_kubernetes_pod_label_app], target_label: app}
  - {source_labels: [__meta_kubernetes_pod_controller_kind, __meta_kubernetes_pod_controller_name], separator: /, regex: "(.+/.+)", target_label: controller}
`, otlpRecv.Addr(), parca.Addr())), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startPairOrdered(t, false, []string{"--config-path", cfg, "--debuginfo-upload-disable",
		"--kubeconfig", kubeconfig, "--node", kubeNode, "--kubernetes", "on"})

	// The workload moves itself into the container's cgroup, then becomes
	// sha256sum, running until the store has its labelled rows. Its first
	// samples are exported before the API reports its pod: they go out
	// without Kubernetes attributes, not held back.
	w := start(t, "pod workload", 0, "sh", "-c", fmt.Sprintf("echo $$ > %s && exec sha256sum /dev/zero", procs))
	var early int
	harness.WaitFor(t, "the container's first samples at the OTLP receiver", 30*time.Second, func() bool {
		early = 0
		for _, s := range otlpRecv.Samples(t) {
			if s.Resource["container.id"] == containerID {
				if s.Resource["k8s.pod.name"] != "" {
					t.Fatal("a sample got pod attributes before the pod existed")
				}
				early++
			}
		}
		return early > 0
	}, p.Sampler, p.Encoder, w)
	api.SetPod(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-5c9d7-x2x2x", Namespace: "shop", UID: types.UID(podUID),
			Labels: map[string]string{"app": "web", "pod-template-hash": "5c9d7"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-5c9d7", UID: "uid-rs",
				Controller: ptr(true)}}},
		Spec: corev1.PodSpec{NodeName: kubeNode, Containers: []corev1.Container{{Name: "app", Image: "registry.example/shop/web:2.1"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", ContainerID: "containerd://" + containerID}}},
	})

	wantAttrs := map[string]string{
		"container.id": containerID, "k8s.namespace.name": "shop", "k8s.pod.name": "web-5c9d7-x2x2x",
		"k8s.pod.uid": podUID, "k8s.container.name": "app", "k8s.node.name": kubeNode,
		"k8s.replicaset.name": "web-5c9d7", "k8s.deployment.name": "web", "container.image.name": "registry.example/shop/web",
		"service.name": "web", "container.image.tags": "2.1",
	}
	var labelled, inContainer int
	harness.WaitFor(t, "the pod's samples with their k8s.* attributes at the OTLP receiver", 30*time.Second, func() bool {
		labelled, inContainer = 0, 0
		for _, s := range otlpRecv.Samples(t) {
			if s.Resource["container.id"] != containerID {
				continue
			}
			inContainer++
			ok := true
			for k, v := range wantAttrs {
				ok = ok && s.Resource[k] == v
			}
			if ok {
				labelled++
			}
		}
		return labelled > 0
	}, p.Sampler, p.Encoder, w)
	t.Logf("OTLP: %d of the container's %d samples carry the pod's attributes (%d exported before the pod was reported)", labelled, inContainer, early)
	if labelled+early > inContainer {
		t.Errorf("%d labelled and %d early samples of %d", labelled, early, inContainer)
	}

	wantLabels := []string{"namespace=shop", "pod=web-5c9d7-x2x2x", "container=app", "app=web", "controller=ReplicaSet/web-5c9d7", "comm=sha256sum"}
	var rows int
	var seen []string // the workload's label sets, for the failure message
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("sha256sum rows' labels at the Parca store: %q", seen)
		}
	})
	harness.WaitFor(t, "the pod's rows with relabelled Kubernetes labels at the Parca store", 30*time.Second, func() bool {
		rows, seen = 0, seen[:0]
		for _, r := range parca.Rows() {
			set := "," + r.Labels + ","
			if strings.Contains(set, ",comm=sha256sum,") && len(seen) < 5 {
				seen = append(seen, r.Labels)
			}
			ok := true
			for _, l := range wantLabels {
				ok = ok && strings.Contains(set, ","+l+",")
			}
			if ok {
				rows++
			}
		}
		return rows > 0
	}, p.Sampler, p.Encoder, w)
	w.Kill() // its cgroup is removed at the end
	for _, r := range parca.Rows() {
		if strings.Contains(r.Labels, "__meta_") {
			t.Fatalf("a __meta_ label reached the store: %s", r.Labels)
		}
	}
	t.Logf("Parca: %d rows with %v", rows, wantLabels)

	var podRequests, watches int
	for _, r := range api.Requests() {
		switch {
		case r.Path == "/api/v1/pods" && r.FieldSelector == "spec.nodeName="+kubeNode && r.Status == 200:
			podRequests++
			if r.Watch {
				watches++
			}
		case r.Path == "/apis/apps/v1/namespaces/shop/replicasets/web-5c9d7" && r.Status == 200:
		default:
			t.Errorf("the API server saw %s %s?%s (%d): only node-scoped pod requests are expected", r.Method, r.Path, r.RawQuery, r.Status)
		}
	}
	if podRequests == 0 || watches == 0 {
		t.Errorf("%d pod requests, %d watches", podRequests, watches)
	}
	if hit := harness.EncoderMetric(t, p.HTTPAddr, `tandem_encoder_kubernetes_lookups_total{result="hit"}`); hit == 0 {
		t.Error("no lookup hit counted")
	}
}

func ptr[T any](v T) *T { return &v }
