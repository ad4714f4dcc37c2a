package kube

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// API is the part of the Kubernetes API the Informer reads: the pods of
// every namespace (list and watch, the informer adds this node's field
// selector) and single ReplicaSets and Jobs (owner lookups).
//
// New's API is client-go's REST client over a scheme of only these three
// kinds. The
// encoder does not link client-go's Clientset: its package and
// kubernetes/scheme import every built-in API group (about 12 MB of code,
// initialised at start-up even with --kubernetes=off), which doubled an
// idle encoder's resident memory (docs/benchmarks/footprint.md). Tests wrap
// client-go's fake Clientset.
type API interface {
	ListPods(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error)
	WatchPods(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	GetReplicaSet(ctx context.Context, namespace, name string) (*appsv1.ReplicaSet, error)
	GetJob(ctx context.Context, namespace, name string) (*batchv1.Job, error)
}

// restAPI is API over one REST client per API group version, sharing one
// HTTP client and one rate limiter, with the requests client-go's
// generated clients make (protobuf preferred, list and watch timeouts from
// the options). It does not use client-go's gentype package either: that
// package holds the fake clients too, which link client-go's testing
// machinery, server-side-apply and OpenAPI (about 2 MB of code).
type restAPI struct {
	core, apps, batch rest.Interface
	params            runtime.ParameterCodec
}

// newRESTAPI returns the API of the server rc names.
func newRESTAPI(rc *rest.Config) (*restAPI, error) {
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"}) // ListOptions, Status, WatchEvent
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme} {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("kubernetes scheme: %w", err)
		}
	}
	codecs := rest.CodecFactoryForGeneratedClient(scheme, serializer.NewCodecFactory(scheme)).WithoutConversion()

	cfg := *rc
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	if cfg.RateLimiter == nil && cfg.QPS > 0 {
		if cfg.Burst <= 0 {
			return nil, fmt.Errorf("kubernetes client: burst must be positive when QPS is set")
		}
		cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(cfg.QPS, cfg.Burst)
	}
	hc, err := rest.HTTPClientFor(&cfg)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	a := &restAPI{params: runtime.NewParameterCodec(scheme)}
	for _, c := range []struct {
		to      *rest.Interface
		apiPath string
		gv      schema.GroupVersion
	}{
		{&a.core, "/api", corev1.SchemeGroupVersion},
		{&a.apps, "/apis", appsv1.SchemeGroupVersion},
		{&a.batch, "/apis", batchv1.SchemeGroupVersion},
	} {
		gc := cfg
		gc.APIPath, gc.GroupVersion, gc.NegotiatedSerializer = c.apiPath, &c.gv, codecs
		if *c.to, err = rest.RESTClientForConfigAndClient(&gc, hc); err != nil {
			return nil, fmt.Errorf("kubernetes client for %s: %w", c.gv, err)
		}
	}
	return a, nil
}

func timeout(o metav1.ListOptions) time.Duration {
	if o.TimeoutSeconds == nil {
		return 0
	}
	return time.Duration(*o.TimeoutSeconds) * time.Second
}

func (a *restAPI) ListPods(ctx context.Context, o metav1.ListOptions) (*corev1.PodList, error) {
	l := &corev1.PodList{}
	err := a.core.Get().UseProtobufAsDefaultIfPreferred(true).Resource("pods").
		VersionedParams(&o, a.params).Timeout(timeout(o)).Do(ctx).Into(l)
	return l, err
}

func (a *restAPI) WatchPods(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	o.Watch = true
	return a.core.Get().UseProtobufAsDefaultIfPreferred(true).Resource("pods").
		VersionedParams(&o, a.params).Timeout(timeout(o)).Watch(ctx)
}

func (a *restAPI) GetReplicaSet(ctx context.Context, namespace, name string) (*appsv1.ReplicaSet, error) {
	rs := &appsv1.ReplicaSet{}
	return rs, a.get(ctx, a.apps, "replicasets", namespace, name, rs)
}

func (a *restAPI) GetJob(ctx context.Context, namespace, name string) (*batchv1.Job, error) {
	j := &batchv1.Job{}
	return j, a.get(ctx, a.batch, "jobs", namespace, name, j)
}

func (a *restAPI) get(ctx context.Context, c rest.Interface, resource, namespace, name string, into runtime.Object) error {
	return c.Get().UseProtobufAsDefaultIfPreferred(true).Namespace(namespace).Resource(resource).Name(name).
		VersionedParams(&metav1.GetOptions{}, a.params).Do(ctx).Into(into)
}
