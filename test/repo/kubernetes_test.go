package repo

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/tandem-profiler/tandem/test/harness"
)

// samplerCapabilities is the measured set the sampler needs on a kernel
// with tracefs mounted by the host (docs/security.md, "The capabilities, measured"). The
// DaemonSet adds exactly these and tandem-sampler.service bounds itself
// to exactly these.
var samplerCapabilities = []string{"BPF", "PERFMON", "SYS_PTRACE", "CHECKPOINT_RESTORE", "SYSLOG", "DAC_READ_SEARCH"}

// spanMapVolume is the chart's volume of the node's BPF filesystem, which
// the sampler mounts writable when it shares its span map with OBI.
const spanMapVolume = "bpffs"

// samplerHostPaths are the host paths the sampler may mount, read-only
// (but for spanMapVolume).
var samplerHostPaths = []string{"/sys/kernel/tracing", "/sys/kernel/debug", "/sys/fs/bpf"}

// manifests are the objects of one rendering of the chart (or of the
// files under deploy/kubernetes), each decoded strictly (unknown fields are
// errors) into its API type.
type manifests struct {
	daemonSets      []*appsv1.DaemonSet
	serviceAccounts []*corev1.ServiceAccount
	namespaces      []*corev1.Namespace
	clusterRoles    []*rbacv1.ClusterRole
	bindings        []*rbacv1.ClusterRoleBinding
	services        []*corev1.Service
	configMaps      []*corev1.ConfigMap
	monitors        []*monitor
}

// monitor is the part of prometheus-operator's monitoring.coreos.com/v1
// ServiceMonitor and PodMonitor the chart writes (the operator's Go types
// are not a dependency; decoding is strict, so a field outside this part
// fails the test until it is added here).
type monitor struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ObjectMeta `json:"metadata"`
	Spec       struct {
		Selector          metav1.LabelSelector `json:"selector"`
		NamespaceSelector struct {
			MatchNames []string `json:"matchNames"`
		} `json:"namespaceSelector"`
		Endpoints           []monitorEndpoint `json:"endpoints"`
		PodMetricsEndpoints []monitorEndpoint `json:"podMetricsEndpoints"`
	} `json:"spec"`
}

type monitorEndpoint struct {
	Port     string `json:"port"`
	Path     string `json:"path"`
	Interval string `json:"interval"`
}

// loadManifests decodes every file under deploy/kubernetes.
func loadManifests(t *testing.T) manifests {
	t.Helper()
	var m manifests
	files, err := filepath.Glob(filepath.Join(harness.ModuleRoot(t), "deploy", "kubernetes", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests under deploy/kubernetes (%v)", err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		decodeManifests(t, filepath.Base(file), data, &m)
	}
	if len(m.daemonSets) != 1 {
		t.Fatalf("%d DaemonSets, want 1", len(m.daemonSets))
	}
	return m
}

// decodeManifests decodes every document of data (from file) into m.
func decodeManifests(t *testing.T, file string, data []byte, m *manifests) {
	t.Helper()
	for i, doc := range bytes.Split(data, []byte("\n---\n")) {
		where := fmt.Sprintf("%s document %d", file, i+1)
		var meta struct{ APIVersion, Kind string }
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		var obj any
		switch meta.APIVersion + " " + meta.Kind {
		case "apps/v1 DaemonSet":
			ds := &appsv1.DaemonSet{}
			m.daemonSets, obj = append(m.daemonSets, ds), ds
		case "v1 ServiceAccount":
			sa := &corev1.ServiceAccount{}
			m.serviceAccounts, obj = append(m.serviceAccounts, sa), sa
		case "v1 Namespace":
			ns := &corev1.Namespace{}
			m.namespaces, obj = append(m.namespaces, ns), ns
		case "rbac.authorization.k8s.io/v1 ClusterRole":
			r := &rbacv1.ClusterRole{}
			m.clusterRoles, obj = append(m.clusterRoles, r), r
		case "rbac.authorization.k8s.io/v1 ClusterRoleBinding":
			b := &rbacv1.ClusterRoleBinding{}
			m.bindings, obj = append(m.bindings, b), b
		case "v1 Service":
			s := &corev1.Service{}
			m.services, obj = append(m.services, s), s
		case "v1 ConfigMap":
			c := &corev1.ConfigMap{}
			m.configMaps, obj = append(m.configMaps, c), c
		case "monitoring.coreos.com/v1 ServiceMonitor", "monitoring.coreos.com/v1 PodMonitor":
			mon := &monitor{}
			m.monitors, obj = append(m.monitors, mon), mon
		case " ":
			continue // empty document
		default:
			// Roles, RoleBindings and anything else: only the encoder's
			// one ClusterRole (checkKubeAccess) is expected.
			t.Fatalf("%s: %s %s is not expected in Tandem's manifests", where, meta.APIVersion, meta.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			t.Fatalf("%s: %s does not match the Kubernetes API: %v", where, meta.Kind, err)
		}
	}
}

func containerByName(t *testing.T, spec *corev1.PodSpec, name string) *corev1.Container {
	t.Helper()
	for i := range spec.Containers {
		if spec.Containers[i].Name == name {
			return &spec.Containers[i]
		}
	}
	t.Fatalf("no %s container", name)
	return nil
}

// TestKubernetesManifests checks the pod's privilege split field by field.
func TestKubernetesManifests(t *testing.T) {
	checkPosture(t, loadManifests(t))
}

// checkPosture checks one rendering: the privilege split, the encoder's
// restricted profile, credentials and the token in the encoder alone, the
// socket private to the pod, resources.
func checkPosture(t *testing.T, m manifests) {
	if len(m.daemonSets) != 1 {
		t.Fatalf("%d DaemonSets, want 1", len(m.daemonSets))
	}
	ds := m.daemonSets[0]
	spec := &ds.Spec.Template.Spec
	if len(spec.EphemeralContainers) != 0 {
		t.Error("the pod has ephemeral containers")
	}
	for i := range spec.InitContainers {
		if c := &spec.InitContainers[i]; c.Name != prepareProfiles {
			t.Errorf("init container %s: only %s, which prepares the pprof files' hostPath, is expected", c.Name, prepareProfiles)
		}
	}
	if len(spec.Containers) != 2 {
		t.Errorf("%d containers, want 2 (sampler, encoder)", len(spec.Containers))
	}
	if !spec.HostPID {
		t.Error("hostPID must be true: the sampler profiles every process on the node")
	}
	if spec.HostNetwork || spec.HostIPC {
		t.Error("hostNetwork and hostIPC must be false")
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Error("the pod must set automountServiceAccountToken: false")
	}
	var sa *corev1.ServiceAccount
	for _, s := range m.serviceAccounts {
		if s.Name == spec.ServiceAccountName && s.Namespace == ds.Namespace {
			sa = s
		}
	}
	// A ServiceAccount the manifests do not define is the user's own
	// (serviceAccount.create=false); the pod still mounts no token.
	if sa != nil && (sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken) {
		t.Errorf("ServiceAccount %s must set automountServiceAccountToken: false", sa.Name)
	}

	enc := containerByName(t, spec, "encoder")
	smp := containerByName(t, spec, "sampler")
	t.Run("encoder passes restricted", func(t *testing.T) { checkRestricted(t, spec, enc) })
	t.Run("sampler", func(t *testing.T) { checkSampler(t, spec, smp) })
	t.Run("no credential reaches the sampler", func(t *testing.T) { checkNoCredentials(t, spec, smp) })
	t.Run("encoder probes", func(t *testing.T) { checkProbes(t, enc) })
	t.Run("kubernetes API access", func(t *testing.T) { checkKubeAccess(t, &m, ds, spec, enc, smp) })
	t.Run("socket identity", func(t *testing.T) { checkSocketIdentity(t, spec, smp, enc) })
	t.Run("pprof files' hostPath", func(t *testing.T) { checkProfilesHostPath(t, spec, enc) })

	for _, c := range []*corev1.Container{enc, smp} {
		r := c.Resources
		if r.Requests.Cpu().IsZero() || r.Requests.Memory().IsZero() || r.Limits.Memory().IsZero() {
			t.Errorf("%s: needs cpu and memory requests and a memory limit", c.Name)
		}
		if r.Limits.Memory().Cmp(*r.Requests.Memory()) < 0 {
			t.Errorf("%s: memory limit below its request", c.Name)
		}
	}
	// The sampler's RSS was measured at 42-66 MB: its limit must hold
	// that with room for a full stream buffer (64 MiB).
	if lim := smp.Resources.Limits.Memory().Value(); lim < 66<<20+64<<20 {
		t.Errorf("sampler memory limit %d MiB is below the measured 66 MiB RSS plus the 64 MiB buffer", lim>>20)
	}

	mount := func(c *corev1.Container, volume string) string {
		for _, vm := range c.VolumeMounts {
			if vm.Name == volume {
				return vm.MountPath
			}
		}
		return ""
	}
	if mount(enc, "socket") == "" || mount(enc, "socket") != mount(smp, "socket") {
		t.Errorf("socket volume mounted at %q (encoder) and %q (sampler), want the same path", mount(enc, "socket"), mount(smp, "socket"))
	}
	for _, v := range spec.Volumes {
		if v.Name == "socket" && v.EmptyDir == nil {
			t.Error("the socket volume must be an emptyDir (shared by the pod's two containers only)")
		}
	}
	for _, ns := range m.namespaces {
		if ns.Name == ds.Namespace && ns.Labels["pod-security.kubernetes.io/warn"] != "restricted" {
			t.Errorf("namespace %s should warn against the restricted profile", ns.Name)
		}
	}
}

func volumeByName(spec *corev1.PodSpec, name string) *corev1.Volume {
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == name {
			return &spec.Volumes[i]
		}
	}
	return nil
}

// checkRestricted applies the Pod Security "restricted" profile's rules
// (v1.30+) that concern one container and the volumes it mounts.
func checkRestricted(t *testing.T, spec *corev1.PodSpec, c *corev1.Container) {
	sc := c.SecurityContext
	if sc == nil {
		t.Fatal("no securityContext")
	}
	psc := spec.SecurityContext
	if sc.Privileged != nil && *sc.Privileged {
		t.Error("privileged")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("allowPrivilegeEscalation must be false")
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Error("capabilities.drop must be [ALL]")
	}
	if sc.Capabilities != nil && len(sc.Capabilities.Add) != 0 {
		t.Errorf("adds capabilities %v (restricted allows only NET_BIND_SERVICE; the encoder needs none)", sc.Capabilities.Add)
	}
	nonRoot := sc.RunAsNonRoot
	if nonRoot == nil && psc != nil {
		nonRoot = psc.RunAsNonRoot
	}
	if nonRoot == nil || !*nonRoot {
		t.Error("runAsNonRoot must be true")
	}
	if sc.RunAsUser == nil || *sc.RunAsUser == 0 {
		t.Error("runAsUser must be set and not 0")
	}
	seccomp := sc.SeccompProfile
	if seccomp == nil && psc != nil {
		seccomp = psc.SeccompProfile
	}
	if seccomp == nil || (seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault && seccomp.Type != corev1.SeccompProfileTypeLocalhost) {
		t.Error("seccompProfile must be RuntimeDefault or Localhost")
	}
	if sc.ProcMount != nil && *sc.ProcMount != corev1.DefaultProcMount {
		t.Error("procMount must be Default")
	}
	if sc.AppArmorProfile != nil && sc.AppArmorProfile.Type == corev1.AppArmorProfileTypeUnconfined {
		t.Error("AppArmor must not be Unconfined")
	}
	if sc.SELinuxOptions != nil && (sc.SELinuxOptions.User != "" || sc.SELinuxOptions.Role != "") {
		t.Error("SELinux user and role must not be set")
	}
	if sc.WindowsOptions != nil && sc.WindowsOptions.HostProcess != nil && *sc.WindowsOptions.HostProcess {
		t.Error("hostProcess")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("readOnlyRootFilesystem must be true (Tandem's rule, beyond restricted)")
	}
	for _, p := range c.Ports {
		if p.HostPort != 0 {
			t.Errorf("hostPort %d", p.HostPort)
		}
	}
	if psc != nil && len(psc.Sysctls) > 0 {
		t.Error("the pod sets sysctls")
	}
	for _, vm := range c.VolumeMounts {
		v := volumeByName(spec, vm.Name)
		if v == nil {
			t.Errorf("mounts undefined volume %s", vm.Name)
			continue
		}
		vs := v.VolumeSource
		if isDebugFiles(v, vm) || isProfilesHostPath(v, vm, spec) {
			continue // the exceptions: see isDebugFiles, isProfilesHostPath
		}
		if vs.ConfigMap == nil && vs.CSI == nil && vs.DownwardAPI == nil && vs.EmptyDir == nil && vs.Ephemeral == nil &&
			vs.PersistentVolumeClaim == nil && vs.Projected == nil && vs.Secret == nil {
			t.Errorf("volume %s is of a type restricted does not allow", v.Name)
		}
	}
}

// debugFilesVolume is the chart's opt-in hostPath of the node's debug
// files (debugFiles.hostPath).
const debugFilesVolume = "debug-files"

// isDebugFiles reports whether an encoder mount is the node's debug files:
// the one volume restricted forbids that the encoder may have, opted into
// with debugFiles.hostPath, and only as a read-only, non-propagating
// hostPath at /usr/lib/debug (where --debuginfo-directories looks). It
// gives the unprivileged encoder files every user of the node can read.
func isDebugFiles(v *corev1.Volume, vm corev1.VolumeMount) bool {
	return v.Name == debugFilesVolume && v.HostPath != nil && vm.ReadOnly && vm.MountPath == "/usr/lib/debug" &&
		(vm.MountPropagation == nil || *vm.MountPropagation == corev1.MountPropagationNone)
}

// prepareProfiles is the chart's init container that gives the pprof
// files' hostPath directory to the encoder's uid.
const prepareProfiles = "prepare-profiles"

// isProfilesHostPath reports whether an encoder mount is the pprof files'
// directory on the node (output.pprof.hostPath, the default output): a
// hostPath the encoder writes its files to, and nothing else of the
// node's, at the directory it writes (--output-dir), prepared by the
// prepareProfiles init container. Pod Security reports the hostPath
// volume of the pod; no finding names the encoder (TestChartPodSecurity).
func isProfilesHostPath(v *corev1.Volume, vm corev1.VolumeMount, spec *corev1.PodSpec) bool {
	if v.Name != "profiles" || v.HostPath == nil || vm.SubPath != "" || vm.SubPathExpr != "" ||
		(vm.MountPropagation != nil && *vm.MountPropagation != corev1.MountPropagationNone) {
		return false
	}
	for i := range spec.InitContainers {
		if c := &spec.InitContainers[i]; c.Name == prepareProfiles && mountPath(c, v.Name) == vm.MountPath {
			return true
		}
	}
	return false
}

// checkProfilesHostPath checks the pprof files' hostPath and the init
// container that prepares it, when the pod has them: created if missing
// (type DirectoryOrCreate) and mounted where the encoder writes; the init
// container, the encoder's binary as root with CAP_CHOWN and CAP_FOWNER
// only, no escalation, a read-only root, no token, no other volume,
// giving exactly that directory to the encoder's uid and gid.
func checkProfilesHostPath(t *testing.T, spec *corev1.PodSpec, enc *corev1.Container) {
	v := volumeByName(spec, "profiles")
	var init *corev1.Container
	for i := range spec.InitContainers {
		if spec.InitContainers[i].Name == prepareProfiles {
			init = &spec.InitContainers[i]
		}
	}
	if v == nil || v.HostPath == nil {
		if init != nil {
			t.Errorf("init container %s without a hostPath profiles volume", prepareProfiles)
		}
		return
	}
	if init == nil {
		t.Fatalf("the profiles hostPath %s without the init container %s: the kubelet makes it root's and the encoder cannot write", v.HostPath.Path, prepareProfiles)
	}
	if v.HostPath.Type == nil || *v.HostPath.Type != corev1.HostPathDirectoryOrCreate {
		t.Errorf("profiles hostPath type %v, want DirectoryOrCreate", v.HostPath.Type)
	}
	dir := mountPath(enc, "profiles")
	if dir == "" || !slices.Equal(args(enc, "--output-dir"), []string{dir}) {
		t.Errorf("the encoder writes to %q and mounts the profiles at %q", args(enc, "--output-dir"), dir)
	}
	uid := strconv.FormatInt(*enc.SecurityContext.RunAsUser, 10)
	gid := uid
	if g := enc.SecurityContext.RunAsGroup; g != nil {
		gid = strconv.FormatInt(*g, 10)
	}
	if want := []string{"prepare-dir", dir, "--uid=" + uid, "--gid=" + gid, "--mode=0750"}; !slices.Equal(init.Command, []string{"/tandem-encoder"}) || !slices.Equal(init.Args, want) {
		t.Errorf("%s runs %q %q, want /tandem-encoder %q", prepareProfiles, init.Command, init.Args, want)
	}
	if init.Image != enc.Image {
		t.Errorf("%s image %s, want the encoder's, %s", prepareProfiles, init.Image, enc.Image)
	}
	sc := init.SecurityContext
	if sc == nil || sc.Capabilities == nil || sc.RunAsUser == nil || *sc.RunAsUser != 0 {
		t.Fatalf("%s: want root with a capabilities list", prepareProfiles)
	}
	if !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || !slices.Equal(sc.Capabilities.Add, []corev1.Capability{"CHOWN", "FOWNER"}) {
		t.Errorf("%s capabilities drop %v add %v, want drop [ALL] add [CHOWN FOWNER]", prepareProfiles, sc.Capabilities.Drop, sc.Capabilities.Add)
	}
	if sc.Privileged != nil && *sc.Privileged || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("%s: want unprivileged, no escalation, a read-only root filesystem", prepareProfiles)
	}
	if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: want seccompProfile RuntimeDefault", prepareProfiles)
	}
	if len(init.VolumeMounts) != 1 || init.VolumeMounts[0].Name != "profiles" || init.VolumeMounts[0].MountPath != dir {
		t.Errorf("%s mounts %+v, want the profiles volume at %s alone", prepareProfiles, init.VolumeMounts, dir)
	}
	if len(init.Env) != 0 || len(init.EnvFrom) != 0 || len(init.Ports) != 0 {
		t.Errorf("%s: want no environment and no ports", prepareProfiles)
	}
}

func checkSampler(t *testing.T, spec *corev1.PodSpec, c *corev1.Container) {
	sc := c.SecurityContext
	if sc == nil || sc.Capabilities == nil {
		t.Fatal("no securityContext.capabilities")
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Error("a privileged container: the sampler gets named capabilities instead")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("allowPrivilegeEscalation must be false")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("readOnlyRootFilesystem must be true")
	}
	if !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("capabilities.drop = %v, want [ALL]", sc.Capabilities.Drop)
	}
	var added []string
	for _, c := range sc.Capabilities.Add {
		added = append(added, string(c))
	}
	if !equalSets(added, samplerCapabilities) {
		t.Errorf("capabilities.add = %v, want exactly the measured set %v", added, samplerCapabilities)
	}
	for _, vm := range c.VolumeMounts {
		v := volumeByName(spec, vm.Name)
		if v == nil {
			t.Errorf("mounts undefined volume %s", vm.Name)
			continue
		}
		switch {
		case v.HostPath != nil:
			if !slices.Contains(samplerHostPaths, v.HostPath.Path) {
				t.Errorf("host path %s is not one the tracer needs (%v)", v.HostPath.Path, samplerHostPaths)
			}
			// The one exception: the BPF filesystem, where the tracer pins
			// its span map for OBI, only when the sampler shares it.
			spanMapShare := v.Name == spanMapVolume && slices.Contains(c.Args, "--obi-process-ctx")
			if !vm.ReadOnly && !spanMapShare {
				t.Errorf("host path %s must be mounted read-only (only the BPF filesystem may be written, with --obi-process-ctx)", v.HostPath.Path)
			}
			if vm.MountPropagation != nil && *vm.MountPropagation != corev1.MountPropagationNone {
				t.Errorf("host path %s: mount propagation %s", v.HostPath.Path, *vm.MountPropagation)
			}
		case v.EmptyDir != nil:
		default:
			t.Errorf("volume %s: the sampler mounts only host paths it reads and the socket's emptyDir", v.Name)
		}
	}
}

// checkNoCredentials fails when a Secret, a service account token or a
// remote-store credential flag can reach the sampler container.
func checkNoCredentials(t *testing.T, spec *corev1.PodSpec, c *corev1.Container) {
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			t.Errorf("env %s comes from Secret %s", e.Name, e.ValueFrom.SecretKeyRef.Name)
		}
	}
	for _, e := range c.EnvFrom {
		if e.SecretRef != nil {
			t.Errorf("envFrom Secret %s", e.SecretRef.Name)
		}
	}
	for _, vm := range c.VolumeMounts {
		v := volumeByName(spec, vm.Name)
		if v == nil {
			continue
		}
		if v.Secret != nil || v.Projected != nil || v.CSI != nil {
			t.Errorf("mounts volume %s, which can carry credentials", v.Name)
		}
	}
	for _, a := range append(slices.Clone(c.Command), c.Args...) {
		if strings.Contains(a, "remote-store") || strings.Contains(a, "token") {
			t.Errorf("argument %q carries remote-store settings", a)
		}
	}
}

func checkProbes(t *testing.T, c *corev1.Container) {
	var httpPort int
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--http-address="); ok {
			_, port, _ := strings.Cut(v, ":")
			httpPort, _ = strconv.Atoi(port)
		}
	}
	if httpPort == 0 {
		t.Fatal("the encoder sets no --http-address=HOST:PORT reachable by the kubelet (the default is loopback)")
	}
	portOf := func(p *corev1.Probe, path string) {
		t.Helper()
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != path {
			t.Errorf("want an httpGet probe on %s", path)
			return
		}
		port := p.HTTPGet.Port.IntValue()
		if p.HTTPGet.Port.StrVal != "" {
			for _, cp := range c.Ports {
				if cp.Name == p.HTTPGet.Port.StrVal {
					port = int(cp.ContainerPort)
				}
			}
		}
		if port != httpPort {
			t.Errorf("probe on %s targets port %d, the encoder listens on %d", path, port, httpPort)
		}
	}
	portOf(c.LivenessProbe, "/healthz")
	portOf(c.ReadinessProbe, "/readyz")
}

func equalSets(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// checkSocketIdentity: the sampler trusts exactly the encoder container's
// uid (its default, the host user tandem, does not exist in the image),
// and it skips the socket-directory check (an emptyDir's mode is 0777)
// only because the directory is an emptyDir no other container mounts.
func checkSocketIdentity(t *testing.T, spec *corev1.PodSpec, smp, enc *corev1.Container) {
	flag := func(c *corev1.Container, name string) []string {
		var vals []string
		for _, a := range c.Args {
			if v, ok := strings.CutPrefix(a, name+"="); ok {
				vals = append(vals, v)
			}
		}
		return vals
	}
	var encUID *int64
	if spec.SecurityContext != nil {
		encUID = spec.SecurityContext.RunAsUser
	}
	if enc.SecurityContext != nil && enc.SecurityContext.RunAsUser != nil {
		encUID = enc.SecurityContext.RunAsUser
	}
	if encUID == nil || *encUID == 0 {
		t.Fatal("the encoder container sets no non-root runAsUser")
	}
	if got := flag(smp, "--encoder-uid"); !slices.Equal(got, []string{strconv.FormatInt(*encUID, 10)}) {
		t.Errorf("sampler --encoder-uid=%v, want exactly the encoder's runAsUser %d", got, *encUID)
	}
	if got := flag(enc, "--allowed-uid"); !slices.Equal(got, []string{"0"}) {
		t.Errorf("encoder --allowed-uid=%v, want only the root sampler, 0", got)
	}
	check := flag(smp, "--socket-dir-check")
	if len(check) == 0 || check[0] != "false" {
		return
	}
	v := volumeByName(spec, "socket")
	if v == nil || v.EmptyDir == nil {
		t.Error("--socket-dir-check=false without an emptyDir socket volume")
	}
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		for _, vm := range c.VolumeMounts {
			if vm.Name == "socket" && c.Name != smp.Name && c.Name != enc.Name {
				t.Errorf("container %s mounts the socket volume; with --socket-dir-check=false only the sampler and the encoder may", c.Name)
			}
		}
	}
}

// encoderRules are the only API permissions the encoder gets (encoder/kube).
var encoderRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{"apps"}, Resources: []string{"replicasets"}, Verbs: []string{"get"}},
	{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get"}},
}

// tokenDir is where client-go's in-cluster configuration reads the token.
const tokenDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// checkKubeAccess checks the encoder's API access: one ClusterRole with
// exactly encoderRules, bound to the pod's ServiceAccount alone (unless
// the rendering leaves RBAC to the user: neither is present), and the token
// projected into the encoder container only. With --kubernetes=off there
// is no token and no role at all.
func checkKubeAccess(t *testing.T, m *manifests, ds *appsv1.DaemonSet, spec *corev1.PodSpec, enc, smp *corev1.Container) {
	if slices.Contains(enc.Args, "--kubernetes=off") {
		for _, v := range spec.Volumes {
			if v.Projected != nil {
				t.Errorf("--kubernetes=off, but volume %s is projected (no token is needed)", v.Name)
			}
		}
		if len(m.clusterRoles)+len(m.bindings) != 0 {
			t.Errorf("--kubernetes=off, but %d ClusterRoles and %d bindings are rendered", len(m.clusterRoles), len(m.bindings))
		}
		return
	}
	if len(m.clusterRoles)+len(m.bindings) != 0 {
		checkEncoderRole(t, m, ds, spec)
	}

	// The token: projected, into the encoder only, read-only, rotated.
	var token *corev1.Volume
	for i := range spec.Volumes {
		v := &spec.Volumes[i]
		if v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			if src.ServiceAccountToken != nil {
				if token != nil {
					t.Errorf("two volumes project the token (%s, %s)", token.Name, v.Name)
				}
				token = v
				if e := src.ServiceAccountToken.ExpirationSeconds; e == nil || *e > 24*3600 {
					t.Errorf("volume %s: the token must expire within a day (the kubelet rotates it)", v.Name)
				}
				if src.ServiceAccountToken.Audience != "" {
					t.Errorf("volume %s: audience %q: the API server's default audience is the one it accepts", v.Name, src.ServiceAccountToken.Audience)
				}
			}
		}
	}
	if token == nil {
		t.Fatal("no projected service-account token for the encoder")
	}
	mounted := func(c *corev1.Container) *corev1.VolumeMount {
		for i := range c.VolumeMounts {
			if c.VolumeMounts[i].Name == token.Name {
				return &c.VolumeMounts[i]
			}
		}
		return nil
	}
	if vm := mounted(smp); vm != nil {
		t.Errorf("the sampler mounts the token volume %s", token.Name)
	}
	switch vm := mounted(enc); {
	case vm == nil:
		t.Errorf("the encoder does not mount the token volume %s", token.Name)
	case vm.MountPath != tokenDir || !vm.ReadOnly:
		t.Errorf("the encoder mounts %s at %s (read-only %v), want %s read-only", token.Name, vm.MountPath, vm.ReadOnly, tokenDir)
	}
	if !slices.Contains(enc.Args, "--kubernetes=on") && !slices.Contains(enc.Args, "--kubernetes=auto") {
		t.Error("the encoder does not look pods up: pass --kubernetes=on")
	}
	if !slices.Contains(enc.Args, "--node=$(NODE_NAME)") {
		t.Error("the encoder must get --node=$(NODE_NAME): the pods it lists are that node's")
	}
}

// checkEncoderRole: one ClusterRole with exactly encoderRules, bound to the
// pod's ServiceAccount alone.
func checkEncoderRole(t *testing.T, m *manifests, ds *appsv1.DaemonSet, spec *corev1.PodSpec) {
	if len(m.clusterRoles) != 1 || len(m.bindings) != 1 {
		t.Fatalf("%d ClusterRoles and %d ClusterRoleBindings, want one of each", len(m.clusterRoles), len(m.bindings))
	}
	role, b := m.clusterRoles[0], m.bindings[0]
	if role.AggregationRule != nil {
		t.Error("the ClusterRole must not aggregate other roles")
	}
	if len(role.Rules) != len(encoderRules) {
		t.Errorf("ClusterRole %s has %d rules, want %d", role.Name, len(role.Rules), len(encoderRules))
	}
	for i, r := range role.Rules {
		if i >= len(encoderRules) {
			break
		}
		w := encoderRules[i]
		if !slices.Equal(r.APIGroups, w.APIGroups) || !slices.Equal(r.Resources, w.Resources) || !slices.Equal(r.Verbs, w.Verbs) ||
			len(r.ResourceNames) != 0 || len(r.NonResourceURLs) != 0 {
			t.Errorf("ClusterRole rule %d = %+v, want %+v", i, r, w)
		}
	}
	if b.RoleRef != (rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name}) {
		t.Errorf("binding %s refers to %+v, want ClusterRole %s", b.Name, b.RoleRef, role.Name)
	}
	want := rbacv1.Subject{Kind: "ServiceAccount", Name: spec.ServiceAccountName, Namespace: ds.Namespace}
	if len(b.Subjects) != 1 || b.Subjects[0] != want {
		t.Errorf("binding %s subjects %+v, want only %+v", b.Name, b.Subjects, want)
	}
}
