package kube

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
)

// clientsetAPI is the API over client-go's fake Clientset (its object
// tracker, reactors and watch semantics); the shipped REST API is tested
// against test/kubetest's server (integration_test.go).
type clientsetAPI struct{ *fake.Clientset }

func fakeAPI(c *fake.Clientset) clientsetAPI { return clientsetAPI{c} }

func (c clientsetAPI) ListPods(ctx context.Context, o metav1.ListOptions) (*corev1.PodList, error) {
	return c.CoreV1().Pods(metav1.NamespaceAll).List(ctx, o)
}

func (c clientsetAPI) WatchPods(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	return c.CoreV1().Pods(metav1.NamespaceAll).Watch(ctx, o)
}

func (c clientsetAPI) GetReplicaSet(ctx context.Context, ns, name string) (*appsv1.ReplicaSet, error) {
	return c.AppsV1().ReplicaSets(ns).Get(ctx, name, metav1.GetOptions{})
}

func (c clientsetAPI) GetJob(ctx context.Context, ns, name string) (*batchv1.Job, error) {
	return c.BatchV1().Jobs(ns).Get(ctx, name, metav1.GetOptions{})
}
