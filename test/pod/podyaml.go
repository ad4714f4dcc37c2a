package pod

import (
	"errors"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/tandem-profiler/tandem/tools/helmchart"
)

// PodName is the name of the Pod the DaemonSet's template is played as;
// podman names its containers <pod>-<container>.
const PodName = "tandem"

// PodConfig says how to render the chart for podman.
type PodConfig struct {
	// ChartDir is the chart (deploy/helm/tandem).
	ChartDir string
	// Values are the chart values over its defaults.
	Values map[string]any
	// SocketDir is a mode 0777 host directory standing in for the
	// socket's emptyDir.
	SocketDir string
	// NodeName is what the downward API's spec.nodeName would give.
	NodeName string

	_ struct{}
}

// PodYAML renders the chart and returns its DaemonSet's pod template as a
// Pod podman 4.3 plays (podman kube play has no DaemonSet), changed only
// where podman does what a kubelet would do differently:
//
//   - it publishes containerPorts, which --network none refuses, and turns
//     httpGet probes into health checks running curl inside the container
//     (the image has none): the Pod has no ports and no probes;
//   - its downward API knows only metadata fields, and it passes $(VAR)
//     references in arguments on as written: the node's name and the pod's
//     address (its own loopback, with --network none) are written in, as
//     a kubelet would fill them in;
//   - it reads seccomp profiles from the annotations Kubernetes had before
//     securityContext.seccompProfile: each container's is written there too;
//   - its emptyDir is a volume owned by the first container that mounts it
//     (the root sampler: the encoder could not create the socket), where a
//     kubelet makes it mode 0777: the socket's emptyDir is SocketDir;
//   - it removes a run-once init container after it exits, and podman 4.3
//     can fail the whole play racing that exit ("failed to remove once
//     init container ... as it is running", podman issue 18477, fixed in
//     4.6): init containers are of podman's type "always" (kept, run at
//     each start of the pod), the kubelet's behaviour for one pod start;
//   - it ignores hostPID (read from podman 4.5 on): the caller puts the
//     containers in the host's PID namespace with containers.conf's
//     pidns = "host" (PodYAML refuses a pod without hostPID, so that
//     setting never stands for something the chart did not ask for).
func PodYAML(cfg PodConfig) ([]byte, error) {
	if cfg.SocketDir == "" || cfg.NodeName == "" {
		return nil, errors.New("pod for podman: needs a socket directory and a node name")
	}
	r, err := helmchart.Render(cfg.ChartDir, helmchart.DefaultRelease, cfg.Values)
	if err != nil {
		return nil, err
	}
	var ds *appsv1.DaemonSet
	for _, m := range r.Manifests {
		if m.Kind == "DaemonSet" {
			ds = &appsv1.DaemonSet{}
			if err := yaml.UnmarshalStrict([]byte(m.YAML), ds); err != nil {
				return nil, fmt.Errorf("decode the chart's DaemonSet: %w", err)
			}
		}
	}
	if ds == nil {
		return nil, errors.New("the chart renders no DaemonSet")
	}
	kubelet := map[string]string{"spec.nodeName": cfg.NodeName, "status.podIP": "127.0.0.1"}
	spec := &ds.Spec.Template.Spec
	annotations := map[string]string{}
	if len(spec.InitContainers) > 0 {
		annotations["io.podman.annotations.init.container.type"] = "always"
	}
	containers := make([]*corev1.Container, 0, len(spec.InitContainers)+len(spec.Containers))
	for i := range spec.InitContainers {
		containers = append(containers, &spec.InitContainers[i])
	}
	for i := range spec.Containers {
		containers = append(containers, &spec.Containers[i])
	}
	for _, c := range containers {
		c.Ports, c.LivenessProbe, c.ReadinessProbe = nil, nil, nil
		if sc := c.SecurityContext; sc != nil && sc.SeccompProfile != nil {
			key := "container.seccomp.security.alpha.kubernetes.io/" + c.Name
			switch sc.SeccompProfile.Type {
			case corev1.SeccompProfileTypeUnconfined:
				annotations[key] = "unconfined"
			case corev1.SeccompProfileTypeRuntimeDefault:
				annotations[key] = "runtime/default"
			default:
				return nil, fmt.Errorf("container %s: seccomp profile %s cannot be handed to podman here", c.Name, sc.SeccompProfile.Type)
			}
		}
		var refs []string
		for j := range c.Env {
			e := &c.Env[j]
			if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
				v, ok := kubelet[e.ValueFrom.FieldRef.FieldPath]
				if !ok {
					return nil, fmt.Errorf("container %s: env %s comes from %s, which cannot be filled in here", c.Name, e.Name, e.ValueFrom.FieldRef.FieldPath)
				}
				e.Value, e.ValueFrom = v, nil
			}
			refs = append(refs, "$("+e.Name+")", e.Value)
		}
		expand := strings.NewReplacer(refs...)
		for j := range c.Args {
			c.Args[j] = expand.Replace(c.Args[j])
		}
		for j := range c.Command {
			c.Command[j] = expand.Replace(c.Command[j])
		}
	}
	if !spec.HostPID {
		return nil, errors.New("the chart's pod has no hostPID: the podman setup here gives every container the host's PID namespace")
	}
	var socket bool
	for i := range spec.Volumes {
		if v := &spec.Volumes[i]; v.Name == "socket" {
			if v.EmptyDir == nil {
				return nil, errors.New("the socket volume is not an emptyDir")
			}
			dirType := corev1.HostPathDirectory
			v.VolumeSource = corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: cfg.SocketDir, Type: &dirType}}
			socket = true
		}
	}
	if !socket {
		return nil, errors.New("the chart's pod has no socket volume")
	}
	pod := corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: PodName, Labels: ds.Spec.Template.Labels, Annotations: annotations},
		Spec:       *spec,
	}
	return yaml.Marshal(pod)
}
