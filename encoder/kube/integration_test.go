package kube_test

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	promlabels "github.com/prometheus/prometheus/model/labels"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
	"github.com/tandem-profiler/tandem/encoder/kube"
	"github.com/tandem-profiler/tandem/encoder/labels"
	"github.com/tandem-profiler/tandem/test/kubetest"
	"github.com/tandem-profiler/tandem/test/promtest"
	"github.com/tandem-profiler/tandem/test/waittest"
)

const (
	token = "s3cret-token"
	node  = "node-a"
)

var appID = strings.Repeat("a", 64)

func controller(kind, name string) []metav1.OwnerReference {
	t := true
	return []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name, UID: types.UID("uid-" + name), Controller: &t}}
}

func webPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-5c9d7-x2x2x", Namespace: "shop", UID: "uid-pod",
			Labels: map[string]string{"app": "web", "pod-template-hash": "5c9d7"}, OwnerReferences: controller("ReplicaSet", "web-5c9d7")},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "shop/web:2.0"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning,
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", ContainerID: "containerd://" + appID}}},
	}
}

type informer struct {
	*kube.Informer
	reg *prometheus.Registry
}

func run(t *testing.T, kubeconfig, nodeName string, ttl time.Duration) informer {
	t.Helper()
	cfg := kube.DefaultConfig()
	cfg.Mode, cfg.Kubeconfig, cfg.Node, cfg.LabelTTL = kube.ModeOn, kubeconfig, nodeName, ttl
	reg := prometheus.NewRegistry()
	in, err := kube.New(cfg, slog.New(slog.NewTextHandler(testLog, &slog.HandlerOptions{Level: slog.LevelDebug})), reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { in.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return informer{in, reg}
}

func attr(as []aggregate.Attr, key string) string {
	for _, a := range as {
		if a.Key == key {
			return a.Value
		}
	}
	return ""
}

// TestAgainstAPIServer: client-go over real HTTP, against a server that
// checks the token and the node scope, with a pod that appears after its
// container's first samples and is deleted later.
func TestAgainstAPIServer(t *testing.T) {
	api := kubetest.Start(t, token, node)
	api.SetReplicaSet(&appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: "web-5c9d7", Namespace: "shop",
		UID: "uid-web-5c9d7", OwnerReferences: controller("Deployment", "web")}})
	in := run(t, api.Kubeconfig(t, t.TempDir()), node, 2*time.Second)
	waittest.For(t, "the first list", in.Synced)

	l, err := labels.New(labels.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	sample := labels.Input{Node: node, PID: 7, Comm: "web", ContainerID: appID, TID: 7, Events: 1}
	sample.Workload = in.Lookup(appID)
	if got, _ := l.Sample(&sample); sample.Workload != nil || hasLabel(got, "pod") {
		t.Fatalf("labels before the pod exists: %v", got)
	}

	api.SetPod(webPod()) // the watch reports the pod after its first samples
	var w *aggregate.Workload
	waittest.For(t, "the watched pod", func() bool { w = in.Lookup(appID); return w != nil })
	sample.Workload = w
	got, _ := l.Sample(&sample)
	for k, v := range map[string]string{"namespace": "shop", "pod": "web-5c9d7-x2x2x", "container": "app", "container_image": "shop/web:2.0"} {
		if lv := labelValue(got, k); lv != v {
			t.Errorf("label %s = %q, want %q (all: %v)", k, lv, v, got)
		}
	}
	for k, v := range map[string]string{kube.AttrDeployment: "web", kube.AttrReplicaSet: "web-5c9d7", kube.AttrPodUID: "uid-pod", kube.AttrNode: node} {
		if a := attr(w.Attributes, k); a != v {
			t.Errorf("%s = %q, want %q", k, a, v)
		}
	}

	api.DeletePod("shop", "web-5c9d7-x2x2x")
	deleted := time.Now()
	waittest.For(t, "the label TTL after the deletion", func() bool { return in.Lookup(appID) == nil })
	if kept := time.Since(deleted); kept < 2*time.Second {
		t.Errorf("a deleted pod's labels went after %v, before the 2s label TTL", kept)
	}

	var watches int
	for _, r := range api.Requests() {
		if r.Status != 200 {
			t.Errorf("request %s %s?%s answered %d", r.Method, r.Path, r.RawQuery, r.Status)
		}
		switch {
		case r.Path == "/api/v1/pods":
			if r.FieldSelector != "spec.nodeName="+node {
				t.Errorf("pod request not node-scoped: %s?%s", r.Path, r.RawQuery)
			}
			if r.Watch {
				watches++
			}
		case r.Path == "/apis/apps/v1/namespaces/shop/replicasets/web-5c9d7":
		default:
			t.Errorf("unexpected request %s %s", r.Method, r.Path)
		}
	}
	if watches == 0 {
		t.Error("no watch")
	}
	if n := promtest.Value(t, in.reg, "tandem_encoder_kubernetes_lookups_total", "result", "hit"); n < 1 {
		t.Errorf("hits %v", n)
	}
}

func TestAPIServerRejects(t *testing.T) {
	api := kubetest.Start(t, token, node)
	api.SetPod(webPod())
	for _, tc := range []struct {
		name, token, node, kind string
	}{
		{"wrong token", "stolen", node, kube.ErrUnauthorized},
		{"not node-scoped", token, "another-node", kube.ErrForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := run(t, api.KubeconfigWithToken(t, t.TempDir(), tc.token), tc.node, time.Minute)
			waittest.For(t, "the error", func() bool { return strings.Contains(in.Warning(), tc.kind) })
			if in.Lookup(appID) != nil {
				t.Error("resolved through a rejected client")
			}
			if n := promtest.Value(t, in.reg, "tandem_encoder_kubernetes_api_errors_total", "kind", tc.kind); n < 1 {
				t.Errorf("%s errors %v", tc.kind, n)
			}
		})
	}
	api.Close()
	in := run(t, api.Kubeconfig(t, t.TempDir()), node, time.Minute)
	waittest.For(t, "the unreachable error", func() bool { return strings.Contains(in.Warning(), kube.ErrUnreachable) })
}

func hasLabel(ls []promlabels.Label, name string) bool { return labelValue(ls, name) != "" }

func labelValue(ls []promlabels.Label, name string) string {
	for _, l := range ls {
		if l.Name == name {
			return l.Value
		}
	}
	return ""
}

var testLog io.Writer = io.Discard

// records is a handler that keeps every record.
type records struct {
	mu sync.Mutex
	rs []slog.Record
}

func (h *records) Enabled(context.Context, slog.Level) bool { return true }
func (h *records) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rs = append(h.rs, r)
	return nil
}
func (h *records) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *records) WithGroup(string) slog.Handler      { return h }

// TestClientGoLogsToInformerLogger: client-go's lines about an Informer's
// requests (here an API server's warning, which client-go logs at klog
// V(0) as it reads the answer, before the list is stored) go to the
// logger New was given, at debug level, with nothing set process-wide.
func TestClientGoLogsToInformerLogger(t *testing.T) {
	api := kubetest.Start(t, token, node)
	const warning = "tandem test: this API is deprecated"
	api.Warn(warning)
	cfg := kube.DefaultConfig()
	cfg.Mode, cfg.Kubeconfig, cfg.Node = kube.ModeOn, api.Kubeconfig(t, t.TempDir()), node
	var h records
	in, err := kube.New(cfg, slog.New(&h), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { in.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	waittest.For(t, "the first list", in.Synced)

	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.rs {
		if r.Message == "Warning: "+warning {
			if r.Level != slog.LevelDebug {
				t.Errorf("client-go's warning logged at %v, want DEBUG", r.Level)
			}
			return
		}
	}
	t.Errorf("client-go's warning did not reach the Informer's logger; it got %d records", len(h.rs))
}
