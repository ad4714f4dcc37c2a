package helmchart

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"helm.sh/helm/v3/pkg/releaseutil"
)

// Dir is the chart's directory relative to the module root.
const Dir = "deploy/helm/tandem"

// Release names the release a chart is rendered for.
type Release struct {
	Name      string
	Namespace string
}

// DefaultRelease is the release deploy/kubernetes/daemonset.yaml is
// rendered for: `helm install tandem deploy/helm/tandem -n tandem
// --create-namespace` (every object goes in the release's namespace).
var DefaultRelease = Release{Name: "tandem", Namespace: "tandem"}

// Manifest is one rendered Kubernetes object.
type Manifest struct {
	// Template is the template file it came from (templates/daemonset.yaml).
	Template string
	// Kind is the object's kind.
	Kind string
	// YAML is the object as rendered, comments included.
	YAML string
}

// Rendered is a chart rendered for one release and one set of values.
type Rendered struct {
	// Manifests in Helm's install order (Namespace first, DaemonSet late).
	Manifests []Manifest
	// Notes is the rendered NOTES.txt.
	Notes string
}

// Render renders the chart in chartDir for rel with values over the
// chart's defaults. Values the schema refuses, and values the templates
// refuse (fail), are errors saying why.
func Render(chartDir string, rel Release, values map[string]any) (*Rendered, error) {
	ch, err := loader.LoadDir(chartDir)
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", chartDir, err)
	}
	return RenderChart(ch, rel, values)
}

// RenderChart is Render for a loaded chart (a packaged one: loader.Load).
func RenderChart(ch *chart.Chart, rel Release, values map[string]any) (*Rendered, error) {
	if values == nil {
		values = map[string]any{}
	}
	opts := chartutil.ReleaseOptions{Name: rel.Name, Namespace: rel.Namespace, Revision: 1, IsInstall: true}
	vals, err := chartutil.ToRenderValues(ch, values, opts, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, fmt.Errorf("values of chart %s: %w", ch.Name(), err)
	}
	files, err := engine.Engine{Strict: true}.Render(ch, vals)
	if err != nil {
		return nil, fmt.Errorf("render chart %s: %w", ch.Name(), err)
	}
	out := &Rendered{}
	templates := map[string]string{}
	for name, content := range files {
		base := strings.TrimPrefix(name, ch.Name()+"/")
		switch {
		case filepath.Base(name) == "NOTES.txt":
			out.Notes = content
		case strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml"):
			templates[base] = content
		}
	}
	hooks, manifests, err := releaseutil.SortManifests(templates, nil, releaseutil.InstallOrder)
	if err != nil {
		return nil, fmt.Errorf("sort rendered manifests: %w", err)
	}
	if len(hooks) > 0 {
		return nil, errors.New("the chart renders hooks: Tandem's chart has none, and daemonset.yaml could not hold them")
	}
	for _, m := range manifests {
		out.Manifests = append(out.Manifests, Manifest{Template: m.Name, Kind: m.Head.Kind, YAML: strings.TrimSpace(m.Content) + "\n"})
	}
	return out, nil
}

// YAML joins the manifests into one multi-document file.
func (r *Rendered) YAML() []byte {
	var b strings.Builder
	for i, m := range r.Manifests {
		if i > 0 {
			b.WriteString("---\n")
		}
		b.WriteString(m.YAML)
	}
	return []byte(b.String())
}

// helmBookkeeping are the labels that say Helm manages an object; a
// manifest applied with kubectl must not claim that.
var helmBookkeeping = []string{"app.kubernetes.io/managed-by:", "helm.sh/chart:"}

// Plain is YAML without Helm's bookkeeping labels (managed-by, the chart's
// version): the manifests as kubectl apply -f would own them.
func (r *Rendered) Plain() []byte {
	lines := strings.SplitAfter(string(r.YAML()), "\n")
	out := lines[:0]
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if !slices.ContainsFunc(helmBookkeeping, func(p string) bool { return strings.HasPrefix(t, p) }) {
			out = append(out, l)
		}
	}
	return []byte(strings.Join(out, ""))
}

// Lint runs Helm's chart linter (Chart.yaml, values, every template
// rendered with values, the schema) and returns its findings at warning
// level and above, each as "path: message".
func Lint(chartDir, namespace string, values map[string]any) []string {
	var findings []string
	for _, m := range lint.All(chartDir, values, namespace, false).Messages {
		if m.Severity >= support.WarningSev {
			findings = append(findings, m.Error())
		}
	}
	return findings
}
