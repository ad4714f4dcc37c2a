package arrow

import (
	"slices"
	"strconv"
	"strings"

	"github.com/tandem-profiler/tandem/encoder"
)

// Label is one label of a sample.
type Label struct{ Name, Value string }

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
	b := l.scratch[:0]
	add := func(name, value string) {
		if value != "" {
			b = append(b, Label{Name: name, Value: value})
		}
	}
	add(LabelNode, f.Strings[r.NodeName])
	add(LabelComm, f.Strings[r.Comm])
	if !l.cfg.DisableCPU {
		add(LabelCPU, l.cpu(s.CPU))
	}
	if !l.cfg.DisableThreadID {
		add(LabelThreadID, l.tid(s.TID))
	}
	if !l.cfg.DisableThreadName {
		add(LabelThreadName, f.Strings[s.ThreadName])
	}
	if s.Labels != 0 {
		for _, kv := range f.LabelSet(s.Labels) {
			add(f.Strings[kv.Key], f.Strings[kv.Value])
		}
	}
	l.scratch = b
	return appendSorted(dst, b, l.external), true
}

// appendSorted appends to dst the union of b (later entries win on a
// duplicate name) and ext (only names b lacks; sorted), sorted by name.
func appendSorted(dst, b, ext []Label) []Label {
	// Stable sort so that for equal names the last one added is last.
	slices.SortStableFunc(b, func(x, y Label) int { return strings.Compare(x.Name, y.Name) })
	start := len(dst)
	for i := range b {
		if i+1 < len(b) && b[i+1].Name == b[i].Name {
			continue
		}
		dst = append(dst, b[i])
	}
	if len(ext) == 0 {
		return dst
	}
	n := len(dst)
	for _, e := range ext {
		if _, found := slices.BinarySearchFunc(dst[start:n], e.Name, func(x Label, name string) int {
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
