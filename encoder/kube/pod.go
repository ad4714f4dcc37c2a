package kube

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// pod is the part of a v1 Pod that buildWorkloads reads, under the API's
// field names. The informer receives pods as unstructured objects
// (client-go's dynamic client) and keeps only this: the encoder links no
// k8s.io/api types, whose package initialisation alone cost an idle
// encoder about 1 MB of resident binary (docs/benchmarks/footprint.md).
type pod struct {
	metav1.ObjectMeta
	Spec   podSpec
	Status podStatus
}

type podSpec struct {
	NodeName            string      `json:"nodeName,omitempty"`
	Containers          []container `json:"containers,omitempty"`
	InitContainers      []container `json:"initContainers,omitempty"`
	EphemeralContainers []container `json:"ephemeralContainers,omitempty"`
}

type container struct {
	Name  string `json:"name"`
	Image string `json:"image,omitempty"`
}

type podStatus struct {
	Phase                      string            `json:"phase,omitempty"`
	PodIP                      string            `json:"podIP,omitempty"`
	HostIP                     string            `json:"hostIP,omitempty"`
	Conditions                 []podCondition    `json:"conditions,omitempty"`
	ContainerStatuses          []containerStatus `json:"containerStatuses,omitempty"`
	InitContainerStatuses      []containerStatus `json:"initContainerStatuses,omitempty"`
	EphemeralContainerStatuses []containerStatus `json:"ephemeralContainerStatuses,omitempty"`
}

type podCondition struct {
	Type   string `json:"type"`
	Status string `json:"status"`
}

type containerStatus struct {
	Name        string `json:"name"`
	Image       string `json:"image,omitempty"`
	ContainerID string `json:"containerID,omitempty"`
}

// podReadyCondition is the type of the pod condition
// __meta_kubernetes_pod_ready reports.
const podReadyCondition = "Ready"

// trimPod is the informer's transform: it turns an unstructured pod into
// a pod, so that the informer's cache of up to 110 pods holds only what
// buildWorkloads reads (no managed fields, no last-applied-configuration,
// no volumes, env, probes or resources). Other objects pass unchanged
// (client-go's DeletedFinalStateUnknown wraps the last known pod).
func trimPod(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	p := &pod{ObjectMeta: metav1.ObjectMeta{
		Name: u.GetName(), Namespace: u.GetNamespace(), UID: u.GetUID(),
		ResourceVersion: u.GetResourceVersion(), Labels: u.GetLabels(),
		OwnerReferences: u.GetOwnerReferences(), DeletionTimestamp: u.GetDeletionTimestamp(),
	}}
	if as := u.GetAnnotations(); len(as) > 0 {
		delete(as, lastAppliedAnnotation) // GetAnnotations returns a copy
		if len(as) > 0 {
			p.Annotations = as
		}
	}
	for _, f := range []struct {
		name string
		into any
	}{{"spec", &p.Spec}, {"status", &p.Status}} {
		m, ok := u.Object[f.name].(map[string]any)
		if !ok {
			continue
		}
		// Fields pod does not name are skipped, not copied.
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, f.into); err != nil {
			return nil, fmt.Errorf("pod %s/%s: %s: %w", p.Namespace, p.Name, f.name, err)
		}
	}
	return p, nil
}
