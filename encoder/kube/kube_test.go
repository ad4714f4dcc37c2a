package kube

import (
	"context"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
	"github.com/tandem-profiler/tandem/test/waittest"
)

const node = "node-a"

func hexID(c byte) string { return strings.Repeat(string(c), 64) }

func ctrl(kind, name, uid string) []metav1.OwnerReference {
	t := true
	return []metav1.OwnerReference{{Kind: kind, Name: name, UID: types.UID(uid), Controller: &t}}
}

// testPod is a pod of a Deployment with a regular, an init and an
// ephemeral container, as the API reports it (managed fields included).
func testPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-7d9f8-abcde", Namespace: "shop", UID: "uid-web",
			Labels:          map[string]string{"app": "web", "pod-template-hash": "7d9f8", "tier.example.com/role": "front"},
			Annotations:     map[string]string{"note": "x", lastAppliedAnnotation: `{"big":"json"}`},
			OwnerReferences: ctrl("ReplicaSet", "web-7d9f8", "uid-rs"),
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: "Update"}},
		},
		Spec: corev1.PodSpec{
			NodeName:       node,
			Containers:     []corev1.Container{{Name: "app", Image: "registry.example:5000/shop/web:1.4.2", Command: []string{"/web"}}},
			InitContainers: []corev1.Container{{Name: "migrate", Image: "shop/migrate@sha256:" + hexID('d')}},
			EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
				Name: "debug", Image: "busybox"}}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: "10.0.0.7", HostIP: "192.168.1.2",
			Conditions:                 []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses:          []corev1.ContainerStatus{{Name: "app", ContainerID: "containerd://" + hexID('a'), Image: "x"}},
			InitContainerStatuses:      []corev1.ContainerStatus{{Name: "migrate", ContainerID: "cri-o://" + hexID('b')}},
			EphemeralContainerStatuses: []corev1.ContainerStatus{{Name: "debug", ContainerID: "docker://" + hexID('c'), Image: "docker.io/library/busybox:latest"}},
		},
	}
}

func testRS() *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{
		Name: "web-7d9f8", Namespace: "shop", UID: "uid-rs", OwnerReferences: ctrl("Deployment", "web", "uid-dep")}}
}

type fixture struct {
	in    *Informer
	reg   *prometheus.Registry
	clock *fakeClock
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func start(t *testing.T, client dynamic.Interface, mutate func(*Config)) *fixture {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Mode, cfg.Node = ModeOn, node
	if mutate != nil {
		mutate(&cfg)
	}
	reg := prometheus.NewRegistry()
	in, err := NewForClient(cfg, client, slog.New(slog.NewTextHandler(io.Discard, nil)), reg)
	if err != nil {
		t.Fatal(err)
	}
	return runFixture(t, in, reg)
}

// runFixture runs in on a fake clock until the test ends.
func runFixture(t *testing.T, in *Informer, reg *prometheus.Registry) *fixture {
	t.Helper()
	clock := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	in.now = clock.now
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { in.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return &fixture{in: in, reg: reg, clock: clock}
}

func attrs(as []aggregate.Attr) map[string]string {
	m := make(map[string]string, len(as))
	for _, a := range as {
		m[a.Key] = a.Value
	}
	return m
}

func TestJoinAndNames(t *testing.T) {
	f := start(t, fakeClient(testPod(), testRS()), nil)
	var w *aggregate.Workload
	waittest.For(t, "the app container", func() bool {
		w = f.in.Lookup(hexID('a'))
		return w != nil && attrs(w.Attributes)[AttrDeployment] != ""
	})
	meta := attrs(w.Meta)
	for k, v := range map[string]string{
		MetaNamespace: "shop", MetaPodName: "web-7d9f8-abcde", MetaPodUID: "uid-web", MetaPodIP: "10.0.0.7",
		MetaPodReady: "true", MetaPodPhase: "Running", MetaPodNodeName: node, MetaPodHostIP: "192.168.1.2",
		MetaNodeName: node, MetaContainerName: "app", MetaContainerID: hexID('a'),
		MetaContainerImage: "registry.example:5000/shop/web:1.4.2", MetaContainerInit: "false",
		MetaControllerKind: "ReplicaSet", MetaControllerName: "web-7d9f8",
		"__meta_kubernetes_pod_label_app": "web", "__meta_kubernetes_pod_labelpresent_app": "true",
		"__meta_kubernetes_pod_label_tier_example_com_role": "front",
		"__meta_kubernetes_pod_annotation_note":             "x", "__meta_kubernetes_pod_annotationpresent_note": "true",
	} {
		if meta[k] != v {
			t.Errorf("meta %s = %q, want %q", k, meta[k], v)
		}
	}
	if _, ok := meta["__meta_kubernetes_pod_annotation_kubectl_kubernetes_io_last_applied_configuration"]; ok {
		t.Error("the last-applied annotation was kept")
	}
	wantAttrs := map[string]string{
		AttrNamespace: "shop", AttrPodName: "web-7d9f8-abcde", AttrPodUID: "uid-web", AttrContainer: "app",
		AttrNode: node, AttrReplicaSet: "web-7d9f8", AttrDeployment: "web", AttrImageName: "registry.example:5000/shop/web",
	}
	if got := attrs(w.Attributes); !equalMaps(got, wantAttrs) {
		t.Errorf("attributes = %v, want %v", got, wantAttrs)
	}
	if len(w.ListAttributes) != 1 || w.ListAttributes[0] != (aggregate.Attr{Key: AttrImageTags, Value: "1.4.2"}) {
		t.Errorf("list attributes = %v", w.ListAttributes)
	}
	wantLabels := map[string]string{LabelNamespace: "shop", LabelPod: "web-7d9f8-abcde", LabelContainer: "app",
		LabelContainerImage: "registry.example:5000/shop/web:1.4.2"}
	if got := attrs(w.Labels); !equalMaps(got, wantLabels) {
		t.Errorf("labels = %v, want %v", got, wantLabels)
	}
	if w.ServiceName != "web" {
		t.Errorf("service name %q, want the deployment's", w.ServiceName)
	}
	for _, set := range [][]aggregate.Attr{w.Meta, w.Labels, w.Attributes} {
		for i := 1; i < len(set); i++ {
			if set[i-1].Key >= set[i].Key {
				t.Errorf("not sorted and unique: %q before %q", set[i-1].Key, set[i].Key)
			}
		}
	}

	init := f.in.Lookup(hexID('b'))
	if init == nil || attrs(init.Meta)[MetaContainerInit] != "true" || attrs(init.Attributes)[AttrContainer] != "migrate" ||
		attrs(init.Attributes)[AttrImageName] != "shop/migrate" || len(init.ListAttributes) != 0 {
		t.Errorf("init container: %+v", init)
	}
	eph := f.in.Lookup(hexID('c'))
	if eph == nil || attrs(eph.Attributes)[AttrContainer] != "debug" || attrs(eph.Meta)[MetaContainerImage] != "busybox" {
		t.Errorf("ephemeral container: %+v", eph)
	}
	if f.in.Lookup(hexID('e')) != nil || f.in.Lookup("") != nil {
		t.Error("unknown container resolved")
	}
	if hit := testutil.ToFloat64(f.in.m.hits); hit < 3 {
		t.Errorf("hits = %v", hit)
	}
	if miss := testutil.ToFloat64(f.in.m.misses); miss < 1 {
		t.Errorf("misses = %v", miss)
	}
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestOwnersAndServiceName(t *testing.T) {
	forbidRS := func(c *dynamicfake.FakeDynamicClient) {
		c.PrependReactor("get", "replicasets", func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "replicasets"}, "web-7d9f8", nil)
		})
	}
	cronJob := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "report-2900", Namespace: "shop", UID: "uid-job",
		OwnerReferences: ctrl("CronJob", "report", "uid-cj")}}
	for _, tc := range []struct {
		name    string
		owners  []metav1.OwnerReference
		labels  map[string]string
		objects []runtime.Object
		react   func(*dynamicfake.FakeDynamicClient)
		want    map[string]string
		service string
		errKind string
	}{
		{name: "deployment", owners: ctrl("ReplicaSet", "web-7d9f8", "uid-rs"), objects: []runtime.Object{testRS()},
			labels: map[string]string{"pod-template-hash": "7d9f8"},
			want:   map[string]string{AttrReplicaSet: "web-7d9f8", AttrDeployment: "web"}, service: "web"},
		{name: "replicaset forbidden: deployment from the pod-template-hash", owners: ctrl("ReplicaSet", "web-7d9f8", "uid-rs"),
			labels: map[string]string{"pod-template-hash": "7d9f8"}, react: forbidRS,
			want: map[string]string{AttrReplicaSet: "web-7d9f8", AttrDeployment: "web"}, service: "web", errKind: ErrForbidden},
		{name: "bare replicaset", owners: ctrl("ReplicaSet", "solo", "uid-rs2"),
			objects: []runtime.Object{&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "solo", Namespace: "shop", UID: "uid-rs2"}}},
			want:    map[string]string{AttrReplicaSet: "solo"}, service: "solo"},
		{name: "cronjob", owners: ctrl("Job", "report-2900", "uid-job"), objects: []runtime.Object{cronJob},
			want: map[string]string{AttrJob: "report-2900", AttrCronJob: "report"}, service: "report"},
		{name: "statefulset", owners: ctrl("StatefulSet", "db", "uid-ss"),
			want: map[string]string{AttrStatefulSet: "db"}, service: "db"},
		{name: "daemonset", owners: ctrl("DaemonSet", "agent", "uid-ds"),
			want: map[string]string{AttrDaemonSet: "agent"}, service: "agent"},
		{name: "custom controller", owners: ctrl("Rollout", "canary", "uid-ro"), want: map[string]string{}, service: "canary"},
		{name: "bare pod: the container name", want: map[string]string{}, service: "app"},
		{name: "app.kubernetes.io/name wins", owners: ctrl("StatefulSet", "db", "uid-ss"),
			labels: map[string]string{"app.kubernetes.io/name": "postgres"},
			want:   map[string]string{AttrStatefulSet: "db"}, service: "postgres"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod()
			pod.OwnerReferences, pod.Labels = tc.owners, tc.labels
			client := fakeClient(append(tc.objects, pod)...)
			if tc.react != nil {
				tc.react(client)
			}
			f := start(t, client, nil)
			var w *aggregate.Workload
			waittest.For(t, "the pod", func() bool { w = f.in.Lookup(hexID('a')); return w != nil })
			got := map[string]string{}
			for _, a := range w.Attributes {
				if strings.HasPrefix(a.Key, "k8s.") && strings.HasSuffix(a.Key, "set.name") || ownerKey(a.Key) {
					got[a.Key] = a.Value
				}
			}
			if !equalMaps(got, tc.want) {
				t.Errorf("workload attributes %v, want %v", got, tc.want)
			}
			if w.ServiceName != tc.service {
				t.Errorf("service name %q, want %q", w.ServiceName, tc.service)
			}
			if tc.errKind != "" {
				if n := testutil.ToFloat64(f.in.m.apiErrors.WithLabelValues(tc.errKind)); n < 1 {
					t.Errorf("%s errors = %v", tc.errKind, n)
				}
				// A 403 stays in the /readyz warning while pod lists and
				// watches succeed (forbidden_test.go: against a real-HTTP
				// API server, until the lookup itself succeeds).
				if w := f.in.Warning(); !strings.Contains(w, "get replicasets.apps forbidden (403)") {
					t.Errorf("warning %q, want the forbidden ReplicaSet lookup", w)
				}
			}
		})
	}
}

func ownerKey(k string) bool {
	for _, v := range ownerAttr {
		if v == k {
			return true
		}
	}
	return false
}

func TestPodLabelAttributes(t *testing.T) {
	f := start(t, fakeClient(testPod(), testRS()), func(c *Config) { c.PodLabelAttributes = true })
	var w *aggregate.Workload
	waittest.For(t, "the pod", func() bool { w = f.in.Lookup(hexID('a')); return w != nil })
	if got := attrs(w.Attributes)["k8s.pod.label.tier.example.com/role"]; got != "front" {
		t.Errorf("k8s.pod.label.tier.example.com/role = %q", got)
	}
	off := start(t, fakeClient(testPod(), testRS()), nil)
	waittest.For(t, "the pod", func() bool { w = off.in.Lookup(hexID('a')); return w != nil })
	for _, a := range w.Attributes {
		if strings.HasPrefix(a.Key, "k8s.pod.label.") {
			t.Errorf("pod label attribute %s written without being asked for", a.Key)
		}
	}
}

func TestFreshnessAndTTL(t *testing.T) {
	client := fakeClient(testRS())
	f := start(t, client, nil)
	ctx := t.Context()
	// Samples arrive before the pod is known: a miss, not remembered.
	if f.in.Lookup(hexID('a')) != nil {
		t.Fatal("resolved before the pod exists")
	}
	pod := testPod()
	pod.Status.ContainerStatuses[0].ContainerID = "" // created, not started
	createPod(ctx, t, client, pod)
	waittest.For(t, "the init container", func() bool { return f.in.Lookup(hexID('b')) != nil })
	if f.in.Lookup(hexID('a')) != nil {
		t.Fatal("a container without an id resolved")
	}
	pod.Status.ContainerStatuses[0].ContainerID = "containerd://" + hexID('a')
	updatePodStatus(ctx, t, client, pod)
	var w *aggregate.Workload
	waittest.For(t, "the started container", func() bool { w = f.in.Lookup(hexID('a')); return w != nil })

	// A status update that changes nothing written keeps the pointer.
	pod.Status.ContainerStatuses[0].RestartCount = 1
	updatePodStatus(ctx, t, client, pod)
	pod.Labels["version"] = "2"
	updatePod(ctx, t, client, pod)
	waittest.For(t, "the relabelled pod", func() bool {
		return attrs(f.in.Lookup(hexID('a')).Meta)["__meta_kubernetes_pod_label_version"] == "2"
	})
	if w2 := f.in.Lookup(hexID('a')); w2 == w {
		t.Error("a label change kept the old Workload")
	}

	// Deleted: answers for the label TTL, then goes.
	deletePod(ctx, t, client, "shop", pod.Name)
	waittest.For(t, "the deletion", func() bool {
		f.in.mu.RLock()
		defer f.in.mu.RUnlock()
		e := f.in.pods["uid-web"]
		return e != nil && !e.deleted.IsZero()
	})
	f.clock.add(DefaultLabelTTL - time.Second)
	f.in.sweep()
	if f.in.Lookup(hexID('a')) == nil {
		t.Fatal("a deleted pod's labels went before the TTL")
	}
	f.clock.add(time.Second)
	f.in.sweep()
	if f.in.Lookup(hexID('a')) != nil || f.in.Lookup(hexID('b')) != nil {
		t.Fatal("a deleted pod's labels outlived the TTL")
	}
}

func TestBounds(t *testing.T) {
	client := fakeClient()
	f := start(t, client, func(c *Config) { c.MaxPods = 3 })
	ctx := t.Context()
	mk := func(i int) *corev1.Pod {
		p := testPod()
		c := byte('a' + i)
		p.Name, p.UID = "p"+string(c), types.UID("uid-"+string(c))
		p.OwnerReferences = nil
		p.Status.ContainerStatuses[0].ContainerID = "containerd://" + hexID(c)
		p.Status.InitContainerStatuses, p.Status.EphemeralContainerStatuses = nil, nil
		return p
	}
	for i := range 3 {
		createPod(ctx, t, client, mk(i))
	}
	waittest.For(t, "three pods", func() bool { return f.in.Lookup(hexID('c')) != nil && f.in.Lookup(hexID('a')) != nil })
	// Delete two (a first), then add two: the deleted ones make room,
	// oldest deletion first; the live one stays.
	for _, n := range []string{"pa", "pb"} {
		deletePod(ctx, t, client, "shop", n)
		name := n
		waittest.For(t, "deletion", func() bool {
			f.in.mu.RLock()
			defer f.in.mu.RUnlock()
			_, live := f.in.byKey["shop/"+name]
			return !live
		})
		f.clock.add(time.Second)
	}
	for i := 3; i < 5; i++ {
		createPod(ctx, t, client, mk(i))
	}
	waittest.For(t, "the new pods", func() bool { return f.in.Lookup(hexID('e')) != nil && f.in.Lookup(hexID('d')) != nil })
	if f.in.Lookup(hexID('c')) == nil {
		t.Error("a live pod was evicted")
	}
	if f.in.Lookup(hexID('a')) != nil || f.in.Lookup(hexID('b')) != nil {
		t.Error("deleted pods kept beyond the bound")
	}
	if n := testutil.ToFloat64(f.in.m.evicted); n != 2 {
		t.Errorf("evicted = %v, want 2", n)
	}
	f.in.mu.RLock()
	n := len(f.in.pods)
	f.in.mu.RUnlock()
	if n > 3 {
		t.Errorf("%d pods held, bound 3", n)
	}
}

func TestAPIFailureNeverBlocks(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		kind string
	}{
		{"unauthorized", apierrors.NewUnauthorized("token expired"), ErrUnauthorized},
		{"forbidden", apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", nil), ErrForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fakeClient(testPod())
			client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, tc.err })
			f := start(t, client, nil)
			waittest.For(t, "the error", func() bool { return testutil.ToFloat64(f.in.m.apiErrors.WithLabelValues(tc.kind)) >= 1 })
			if f.in.Lookup(hexID('a')) != nil {
				t.Error("resolved without a list")
			}
			if w := f.in.Warning(); !strings.Contains(w, tc.kind) {
				t.Errorf("warning %q", w)
			}
			if f.in.Synced() {
				t.Error("synced without a list")
			}
		})
	}
}

// TestTrimPod: the informer keeps, of a pod as the API serves it, only
// what buildWorkloads reads, and reads all of it.
func TestTrimPod(t *testing.T) {
	u := toUnstructured(t, testPod())
	u.SetResourceVersion("41")
	got, err := trimPod(u)
	if err != nil {
		t.Fatal(err)
	}
	p := got.(*pod)
	if p.ManagedFields != nil || p.Annotations[lastAppliedAnnotation] != "" || p.Annotations["note"] != "x" {
		t.Errorf("annotations or managed fields: %+v", p.ObjectMeta)
	}
	if u.GetAnnotations()[lastAppliedAnnotation] == "" {
		t.Error("trimming changed the informer's input")
	}
	want := &pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-7d9f8-abcde", Namespace: "shop", UID: "uid-web", ResourceVersion: "41",
			Labels: testPod().Labels, Annotations: map[string]string{"note": "x"}, OwnerReferences: testPod().OwnerReferences},
		Spec: podSpec{NodeName: node,
			Containers:          []container{{Name: "app", Image: "registry.example:5000/shop/web:1.4.2"}},
			InitContainers:      []container{{Name: "migrate", Image: "shop/migrate@sha256:" + hexID('d')}},
			EphemeralContainers: []container{{Name: "debug", Image: "busybox"}}},
		Status: podStatus{Phase: "Running", PodIP: "10.0.0.7", HostIP: "192.168.1.2",
			Conditions:                 []podCondition{{Type: "Ready", Status: "True"}},
			ContainerStatuses:          []containerStatus{{Name: "app", ContainerID: "containerd://" + hexID('a'), Image: "x"}},
			InitContainerStatuses:      []containerStatus{{Name: "migrate", ContainerID: "cri-o://" + hexID('b')}},
			EphemeralContainerStatuses: []containerStatus{{Name: "debug", ContainerID: "docker://" + hexID('c'), Image: "docker.io/library/busybox:latest"}}},
	}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("trimmed pod\n%+v\nwant\n%+v", p, want)
	}
	if other, err := trimPod("not a pod"); err != nil || other != "not a pod" {
		t.Errorf("trimPod of another object: %v, %v", other, err)
	}
	broken := toUnstructured(t, testPod())
	broken.Object["status"].(map[string]any)["containerStatuses"] = "not a list"
	if _, err := trimPod(broken); err == nil || !strings.Contains(err.Error(), "shop/web-7d9f8-abcde: status") {
		t.Errorf("a malformed pod: %v", err)
	}
}

func TestSplitImage(t *testing.T) {
	for _, tc := range []struct{ ref, name, tag string }{
		{"nginx", "nginx", ""},
		{"nginx:1.25", "nginx", "1.25"},
		{"reg:5000/a/b", "reg:5000/a/b", ""},
		{"reg:5000/a/b:v1", "reg:5000/a/b", "v1"},
		{"a/b:v1@sha256:00", "a/b", "v1"},
		{"a/b@sha256:00", "a/b", ""},
	} {
		if n, tag := splitImage(tc.ref); n != tc.name || tag != tc.tag {
			t.Errorf("splitImage(%q) = %q, %q; want %q, %q", tc.ref, n, tag, tc.name, tc.tag)
		}
	}
}

func TestConfig(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	for _, tc := range []struct {
		cfg     Config
		enabled bool
		errs    []string
	}{
		{cfg: Config{Mode: ModeAuto, Node: "n", LabelTTL: time.Minute, MaxPods: 1, MaxOwners: 1}},
		{cfg: Config{Mode: ModeAuto, Kubeconfig: "k", Node: "n", LabelTTL: time.Minute, MaxPods: 1, MaxOwners: 1}, enabled: true},
		{cfg: Config{Mode: ModeOff, Kubeconfig: "k", LabelTTL: time.Minute, MaxPods: 1, MaxOwners: 1}},
		{cfg: Config{Mode: ModeOn, LabelTTL: time.Minute, MaxPods: 1, MaxOwners: 1}, enabled: true,
			errs: []string{"--node", "not in a cluster"}},
		{cfg: Config{Mode: "maybe", LabelTTL: 0}, errs: []string{"must be auto, on or off", "label TTL", "bounds"}},
	} {
		if got := tc.cfg.Enabled(); got != tc.enabled {
			t.Errorf("%+v: enabled %v", tc.cfg, got)
		}
		err := tc.cfg.Validate()
		if len(tc.errs) == 0 && err != nil {
			t.Errorf("%+v: %v", tc.cfg, err)
		}
		for _, e := range tc.errs {
			if err == nil || !strings.Contains(err.Error(), e) {
				t.Errorf("%+v: error %v does not say %q", tc.cfg, err, e)
			}
		}
	}
}

// client-go's own logging reaches the encoder's log at debug level, and
// only up to klog V(2): from V(3) on it logs request and response bodies.
func TestKlogHandler(t *testing.T) {
	var buf strings.Builder
	h := debugHandler{slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})}
	ctx := context.Background()
	if !h.Enabled(ctx, slog.LevelInfo) || !h.Enabled(ctx, slog.LevelError) || !h.Enabled(ctx, -2) || h.Enabled(ctx, -3) {
		t.Error("wrong levels enabled")
	}
	l := slog.New(h)
	l.Error("watch failed")
	l.Log(ctx, -8, "Response Body")
	if got := buf.String(); !strings.Contains(got, "level=DEBUG msg=\"watch failed\"") || strings.Contains(got, "Response Body") {
		t.Errorf("logged %q", got)
	}
	quiet := debugHandler{slog.NewTextHandler(&buf, nil)} // info level: nothing from client-go
	if quiet.Enabled(ctx, slog.LevelError) {
		t.Error("client-go logs at info level")
	}
}
