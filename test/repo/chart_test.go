package repo

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/tandem-profiler/tandem/tools/helmchart"

	"github.com/tandem-profiler/tandem/test/harness"
)

var update = flag.Bool("update", false, "rewrite deploy/kubernetes/daemonset.yaml from the chart's defaults")

// daemonSetHeader opens deploy/kubernetes/daemonset.yaml.
const daemonSetHeader = `# Tandem for kubectl apply -f: the Helm chart deploy/helm/tandem rendered
# with its default values and namespace.create for release "tandem" in
# namespace tandem (helm template tandem deploy/helm/tandem -n tandem
# --set namespace.create=true), less Helm's managed-by labels: everything
# in namespace tandem, which it creates. Generated, do not edit: change the chart, then run make manifests
# (test/repo's TestDaemonSetIsChartDefaults fails when the two
# differ). docs/reference/helm-values.md says what each value does.

`

func chartDir(t *testing.T) string { return filepath.Join(harness.ModuleRoot(t), helmchart.Dir) }

// render renders the chart for the default release with values and
// decodes the result strictly.
func render(t *testing.T, values map[string]any) (manifests, *helmchart.Rendered) {
	t.Helper()
	r, err := helmchart.Render(chartDir(t), helmchart.DefaultRelease, values)
	if err != nil {
		t.Fatal(err)
	}
	var m manifests
	decodeManifests(t, "chart", r.YAML(), &m)
	return m, r
}

// TestDaemonSetIsChartDefaults: deploy/kubernetes/daemonset.yaml is the
// chart rendered with its defaults, byte for byte (-update rewrites it).
func TestDaemonSetIsChartDefaults(t *testing.T) {
	_, r := render(t, map[string]any{"namespace": map[string]any{"create": true}})
	want := append([]byte(daemonSetHeader), r.Plain()...)
	path := filepath.Join(harness.ModuleRoot(t), "deploy", "kubernetes", "daemonset.yaml")
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("deploy/kubernetes/daemonset.yaml is not the chart rendered with its defaults: run make manifests (first differing line %d)", firstDiffLine(got, want))
	}
}

func firstDiffLine(a, b []byte) int {
	la, lb := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := range min(len(la), len(lb)) {
		if la[i] != lb[i] {
			return i + 1
		}
	}
	return min(len(la), len(lb)) + 1
}

// args returns the values of a container's --name=value arguments.
func args(c *corev1.Container, name string) []string {
	var vals []string
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			vals = append(vals, v)
		} else if a == name {
			vals = append(vals, "")
		}
	}
	return vals
}

func mountPath(c *corev1.Container, volume string) string {
	for _, vm := range c.VolumeMounts {
		if vm.Name == volume {
			return vm.MountPath
		}
	}
	return ""
}

func wantArgs(t *testing.T, c *corev1.Container, name string, want ...string) {
	t.Helper()
	if got := args(c, name); !slices.Equal(got, want) {
		t.Errorf("%s %s = %q, want %q", c.Name, name, got, want)
	}
}

// chartCase is one set of values: rendered, decoded strictly, put through
// checkPosture, linted, then checked for what the values are for.
type chartCase struct {
	name   string
	values string // YAML over the chart's defaults
	check  func(t *testing.T, m manifests, enc, smp *corev1.Container)
}

var chartCases = []chartCase{
	{
		name:   "the sampler under Tandem's Localhost seccomp profile",
		values: `sampler: {seccompLocalhostProfile: tandem/tandem-sampler.json}`,
		check: func(t *testing.T, _ manifests, enc, smp *corev1.Container) {
			p := smp.SecurityContext.SeccompProfile
			if p == nil || p.Type != corev1.SeccompProfileTypeLocalhost || p.LocalhostProfile == nil || *p.LocalhostProfile != "tandem/tandem-sampler.json" {
				t.Errorf("sampler seccompProfile %+v, want Localhost tandem/tandem-sampler.json", p)
			}
			if p := enc.SecurityContext.SeccompProfile; p == nil || p.Type != corev1.SeccompProfileTypeRuntimeDefault {
				t.Errorf("encoder seccompProfile %+v, want RuntimeDefault (an allow-list, stricter than Tandem's deny-list)", p)
			}
		},
	},
	{
		name: "defaults: pprof files on the node, prepared by an init container",
		check: func(t *testing.T, m manifests, enc, smp *corev1.Container) {
			wantArgs(t, enc, "--output-dir", "/var/lib/tandem/profiles")
			wantArgs(t, enc, "--output-dir-max-bytes", "536870912")
			spec := &m.daemonSets[0].Spec.Template.Spec
			if v := volumeByName(spec, "profiles"); v == nil || v.HostPath == nil || v.HostPath.Path != "/var/lib/tandem/profiles" {
				t.Errorf("profiles volume %+v, want the node's /var/lib/tandem/profiles", v)
			}
			if len(spec.InitContainers) != 1 {
				t.Errorf("%d init containers, want %s", len(spec.InitContainers), prepareProfiles)
			}
			wantArgs(t, enc, "--remote-store-address")
			wantArgs(t, enc, "--kubernetes", "on")
			wantArgs(t, smp, "--encoder-uid", "65532")
			if len(m.namespaces) != 0 {
				t.Error("the defaults render a Namespace: helm install -n NAME --create-namespace would conflict with it")
			}
			if len(m.configMaps)+len(m.services)+len(m.monitors) != 0 {
				t.Error("defaults render a ConfigMap, a Service or a monitor")
			}
			if v := volumeByName(&m.daemonSets[0].Spec.Template.Spec, spanMapVolume); v != nil || mountPath(smp, spanMapVolume) != "" || len(args(smp, "--obi-process-ctx")) != 0 {
				t.Error("the node's BPF filesystem is mounted, or span sharing on, by default")
			}
			if v := volumeByName(&m.daemonSets[0].Spec.Template.Spec, debugFilesVolume); v != nil || mountPath(enc, debugFilesVolume) != "" {
				t.Error("the node's debug files are mounted by default: the encoder would leave restricted")
			}
			tol := m.daemonSets[0].Spec.Template.Spec.Tolerations
			if len(tol) != 1 || tol[0].Operator != corev1.TolerationOpExists || tol[0].Key != "" {
				t.Errorf("tolerations %+v, want every node (operator Exists, no key)", tol)
			}
		},
	},
	{
		name:   "pprof files in an emptyDir (output.pprof.hostPath empty)",
		values: `output: {pprof: {hostPath: "", sizeLimit: 2Gi, maxBytes: 0}}`,
		check: func(t *testing.T, m manifests, enc, smp *corev1.Container) {
			wantArgs(t, enc, "--output-dir", "/var/lib/tandem/profiles")
			wantArgs(t, enc, "--output-dir-max-bytes", "0")
			spec := &m.daemonSets[0].Spec.Template.Spec
			if v := volumeByName(spec, "profiles"); v == nil || v.EmptyDir == nil || v.EmptyDir.SizeLimit.String() != "2Gi" {
				t.Errorf("profiles volume %+v, want an emptyDir of 2Gi", v)
			}
			if len(spec.InitContainers) != 0 {
				t.Error("an init container without a hostPath to prepare")
			}
		},
	},
	{
		name: "OTLP with a bearer token, mutual TLS and headers",
		values: `
output:
  remoteStore:
    address: otel-collector.observability:4317
    headers: {x-scope-orgid: team-a, x-tenant: b}
    bearerTokenSecret: {name: collector-token}
    tlsSecret: {name: collector-tls, caKey: ca.crt, clientCertKey: tls.crt, clientKeyKey: tls.key}
    otlpLogging: true
`,
		check: func(t *testing.T, m manifests, enc, smp *corev1.Container) {
			wantArgs(t, enc, "--remote-store-address", "otel-collector.observability:4317")
			wantArgs(t, enc, "--remote-store-format", "otlp")
			wantArgs(t, enc, "--remote-store-grpc-headers", "x-scope-orgid=team-a", "x-tenant=b")
			wantArgs(t, enc, "--remote-store-bearer-token-file", "/etc/tandem/remote-store-token/token")
			wantArgs(t, enc, "--remote-store-ca-file", "/etc/tandem/remote-store-tls/ca.crt")
			wantArgs(t, enc, "--remote-store-client-cert", "/etc/tandem/remote-store-tls/tls.crt")
			wantArgs(t, enc, "--remote-store-client-key", "/etc/tandem/remote-store-tls/tls.key")
			wantArgs(t, enc, "--otlp-logging", "")
			wantArgs(t, enc, "--output-dir")
			spec := &m.daemonSets[0].Spec.Template.Spec
			for vol, secret := range map[string]string{"remote-store-token": "collector-token", "remote-store-tls": "collector-tls"} {
				v := volumeByName(spec, vol)
				if v == nil || v.Secret == nil || v.Secret.SecretName != secret {
					t.Errorf("volume %s: want Secret %s", vol, secret)
				}
				if mountPath(enc, vol) == "" {
					t.Errorf("the encoder does not mount %s", vol)
				}
			}
		},
	},
	{
		name: "Parca arrow-v2 with symbol upload elsewhere",
		values: `
output:
  remoteStore: {address: "parca.parca:7070", format: arrow-v2, insecure: true}
debuginfo: {address: "parca-debuginfo.parca:7070"}
`,
		check: func(t *testing.T, m manifests, enc, smp *corev1.Container) {
			wantArgs(t, enc, "--remote-store-format", "arrow-v2")
			wantArgs(t, enc, "--remote-store-insecure", "")
			wantArgs(t, enc, "--remote-store-compression") // OTLP only
			wantArgs(t, enc, "--debuginfo-address", "parca-debuginfo.parca:7070")
			if mountPath(enc, "tmp") != "/tmp" {
				t.Error("uploads need scratch space: the encoder mounts no /tmp")
			}
		},
	},
	{
		name: "an outputs file and relabelling in a ConfigMap",
		values: `
output:
  outputs:
    - {name: collector, format: otlp, address: "otel-collector:4317"}
    - {name: local, format: pprof, dir: /var/lib/tandem/profiles}
relabelConfigs:
  - {source_labels: [__meta_kubernetes_namespace], target_label: namespace}
`,
		check: func(t *testing.T, m manifests, enc, smp *corev1.Container) {
			wantArgs(t, enc, "--config-path", "/etc/tandem/config/config.yaml")
			wantArgs(t, enc, "--remote-store-address")
			wantArgs(t, enc, "--output-dir")
			if len(m.configMaps) != 1 {
				t.Fatalf("%d ConfigMaps, want 1", len(m.configMaps))
			}
			var file struct {
				Outputs        []map[string]any `json:"outputs"`
				RelabelConfigs []map[string]any `json:"relabel_configs"`
			}
			if err := yaml.UnmarshalStrict([]byte(m.configMaps[0].Data["config.yaml"]), &file); err != nil {
				t.Fatalf("config.yaml: %v", err)
			}
			if len(file.Outputs) != 2 || len(file.RelabelConfigs) != 1 {
				t.Errorf("config.yaml holds %d outputs and %d relabel rules, want 2 and 1", len(file.Outputs), len(file.RelabelConfigs))
			}
			if m.daemonSets[0].Spec.Template.Annotations["checksum/encoder-config"] == "" {
				t.Error("no checksum annotation: a new config file would not roll the pods")
			}
		},
	},
	{
		name:   "the node's debug files, read-only in the encoder",
		values: `debugFiles: {hostPath: /usr/lib/debug}`,
		check: func(t *testing.T, m manifests, enc, smp *corev1.Container) {
			v := volumeByName(&m.daemonSets[0].Spec.Template.Spec, debugFilesVolume)
			if v == nil || v.HostPath == nil || v.HostPath.Path != "/usr/lib/debug" {
				t.Fatalf("volume %s: %+v, want a hostPath of /usr/lib/debug", debugFilesVolume, v)
			}
			found := false
			for _, vm := range enc.VolumeMounts {
				found = found || isDebugFiles(v, vm)
			}
			if !found {
				t.Errorf("the encoder does not mount %s read-only at /usr/lib/debug: %+v", debugFilesVolume, enc.VolumeMounts)
			}
			if mountPath(smp, debugFilesVolume) != "" {
				t.Error("the sampler mounts the debug files")
			}
			wantArgs(t, enc, "--debuginfo-directories") // the default, /usr/lib/debug
		},
	},
	{
		name:   "span map shared with OBI",
		values: `sampler: {obiProcessCtx: true}`,
		check: func(t *testing.T, m manifests, enc, smp *corev1.Container) {
			wantArgs(t, smp, "--obi-process-ctx", "")
			wantArgs(t, smp, "--bpffs-root", "/sys/fs/bpf")
			v := volumeByName(&m.daemonSets[0].Spec.Template.Spec, spanMapVolume)
			if v == nil || v.HostPath == nil || v.HostPath.Path != "/sys/fs/bpf" || mountPath(smp, spanMapVolume) != "/sys/fs/bpf" {
				t.Errorf("volume %+v mounted at %q: want the node's /sys/fs/bpf at /sys/fs/bpf", v, mountPath(smp, spanMapVolume))
			}
			if mountPath(enc, spanMapVolume) != "" {
				t.Error("the encoder mounts the BPF filesystem")
			}
		},
	},
	{
		name:   "Kubernetes metadata off",
		values: `kubernetesMetadata: {enabled: false}`,
		check: func(t *testing.T, m manifests, enc, smp *corev1.Container) {
			wantArgs(t, enc, "--kubernetes", "off")
			if mountPath(enc, "kube-api-token") != "" {
				t.Error("the token is mounted with Kubernetes metadata off")
			}
		},
	},
	{
		name: "metrics Service and ServiceMonitor",
		values: `
metrics:
  service: {enabled: true}
  serviceMonitor: {enabled: true, labels: {release: prom}}
`,
		check: checkMetricsObjects,
	},
	{
		name: "metrics Service and PodMonitor",
		values: `
metrics:
  service: {enabled: true}
  podMonitor: {enabled: true, interval: 1m}
`,
		check: checkMetricsObjects,
	},
	{
		name: "scheduling, an existing ServiceAccount, extras",
		values: `
image: {digest: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}
serviceAccount: {create: false, name: profiler}
rbac: {create: false}
nodeSelector: {kubernetes.io/os: linux}
tolerations: [{key: dedicated, operator: Equal, value: batch, effect: NoSchedule}]
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms: [{matchExpressions: [{key: profiling, operator: NotIn, values: ["off"]}]}]
priorityClassName: ""
updateStrategy: {type: OnDelete}
sampler:
  samplingFrequency: 97
  tracers: python,hotspot,luajit
  offCPUThreshold: 0.01
  includeEnvVars: [DEPLOY_ENV]
  extraArgs: [--flush-interval=2s]
  extraEnv: [{name: GOMAXPROCS, value: "2"}]
encoder:
  extraArgs: [--profiling-label-ttl=5m]
  extraEnv: [{name: GOMEMLIMIT, value: 400MiB}]
`,
		check: func(t *testing.T, m manifests, enc, smp *corev1.Container) {
			spec := &m.daemonSets[0].Spec.Template.Spec
			if len(m.namespaces)+len(m.serviceAccounts)+len(m.clusterRoles)+len(m.bindings) != 0 {
				t.Error("a Namespace, ServiceAccount or RBAC object is rendered though create is off")
			}
			if spec.ServiceAccountName != "profiler" || spec.PriorityClassName != "" || spec.NodeSelector["kubernetes.io/os"] != "linux" || spec.Affinity == nil {
				t.Errorf("scheduling values not applied: sa %q, priority %q, nodeSelector %v", spec.ServiceAccountName, spec.PriorityClassName, spec.NodeSelector)
			}
			if len(spec.Tolerations) != 1 || spec.Tolerations[0].Key != "dedicated" {
				t.Errorf("tolerations %+v", spec.Tolerations)
			}
			if m.daemonSets[0].Spec.UpdateStrategy.Type != "OnDelete" {
				t.Error("update strategy not applied")
			}
			if !strings.HasSuffix(smp.Image, "@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef") || enc.Image != smp.Image {
				t.Errorf("images %s and %s, want the digest", smp.Image, enc.Image)
			}
			wantArgs(t, smp, "--profiling-cpu-sampling-frequency", "97")
			wantArgs(t, smp, "--tracers", "python,hotspot,luajit")
			wantArgs(t, smp, "--off-cpu-threshold", "0.01")
			wantArgs(t, smp, "--include-env-var", "DEPLOY_ENV")
			wantArgs(t, smp, "--flush-interval", "2s")
			wantArgs(t, enc, "--profiling-label-ttl", "5m")
			if len(smp.Env) != 2 || len(enc.Env) != 2 {
				t.Errorf("env: sampler %d, encoder %d variables, want 2 and 2", len(smp.Env), len(enc.Env))
			}
		},
	},
}

// TestChartValueSets renders the chart for each value set with Helm's
// library, decodes it strictly, lints it, and puts it through the same
// posture checks as the plain manifests.
func TestChartValueSets(t *testing.T) {
	for _, tc := range chartCases {
		t.Run(tc.name, func(t *testing.T) {
			values := map[string]any{}
			if err := yaml.Unmarshal([]byte(tc.values), &values); err != nil {
				t.Fatal(err)
			}
			m, r := render(t, values)
			t.Run("posture", func(t *testing.T) { checkPosture(t, m) })
			for _, f := range helmchart.Lint(chartDir(t), helmchart.DefaultRelease.Namespace, values) {
				t.Errorf("helm lint: %s", f)
			}
			if !strings.Contains(r.Notes, "rollout status daemonset/tandem") {
				t.Errorf("NOTES.txt does not say how to check the rollout:\n%s", r.Notes)
			}
			spec := &m.daemonSets[0].Spec.Template.Spec
			tc.check(t, m, containerByName(t, spec, "encoder"), containerByName(t, spec, "sampler"))
		})
	}
}

// TestChartRefusesValues: values that cannot work fail at install (schema
// or template), naming the value.
func TestChartRefusesValues(t *testing.T) {
	for _, tc := range []struct{ name, values, want string }{
		{"no output", `output: {pprof: {dir: ""}}`, "no output configured"},
		{"unknown format", `output: {remoteStore: {address: "c:4317", format: parquet}}`, "format"},
		{"off-CPU threshold above 1", `sampler: {offCPUThreshold: 1.5}`, "offCPUThreshold"},
		{"negative threshold", `sampler: {offCPUThreshold: -0.1}`, "offCPUThreshold"},
		{"sampling frequency 0", `sampler: {samplingFrequency: 0}`, "samplingFrequency"},
		{"unknown key", `sampler: {samplingFrequncy: 97}`, "samplingFrequncy"},
		{"address without port", `output: {remoteStore: {address: collector}}`, `output.remoteStore.address "collector": want host:PORT`},
		{"unbracketed IPv6 address", `output: {remoteStore: {address: "fd00::1:4317"}}`, "an IPv6 address in brackets: [fd00::1]:4317"},
		{"debuginfo address without port", `debuginfo: {address: parca}`, `debuginfo.address "parca": want host:PORT`},
		{"address and outputs", `output: {remoteStore: {address: "c:4317"}, outputs: [{name: a, format: otlp, address: "c:4317"}]}`, "not both"},
		{"an unknown tracer", `sampler: {tracers: "python,cobol"}`, `sampler.tracers: "cobol" is not a tracer: want all, or a comma-separated list of perl, php`},
		{"an outputs entry with a typo'd key", `output: {outputs: [{name: a, format: otlp, adress: "c:4317"}]}`, "adress"},
		{"encoder as root", `encoder: {uid: 0}`, "uid"},
		{"half of mutual TLS", `output: {remoteStore: {address: "c:4317", tlsSecret: {name: s, clientCertKey: tls.crt}}}`, "clientKeyKey"},
		{"plaintext with TLS", `output: {remoteStore: {address: "c:4317", insecure: true, tlsSecret: {name: s}}}`, "insecure"},
		{"existing ServiceAccount unnamed", `serviceAccount: {create: false}`, "serviceAccount.name"},
		{"bad duration", `encoder: {profilingDuration: 10}`, "profilingDuration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			values := map[string]any{}
			if err := yaml.Unmarshal([]byte(tc.values), &values); err != nil {
				t.Fatal(err)
			}
			_, err := helmchart.Render(chartDir(t), helmchart.DefaultRelease, values)
			if err == nil {
				t.Fatalf("values %s rendered; want an error naming %q", tc.values, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not name %q", err, tc.want)
			}
		})
	}
}

// checkMetricsObjects: the headless Service and the one monitor select the
// pods' metrics port.
func checkMetricsObjects(t *testing.T, m manifests, _, _ *corev1.Container) {
	if len(m.services) != 1 || len(m.monitors) != 1 {
		t.Fatalf("%d Services and %d monitors, want 1 and 1", len(m.services), len(m.monitors))
	}
	svc := m.services[0]
	if svc.Spec.ClusterIP != corev1.ClusterIPNone || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.StrVal != "http-metrics" {
		t.Errorf("Service %s: want headless, targeting port http-metrics", svc.Name)
	}
	podLabels := m.daemonSets[0].Spec.Template.Labels
	for k, v := range svc.Spec.Selector {
		if podLabels[k] != v {
			t.Errorf("the Service selects %s=%s, which the pods do not carry", k, v)
		}
	}
	for _, mon := range m.monitors {
		eps := append(mon.Spec.Endpoints, mon.Spec.PodMetricsEndpoints...)
		if len(eps) != 1 || eps[0].Port != "http-metrics" || eps[0].Path != "/metrics" {
			t.Errorf("%s: endpoints %+v, want http-metrics /metrics", mon.Kind, eps)
		}
		for k, v := range mon.Spec.Selector.MatchLabels {
			if podLabels[k] != v || (mon.Kind == "ServiceMonitor" && svc.Labels[k] != v) {
				t.Errorf("%s selects %s=%s, which its targets do not carry", mon.Kind, k, v)
			}
		}
	}
}
