package kube

import (
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/prometheus/util/strutil"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
)

// The __meta_kubernetes_* label names, as parca-agent writes them
// (reporter/metadata/containermetadata.go in its source), and the default
// labels of its Kubernetes configuration (kubernetes-config.yaml).
const (
	MetaNamespace          = "__meta_kubernetes_namespace"
	MetaPodName            = "__meta_kubernetes_pod_name"
	MetaPodUID             = "__meta_kubernetes_pod_uid"
	MetaPodIP              = "__meta_kubernetes_pod_ip"
	MetaPodReady           = "__meta_kubernetes_pod_ready"
	MetaPodPhase           = "__meta_kubernetes_pod_phase"
	MetaPodNodeName        = "__meta_kubernetes_pod_node_name"
	MetaPodHostIP          = "__meta_kubernetes_pod_host_ip"
	MetaContainerName      = "__meta_kubernetes_pod_container_name"
	MetaContainerID        = "__meta_kubernetes_pod_container_id"
	MetaContainerImage     = "__meta_kubernetes_pod_container_image"
	MetaContainerInit      = "__meta_kubernetes_pod_container_init"
	MetaControllerKind     = "__meta_kubernetes_pod_controller_kind"
	MetaControllerName     = "__meta_kubernetes_pod_controller_name"
	MetaPodLabelPrefix     = "__meta_kubernetes_pod_label_"
	MetaPodLabelPresent    = "__meta_kubernetes_pod_labelpresent_"
	MetaPodAnnotation      = "__meta_kubernetes_pod_annotation_"
	MetaPodAnnotationPres  = "__meta_kubernetes_pod_annotationpresent_"
	MetaNodeName           = "__meta_kubernetes_node_name"
	LabelNamespace         = "namespace"
	LabelPod               = "pod"
	LabelContainer         = "container"
	LabelContainerImage    = "container_image"
	presentValue           = "true"
	appNameLabel           = "app.kubernetes.io/name"
	lastAppliedAnnotation  = "kubectl.kubernetes.io/last-applied-configuration"
	podTemplateHashLabel   = "pod-template-hash"
	attrPodLabelPrefix     = "k8s.pod.label."
	attrContainerImageName = "container.image.name"
	attrContainerImageTags = "container.image.tags"
)

// OpenTelemetry semantic-convention resource attributes.
const (
	AttrNamespace   = "k8s.namespace.name"
	AttrPodName     = "k8s.pod.name"
	AttrPodUID      = "k8s.pod.uid"
	AttrContainer   = "k8s.container.name"
	AttrNode        = "k8s.node.name"
	AttrReplicaSet  = "k8s.replicaset.name"
	AttrDeployment  = "k8s.deployment.name"
	AttrStatefulSet = "k8s.statefulset.name"
	AttrDaemonSet   = "k8s.daemonset.name"
	AttrJob         = "k8s.job.name"
	AttrCronJob     = "k8s.cronjob.name"
	AttrImageName   = attrContainerImageName
	AttrImageTags   = attrContainerImageTags
)

// owner is one link of a pod's owner chain.
type owner struct{ Kind, Name string }

// ownerAttr maps an owner kind to its semantic-convention attribute.
var ownerAttr = map[string]string{
	"ReplicaSet":  AttrReplicaSet,
	"Deployment":  AttrDeployment,
	"StatefulSet": AttrStatefulSet,
	"DaemonSet":   AttrDaemonSet,
	"Job":         AttrJob,
	"CronJob":     AttrCronJob,
}

// containerRef is a container of a pod joined to its status.
type containerRef struct {
	name, image, id string
	init            bool
}

// podContainers returns the pod's containers that have a container id
// (regular, init and ephemeral), with their images: the spec's, else the
// status's.
func podContainers(p *pod) []containerRef {
	var out []containerRef
	add := func(statuses []containerStatus, image func(string) string, init bool) {
		for i := range statuses {
			st := &statuses[i]
			id := bareContainerID(st.ContainerID)
			if id == "" {
				continue
			}
			img := image(st.Name)
			if img == "" {
				img = st.Image
			}
			out = append(out, containerRef{name: st.Name, image: img, id: id, init: init})
		}
	}
	add(p.Status.ContainerStatuses, func(n string) string { return specImage(p.Spec.Containers, n) }, false)
	add(p.Status.InitContainerStatuses, func(n string) string { return specImage(p.Spec.InitContainers, n) }, true)
	add(p.Status.EphemeralContainerStatuses, func(n string) string { return specImage(p.Spec.EphemeralContainers, n) }, false)
	return out
}

func specImage(cs []container, name string) string {
	for i := range cs {
		if cs[i].Name == name {
			return cs[i].Image
		}
	}
	return ""
}

// bareContainerID strips the runtime scheme (containerd://, cri-o://,
// docker://) from a status containerID.
func bareContainerID(s string) string {
	if i := strings.Index(s, "://"); i >= 0 {
		s = s[i+3:]
	}
	return s
}

// splitImage splits an image reference into name and tag: "reg:5000/a/b:1.2"
// gives "reg:5000/a/b" and "1.2"; a digest-only reference has no tag.
func splitImage(ref string) (name, tag string) {
	if i := strings.IndexByte(ref, '@'); i >= 0 {
		ref = ref[:i]
	}
	slash := strings.LastIndexByte(ref, '/')
	if i := strings.LastIndexByte(ref, ':'); i > slash {
		return ref[:i], ref[i+1:]
	}
	return ref, ""
}

func podReady(p *pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == podReadyCondition {
			return strings.ToLower(c.Status)
		}
	}
	return "unknown"
}

// field is one fact about a container's pod and its name in each
// vocabulary that has it ("" = not written there): parca-agent's
// __meta_kubernetes_* relabeling input (written even when empty), its
// default labels and the OpenTelemetry resource attributes (both only
// when set). Each fact is read here once for every vocabulary.
type field struct {
	meta, label, attr string
	value             func(p *pod, c *containerRef) string
}

// podFields is the table of the facts every vocabulary shares. The prefixed
// names (pod labels and annotations), the owner chain and the image's
// name and tag are written by buildWorkloads.
var podFields = []field{
	{meta: MetaNamespace, label: LabelNamespace, attr: AttrNamespace, value: func(p *pod, _ *containerRef) string { return p.Namespace }},
	{meta: MetaPodName, label: LabelPod, attr: AttrPodName, value: func(p *pod, _ *containerRef) string { return p.Name }},
	{meta: MetaPodUID, attr: AttrPodUID, value: func(p *pod, _ *containerRef) string { return string(p.UID) }},
	{meta: MetaPodIP, value: func(p *pod, _ *containerRef) string { return p.Status.PodIP }},
	{meta: MetaPodReady, value: func(p *pod, _ *containerRef) string { return podReady(p) }},
	{meta: MetaPodPhase, value: func(p *pod, _ *containerRef) string { return p.Status.Phase }},
	{meta: MetaPodNodeName, attr: AttrNode, value: func(p *pod, _ *containerRef) string { return p.Spec.NodeName }},
	{meta: MetaPodHostIP, value: func(p *pod, _ *containerRef) string { return p.Status.HostIP }},
	{meta: MetaNodeName, value: func(p *pod, _ *containerRef) string { return p.Spec.NodeName }},
	{meta: MetaContainerName, label: LabelContainer, attr: AttrContainer, value: func(_ *pod, c *containerRef) string { return c.name }},
	{meta: MetaContainerID, value: func(_ *pod, c *containerRef) string { return c.id }},
	{meta: MetaContainerImage, label: LabelContainerImage, value: func(_ *pod, c *containerRef) string { return c.image }},
	{meta: MetaContainerInit, value: func(_ *pod, c *containerRef) string { return strconv.FormatBool(c.init) }},
}

// buildWorkloads returns a Workload per container of the pod with a
// container id. chain is the owner chain, controller first (may be empty).
func buildWorkloads(p *pod, chain []owner, podLabelAttrs bool) map[string]*aggregate.Workload {
	cs := podContainers(p)
	if len(cs) == 0 {
		return nil
	}
	// What every container of the pod shares, besides podFields.
	var podMeta, podAttrs []aggregate.Attr
	m := func(k, v string) { podMeta = append(podMeta, aggregate.Attr{Key: k, Value: v}) }
	a := func(k, v string) {
		if v != "" {
			podAttrs = append(podAttrs, aggregate.Attr{Key: k, Value: v})
		}
	}
	if len(chain) > 0 {
		m(MetaControllerKind, chain[0].Kind)
		m(MetaControllerName, chain[0].Name)
	}
	for k, v := range p.Labels {
		n := strutil.SanitizeLabelName(k)
		m(MetaPodLabelPrefix+n, v)
		m(MetaPodLabelPresent+n, presentValue)
	}
	for k, v := range p.Annotations {
		n := strutil.SanitizeLabelName(k)
		m(MetaPodAnnotation+n, v)
		m(MetaPodAnnotationPres+n, presentValue)
	}
	workloadName := ""
	for _, o := range chain {
		if k, ok := ownerAttr[o.Kind]; ok {
			a(k, o.Name)
		}
		workloadName = o.Name // the outermost owner
	}
	if podLabelAttrs {
		for k, v := range p.Labels {
			a(attrPodLabelPrefix+k, v)
		}
	}

	out := make(map[string]*aggregate.Workload, len(cs))
	for i := range cs {
		c := &cs[i]
		w := &aggregate.Workload{}
		meta, attrs := slices.Clip(podMeta), slices.Clip(podAttrs)
		for _, f := range podFields {
			v := f.value(p, c)
			if f.meta != "" {
				meta = append(meta, aggregate.Attr{Key: f.meta, Value: v})
			}
			if v == "" {
				continue
			}
			if f.label != "" {
				w.Labels = append(w.Labels, aggregate.Attr{Key: f.label, Value: v})
			}
			if f.attr != "" {
				attrs = append(attrs, aggregate.Attr{Key: f.attr, Value: v})
			}
		}
		w.Meta = sortUnique(meta)
		w.Labels = sortUnique(w.Labels)
		name, tag := splitImage(c.image)
		if name != "" {
			attrs = append(attrs, aggregate.Attr{Key: AttrImageName, Value: name})
		}
		if tag != "" {
			w.ListAttributes = []aggregate.Attr{{Key: AttrImageTags, Value: tag}}
		}
		w.Attributes = sortUnique(attrs)
		switch {
		case p.Labels[appNameLabel] != "":
			w.ServiceName = p.Labels[appNameLabel]
		case workloadName != "":
			w.ServiceName = workloadName
		default:
			w.ServiceName = c.name
		}
		out[c.id] = w
	}
	return out
}

// sortUnique sorts by key; of two equal keys (two label names that
// sanitize alike) the first kept wins, as map order would be arbitrary the
// smaller value is kept.
func sortUnique(as []aggregate.Attr) []aggregate.Attr {
	slices.SortFunc(as, func(x, y aggregate.Attr) int {
		if c := strings.Compare(x.Key, y.Key); c != 0 {
			return c
		}
		return strings.Compare(x.Value, y.Value)
	})
	return slices.CompactFunc(as, func(x, y aggregate.Attr) bool { return x.Key == y.Key })
}

// sameWorkload reports whether two Workloads write the same things.
func sameWorkload(a, b *aggregate.Workload) bool {
	return a.ServiceName == b.ServiceName && slices.Equal(a.Meta, b.Meta) && slices.Equal(a.Labels, b.Labels) &&
		slices.Equal(a.Attributes, b.Attributes) && slices.Equal(a.ListAttributes, b.ListAttributes)
}
