package labels

import (
	"testing"

	promlabels "github.com/prometheus/prometheus/model/labels"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
)

// testWorkload is what encoder/kube publishes for a container (names from
// encoder/kube, spelled out here so that a rename there fails a test).
func testWorkload() *aggregate.Workload {
	return &aggregate.Workload{
		ServiceName: "web",
		Meta: []aggregate.Attr{
			{Key: "__meta_kubernetes_namespace", Value: "shop"},
			{Key: "__meta_kubernetes_pod_container_name", Value: "app"},
			{Key: "__meta_kubernetes_pod_label_app", Value: "web"},
			{Key: "__meta_kubernetes_pod_name", Value: "web-1"},
		},
		Labels: []aggregate.Attr{
			{Key: "container", Value: "app"}, {Key: "container_image", Value: "web:1"},
			{Key: "namespace", Value: "shop"}, {Key: "pod", Value: "web-1"},
		},
	}
}

func TestWorkloadLabels(t *testing.T) {
	for _, tc := range []struct {
		name  string
		rules string
		want  []promlabels.Label
	}{
		{name: "no relabel rules: parca-agent's Kubernetes defaults",
			want: ls("comm", "app", "container", "app", "container_image", "web:1", "cpu", "3", "namespace", "shop",
				"node", "node-1", "pod", "web-1", "thread_id", "43", "thread_name", "worker")},
		{name: "rules over __meta_kubernetes_*, no defaults",
			rules: "- source_labels: [__meta_kubernetes_pod_label_app]\n  target_label: app\n" +
				"- source_labels: [__meta_kubernetes_namespace, __meta_kubernetes_pod_name]\n  separator: /\n  target_label: instance\n",
			want: ls("app", "web", "comm", "app", "cpu", "3", "instance", "shop/web-1", "node", "node-1",
				"thread_id", "43", "thread_name", "worker")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			if tc.rules != "" {
				cfg.RelabelConfigs = rules(t, tc.rules)
			}
			l, err := New(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			in := testInput()
			in.Workload = testWorkload()
			got, keep := l.Sample(&in)
			if !keep || !promlabels.Equal(promlabels.New(got...), promlabels.New(tc.want...)) {
				t.Errorf("labels = %v (keep %v), want %v", got, keep, tc.want)
			}
		})
	}
}

// A process whose pod the API reports after its first samples gets the
// pod's labels from the next sample on: the miss is not cached.
func TestWorkloadMissNotCached(t *testing.T) {
	l, err := New(DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	in := testInput()
	if got, _ := l.Sample(&in); promlabels.New(got...).Get("pod") != "" {
		t.Fatalf("pod label without a workload: %v", got)
	}
	in.Workload = testWorkload()
	if got, _ := l.Sample(&in); promlabels.New(got...).Get("pod") != "web-1" {
		t.Fatalf("pod label after the pod appeared: %v", got)
	}
	in.Workload = nil // deleted and past its TTL
	if got, _ := l.Sample(&in); promlabels.New(got...).Get("pod") != "" {
		t.Fatalf("pod label after the pod went: %v", got)
	}
}

// A process in a pod costs no allocation per sample once its labels are
// built: the entry is current as long as the lookup returns the same
// Workload.
func TestSampleAllocsWithWorkload(t *testing.T) {
	l, err := New(DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	inputs := steadyInputs()
	w := testWorkload()
	for i := range inputs {
		inputs[i].Workload = w
		l.Sample(&inputs[i])
	}
	i := 0
	if a := testing.AllocsPerRun(100, func() { l.Sample(&inputs[i%len(inputs)]); i++ }); a != 0 {
		t.Errorf("%v allocations per Sample of a pod's process, want 0", a)
	}
}
