// Package kube tells the encoder which Kubernetes pod, namespace, container
// and workload a sample's process belongs to.
//
// A Store lists and watches, through a client-go shared informer over
// client-go's dynamic client, the pods scheduled on one node
// (fieldSelector spec.nodeName=<node>), so its memory and the API load it
// causes do not grow with the cluster. Each pod is trimmed as it arrives:
// only the fields the names need are copied out of the unstructured
// object (managed fields, the last-applied annotation and every other
// spec and status field are dropped). Its owner is
// resolved to the workload: a ReplicaSet to its Deployment, a Job to its
// CronJob, by one GET per owner, cached (bounded) and retried with backoff;
// a ReplicaSet that cannot be read still gives the Deployment through the
// pod-template-hash naming rule.
//
// The join is exact: the container id the sampler reads from the process's
// cgroup (64 hex digits) is matched against status.containerStatuses,
// initContainerStatuses and ephemeralContainerStatuses[].containerID
// (containerd://, cri-o://, docker:// are stripped). For every container a
// Store publishes one immutable encoder.Workload holding what encoders
// write: the __meta_kubernetes_* labels for relabelling (parca-agent's
// names), the default labels (namespace, pod, container, container_image),
// the OpenTelemetry resource attributes and the service.name. A pod update
// that changes none of it keeps the same pointer.
//
// # Freshness
//
// Nothing negative is cached: Lookup answers from the informer's current
// state, so a container the API reports after its first samples is found
// by the next lookup. A deleted pod's containers keep answering for
// Config.LabelTTL (samples of its last seconds are still attributed), then
// go.
//
// # Failure
//
// The API being unreachable, 401, 403 or a failing watch never blocks
// Lookup and never drops a sample: Lookup answers nil and samples go out
// without Kubernetes labels. Each kind of error is logged once with the fix,
// counted in tandem_encoder_kubernetes_api_errors_total{kind}, retried by
// client-go's reflector with exponential backoff, and reported by Warning
// (the /readyz warning field) until a list or watch succeeds again.
//
// # Concurrency
//
// Lookup and Warning are safe for concurrent use and do not allocate (a
// read lock and a map lookup). Run starts the informer and blocks until its
// context ends.
package kube
