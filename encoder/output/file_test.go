package output_test

import (
	"strings"
	"testing"
	"time"

	"github.com/tandem-profiler/tandem/encoder/output"
)

func TestLoadConfigFile(t *testing.T) {
	cfgs, err := output.LoadConfigFile("testdata/outputs.yaml", output.DefaultConfig)
	if err != nil {
		t.Fatal(err)
	}
	if len(cfgs) != 3 {
		t.Fatalf("%d outputs, want 3", len(cfgs))
	}
	c, p, l := cfgs[0], cfgs[1], cfgs[2]
	if c.Name != "collector" || c.Format != output.FormatOTLP || c.Remote.Address != "otel-collector:4317" || !c.Remote.Insecure ||
		c.Remote.Compression != "none" || c.Queue.QueueSize != 10 || c.Queue.QueueBytes != 1<<20 || c.Queue.RPCTimeout != 10*time.Second {
		t.Errorf("collector = %+v", c)
	}
	if p.Format != output.FormatArrowV2 || p.Remote.BearerTokenFile != "/var/run/secrets/parca/token" ||
		p.Remote.GRPCHeaders["X-Scope-OrgID"] != "tenant-1" || p.Remote.Insecure {
		t.Errorf("parca = %+v", p)
	}
	if l.Format != output.FormatPprof || l.Dir != "/var/lib/tandem/profiles" {
		t.Errorf("local = %+v", l)
	}
}

func TestParseOutputsErrors(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       []string
	}{
		{"none listed", "relabel_configs: []\n", nil},
		{"unknown key", "outputs:\n  - name: a\n    format: otlp\n    address: x:1\n    adress: y\n", []string{"line 5", `unknown key "adress"`}},
		{"key of another format", "outputs:\n  - name: a\n    format: pprof\n    dir: /tmp\n    address: x:1\n", []string{"line 5", `"address" does not apply to format pprof`}},
		{"dir on otlp", "outputs:\n  - name: a\n    format: otlp\n    address: x:1\n    dir: /tmp\n", []string{"line 5", `"dir" does not apply to format otlp`}},
		{"no name", "outputs:\n  - format: otlp\n    address: x:1\n", []string{"line 2", "needs a name"}},
		{"no format", "outputs:\n  - name: a\n", []string{"line 2", "needs a format"}},
		{"bad format", "outputs:\n  - name: a\n    format: arrow-v3\n", []string{"line 3", `format "arrow-v3"`}},
		{"duplicate name", "outputs:\n  - name: a\n    format: pprof\n    dir: /x\n  - name: a\n    format: pprof\n    dir: /y\n", []string{"line 5", `"a" is already used on line 2`}},
		{"duplicate key", "outputs:\n  - name: a\n    format: pprof\n    dir: /x\n    dir: /y\n", []string{"line 5", `duplicate key "dir"`}},
		{"contradiction", "outputs:\n  - name: a\n    format: otlp\n    address: x:1\n    insecure: true\n    ca_file: /ca.pem\n", []string{"line 2", `output "a"`, "contradicts"}},
		{"no address", "outputs:\n  - name: a\n    format: arrow-v1\n", []string{"line 2", "needs an address"}},
		{"no dir", "outputs:\n  - name: a\n    format: pprof\n", []string{"line 2", "needs a directory"}},
		{"wrong type", "outputs:\n  - name: a\n    format: otlp\n    address: x:1\n    insecure: maybe\n", []string{"line 5", "insecure"}},
		{"bad duration", "outputs:\n  - name: a\n    format: otlp\n    address: x:1\n    rpc_timeout: soon\n", []string{"line 5", "rpc_timeout", "duration"}},
		{"not a list", "outputs: collector\n", []string{"line 1", "must be a list"}},
		{"empty list", "outputs: []\n", []string{"line 1", "outputs is empty"}},
		{"bad name", "outputs:\n  - name: a b\n    format: pprof\n    dir: /x\n", []string{"line 2", `output name "a b"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfgs, err := output.ParseOutputs([]byte(tt.yaml), output.DefaultConfig)
			if tt.want == nil {
				if err != nil || cfgs != nil {
					t.Fatalf("ParseOutputs = %v, %v; want no outputs, no error", cfgs, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ParseOutputs accepted:\n%s", tt.yaml)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}
