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
// without Kubernetes labels (or, for an owner lookup, without the
// workload's name). Each error is counted in
// tandem_encoder_kubernetes_api_errors_total{kind}, retried (client-go's
// reflector, with exponential backoff; an owner lookup after a minute),
// logged once with the fix, and reported by Warning (the /readyz warning
// lines). How long it stays there depends on what it means:
//
//   - 403 is a ClusterRole without the rule for this verb on this
//     resource, a misconfiguration no other request's success cures: its
//     warning names the lookup, what it costs and the rule to add, and
//     stays, with tandem_encoder_kubernetes_forbidden{verb,resource} at 1,
//     until a request of that same lookup succeeds (list pods, watch pods,
//     get replicasets.apps, get jobs.batch).
//   - Anything else (401, unreachable, 5xx, a cut watch) is transient:
//     its warning goes with the next request that succeeds.
//
// # Concurrency
//
// Lookup and Warning are safe for concurrent use and do not allocate (a
// read lock and a map lookup). Run starts the informer and blocks until its
// context ends.
package kube
