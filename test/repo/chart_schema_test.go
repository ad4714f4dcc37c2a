package repo

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/tandem-profiler/tandem/encoder/output"
	"github.com/tandem-profiler/tandem/tools/helmchart"
)

// TestReferenceChartOutputsSchema: the chart schema's output.outputs.items
// is encoder/output.EntrySchema, the rules the encoder applies to an
// outputs entry (make reference, -update, rewrites it in place).
func TestReferenceChartOutputsSchema(t *testing.T) {
	path := filepath.Join(chartDir(t), "values.schema.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	start, end, err := valueSpan(data, "properties", "output", "properties", "outputs", "items")
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	indent := string(data[bytes.LastIndexByte(data[:start], '\n')+1 : start])
	indent = indent[:len(indent)-len(strings.TrimLeft(indent, " "))]
	want, err := json.MarshalIndent(output.EntrySchema(), indent, "  ")
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		data = append(append(append([]byte{}, data[:start]...), want...), data[end:]...)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		end = start + len(want)
	}
	if !bytes.Equal(data[start:end], want) {
		t.Errorf("%s: output.outputs.items is not encoder/output.EntrySchema (the encoder's rules for an outputs entry): run make reference", helmchart.Dir+"/values.schema.json")
	}
}

// valueSpan returns the byte offsets of the JSON value at path in data.
func valueSpan(data []byte, path ...string) (start, end int, err error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	for depth := 0; depth <= len(path); depth++ {
		if depth == len(path) {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return 0, 0, err
			}
			end = int(dec.InputOffset())
			return end - len(raw), end, nil
		}
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			return 0, 0, fmt.Errorf("%s: not an object", strings.Join(path[:depth], "."))
		}
		for {
			tok, err := dec.Token()
			if err != nil {
				return 0, 0, err
			}
			if tok == json.Delim('}') {
				return 0, 0, fmt.Errorf("no %s", strings.Join(path[:depth+1], "."))
			}
			if tok == path[depth] {
				break
			}
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return 0, 0, err
			}
		}
	}
	return 0, 0, fmt.Errorf("no %s", strings.Join(path, "."))
}

// TestChartOutputsEntriesAsTheEncoder: an outputs list the chart takes
// (its schema, its templates' checks) is one the encoder takes, and one it
// refuses the encoder refuses (which would be exit 2 on every node: a
// crash loop). An entry may be several, comma-separated.
func TestChartOutputsEntriesAsTheEncoder(t *testing.T) {
	for _, tc := range []struct {
		name, entry string
		ok          bool
	}{
		{"otlp", `{name: a, format: otlp, address: "c:4317", compression: none, queue_size: 4, rpc_timeout: 1m30s, headers: {x-team: a}}`, true},
		{"pprof", `{name: files, format: pprof, dir: /var/lib/tandem/profiles}`, true},
		{"arrow over IPv6", `{name: parca, format: arrow-v2, address: "[fd00::1]:7070", insecure: true}`, true},
		{"a typo'd key", `{name: a, format: otlp, adress: "c:4317"}`, false},
		{"an address on pprof", `{name: a, format: pprof, dir: /x, address: "c:4317"}`, false},
		{"no address", `{name: a, format: otlp}`, false},
		{"an address without port", `{name: a, format: otlp, address: collector}`, false},
		{"a bad name", `{name: "a b", format: otlp, address: "c:4317"}`, false},
		{"an unknown format", `{name: a, format: parquet, address: "c:4317"}`, false},
		{"an unknown compression", `{name: a, format: otlp, address: "c:4317", compression: zstd}`, false},
		{"a bad duration", `{name: a, format: otlp, address: "c:4317", rpc_timeout: 10}`, false},
		{"an empty queue", `{name: a, format: otlp, address: "c:4317", queue_size: 0}`, false},
		{"a size bound", `{name: a, format: pprof, dir: /x, max_bytes: 1000}`, true},
		{"a negative size bound", `{name: a, format: pprof, dir: /x, max_bytes: -1}`, false},
		{"a size bound on otlp", `{name: a, format: otlp, address: "c:4317", max_bytes: 1000}`, false},
		{"two outputs", `{name: a, format: otlp, address: "c:4317"}, {name: b, format: pprof, dir: /x}`, true},
		{"a name used twice", `{name: a, format: otlp, address: "c:4317"}, {name: b, format: pprof, dir: /x}, {name: a, format: pprof, dir: /y}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var encErr error
			cfgs, err := output.ParseOutputs([]byte("outputs: ["+tc.entry+"]"), output.DefaultConfig)
			encErr = err
			for _, c := range cfgs {
				encErr = errors.Join(encErr, c.Validate())
			}
			values := map[string]any{}
			if err := yaml.Unmarshal([]byte("output: {outputs: ["+tc.entry+"]}"), &values); err != nil {
				t.Fatal(err)
			}
			_, chartErr := helmchart.Render(chartDir(t), helmchart.DefaultRelease, values)
			if (encErr == nil) != tc.ok {
				t.Errorf("the encoder: %v, want ok %v", encErr, tc.ok)
			}
			if (chartErr == nil) != tc.ok {
				t.Errorf("the chart: %v, want ok %v", chartErr, tc.ok)
			}
		})
	}
}

// TestChartRefusesDuplicateOutputNames: a name used twice in
// output.outputs fails the install with a message naming it and the two
// entries (JSON schema cannot express unique names; the template does).
func TestChartRefusesDuplicateOutputNames(t *testing.T) {
	values := map[string]any{}
	if err := yaml.Unmarshal([]byte(`output: {outputs: [{name: otel, format: otlp, address: "c:4317"}, {name: files, format: pprof, dir: /x}, {name: otel, format: arrow-v2, address: "p:7070"}]}`), &values); err != nil {
		t.Fatal(err)
	}
	_, err := helmchart.Render(chartDir(t), helmchart.DefaultRelease, values)
	if err == nil {
		t.Fatal("the chart renders two outputs named otel: every encoder would exit 2")
	}
	for _, want := range []string{`output.outputs: the name "otel" is used by entries 1 and 3`, "give each output its own name"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}
