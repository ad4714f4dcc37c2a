package repo

import (
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	"github.com/tandem-profiler/tandem/tools/helmchart"
)

// TestChartLabelsValidForDevVersions: with the version of a build between
// releases (0.1.0-dev+<hash>, which make release packages the chart
// with), every label the chart renders is one the API server accepts: a
// "+" in a label value fails helm install with "a valid label must be an
// empty string or consist of alphanumeric characters" (seen on the real
// cluster of test/cluster).
func TestChartLabelsValidForDevVersions(t *testing.T) {
	ch, err := loader.Load(chartDir(t))
	if err != nil {
		t.Fatal(err)
	}
	const dev = "0.1.0-dev+9a3756ff0b3d.dirty"
	ch.Metadata.Version, ch.Metadata.AppVersion = dev, dev
	r, err := helmchart.RenderChart(ch, helmchart.DefaultRelease, map[string]any{
		"namespace": map[string]any{"create": true},
		"output":    map[string]any{"remoteStore": map[string]any{"address": "collector:4317"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range r.Manifests {
		var obj struct {
			Metadata struct{ Labels map[string]string }
			Spec     struct {
				Template struct {
					Metadata struct{ Labels map[string]string }
				}
			}
		}
		if err := yaml.Unmarshal([]byte(m.YAML), &obj); err != nil {
			t.Fatalf("%s: %v", m.Template, err)
		}
		for _, labels := range []map[string]string{obj.Metadata.Labels, obj.Spec.Template.Metadata.Labels} {
			for k, v := range labels {
				for _, msg := range append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...) {
					t.Errorf("%s (%s): label %s=%q: %s", m.Kind, m.Template, k, v, msg)
				}
			}
		}
	}
}
