package repo

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/tandem-profiler/tandem/tools/helmchart"
)

// TestChartNotesWork: NOTES.txt's commands work with this image on a
// stock cluster: no kubectl cp (needs tar in the image), no go tool (needs
// Go), a port-forward only to a listener on the pod's loopback, and only
// metrics the encoder has (docs/reference/metrics-encoder.md).
func TestChartNotesWork(t *testing.T) {
	ref, err := os.ReadFile(filepath.Join(moduleRoot(t), "docs", "reference", "metrics-encoder.md"))
	if err != nil {
		t.Fatal(err)
	}
	metric := regexp.MustCompile(`tandem_[a-z_]+[a-z]`)
	for _, values := range []string{
		"",
		`output: {remoteStore: {address: "c:4317"}}`,
		`output: {outputs: [{name: a, format: otlp, address: "c:4317"}]}`,
	} {
		v := map[string]any{}
		if err := yaml.Unmarshal([]byte(values), &v); err != nil {
			t.Fatal(err)
		}
		m, r := render(t, v)
		for _, bad := range []string{"kubectl cp", "go tool", "export_requests"} {
			if strings.Contains(r.Notes, bad) {
				t.Errorf("values %q: NOTES.txt says %q, which does not work with this image", values, bad)
			}
		}
		for _, name := range metric.FindAllString(r.Notes, -1) {
			if !strings.Contains(string(ref), "`"+name+"`") {
				t.Errorf("values %q: NOTES.txt names %s, which the encoder does not have", values, name)
			}
		}
		if strings.Contains(r.Notes, "port-forward") {
			checkNoPodIPListener(t, containerByName(t, &m.daemonSets[0].Spec.Template.Spec, "encoder"))
		}
	}
}

// TestChartDefaultsForEveryCluster: the defaults need nothing a stock
// cluster may lack: no priority class (GKE wants a quota for
// system-node-critical outside kube-system), and a debug-files hostPath
// is never created on the node (read-only /usr on COS, Bottlerocket,
// Flatcar, Talos).
func TestChartDefaultsForEveryCluster(t *testing.T) {
	m, _ := render(t, nil)
	if pc := m.daemonSets[0].Spec.Template.Spec.PriorityClassName; pc != "" {
		t.Errorf("priorityClassName %q by default, want none", pc)
	}
	m, _ = render(t, map[string]any{"debugFiles": map[string]any{"hostPath": "/usr/lib/debug"}})
	v := volumeByName(&m.daemonSets[0].Spec.Template.Spec, "debug-files")
	if v == nil || v.HostPath == nil || v.HostPath.Type == nil || *v.HostPath.Type != "Directory" {
		t.Errorf("debug-files volume %+v, want a hostPath of type Directory", v)
	}
	_, err := helmchart.Render(chartDir(t), helmchart.DefaultRelease, map[string]any{"metrics": map[string]any{
		"service": map[string]any{"enabled": true}, "serviceMonitor": map[string]any{"enabled": true}, "podMonitor": map[string]any{"enabled": true}}})
	if err == nil || !strings.Contains(err.Error(), "not both") {
		t.Errorf("a ServiceMonitor and a PodMonitor together (each pod scraped twice): %v, want an error", err)
	}
}
