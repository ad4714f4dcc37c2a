package repo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/tandem-profiler/tandem/tools/helmchart"

	"github.com/tandem-profiler/tandem/test/harness"
)

// clusterScoped are the kinds the chart renders that have no namespace.
var clusterScoped = map[string]bool{"Namespace": true, "ClusterRole": true, "ClusterRoleBinding": true}

// everything turns on every object the chart can render.
const everything = `
metrics: {service: {enabled: true}, serviceMonitor: {enabled: true}}
output: {outputs: [{name: a, format: otlp, address: "c:4317"}]}
`

// TestChartInReleaseNamespace: helm install -n other --create-namespace
// puts every object in "other" and renders no Namespace (which would
// conflict with the one Helm creates); namespace.create renders that
// namespace, kept on uninstall (it may hold the user's Secrets).
func TestChartInReleaseNamespace(t *testing.T) {
	rel := helmchart.Release{Name: "prof", Namespace: "other"}
	for _, tc := range []struct {
		name, values string
		create       bool
	}{
		{"defaults", "", false},
		{"every object", everything, false},
		{"namespace.create", "namespace: {create: true}", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			values := map[string]any{}
			if err := yaml.Unmarshal([]byte(tc.values), &values); err != nil {
				t.Fatal(err)
			}
			r, err := helmchart.Render(chartDir(t), rel, values)
			if err != nil {
				t.Fatal(err)
			}
			var namespaces int
			for _, m := range r.Manifests {
				var obj struct {
					Metadata struct {
						Name, Namespace string
						Annotations     map[string]string
						Labels          map[string]string
					}
					Subjects []struct{ Kind, Name, Namespace string }
				}
				if err := yaml.Unmarshal([]byte(m.YAML), &obj); err != nil {
					t.Fatalf("%s: %v", m.Template, err)
				}
				md := obj.Metadata
				switch {
				case m.Kind == "Namespace":
					namespaces++
					if md.Name != rel.Namespace || md.Annotations["helm.sh/resource-policy"] != "keep" || md.Labels["pod-security.kubernetes.io/enforce"] != "privileged" {
						t.Errorf("Namespace %s, annotations %v, labels %v: want %s, kept on uninstall, enforcing privileged", md.Name, md.Annotations, md.Labels, rel.Namespace)
					}
				case clusterScoped[m.Kind]:
					if md.Namespace != "" {
						t.Errorf("%s %s has namespace %q", m.Kind, md.Name, md.Namespace)
					}
				case md.Namespace != rel.Namespace:
					t.Errorf("%s %s in namespace %q, want the release's, %q", m.Kind, md.Name, md.Namespace, rel.Namespace)
				}
				for _, s := range obj.Subjects {
					if s.Kind == "ServiceAccount" && s.Namespace != rel.Namespace {
						t.Errorf("%s %s binds ServiceAccount %s in %q, want %q", m.Kind, md.Name, s.Name, s.Namespace, rel.Namespace)
					}
				}
			}
			if want := map[bool]int{false: 0, true: 1}[tc.create]; namespaces != want {
				t.Errorf("%d Namespace objects, want %d", namespaces, want)
			}
			for _, cmd := range strings.Split(r.Notes, "\n") {
				if strings.Contains(cmd, "kubectl ") && !strings.Contains(cmd, "-n "+rel.Namespace+" ") {
					t.Errorf("NOTES.txt command without -n %s: %s", rel.Namespace, strings.TrimSpace(cmd))
				}
			}
		})
	}
}

// TestStaticManifestIsNotHelms: the kubectl apply manifest does not claim
// Helm manages its objects (helm install over it would refuse, or adopt
// objects kubectl owns).
func TestStaticManifestIsNotHelms(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(harness.ModuleRoot(t), "deploy", "kubernetes", "daemonset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range []string{"app.kubernetes.io/managed-by", "helm.sh/chart"} {
		if strings.Contains(string(data), l) {
			t.Errorf("deploy/kubernetes/daemonset.yaml carries Helm's %s label", l)
		}
	}
}
