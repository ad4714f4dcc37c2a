package labels

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/model/relabel"
)

func TestLoadConfigFile(t *testing.T) {
	tests := []struct {
		file        string
		wantActions []relabel.Action
		wantErr     []string // substrings
	}{
		{file: "good.yaml", wantActions: []relabel.Action{relabel.Replace, relabel.Replace, relabel.LabelMap, relabel.Drop}},
		{file: "empty.yaml"},
		{file: "comments_only.yaml"},
		{file: "unknown_top_key.yaml", wantErr: []string{"unknown_top_key.yaml", `line 1: unknown key "node"`, "only hold relabel_configs"}},
		{file: "unknown_rule_key.yaml", wantErr: []string{`line 3: unknown key "targetlabel" in a relabel config`, "target_label"}},
		{file: "bad_action.yaml", wantErr: []string{`unknown relabel action "frobnicate"`}},
		{file: "bad_regex.yaml", wantErr: []string{"(unclosed"}},
		{file: "missing_target.yaml", wantErr: []string{"requires 'target_label'"}},
		{file: "duplicate_key.yaml", wantErr: []string{`line 4: duplicate key "action"`}},
		{file: "wrong_type.yaml", wantErr: []string{"line 1", "cannot unmarshal"}},
		{file: "empty_entry.yaml", wantErr: []string{"relabel_configs[0]: empty relabel config"}},
		{file: "not_yaml.yaml", wantErr: []string{"not valid YAML: line 2", "unclosed bracket"}},
		{file: "missing.yaml", wantErr: []string{"read config file", "no such file"}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			cfgs, err := LoadConfigFile(filepath.Join("testdata", tt.file))
			if len(tt.wantErr) > 0 {
				if err == nil {
					t.Fatalf("LoadConfigFile = %d configs, want an error", len(cfgs))
				}
				for _, w := range tt.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var actions []relabel.Action
			for _, c := range cfgs {
				actions = append(actions, c.Action)
			}
			if !slices.Equal(actions, tt.wantActions) {
				t.Errorf("actions %v, want %v", actions, tt.wantActions)
			}
		})
	}
}

// TestLoadConfigFileApplied runs the good file's rules over samples.
func TestLoadConfigFileApplied(t *testing.T) {
	cfgs, err := LoadConfigFile(filepath.Join("testdata", "good.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(Config{RelabelConfigs: cfgs}, nil)
	if err != nil {
		t.Fatal(err)
	}
	in := testInput()
	got, keep := l.Sample(&in)
	want := ls("comm", "app", "cpu", "3", "env_REGION", "eu-1", "exec", "app", "node", "node-1", "thread_id", "43", "thread_name", "worker")
	if !keep || !slices.Equal(got, want) {
		t.Errorf("Sample = %v, %v; want %v, true", got, keep, want)
	}
	in = testInput()
	in.PID, in.Comm = 2, "kworker/0:1"
	if got, keep := l.Sample(&in); keep {
		t.Errorf("kworker kept: %v", got)
	}
}

func TestLoadConfigFileUnreadable(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadConfigFile(dir); err == nil {
		t.Error("loading a directory succeeded")
	}
	p := filepath.Join(dir, "tabs.yaml")
	if err := os.WriteFile(p, []byte("relabel_configs:\n\t- action: keep\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadConfigFile(p); err == nil || !strings.Contains(err.Error(), "tabs.yaml") {
		t.Errorf("LoadConfigFile(tabs) = %v, want an error naming the file", err)
	}
}
