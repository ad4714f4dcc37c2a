package repo

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tandem-profiler/tandem/sampler"
	"github.com/tandem-profiler/tandem/test/harness"
	"github.com/tandem-profiler/tandem/tools/helmchart"
	"github.com/tandem-profiler/tandem/tools/reference"
)

// tracersTemplate is the chart's list of tracers, generated from the
// sampler's table.
const tracersTemplate = helmchart.Dir + "/templates/_tracers.tpl"

// TestReferenceChartTracers keeps the chart's tracer list the sampler's:
// templates/_tracers.tpl (what the templates check sampler.tracers
// against) and the comment above sampler.tracers in values.yaml (what
// docs/reference/helm-values.md shows) are generated from
// sampler.ListedTracers, so a tracer added to the sampler is one the chart
// takes (make reference, -update, rewrites both).
func TestReferenceChartTracers(t *testing.T) {
	root := harness.ModuleRoot(t)
	names := sampler.ListedTracers()
	tpl := fmt.Sprintf(`{{- /* Generated from the sampler's tracer table (sampler.ListedTracers) by
make reference (test/repo TestReferenceChartTracers): do not edit. */ -}}
{{- define "tandem.tracers" -}}
%s
{{- end -}}
`, strings.Join(names, ","))

	path := filepath.Join(root, filepath.FromSlash(helmchart.Dir), "values.yaml")
	values, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := withTracersComment(values, names)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	reference.Check(t, root, reference.Files{
		tracersTemplate:                []byte(tpl),
		helmchart.Dir + "/values.yaml": got,
	}, *update)
}

// withTracersComment returns values.yaml with the comment above
// sampler.tracers listing names, wrapped as the file's other comments.
func withTracersComment(values []byte, names []string) ([]byte, error) {
	lines := strings.SplitAfter(string(values), "\n")
	key := -1
	inSampler := false
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, "sampler:"):
			inSampler = true
		case inSampler && strings.HasPrefix(l, "  tracers:"):
			key = i
		}
		if key >= 0 {
			break
		}
	}
	if key < 0 {
		return nil, fmt.Errorf("no sampler.tracers")
	}
	start := key
	for start > 0 && strings.HasPrefix(lines[start-1], "  #") {
		start--
	}
	words := strings.Fields("all, or a comma-separated list of " + strings.Join(names, ", ") +
		" (the sampler's tracers; go comes with --symbolize-go in extraArgs).")
	var comment []string
	line := "  #"
	for _, w := range words {
		if len(line)+1+len(w) > 76 {
			comment = append(comment, line+"\n")
			line = "  #"
		}
		line += " " + w
	}
	comment = append(comment, line+"\n")
	var b bytes.Buffer
	b.WriteString(strings.Join(lines[:start], ""))
	b.WriteString(strings.Join(comment, ""))
	b.WriteString(strings.Join(lines[key:], ""))
	return b.Bytes(), nil
}

// TestChartTracers: sampler.tracers takes every tracer of the sampler's
// list (luajit among them) and all, and refuses an unknown name and go
// (which needs --symbolize-go) with a message listing the tracers.
func TestChartTracers(t *testing.T) {
	for _, tc := range []struct {
		tracers string
		want    string // in the error; "" is success
	}{
		{"all", ""},
		{strings.Join(sampler.ListedTracers(), ","), ""},
		{"luajit", ""},
		{"python,cobol", `"cobol" is not a tracer: want all, or a comma-separated list of ` + strings.Join(sampler.ListedTracers(), ", ")},
		{"go", "--symbolize-go"},
	} {
		t.Run(tc.tracers, func(t *testing.T) {
			_, err := helmchart.Render(chartDir(t), helmchart.DefaultRelease, map[string]any{"sampler": map[string]any{"tracers": tc.tracers}})
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && err == nil:
				t.Errorf("taken, want an error saying %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
}
