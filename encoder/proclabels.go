package encoder

import "iter"

// Process label names (ProcessLabels).
const (
	LabelExecutable  = "executable"
	LabelContainerID = "container_id"
	LabelSystemdUnit = "systemd_unit"
	LabelServiceName = "service_name"
	LabelNode        = "node"
	LabelEnvPrefix   = "env_"
)

// ProcessLabels yields every label the encoder holds about the process of
// resource r, as plain name/value pairs with no empty value: its
// executable path, container id, systemd unit, APM service name (when the
// sampler found one), node and recorded environment variables
// (env_<NAME>), then the Kubernetes labels of its container's Workload
// (namespace, pod, container, container_image) when known. It is the one
// list for outputs that write whatever they know about a process (pprof
// files); a new kind of process identity is added here and every such
// output writes it.
func (f *Flush) ProcessLabels(r *Resource) iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for _, kv := range [...]struct {
			k  string
			id uint32
		}{
			{LabelExecutable, r.ExecutablePath}, {LabelContainerID, r.ContainerID},
			{LabelSystemdUnit, r.SystemdUnit}, {LabelServiceName, r.ServiceName}, {LabelNode, r.NodeName},
		} {
			if v := f.Strings[kv.id]; v != "" && !yield(kv.k, v) {
				return
			}
		}
		for _, kv := range f.LabelSet(r.EnvVars) {
			if v := f.Strings[kv.Value]; v != "" && !yield(LabelEnvPrefix+f.Strings[kv.Key], v) {
				return
			}
		}
		if w := f.Workload(r); w != nil {
			for _, a := range w.Labels {
				if a.Value != "" && !yield(a.Key, a.Value) {
					return
				}
			}
		}
	}
}
