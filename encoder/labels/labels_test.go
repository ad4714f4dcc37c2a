package labels

import (
	"crypto/md5"
	"encoding/binary"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	promlabels "github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/relabel"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
	"github.com/tandem-profiler/tandem/schema"
)

// ls builds a label slice from name, value pairs.
func ls(nv ...string) []promlabels.Label {
	out := make([]promlabels.Label, 0, len(nv)/2)
	for i := 0; i < len(nv); i += 2 {
		out = append(out, promlabels.Label{Name: nv[i], Value: nv[i+1]})
	}
	return out
}

// rules parses relabel_configs YAML (the list only).
func rules(t testing.TB, list string) []*relabel.Config {
	t.Helper()
	cfgs, err := parseConfig([]byte("relabel_configs:\n" + list))
	if err != nil {
		t.Fatalf("parse rules: %v", err)
	}
	return cfgs
}

func testInput() Input {
	return Input{
		Node:           "node-1",
		PID:            42,
		Comm:           "app",
		ExecutablePath: "/usr/bin/app",
		ContainerID:    "c0ffee",
		SystemdUnit:    "app.service",
		Env:            ls("REGION", "eu-1"),
		TID:            43,
		CPU:            3,
		ThreadName:     "worker",
		Origin:         schema.OriginCPUSampling,
		Events:         1,
	}
}

// defaultLabels is what testInput gets with the default configuration.
var defaultLabels = ls("comm", "app", "cpu", "3", "node", "node-1", "thread_id", "43", "thread_name", "worker")

// truncated is 52 bytes cut inside a 3-byte rune, as the sampler cuts values.
var truncated = strings.Repeat("a", 50) + "€"[:2]

func hashmod(s string, mod uint64) string {
	sum := md5.Sum([]byte(s))
	return strconv.FormatUint(binary.BigEndian.Uint64(sum[8:])%mod, 10)
}

func TestSample(t *testing.T) {
	tests := []struct {
		name        string
		cfg         Config
		rules       string // relabel_configs list, YAML
		input       func(*Input)
		want        []promlabels.Label
		wantDropped float64 // nil want means dropped
	}{
		{
			name: "defaults",
			want: defaultLabels,
		},
		{
			name: "empty process and thread labels are absent",
			input: func(in *Input) {
				in.Node, in.Comm, in.ThreadName = "", "", ""
			},
			want: ls("cpu", "3", "thread_id", "43"),
		},
		{
			name:  "replace: executable name to exec (parca-agent's config.yaml)",
			rules: "- source_labels: [__meta_process_executable_name]\n  target_label: exec\n",
			want:  ls("comm", "app", "cpu", "3", "exec", "app", "node", "node-1", "thread_id", "43", "thread_name", "worker"),
		},
		{
			name: "replace: regex capture, several sources, env var",
			rules: `- source_labels: [__meta_process_container_id]
  regex: (.{3}).*
  replacement: $1
  target_label: container
- source_labels: [__meta_process_pid, __meta_process_systemd_unit]
  separator: "@"
  target_label: instance
- source_labels: [__meta_env_var_REGION]
  target_label: region
- source_labels: [__meta_process_executable_path]
  target_label: path
`,
			want: ls("comm", "app", "container", "c0f", "cpu", "3", "instance", "42@app.service", "node", "node-1",
				"path", "/usr/bin/app", "region", "eu-1", "thread_id", "43", "thread_name", "worker"),
		},
		{
			name:  "replace: no match leaves the set alone",
			rules: "- source_labels: [comm]\n  regex: other\n  target_label: matched\n  replacement: yes\n",
			want:  defaultLabels,
		},
		{
			name:  "replace: service name when the sampler found one",
			rules: "- source_labels: [__meta_process_service_name]\n  target_label: service\n",
			input: func(in *Input) { in.ServiceName = "checkout" },
			want:  ls("comm", "app", "cpu", "3", "node", "node-1", "service", "checkout", "thread_id", "43", "thread_name", "worker"),
		},
		{
			name:  "labelmap: every process meta label",
			rules: "- action: labelmap\n  regex: __meta_process_(.+)\n  replacement: proc_$1\n",
			want: ls("comm", "app", "cpu", "3", "node", "node-1",
				"proc_comm", "app", "proc_container_id", "c0ffee", "proc_executable_name", "app",
				"proc_executable_path", "/usr/bin/app", "proc_pid", "42", "proc_systemd_unit", "app.service",
				"thread_id", "43", "thread_name", "worker"),
		},
		{
			name:  "labelmap: env vars",
			rules: "- action: labelmap\n  regex: __meta_env_var_(.+)\n",
			input: func(in *Input) { in.Env = ls("REGION", "eu-1", "TIER", "gold") },
			want:  ls("REGION", "eu-1", "TIER", "gold", "comm", "app", "cpu", "3", "node", "node-1", "thread_id", "43", "thread_name", "worker"),
		},
		{
			name:  "keep: matching process kept",
			rules: "- source_labels: [comm]\n  regex: ap+\n  action: keep\n",
			want:  defaultLabels,
		},
		{
			name:        "keep: other process dropped and counted per event",
			rules:       "- source_labels: [comm]\n  regex: other\n  action: keep\n",
			input:       func(in *Input) { in.Events = 5 },
			wantDropped: 5,
		},
		{
			name:        "drop: matching process dropped",
			rules:       "- source_labels: [__meta_process_systemd_unit]\n  regex: app\\.service\n  action: drop\n",
			wantDropped: 1,
		},
		{
			name:        "drop: regex is anchored",
			rules:       "- source_labels: [__meta_process_systemd_unit]\n  regex: app\n  action: drop\n",
			want:        defaultLabels,
			wantDropped: 0,
		},
		{
			name:        "drop: events 0 count as one",
			rules:       "- source_labels: [__meta_process_pid]\n  regex: \"42\"\n  action: drop\n",
			input:       func(in *Input) { in.Events = 0 },
			wantDropped: 1,
		},
		{
			name:  "labeldrop and labelkeep",
			rules: "- action: labeldrop\n  regex: comm\n- action: labelkeep\n  regex: node|comm|__.*\n",
			want:  ls("cpu", "3", "node", "node-1", "thread_id", "43", "thread_name", "worker"),
		},
		{
			name:  "hashmod",
			rules: "- source_labels: [__meta_process_pid]\n  modulus: 4\n  target_label: shard\n  action: hashmod\n",
			want:  ls("comm", "app", "cpu", "3", "node", "node-1", "shard", hashmod("42", 4), "thread_id", "43", "thread_name", "worker"),
		},
		{
			name:  "other double-underscore labels stay",
			rules: "- source_labels: [comm]\n  target_label: __tmp_comm\n",
			want:  ls("__tmp_comm", "app", "comm", "app", "cpu", "3", "node", "node-1", "thread_id", "43", "thread_name", "worker"),
		},
		{
			name:  "per-sample labels replace relabelled ones",
			rules: "- target_label: cpu\n  replacement: from-rule\n- target_label: thread_name\n  replacement: from-rule\n",
			want:  defaultLabels,
		},
		{
			name: "disable cpu label",
			cfg:  Config{DisableCPULabel: true},
			want: ls("comm", "app", "node", "node-1", "thread_id", "43", "thread_name", "worker"),
		},
		{
			name: "disable thread id label",
			cfg:  Config{DisableThreadIDLabel: true},
			want: ls("comm", "app", "cpu", "3", "node", "node-1", "thread_name", "worker"),
		},
		{
			name: "disable thread comm label",
			cfg:  Config{DisableThreadCommLabel: true},
			want: ls("comm", "app", "cpu", "3", "node", "node-1", "thread_id", "43"),
		},
		{
			name: "disable all three",
			cfg:  Config{DisableCPULabel: true, DisableThreadIDLabel: true, DisableThreadCommLabel: true},
			want: ls("comm", "app", "node", "node-1"),
		},
		{
			name: "custom labels: sorted in, never replacing, invalid ones skipped, cut rune trimmed",
			input: func(in *Input) {
				in.Custom = ls(
					"span", "abc",
					"comm", "evil", // collides with comm
					"\xff", "bad key",
					"bad", "\xffvalue",
					"trunc", truncated,
					"empty", "",
					"", "no name",
					"span", "second", // duplicate key: the first wins
					"aaa", "first",
				)
			},
			want: ls("aaa", "first", "comm", "app", "cpu", "3", "node", "node-1", "span", "abc",
				"thread_id", "43", "thread_name", "worker", "trunc", strings.Repeat("a", 50)),
		},
		{
			name:  "custom labels are not relabelled",
			rules: "- source_labels: [span]\n  regex: abc\n  action: drop\n",
			input: func(in *Input) { in.Custom = ls("span", "abc") },
			want:  ls("comm", "app", "cpu", "3", "node", "node-1", "span", "abc", "thread_id", "43", "thread_name", "worker"),
		},
		{
			name:  "non-probe samples: thread labels invisible to relabelling",
			rules: "- source_labels: [__meta_thread_comm]\n  regex: worker\n  action: drop\n- source_labels: [thread_name]\n  regex: worker\n  action: drop\n",
			want:  defaultLabels,
		},
		{
			name:        "probe samples: second pass drops on thread comm",
			rules:       "- source_labels: [__meta_thread_comm]\n  regex: worker\n  action: drop\n",
			input:       func(in *Input) { in.Origin = schema.OriginProbe; in.Events = 2 },
			wantDropped: 2,
		},
		{
			name:        "probe samples: second pass sees the per-sample labels",
			rules:       "- source_labels: [cpu, thread_id]\n  regex: 3;43\n  action: drop\n",
			input:       func(in *Input) { in.Origin = schema.OriginProbe },
			wantDropped: 1,
		},
		{
			name:  "probe samples: second pass derives labels, meta removed again",
			cfg:   Config{DisableThreadIDLabel: true},
			rules: "- source_labels: [__meta_thread_id]\n  target_label: tid\n- source_labels: [__meta_cpu]\n  target_label: core\n",
			input: func(in *Input) { in.Origin = schema.OriginProbe; in.Custom = ls("span", "abc") },
			want:  ls("comm", "app", "core", "3", "cpu", "3", "node", "node-1", "span", "abc", "thread_name", "worker", "tid", "43"),
		},
		{
			name:  "probe samples: rules apply once, labels made from __meta_* stay",
			rules: "- source_labels: [__meta_process_executable_name]\n  target_label: exec\n- source_labels: [comm]\n  regex: (.*)\n  replacement: x-$1\n  target_label: comm\n",
			input: func(in *Input) { in.Origin = schema.OriginProbe },
			want:  ls("comm", "x-app", "cpu", "3", "exec", "app", "node", "node-1", "thread_id", "43", "thread_name", "worker"),
		},
		{
			name:  "probe samples: second pass can rewrite per-sample labels",
			rules: "- source_labels: [thread_name]\n  regex: (work).*\n  target_label: thread_name\n",
			input: func(in *Input) { in.Origin = schema.OriginProbe },
			want:  ls("comm", "app", "cpu", "3", "node", "node-1", "thread_id", "43", "thread_name", "work"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			if tt.rules != "" {
				cfg.RelabelConfigs = rules(t, tt.rules)
			}
			l, err := New(cfg, prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			in := testInput()
			if tt.input != nil {
				tt.input(&in)
			}
			got, keep := l.Sample(&in)
			if keep != (tt.want != nil) {
				t.Fatalf("keep = %v, want %v (labels %v)", keep, tt.want != nil, got)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("labels\n got %v\nwant %v", got, tt.want)
			}
			if d := testutil.ToFloat64(l.dropped); d != tt.wantDropped {
				t.Errorf("dropped counter = %v, want %v", d, tt.wantDropped)
			}
			// The same sample again comes from the cache and is the same.
			again, keep2 := l.Sample(&in)
			if keep2 != keep || !slices.Equal(again, tt.want) {
				t.Errorf("cached: keep %v labels %v, want %v %v", keep2, again, keep, tt.want)
			}
			if l.builds != 1 {
				t.Errorf("built the base set %d times, want 1", l.builds)
			}
		})
	}
}

func TestSampleStringsOutliveNextCall(t *testing.T) {
	l, err := New(Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	in := testInput()
	first, _ := l.Sample(&in)
	kept := slices.Clone(first)
	in2 := testInput()
	in2.PID, in2.Comm, in2.TID, in2.CPU, in2.ThreadName = 7, "other", 8, 1, "main"
	in2.Custom = ls("k", "v")
	l.Sample(&in2)
	if !slices.Equal(kept, defaultLabels) {
		t.Errorf("strings of an earlier result changed: %v", kept)
	}
}

func TestExternal(t *testing.T) {
	l, err := New(Config{ExternalLabels: map[string]string{"region": "eu", "cluster": "c1", "__tenant": "t"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := promlabels.FromStrings("__tenant", "t", "cluster", "c1", "region", "eu")
	if got := l.External(); !promlabels.Equal(got, want) {
		t.Errorf("External() = %v, want %v", got, want)
	}
	in := testInput()
	if got, _ := l.Sample(&in); !slices.Equal(got, defaultLabels) {
		t.Errorf("external labels leaked into the sample set: %v", got)
	}

	l, err = New(Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !l.External().IsEmpty() {
		t.Errorf("External() = %v, want empty", l.External())
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr []string // substrings; none = valid
	}{
		{name: "zero", cfg: Config{}},
		{name: "default", cfg: DefaultConfig()},
		{name: "external labels", cfg: Config{ExternalLabels: map[string]string{"a": "b", "utf8.ñ": "ü"}}},
		{name: "negative ttl", cfg: Config{CacheTTL: -time.Second}, wantErr: []string{"must not be negative"}},
		{
			name: "bad external labels, all reported",
			cfg:  Config{ExternalLabels: map[string]string{"": "x", "empty": "", "\xff": "x", "v": "\xff"}},
			wantErr: []string{
				"external label with an empty name", `external label "empty": empty value`,
				"not valid UTF-8", `external label "v": value`,
			},
		},
		{name: "nil relabel config", cfg: Config{RelabelConfigs: []*relabel.Config{nil}}, wantErr: []string{"relabel_configs[0]: empty relabel config"}},
		{
			name:    "unknown action",
			cfg:     Config{RelabelConfigs: []*relabel.Config{{Action: "frobnicate", Regex: relabel.MustNewRegexp("x")}}},
			wantErr: []string{`unknown relabel action "frobnicate"`},
		},
		{
			name:    "empty action",
			cfg:     Config{RelabelConfigs: []*relabel.Config{{Regex: relabel.MustNewRegexp("x")}}},
			wantErr: []string{"action cannot be empty"},
		},
		{
			name:    "regex unset",
			cfg:     Config{RelabelConfigs: []*relabel.Config{{Action: relabel.Keep}}},
			wantErr: []string{"regex is not set"},
		},
		{
			name: "replace without target",
			cfg: Config{RelabelConfigs: []*relabel.Config{
				{Action: relabel.Keep, Regex: relabel.MustNewRegexp("x")},
				{Action: relabel.Replace, Regex: relabel.MustNewRegexp("x")},
			}},
			wantErr: []string{"relabel_configs[1]", "requires 'target_label'"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				if _, err := New(tt.cfg, nil); err != nil {
					t.Fatalf("New() = %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate() = nil, want an error")
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if _, err := New(tt.cfg, nil); err == nil {
				t.Error("New() accepted an invalid config")
			}
		})
	}
}

func TestNewRegistersMetric(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := New(Config{}, reg); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{}, reg); err == nil {
		t.Error("a second Labeler on the same registry registered its metric twice")
	}
	n, err := testutil.GatherAndCount(reg, "tandem_encoder_labels_dropped_by_relabel_total")
	if err != nil || n != 1 {
		t.Errorf("GatherAndCount = %d, %v; want 1, nil", n, err)
	}
}

// fakeClock is an injectable clock.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }
func newClockedLabeler(t *testing.T, cfg Config) (*Labeler, *fakeClock) {
	t.Helper()
	l, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &fakeClock{t: time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)}
	l.now, l.clockN = c.now, 1
	return l, c
}

func TestCache(t *testing.T) {
	const ttl = 10 * time.Minute
	type step struct {
		advance    time.Duration
		input      func(*Input)
		wantBuilds uint64
		wantComm   string
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{
			name: "hit within the TTL, rebuilt at the TTL",
			steps: []step{
				{wantBuilds: 1, wantComm: "app"},
				{advance: time.Minute, wantBuilds: 1, wantComm: "app"},
				{advance: ttl - time.Minute - time.Nanosecond, wantBuilds: 1, wantComm: "app"},
				{advance: time.Nanosecond, wantBuilds: 2, wantComm: "app"},
				{advance: time.Second, wantBuilds: 2, wantComm: "app"},
			},
		},
		{
			name: "per PID: thread, cpu and custom labels do not rebuild",
			steps: []step{
				{wantBuilds: 1, wantComm: "app"},
				{input: func(in *Input) { in.TID, in.CPU, in.ThreadName = 99, 0, "gc" }, wantBuilds: 1, wantComm: "app"},
				{input: func(in *Input) { in.Custom = ls("k", "v"); in.Origin = schema.OriginOffCPU }, wantBuilds: 1, wantComm: "app"},
				{input: func(in *Input) { in.PID = 7 }, wantBuilds: 2, wantComm: "app"},
				{wantBuilds: 2, wantComm: "app"},
			},
		},
		{
			name: "changed process labels rebuild before the TTL (exec, PID reuse)",
			steps: []step{
				{wantBuilds: 1, wantComm: "app"},
				{input: func(in *Input) { in.Comm = "sh" }, wantBuilds: 2, wantComm: "sh"},
				{input: func(in *Input) { in.Comm = "sh" }, wantBuilds: 2, wantComm: "sh"},
				{input: func(in *Input) { in.Comm = "sh"; in.Env = ls("REGION", "us-1") }, wantBuilds: 3, wantComm: "sh"},
				{input: func(in *Input) { in.Comm = "sh"; in.Env = ls("REGION", "us-1"); in.Node = "n2" }, wantBuilds: 4, wantComm: "sh"},
				{input: func(in *Input) {
					in.Comm = "sh"
					in.Env = ls("REGION", "us-1")
					in.Node = "n2"
					in.ExecutablePath = "/bin/sh"
				}, wantBuilds: 5, wantComm: "sh"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, clock := newClockedLabeler(t, Config{CacheTTL: ttl})
			for i, s := range tt.steps {
				clock.advance(s.advance)
				in := testInput()
				if s.input != nil {
					s.input(&in)
				}
				got, keep := l.Sample(&in)
				if !keep {
					t.Fatalf("step %d: dropped", i)
				}
				if l.builds != s.wantBuilds {
					t.Errorf("step %d: %d builds, want %d", i, l.builds, s.wantBuilds)
				}
				if c := promlabels.New(got...).Get("comm"); c != s.wantComm {
					t.Errorf("step %d: comm = %q, want %q", i, c, s.wantComm)
				}
			}
		})
	}
}

func TestCacheKeepsDropDecision(t *testing.T) {
	l, clock := newClockedLabeler(t, Config{RelabelConfigs: rules(t, "- source_labels: [comm]\n  regex: app\n  action: drop\n")})
	for range 3 {
		in := testInput()
		if _, keep := l.Sample(&in); keep {
			t.Fatal("kept a dropped process")
		}
		clock.advance(time.Second)
	}
	if l.builds != 1 {
		t.Errorf("%d builds, want 1", l.builds)
	}
	if d := testutil.ToFloat64(l.dropped); d != 3 {
		t.Errorf("dropped = %v, want 3", d)
	}
}

func TestCacheSweep(t *testing.T) {
	l, clock := newClockedLabeler(t, Config{CacheTTL: 2 * time.Minute})
	for pid := range uint32(10) {
		in := testInput()
		in.PID = pid
		l.Sample(&in)
	}
	if len(l.cache) != 10 {
		t.Fatalf("%d cache entries, want 10", len(l.cache))
	}
	clock.advance(2 * time.Minute)
	in := testInput()
	in.PID = 100
	l.Sample(&in)
	if len(l.cache) != 1 {
		t.Errorf("%d cache entries after the TTL, want 1 (expired ones swept)", len(l.cache))
	}
}

func TestCacheBounded(t *testing.T) {
	l, _ := newClockedLabeler(t, Config{})
	for pid := range uint32(maxCacheEntries + 10) {
		in := testInput()
		in.PID = pid
		l.Sample(&in)
	}
	if len(l.cache) > maxCacheEntries {
		t.Errorf("%d cache entries, bound is %d", len(l.cache), maxCacheEntries)
	}
}

func TestFixTruncation(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"", "", true},
		{"plain", "plain", true},
		{"ünïcödé€", "ünïcödé€", true},
		{"ab" + "€"[:1], "ab", true},
		{"ab" + "€"[:2], "ab", true},
		{"ab" + "𝄞"[:3], "ab", true},
		{"\xffab", "", false},
		{"a\xff" + "€"[:2], "", false},
		{"ab\x80", "", false},
		{"ab\xff", "", false},
	}
	for _, tt := range tests {
		got, ok := fixTruncation(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("fixTruncation(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestFromFlush(t *testing.T) {
	f := &aggregate.Flush{
		Strings:   []string{"", "node-1", "app", "/usr/bin/app", "c0ffee", "app.service", "REGION", "eu-1", "worker", "span", "abc", "apm"},
		LabelKVs:  []aggregate.KeyValue{{Key: 6, Value: 7}, {Key: 9, Value: 10}},
		LabelEnds: []uint32{0, 1, 2},
		Resources: []aggregate.Resource{
			{PID: 9, Comm: 2},
			{PID: 42, Comm: 2, ExecutablePath: 3, ContainerID: 4, SystemdUnit: 5, ServiceName: 11, NodeName: 1, EnvVars: 1},
		},
		Samples: []aggregate.Sample{
			{Resource: 1, Origin: schema.OriginOffCPU, TID: 43, CPU: 3, ThreadName: 8, Labels: 2, Timestamps: []int64{1, 2}, Values: []int64{5, 6}},
			{Resource: 0, Origin: schema.OriginCPUSampling, TID: 9, CPU: 0, Timestamps: []int64{3}, Values: []int64{1}},
		},
	}
	var in Input
	in.FromFlush(f, &f.Samples[0])
	want := Input{
		Node: "node-1", PID: 42, Comm: "app", ExecutablePath: "/usr/bin/app", ContainerID: "c0ffee",
		SystemdUnit: "app.service", ServiceName: "apm", Env: ls("REGION", "eu-1"),
		TID: 43, CPU: 3, ThreadName: "worker", Custom: ls("span", "abc"), Origin: schema.OriginOffCPU, Events: 2,
	}
	if !inputEqual(in, want) {
		t.Errorf("FromFlush:\n got %+v\nwant %+v", in, want)
	}
	in.FromFlush(f, &f.Samples[1])
	want = Input{PID: 9, Comm: "app", TID: 9, Origin: schema.OriginCPUSampling, Events: 1}
	if !inputEqual(in, want) {
		t.Errorf("FromFlush (reused Input):\n got %+v\nwant %+v", in, want)
	}
}

func TestLabels(t *testing.T) {
	f := &aggregate.Flush{
		Strings:   []string{"", "node-1", "app", "worker", "span", "abc", "cluster", "sh"},
		LabelKVs:  []aggregate.KeyValue{{Key: 4, Value: 5}, {Key: 6, Value: 2}},
		LabelEnds: []uint32{0, 1, 2},
		Resources: []aggregate.Resource{{PID: 42, Comm: 2, NodeName: 1}, {PID: 7, Comm: 7, NodeName: 1}},
		Samples: []aggregate.Sample{
			{Resource: 0, TID: 43, CPU: 3, ThreadName: 3, Labels: 1, Timestamps: []int64{1}, Values: []int64{1}},
			{Resource: 0, TID: 44, CPU: 1, Labels: 2, Timestamps: []int64{2}, Values: []int64{1}},
			{Resource: 1, TID: 7, CPU: 0, Timestamps: []int64{3, 4, 5}, Values: []int64{1, 1, 1}},
		},
	}
	l, err := New(Config{
		ExternalLabels: map[string]string{"cluster": "c1", "zone": "z", "a": "first"},
		RelabelConfigs: rules(t, "- source_labels: [comm]\n  regex: sh\n  action: drop\n"),
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	prefix := ls("keep", "me")
	tests := []struct {
		sample int
		want   []promlabels.Label // after prefix; nil = dropped
	}{
		{0, ls("a", "first", "cluster", "c1", "comm", "app", "cpu", "3", "node", "node-1", "span", "abc", "thread_id", "43", "thread_name", "worker", "zone", "z")},
		{1, ls("a", "first", "cluster", "app", "comm", "app", "cpu", "1", "node", "node-1", "thread_id", "44", "zone", "z")}, // the sample's cluster wins
		{2, nil},
	}
	for _, tt := range tests {
		got, keep := l.Labels(slices.Clone(prefix), f, &f.Samples[tt.sample])
		if keep != (tt.want != nil) {
			t.Fatalf("sample %d: keep = %v", tt.sample, keep)
		}
		want := append(slices.Clone(prefix), tt.want...)
		if !slices.Equal(got, want) {
			t.Errorf("sample %d:\n got %v\nwant %v", tt.sample, got, want)
		}
	}
	if d := testutil.ToFloat64(l.dropped); d != 3 {
		t.Errorf("dropped = %v, want 3 (one sample of three events)", d)
	}

	dst := make([]promlabels.Label, 0, 32)
	allocs := testing.AllocsPerRun(100, func() {
		for i := range f.Samples {
			dst, _ = l.Labels(dst[:0], f, &f.Samples[i])
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per Labels round on cache hits, want 0", allocs)
	}
}

func inputEqual(a, b Input) bool {
	return a.Node == b.Node && a.PID == b.PID && a.Comm == b.Comm && a.ExecutablePath == b.ExecutablePath &&
		a.ContainerID == b.ContainerID && a.SystemdUnit == b.SystemdUnit && a.ServiceName == b.ServiceName &&
		slices.Equal(a.Env, b.Env) && a.TID == b.TID && a.CPU == b.CPU && a.ThreadName == b.ThreadName &&
		slices.Equal(a.Custom, b.Custom) && a.Origin == b.Origin && a.Events == b.Events
}

func TestSampleAllocsOnCacheHit(t *testing.T) {
	l, err := New(Config{
		RelabelConfigs: rules(t, "- source_labels: [__meta_process_executable_name]\n  target_label: exec\n"),
		ExternalLabels: map[string]string{"cluster": "c1"},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	inputs := steadyInputs()
	for j := range inputs {
		if _, keep := l.Sample(&inputs[j]); !keep {
			t.Fatal("dropped")
		}
	}
	i := 0
	allocs := testing.AllocsPerRun(100, func() {
		l.Sample(&inputs[i%len(inputs)])
		i++
	})
	if allocs != 0 {
		t.Errorf("%v allocations per Sample on a cache hit, want 0", allocs)
	}
}

// steadyInputs is a few processes with several threads, CPUs and custom
// labels.
func steadyInputs() []Input {
	var inputs []Input
	for p := range uint32(4) {
		for th := range uint32(4) {
			in := testInput()
			in.PID = 100 + p
			in.Comm = "proc" + strconv.Itoa(int(p))
			in.TID = 1000*in.PID + th
			in.CPU = th % 2
			in.ThreadName = "thread-" + strconv.Itoa(int(th))
			if th%2 == 0 {
				in.Custom = ls("span_id", "0123456789abcdef", "user", "alice")
			}
			inputs = append(inputs, in)
		}
	}
	return inputs
}

func BenchmarkSample(b *testing.B) {
	cfgs, err := parseConfig([]byte(`relabel_configs:
  - source_labels: [__meta_process_executable_name]
    target_label: exec
  - action: labelmap
    regex: __meta_env_var_(.+)
    replacement: env_$1
  - source_labels: [comm]
    regex: (kworker|swapper).*
    action: drop
`))
	if err != nil {
		b.Fatal(err)
	}
	l, err := New(Config{RelabelConfigs: cfgs}, nil)
	if err != nil {
		b.Fatal(err)
	}
	inputs := steadyInputs()
	for j := range inputs {
		l.Sample(&inputs[j])
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		l.Sample(&inputs[i%len(inputs)])
		i++
	}
}

// TestInputCoversProcessFields: every field of a process's identity
// reaches the Labeler's Input (a string through inputStrings; the number
// is PID, the label set Env).
func TestInputCoversProcessFields(t *testing.T) {
	for i := range aggregate.ProcessFields {
		pf := &aggregate.ProcessFields[i]
		switch pf.Kind {
		case aggregate.FieldString:
			if inputStrings[i] == nil {
				t.Errorf("process field %s has no Input field (inputStrings)", pf.Name)
			}
		case aggregate.FieldNumber:
			if pf.Name != "PID" {
				t.Errorf("number field %s: Input has only PID", pf.Name)
			}
		case aggregate.FieldLabelSet:
			if pf.Name != "EnvVars" {
				t.Errorf("label set field %s: Input has only Env", pf.Name)
			}
		}
	}
}
