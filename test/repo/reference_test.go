package repo

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tandem-profiler/tandem/tools/reference"
)

// TestReferenceChartValues keeps docs/reference/helm-values.md what the
// chart's values.yaml and values.schema.json say.
func TestReferenceChartValues(t *testing.T) {
	root := moduleRoot(t)
	const chart = "deploy/helm/tandem"
	values, err := os.ReadFile(filepath.Join(root, chart, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	schema, err := os.ReadFile(filepath.Join(root, chart, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	fs, err := reference.Values(chart, values, schema)
	if err != nil {
		t.Fatal(err)
	}
	reference.Check(t, root, fs, *update)
}
