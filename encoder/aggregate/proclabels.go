package aggregate

import "iter"

// Process label names (ProcessLabels; ProcessFields' Label column).
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
// files): the Label column of ProcessFields, so a new process field with a
// label name is written by every such output.
func (f *Flush) ProcessLabels(r *Resource) iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for _, v := range f.AppendProcessValues(nil, r, func(pf *ProcessField) string { return pf.Label }) {
			if s := v.String(); s != "" && !yield(v.FullName(f), s) {
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
