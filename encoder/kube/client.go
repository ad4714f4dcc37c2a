package kube

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The resources the Informer reads through client-go's dynamic client:
// the pods of every namespace (list and watch, with this node's field
// selector) and single ReplicaSets and Jobs (owner lookups, of which only
// the owner references are read).
//
// The dynamic client decodes into unstructured objects, so the encoder
// links neither client-go's Clientset (its package and kubernetes/scheme
// import every built-in API group, about 12 MB of code initialised at
// start-up even with --kubernetes=off) nor the k8s.io/api types of these
// three kinds (their package initialisation kept about 1 MB of the
// binary resident; docs/benchmarks/footprint.md). It speaks JSON, where
// the typed clients prefer protobuf: for the few hundred objects of one
// node that costs little.
var (
	podsResource        = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	replicaSetsResource = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}
	jobsResource        = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
)
