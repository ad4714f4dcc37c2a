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

	lastTID    uint32
	lastTIDStr string
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
	// Samples come grouped by thread: most calls repeat the last one.
	if t == l.lastTID && l.lastTIDStr != "" {
		return l.lastTIDStr
	}
	s, ok := l.tids[t]
	if !ok {
		if len(l.tids) > 1<<16 {
			clear(l.tids) // bound the cache; thread ids churn
		}
		s = strconv.FormatUint(uint64(t), 10)
		l.tids[t] = s
	}
	l.lastTID, l.lastTIDStr = t, s
	return s
}

// Labels implements Labeler.
func (l *DefaultLabeler) Labels(dst []Label, f *encoder.Flush, s *encoder.Sample) ([]Label, bool) {
	var custom []encoder.KeyValue
	if s.Labels != 0 {
		custom = f.LabelSet(s.Labels) // sorted by key (the Aggregator's canonical order)
	}
	r := &f.Resources[s.Resource]
	if len(custom) == 0 && len(l.external) == 0 {
		// The usual case: the fixed labels alone, in name order (comm,
		// cpu, node, thread_id, thread_name), straight into dst.
		dst = appendLabel(dst, LabelComm, f.Strings[r.Comm])
		if !l.cfg.DisableCPU {
			dst = append(dst, Label{Name: LabelCPU, Value: l.cpu(s.CPU)})
		}
		dst = appendLabel(dst, LabelNode, f.Strings[r.NodeName])
		if !l.cfg.DisableThreadID {
			dst = append(dst, Label{Name: LabelThreadID, Value: l.tid(s.TID)})
		}
		if !l.cfg.DisableThreadName {
			dst = appendLabel(dst, LabelThreadName, f.Strings[s.ThreadName])
		}
		return dst, true
	}
	// The fixed labels in name order, empty values included.
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
	if !sortedKVs(f, custom) {
		return l.unsortedLabels(dst, f, custom, fixed[:n]), true
	}
	// Merge the custom labels and the fixed ones, both sorted by name,
	// keeping the first entry of a name (custom labels win over fixed ones
	// of the same name); empty values stay for now, so that they still
	// hide an external label of their name.
	b := l.scratch[:0]
	i, j := 0, 0
	for i < len(custom) || j < n {
		var lb Label
		if j == n || (i < len(custom) && f.Strings[custom[i].Key] <= fixed[j].Name) {
			lb = Label{Name: f.Strings[custom[i].Key], Value: f.Strings[custom[i].Value]}
			i++
		} else {
			lb = fixed[j]
			j++
		}
		if len(b) > 0 && b[len(b)-1].Name == lb.Name {
			continue
		}
		b = append(b, lb)
	}
	l.scratch = b
	return mergeExternal(dst, b, l.external), true
}

// appendLabel appends name=value unless value is empty.
func appendLabel(dst []Label, name, value string) []Label {
	if value == "" {
		return dst
	}
	return append(dst, Label{Name: name, Value: value})
}

// sortedKVs reports whether kvs is sorted by key content (the
// Aggregator's canonical order).
func sortedKVs(f *encoder.Flush, kvs []encoder.KeyValue) bool {
	for i := 1; i < len(kvs); i++ {
		if f.Strings[kvs[i-1].Key] > f.Strings[kvs[i].Key] {
			return false
		}
	}
	return true
}

// mergeExternal appends to dst the labels of b (sorted, unique names)
// with a value, and the external labels ext (sorted) whose name b lacks,
// in name order.
func mergeExternal(dst, b, ext []Label) []Label {
	k := 0
	for _, lb := range b {
		for k < len(ext) && ext[k].Name < lb.Name {
			dst = append(dst, ext[k])
			k++
		}
		if k < len(ext) && ext[k].Name == lb.Name {
			k++
		}
		if lb.Value != "" {
			dst = append(dst, lb)
		}
	}
	return append(dst, ext[k:]...)
}

// unsortedLabels is Labels for custom labels out of canonical order.
func (l *DefaultLabeler) unsortedLabels(dst []Label, f *encoder.Flush, custom []encoder.KeyValue, fixed []Label) []Label {
	b := l.scratch[:0]
	for _, kv := range custom {
		b = append(b, Label{Name: f.Strings[kv.Key], Value: f.Strings[kv.Value]})
	}
	// Custom labels win over fixed ones of the same name.
	b = append(b, fixed...)
	l.scratch = b
	return appendSorted(dst, b, l.external)
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
