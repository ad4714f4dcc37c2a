package kube

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
)

// fakeScheme knows the typed objects the tests build (test code may link
// k8s.io/api; the encoder does not).
var fakeScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

// fakeClient returns client-go's fake dynamic client (its object
// tracker, reactors and watch semantics) holding objs, typed objects
// converted as the API server would serve them.
func fakeClient(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClient(fakeScheme, objs...)
}

// toUnstructured is p as the dynamic client receives it.
func toUnstructured(t testing.TB, p *corev1.Pod) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion("v1")
	u.SetKind("Pod")
	return u
}

// The pod changes the tests make, through the dynamic client.
func createPod(ctx context.Context, t testing.TB, c *dynamicfake.FakeDynamicClient, p *corev1.Pod) {
	t.Helper()
	if _, err := c.Resource(podsResource).Namespace(p.Namespace).Create(ctx, toUnstructured(t, p), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func updatePod(ctx context.Context, t testing.TB, c *dynamicfake.FakeDynamicClient, p *corev1.Pod) {
	t.Helper()
	if _, err := c.Resource(podsResource).Namespace(p.Namespace).Update(ctx, toUnstructured(t, p), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func updatePodStatus(ctx context.Context, t testing.TB, c *dynamicfake.FakeDynamicClient, p *corev1.Pod) {
	t.Helper()
	if _, err := c.Resource(podsResource).Namespace(p.Namespace).UpdateStatus(ctx, toUnstructured(t, p), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func deletePod(ctx context.Context, t testing.TB, c *dynamicfake.FakeDynamicClient, namespace, name string) {
	t.Helper()
	if err := c.Resource(podsResource).Namespace(namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}
