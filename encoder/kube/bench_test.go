package kube

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tandem-profiler/tandem/test/waittest"
)

// kubeletMaxPods is the kubelet's default pod limit per node.
const kubeletMaxPods = 110

// realisticPod is a Deployment's pod as the API returns it: two
// containers with env, probes, resources and mounts, managed fields from
// three managers and the last-applied annotation.
func realisticPod(i int) *corev1.Pod {
	p := testPod()
	p.Name = fmt.Sprintf("web-%03d-abcde", i)
	p.UID = types.UID(fmt.Sprintf("uid-%03d", i))
	id := func(c int) string { return fmt.Sprintf("%060d%04d", i, c) }
	p.Status.ContainerStatuses = []corev1.ContainerStatus{
		{Name: "app", ContainerID: "containerd://" + id(0), Image: "registry.example:5000/shop/web:1.4.2", ImageID: "sha256:" + strings.Repeat("f", 64)},
		{Name: "sidecar", ContainerID: "containerd://" + id(1), Image: "envoy:1.30", ImageID: "sha256:" + strings.Repeat("e", 64)},
	}
	p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "migrate", ContainerID: "containerd://" + id(2)}}
	p.Status.EphemeralContainerStatuses = nil
	p.Spec.EphemeralContainers = nil
	full := func(name, image string) corev1.Container {
		c := corev1.Container{Name: name, Image: image, Command: []string{"/" + name, "--config=/etc/" + name + "/config.yaml"}}
		for e := range 15 {
			c.Env = append(c.Env, corev1.EnvVar{Name: fmt.Sprintf("SETTING_%02d", e), Value: strings.Repeat("v", 40)})
		}
		c.VolumeMounts = []corev1.VolumeMount{{Name: "config", MountPath: "/etc/" + name}, {Name: "token", MountPath: "/var/run/secrets"}}
		c.LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz"}}}
		c.ReadinessProbe = c.LivenessProbe
		return c
	}
	p.Spec.Containers = []corev1.Container{full("app", "registry.example:5000/shop/web:1.4.2"), full("sidecar", "envoy:1.30")}
	p.Spec.InitContainers = []corev1.Container{full("migrate", "shop/migrate:1.4.2")}
	p.Spec.Volumes = []corev1.Volume{{Name: "config"}, {Name: "token"}}
	p.Annotations[lastAppliedAnnotation] = strings.Repeat(`{"apiVersion":"v1","kind":"Pod","spec":{}}`, 60) // ~2.6 KB
	var fields []string
	for f := range 40 {
		fields = append(fields, fmt.Sprintf(`"f:example.com/label-%02d":{}`, f))
	}
	managed := `{"f:metadata":{"f:labels":{` + strings.Join(fields, ",") + `}}}` // ~1.1 KB
	p.ManagedFields = []metav1.ManagedFieldsEntry{
		{Manager: "kube-controller-manager", Operation: "Update", FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(managed)},
		{Manager: "kubelet", Operation: "Update", Subresource: "status", FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(managed)},
		{Manager: "kubectl", Operation: "Apply", FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(managed)},
	}
	p.Status.Conditions = append(p.Status.Conditions,
		corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, Message: strings.Repeat("m", 50)},
		corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue})
	return p
}

func containerIDs(n int) []string {
	var ids []string
	for i := range n {
		for c := range 3 {
			ids = append(ids, fmt.Sprintf("%060d%04d", i, c))
		}
	}
	return ids
}

// TestLookupAllocs: the per-sample lookup allocates nothing, hit or miss.
func TestLookupAllocs(t *testing.T) {
	client := fakeClient()
	for i := range kubeletMaxPods {
		if err := client.Tracker().Add(toUnstructured(t, realisticPod(i))); err != nil {
			t.Fatal(err)
		}
	}
	f := start(t, client, nil)
	ids := containerIDs(kubeletMaxPods)
	waittest.For(t, "110 pods", func() bool { return f.in.Lookup(ids[len(ids)-1]) != nil && f.in.Lookup(ids[0]) != nil })
	miss := strings.Repeat("9", 64)
	i := 0
	if a := testing.AllocsPerRun(1000, func() { f.in.Lookup(ids[i%len(ids)]); f.in.Lookup(miss); i++ }); a != 0 {
		t.Errorf("%v allocations per lookup, want 0", a)
	}
}

func BenchmarkLookup(b *testing.B) {
	s, err := newStore(DefaultConfig(), nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	for i := range kubeletMaxPods {
		p := trimmed(b, realisticPod(i))
		s.setPod(p.UID, p.Namespace+"/"+p.Name, buildWorkloads(p, []owner{{"ReplicaSet", "web-7d9f8"}, {"Deployment", "web"}}, false))
	}
	ids := containerIDs(kubeletMaxPods)
	miss := strings.Repeat("9", 64)
	b.Run("hit", func(b *testing.B) {
		b.ReportAllocs()
		for i := range b.N {
			if s.Lookup(ids[i%len(ids)]) == nil {
				b.Fatal("miss")
			}
		}
	})
	b.Run("miss", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if s.Lookup(miss) != nil {
				b.Fatal("hit")
			}
		}
	})
}

func heapAlloc() uint64 {
	var ms runtime.MemStats
	for range 3 {
		runtime.GC()
	}
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkInformerMemory110Pods reports the heap an Informer holding 110
// realistic pods (330 containers) adds, trimmed as it keeps them, and what
// the same pods take untrimmed.
func BenchmarkInformerMemory110Pods(b *testing.B) {
	for range b.N {
		client := fakeClient()
		for i := range kubeletMaxPods {
			if err := client.Tracker().Add(toUnstructured(b, realisticPod(i))); err != nil {
				b.Fatal(err)
			}
		}
		before := heapAlloc()
		cfg := DefaultConfig()
		cfg.Mode, cfg.Node = ModeOn, node
		in, err := NewForClient(cfg, client, discardLogger(), nil)
		if err != nil {
			b.Fatal(err)
		}
		stop := runInBackground(in)
		ids := containerIDs(kubeletMaxPods)
		for in.Lookup(ids[len(ids)-1]) == nil || in.Lookup(ids[0]) == nil {
			runtime.Gosched()
		}
		held := heapAlloc() - before
		stop()

		pods := make([]*corev1.Pod, kubeletMaxPods)
		before = heapAlloc()
		for i := range pods {
			pods[i] = realisticPod(i)
		}
		untrimmed := heapAlloc() - before
		runtime.KeepAlive(pods)
		b.ReportMetric(float64(held), "informer-bytes")
		b.ReportMetric(float64(untrimmed), "untrimmed-pods-bytes")
	}
}

// trimmed is p as the informer keeps it.
func trimmed(t testing.TB, p *corev1.Pod) *pod {
	t.Helper()
	got, err := trimPod(toUnstructured(t, p))
	if err != nil {
		t.Fatal(err)
	}
	return got.(*pod)
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// runInBackground runs in until the returned stop is called.
func runInBackground(in *Informer) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { in.Run(ctx); close(done) }()
	return func() { cancel(); <-done }
}
