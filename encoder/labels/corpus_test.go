package labels_test

import (
	"maps"
	"math/rand/v2"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	promlabels "github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/relabel"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
	"github.com/tandem-profiler/tandem/encoder/internal/flushtest"
	"github.com/tandem-profiler/tandem/encoder/internal/testcorpus"
	"github.com/tandem-profiler/tandem/encoder/labels"
	"github.com/tandem-profiler/tandem/test/promtest"
)

// TestLabelsMatchDefaultSet checks that with no relabel configs the
// Labeler gives every sample of a realistic stream exactly parca-agent's
// default set, as defaultSet computes it from the flush.
func TestLabelsMatchDefaultSet(t *testing.T) {
	f := flushtest.Default(t, testcorpus.Generate(testcorpus.Small()))
	ext := map[string]string{"cluster": "eu-1", "node": "ignored"}
	for _, tt := range []struct {
		name string
		cfg  labels.Config
	}{
		{"defaults", labels.Config{ExternalLabels: ext}},
		{"disabled", labels.Config{DisableCPULabel: true, DisableThreadIDLabel: true, DisableThreadCommLabel: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l, err := labels.New(tt.cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			var got []promlabels.Label
			custom := 0
			for i := range f.Samples {
				s := &f.Samples[i]
				if s.Labels != 0 {
					custom++
				}
				var keep bool
				got, keep = l.Labels(got[:0], f, s)
				if want := defaultSet(f, s, tt.cfg); !keep || !slices.Equal(got, want) {
					t.Fatalf("sample %d: keep %v\n got %v\nwant %v", i, keep, got, want)
				}
			}
			if custom == 0 {
				t.Error("the corpus has no sample with custom labels")
			}
		})
	}
}

// TestLabelsMergeCases checks the merge of custom, fixed and external
// labels on random small cases, sorted and unsorted custom labels among
// them, against defaultSet.
func TestLabelsMergeCases(t *testing.T) {
	names := []string{"a", "comm", "cpu", "handler", "node", "thread_id", "thread_name", "zz"}
	values := []string{"", "x", "y"}
	rng := rand.New(rand.NewPCG(1, 2))
	for iter := range 2000 {
		f := &aggregate.Flush{Strings: []string{""}}
		str := func(s string) uint32 {
			if i := slices.Index(f.Strings, s); i >= 0 {
				return uint32(i)
			}
			f.Strings = append(f.Strings, s)
			return uint32(len(f.Strings) - 1)
		}
		var kvs []aggregate.KeyValue
		for range rng.IntN(5) {
			kvs = append(kvs, aggregate.KeyValue{Key: str(names[rng.IntN(len(names))]), Value: str(values[rng.IntN(len(values))])})
		}
		if iter%5 != 0 {
			slices.SortFunc(kvs, func(x, y aggregate.KeyValue) int {
				if c := strings.Compare(f.Strings[x.Key], f.Strings[y.Key]); c != 0 {
					return c
				}
				return strings.Compare(f.Strings[x.Value], f.Strings[y.Value])
			})
		}
		f.LabelKVs = kvs
		f.LabelEnds = []uint32{0, uint32(len(kvs))}
		f.Resources = []aggregate.Resource{{Comm: str(values[rng.IntN(3)]), NodeName: str(values[rng.IntN(3)])}}
		s := &aggregate.Sample{CPU: uint32(rng.IntN(3)), TID: uint32(rng.IntN(3)), ThreadName: str(values[rng.IntN(3)]), Labels: 1}
		ext := map[string]string{}
		for range rng.IntN(3) {
			ext[names[rng.IntN(len(names))]] = "e"
		}
		cfg := labels.Config{ExternalLabels: ext, DisableCPULabel: rng.IntN(4) == 0, DisableThreadCommLabel: rng.IntN(4) == 0}
		l, err := labels.New(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, keep := l.Labels([]promlabels.Label{{Name: "prefix"}}, f, s)
		want := append([]promlabels.Label{{Name: "prefix"}}, defaultSet(f, s, cfg)...)
		if !keep || !slices.Equal(got, want) {
			t.Fatalf("case %d (custom %v, external %v): keep %v\n got %v\nwant %v", iter, kvs, ext, keep, got, want)
		}
	}
}

// defaultSet is the default label set of sample s, written plainly: the
// fixed labels node, comm, cpu, thread_id and thread_name; then the
// sample's custom labels whose name is not taken (a workload's pprof
// labels cannot replace the agent's own; the first of a name wins); then
// the external labels whose name neither has. An empty value is no label
// (Prometheus' rule): it is dropped and hides nothing. Sorted by name.
func defaultSet(f *aggregate.Flush, s *aggregate.Sample, cfg labels.Config) []promlabels.Label {
	seen := map[string]bool{}
	var out []promlabels.Label
	add := func(name, value string) {
		if seen[name] || value == "" {
			return
		}
		seen[name] = true
		out = append(out, promlabels.Label{Name: name, Value: value})
	}
	r := &f.Resources[s.Resource]
	add("comm", f.Strings[r.Comm])
	if !cfg.DisableCPULabel {
		add("cpu", strconv.FormatUint(uint64(s.CPU), 10))
	}
	add("node", f.Strings[r.NodeName])
	if !cfg.DisableThreadIDLabel {
		add("thread_id", strconv.FormatUint(uint64(s.TID), 10))
	}
	if !cfg.DisableThreadCommLabel {
		add("thread_name", f.Strings[s.ThreadName])
	}
	if s.Labels != 0 {
		for _, kv := range f.LabelSet(s.Labels) {
			add(f.Strings[kv.Key], f.Strings[kv.Value])
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.ExternalLabels)) {
		add(name, cfg.ExternalLabels[name])
	}
	slices.SortFunc(out, func(a, b promlabels.Label) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// TestLabelsRelabelStream relabels a realistic stream (drop, replace with
// a capture, labelmap) and checks every event's labels, and the dropped
// count, against expectations computed from the stream's batches.
func TestLabelsRelabelStream(t *testing.T) {
	c := testcorpus.Generate(testcorpus.Small())
	f := flushtest.Default(t, c)
	cfgs, err := labels.LoadConfigFile("testdata/stream.yaml")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	l, err := labels.New(labels.Config{RelabelConfigs: cfgs, ExternalLabels: map[string]string{"cluster": "c1"}}, reg)
	if err != nil {
		t.Fatal(err)
	}

	want := map[string]int{}
	wantDropped := 0
	for _, b := range c.Batches {
		for _, smp := range b.Samples {
			p := &b.Processes[smp.Process]
			if b.String(p.SystemdUnit) != "" {
				wantDropped++
				continue
			}
			lbl := map[string]string{
				"cluster": "c1", "node": c.Hello.NodeName, "comm": b.String(p.Comm),
				"cpu": strconv.Itoa(int(smp.CPU)), "thread_id": strconv.Itoa(int(smp.TID)),
				"thread_name": b.String(smp.ThreadName), "service": b.String(p.ServiceName),
			}
			if exe := b.String(p.ExecutablePath); exe != "" {
				lbl["exec"] = path.Base(exe)
			}
			if id := b.String(p.ContainerID); id != "" {
				lbl["container"] = id[:12]
			}
			for _, kv := range p.EnvVars {
				lbl["env_"+b.String(kv.Key)] = b.String(kv.Value)
			}
			for _, kv := range smp.Labels {
				lbl[b.String(kv.Key)] = b.String(kv.Value)
			}
			var kvs []string
			for k, v := range lbl {
				if v != "" {
					kvs = append(kvs, k+"="+v)
				}
			}
			slices.Sort(kvs)
			want[strings.Join(kvs, ",")]++
		}
	}

	got := map[string]int{}
	var out []promlabels.Label
	for i := range f.Samples {
		s := &f.Samples[i]
		var keep bool
		if out, keep = l.Labels(out[:0], f, s); !keep {
			continue
		}
		kvs := make([]string, len(out))
		for j, x := range out {
			kvs[j] = x.Name + "=" + x.Value
		}
		got[strings.Join(kvs, ",")] += len(s.Timestamps)
	}
	if !maps.Equal(got, want) {
		for k, n := range want {
			if got[k] != n {
				t.Errorf("want %d events labelled %s, got %d", n, k, got[k])
			}
		}
		for k, n := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("got %d unexpected events labelled %s", n, k)
			}
		}
	}
	if wantDropped == 0 || len(want) == 0 {
		t.Fatalf("the corpus exercises nothing: %d dropped, %d label sets kept", wantDropped, len(want))
	}
	if d := promtest.Value(t, reg, "tandem_encoder_labels_dropped_by_relabel_total"); d != float64(wantDropped) {
		t.Errorf("dropped counter %v, want %d events", d, wantDropped)
	}
}

// BenchmarkLabels labels every sample of the benchmark corpus's flush, at
// steady state (caches warm), with parca-agent's shipped config.yaml rules.
func BenchmarkLabels(b *testing.B) {
	c, err := testcorpus.ForBenchmark()
	if err != nil {
		b.Fatal(err)
	}
	f := flushtest.Default(b, c)
	rules, err := labels.LoadConfigFile("testdata/good.yaml")
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name  string
		rules []*relabel.Config
	}{{"default", nil}, {"relabel", rules}} {
		b.Run(bc.name, func(b *testing.B) {
			l, err := labels.New(labels.Config{RelabelConfigs: bc.rules, ExternalLabels: map[string]string{"cluster": "c1"}}, nil)
			if err != nil {
				b.Fatal(err)
			}
			dst := make([]promlabels.Label, 0, 64)
			for i := range f.Samples {
				dst, _ = l.Labels(dst[:0], f, &f.Samples[i])
			}
			b.ReportAllocs()
			for b.Loop() {
				for i := range f.Samples {
					dst, _ = l.Labels(dst[:0], f, &f.Samples[i])
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(f.Samples)), "ns/sample")
		})
	}
}
