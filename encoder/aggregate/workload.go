package aggregate

// Attr is a name/value pair of plain strings: a label or an attribute.
type Attr struct{ Key, Value string }

// Workload is the Kubernetes identity of one container, as encoder/kube
// resolves it from the API. A Workload is immutable once a lookup returned
// it: a change in the pod gives a new Workload, so comparing pointers tells
// whether what was built from one is still current.
type Workload struct {
	// ServiceName is the service.name of a process of this container that
	// has no APM name: the pod's app.kubernetes.io/name label, else the
	// owning workload's name, else the container's name.
	ServiceName string
	// Meta are the __meta_kubernetes_* labels offered to relabelling
	// (parca-agent's names), sorted by name, unique.
	Meta []Attr
	// Labels are the labels written when there are no relabel rules
	// (namespace, pod, container, container_image: what parca-agent's
	// Kubernetes configuration writes), sorted by name.
	Labels []Attr
	// Attributes are the OpenTelemetry resource attributes (k8s.*,
	// container.image.name), sorted by key, string-valued.
	Attributes []Attr
	// ListAttributes are the resource attributes whose semantic-convention
	// type is a string array, each of one element (container.image.tags).
	ListAttributes []Attr
}

// WorkloadLookup resolves a container id (as the sampler reports it: 64
// hex digits) to the container's Workload, or nil when it is not known.
// Implementations are safe for concurrent use and do not allocate.
type WorkloadLookup interface {
	Lookup(containerID string) *Workload
}

// Workload returns the Workload of resource r as it was when the flush was
// taken, or nil (no lookup set, not in a container, or not a known pod's
// container). Every encoding of the flush, a retry's included, sees the
// same answer.
func (f *Flush) Workload(r *Resource) *Workload {
	if r.ContainerID == 0 || len(f.workloads) == 0 {
		return nil
	}
	return f.workloads[r.ContainerID]
}

// resolveWorkloads looks up, once, the Workload of every container id of
// the resources the interval used (resourceUsed at epoch).
func (f *Flush) resolveWorkloads(lookup WorkloadLookup, d *dict, epoch uint32) {
	if lookup == nil {
		return
	}
	if f.workloads == nil {
		f.workloads = make(map[uint32]*Workload)
	}
	for id := range d.resources {
		cid := d.resources[id].ContainerID
		if cid == 0 || d.resourceUsed[id] != epoch {
			continue
		}
		if _, done := f.workloads[cid]; !done {
			f.workloads[cid] = lookup.Lookup(d.strings[cid])
		}
	}
}
