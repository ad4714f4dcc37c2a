package labels

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tandem-profiler/tandem/schema"
)

// FuzzConfig checks that whatever parseConfig accepts, New accepts, and
// that the rules never panic on a sample (relabel.Process panics on an
// unknown action or a nil regex).
func FuzzConfig(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("relabel_configs:\n- action: hashmod\n  modulus: 3\n  source_labels: [comm]\n  target_label: s\n"))
	f.Add([]byte("relabel_configs:\n- action: labelmap\n  regex: (.*)\n  replacement: x_${1}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		cfgs, err := parseConfig(b)
		if err != nil {
			return
		}
		l, err := New(Config{RelabelConfigs: cfgs}, nil)
		if err != nil {
			t.Fatalf("parseConfig accepted what New rejects: %v", err)
		}
		in := testInput()
		in.Custom = ls("k", "v")
		l.Sample(&in)
		in.Origin = schema.OriginProbe
		l.Sample(&in)
	})
}
