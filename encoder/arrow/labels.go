package arrow

import (
	"slices"
	"strconv"
	"strings"

	promlabels "github.com/prometheus/prometheus/model/labels"

	"github.com/tandem-profiler/tandem/encoder"
)

// Label is one label of a sample: Prometheus' label type, so that
// encoder/labels' Labeler satisfies Labeler as it is.
type Label = promlabels.Label

// Labeler chooses the labels of a sample. Labels appends the labels of
// sample s of f to dst and returns the result, sorted by name, with unique
// names and no empty value, and whether to keep the sample at all (false:
// a relabel rule dropped it; the Labeler counts such drops). It is called
// once per aggregated sample, not per event, from one goroutine at a time.
type Labeler interface {
	Labels(dst []Label, f *encoder.Flush, s *encoder.Sample) (out []Label, keep bool)
}

// Label names parca-agent sends by default.
const (
	LabelNode       = "node"
	LabelComm       = "comm"
	LabelCPU        = "cpu"
	LabelThreadID   = "thread_id"
	LabelThreadName = "thread_name"
)

// DefaultLabelerConfig configures DefaultLabeler.
type DefaultLabelerConfig struct {
	// External labels are added to every sample that does not already have
	// the label (Prometheus' external-label rule); they are not relabelled.
	External map[string]string
	// DisableCPU, DisableThreadID and DisableThreadName drop the cpu,
	// thread_id and thread_name labels.
	DisableCPU, DisableThreadID, DisableThreadName bool

	_ struct{}
}

// DefaultLabeler implements parca-agent's default label set: node (the
// sampler's node name), comm (the process's comm), cpu, thread_id,
// thread_name, the sample's custom labels (Go pprof labels), then the
// external labels. It keeps every sample. It is not safe for concurrent
// use.
type DefaultLabeler struct {
	cfg      DefaultLabelerConfig
	external []Label // sorted by name
	cpus     []string
	tids     map[uint32]string
	scratch  []Label
}

// NewDefaultLabeler returns a DefaultLabeler.
func NewDefaultLabeler(cfg DefaultLabelerConfig) *DefaultLabeler {
	l := &DefaultLabeler{cfg: cfg, tids: make(map[uint32]string)}
	for k, v := range cfg.External {
		if k != "" && v != "" {
			l.external = append(l.external, Label{Name: k, Value: v})
		}
	}
	slices.SortFunc(l.external, func(a, b Label) int { return strings.Compare(a.Name, b.Name) })
	return l
}

func (l *DefaultLabeler) cpu(c uint32) string {
	for int(c) >= len(l.cpus) {
		l.cpus = append(l.cpus, strconv.Itoa(len(l.cpus)))
	}
	return l.cpus[c]
}

func (l *DefaultLabeler) tid(t uint32) string {
	if s, ok := l.tids[t]; ok {
		return s
	}
	if len(l.tids) > 1<<16 {
		clear(l.tids) // bound the cache; thread ids churn
	}
	s := strconv.FormatUint(uint64(t), 10)
	l.tids[t] = s
	return s
}

// Labels implements Labeler.
func (l *DefaultLabeler) Labels(dst []Label, f *encoder.Flush, s *encoder.Sample) ([]Label, bool) {
	r := &f.Resources[s.Resource]
	// The fixed labels in name order: comm, cpu, node, thread_id,
	// thread_name.
	fixed := [5]Label{{Name: LabelComm, Value: f.Strings[r.Comm]}}
	n := 1
	if !l.cfg.DisableCPU {
		fixed[n] = Label{Name: LabelCPU, Value: l.cpu(s.CPU)}
		n++
	}
	fixed[n] = Label{Name: LabelNode, Value: f.Strings[r.NodeName]}
	n++
	if !l.cfg.DisableThreadID {
		fixed[n] = Label{Name: LabelThreadID, Value: l.tid(s.TID)}
		n++
	}
	if !l.cfg.DisableThreadName {
		fixed[n] = Label{Name: LabelThreadName, Value: f.Strings[s.ThreadName]}
		n++
	}
	var custom []encoder.KeyValue
	if s.Labels != 0 {
		custom = f.LabelSet(s.Labels) // sorted by key (the Aggregator's canonical order)
	}
	if len(custom) == 0 && len(l.external) == 0 {
		for _, lb := range fixed[:n] {
			if lb.Value != "" {
				dst = append(dst, lb)
			}
		}
		return dst, true
	}
	b := l.scratch[:0]
	for _, kv := range custom {
		b = append(b, Label{Name: f.Strings[kv.Key], Value: f.Strings[kv.Value]})
	}
	// Custom labels win over fixed ones of the same name.
	for _, lb := range fixed[:n] {
		b = append(b, lb)
	}
	l.scratch = b
	return appendSorted(dst, b, l.external), true
}

// appendSorted appends to dst the union of b (the first entry of a name
// wins) and ext (only names b lacks; sorted), sorted by name, without
// empty values.
func appendSorted(dst, b, ext []Label) []Label {
	slices.SortStableFunc(b, func(x, y Label) int { return strings.Compare(x.Name, y.Name) })
	start := len(dst)
	for i := range b {
		if (i > 0 && b[i-1].Name == b[i].Name) || b[i].Value == "" {
			continue
		}
		dst = append(dst, b[i])
	}
	if len(ext) == 0 {
		return dst
	}
	n := len(dst)
	for _, e := range ext {
		if _, found := slices.BinarySearchFunc(b, e.Name, func(x Label, name string) int {
			return strings.Compare(x.Name, name)
		}); !found {
			dst = append(dst, e)
		}
	}
	if len(dst) > n {
		slices.SortFunc(dst[start:], func(x, y Label) int { return strings.Compare(x.Name, y.Name) })
	}
	return dst
}
