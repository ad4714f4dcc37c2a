package otlp_test

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
	"github.com/tandem-profiler/tandem/encoder/internal/flushtest"
	"github.com/tandem-profiler/tandem/encoder/internal/testcorpus"
	"github.com/tandem-profiler/tandem/encoder/otlp"
)

// podsByContainer resolves every container id to a pod named after it.
type podsByContainer map[string]*aggregate.Workload

func (p podsByContainer) Lookup(id string) *aggregate.Workload {
	if w, ok := p[id]; ok {
		return w
	}
	w := &aggregate.Workload{
		ServiceName:    "svc-" + id[:6],
		Attributes:     []aggregate.Attr{{Key: "k8s.namespace.name", Value: "shop"}, {Key: "k8s.pod.name", Value: "pod-" + id[:6]}},
		ListAttributes: []aggregate.Attr{{Key: "container.image.tags", Value: "1.2"}},
	}
	p[id] = w
	return w
}

func TestKubernetesResourceAttributes(t *testing.T) {
	c := testcorpus.Generate(testcorpus.Small())
	cfg := aggregate.DefaultConfig()
	cfg.Workloads = podsByContainer{}
	a, err := aggregate.NewAggregator(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := flushtest.Flush(t, a, c)
	e := newEncoder(t)
	for round := range 2 { // the second encode reuses the first's maps
		req := e.Encode(f)
		inPods := 0
		rps := req.Profiles().ResourceProfiles()
		for i := range rps.Len() {
			m := rps.At(i).Resource().Attributes()
			id, ok := m.Get(otlp.AttrContainerID)
			pod, hasPod := m.Get("k8s.pod.name")
			if !ok {
				if hasPod {
					t.Errorf("round %d: k8s.pod.name without a container", round)
				}
				continue
			}
			inPods++
			if !hasPod || pod.Str() != "pod-"+id.Str()[:6] {
				t.Errorf("round %d: container %s: k8s.pod.name %v", round, id.Str(), pod.AsString())
			}
			if ns, _ := m.Get("k8s.namespace.name"); ns.Str() != "shop" {
				t.Errorf("round %d: k8s.namespace.name %q", round, ns.Str())
			}
			tags, _ := m.Get("container.image.tags")
			if tags.Type() != pcommon.ValueTypeSlice || tags.Slice().Len() != 1 || tags.Slice().At(0).Str() != "1.2" {
				t.Errorf("round %d: container.image.tags %s, want [1.2]", round, tags.AsString())
			}
			svc, _ := m.Get(otlp.AttrServiceName)
			if want := "svc-" + id.Str()[:6]; svc.Str() != want && !hasAPMName(f, id.Str()) {
				t.Errorf("round %d: service.name %q, want %q", round, svc.Str(), want)
			}
		}
		if inPods == 0 {
			t.Fatal("the corpus has no containerized process")
		}
		e.Release(req)
	}
}

// hasAPMName reports whether a process of container id has an APM service
// name, which wins over the pod's.
func hasAPMName(f *aggregate.Flush, id string) bool {
	for i := range f.Resources {
		r := &f.Resources[i]
		if f.Strings[r.ContainerID] == id && r.ServiceName != 0 {
			return true
		}
	}
	return false
}

// TestWorkloadsFixedAtFlush: a flush's workloads are those of the moment
// it was taken. A pod that changes afterwards (here: every container moved
// to another pod) does not change what a later encoding of the same flush
// (an export retry) says, and no lookup happens at encoding time.
func TestWorkloadsFixedAtFlush(t *testing.T) {
	c := testcorpus.Generate(testcorpus.Small())
	pods := podsByContainer{}
	cfg := aggregate.DefaultConfig()
	cfg.Workloads = pods
	a, err := aggregate.NewAggregator(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	f := flushtest.Flush(t, a, c)
	if len(pods) == 0 {
		t.Fatal("the flush looked up no container: the corpus has none")
	}
	for id := range pods {
		pods[id] = &aggregate.Workload{Attributes: []aggregate.Attr{{Key: "k8s.pod.name", Value: "moved"}}}
	}
	before := len(pods)
	req := newEncoder(t).Encode(f)
	rps := req.Profiles().ResourceProfiles()
	for i := range rps.Len() {
		m := rps.At(i).Resource().Attributes()
		id, ok := m.Get(otlp.AttrContainerID)
		if !ok {
			continue
		}
		if pod, _ := m.Get("k8s.pod.name"); pod.Str() != "pod-"+id.Str()[:6] {
			t.Errorf("container %s: k8s.pod.name %q, want the pod of the flush's time", id.Str(), pod.Str())
		}
	}
	if len(pods) != before {
		t.Errorf("encoding looked up %d new containers", len(pods)-before)
	}
}
