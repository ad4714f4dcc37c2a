package reference

import (
	"bytes"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/tandem-profiler/tandem/internal/counters"
)

// The metrics' reference pages, one per process.
const (
	EncoderMetricsPage = "docs/reference/metrics-encoder.md"
	SamplerMetricsPage = "docs/reference/metrics-sampler.md"
)

// Recorder is a Prometheus registry that also keeps every collector
// registered with it, so that the metrics a process registers can be listed
// with their types even when no series exists yet (a vector nobody has
// used). It is safe for concurrent use.
type Recorder struct {
	*prometheus.Registry
	mu         sync.Mutex
	collectors []prometheus.Collector
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder { return &Recorder{Registry: prometheus.NewRegistry()} }

// Register registers c and keeps it.
func (r *Recorder) Register(c prometheus.Collector) error {
	if err := r.Registry.Register(c); err != nil {
		return err
	}
	r.mu.Lock()
	r.collectors = append(r.collectors, c)
	r.mu.Unlock()
	return nil
}

// MustRegister registers cs and keeps them; it panics as the Registry's does.
func (r *Recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// Collectors returns what was registered, in order.
func (r *Recorder) Collectors() []prometheus.Collector {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.collectors)
}

// Metric is one metric family as the reference page lists it.
type Metric struct {
	Name, Type, Help string
	Labels           []string // variable and constant label names, sorted
}

// Describe lists the metric families of collectors, merged by name (the
// same family registered once per output differs only in its constant
// labels' values), sorted by name. Families whose names start with one of
// skip are left out.
func Describe(collectors []prometheus.Collector, skip ...string) ([]Metric, error) {
	byName := map[string]*Metric{}
	for _, c := range collectors {
		typ := typeOf(c)
		types := map[string]string{}
		if typ == "" {
			types = collectedTypes(c)
		}
		ch := make(chan *prometheus.Desc)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			m, err := parseDesc(d.String())
			if err != nil {
				return nil, err
			}
			if slices.ContainsFunc(skip, func(p string) bool { return strings.HasPrefix(m.Name, p) }) {
				continue
			}
			m.Type = typ
			if m.Type == "" {
				m.Type = types[m.Name]
			}
			if have := byName[m.Name]; have != nil {
				if have.Help != m.Help || (have.Type != m.Type && m.Type != "") {
					return nil, fmt.Errorf("metric %s is registered twice with different help or types", m.Name)
				}
				have.Labels = union(have.Labels, m.Labels)
				continue
			}
			byName[m.Name] = &m
		}
	}
	var out []Metric
	for _, m := range byName {
		if m.Type == "" {
			m.Type = "untyped"
		}
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// typeOf is the type of a collector that is one metric or one vector; ""
// for any other collector. Collectors registered through
// prometheus.WrapRegistererWith are unwrapped first.
func typeOf(c prometheus.Collector) string {
	c = unwrap(c)
	switch c.(type) {
	case *prometheus.CounterVec:
		return "counter"
	case *prometheus.GaugeVec:
		return "gauge"
	case *prometheus.HistogramVec:
		return "histogram"
	case *prometheus.SummaryVec:
		return "summary"
	}
	if m, ok := c.(prometheus.Metric); ok {
		var pb dto.Metric
		if m.Write(&pb) == nil {
			return dtoType(&pb)
		}
	}
	return ""
}

// unwrap returns the collector a prometheus.WrapRegistererWith wrapper
// holds (an unexported type of client_golang; the field is read through
// reflection), or c itself.
func unwrap(c prometheus.Collector) prometheus.Collector {
	for {
		v := reflect.ValueOf(c)
		if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
			return c
		}
		f := v.Elem().FieldByName("wrappedCollector")
		if !f.IsValid() || f.Kind() != reflect.Interface {
			return c
		}
		inner, ok := reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem().Interface().(prometheus.Collector)
		if !ok || inner == nil {
			return c
		}
		c = inner
	}
}

// collectedTypes collects c once and returns the type of every family it
// produced a series of.
func collectedTypes(c prometheus.Collector) map[string]string {
	types := map[string]string{}
	ch := make(chan prometheus.Metric)
	go func() { c.Collect(ch); close(ch) }()
	for m := range ch {
		var pb dto.Metric
		if m.Write(&pb) != nil {
			continue
		}
		if d, err := parseDesc(m.Desc().String()); err == nil {
			types[d.Name] = dtoType(&pb)
		}
	}
	return types
}

func dtoType(pb *dto.Metric) string {
	switch {
	case pb.Counter != nil:
		return "counter"
	case pb.Gauge != nil:
		return "gauge"
	case pb.Histogram != nil:
		return "histogram"
	case pb.Summary != nil:
		return "summary"
	}
	return "untyped"
}

// descString matches prometheus.Desc's String: the only way to read a
// Desc's name, help and labels.
var descString = regexp.MustCompile(`^Desc\{fqName: ("(?:[^"\\]|\\.)*"), help: ("(?:[^"\\]|\\.)*"), unit: "(?:[^"\\]|\\.)*", constLabels: \{(.*)\}, variableLabels: \{(.*)\}\}$`)

// constLabel matches one name="value" pair of constLabels.
var constLabel = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_]*)="(?:[^"\\]|\\.)*"`)

func parseDesc(s string) (Metric, error) {
	m := descString.FindStringSubmatch(s)
	if m == nil {
		return Metric{}, fmt.Errorf("cannot read the metric description %s (has client_golang's Desc.String changed?)", s)
	}
	name, err := strconv.Unquote(m[1])
	if err != nil {
		return Metric{}, err
	}
	help, err := strconv.Unquote(m[2])
	if err != nil {
		return Metric{}, err
	}
	var labels []string
	for _, l := range constLabel.FindAllStringSubmatch(m[3], -1) {
		labels = append(labels, l[1])
	}
	for _, l := range strings.Split(m[4], ",") {
		if l = strings.TrimSuffix(strings.TrimPrefix(l, "c("), ")"); l != "" {
			labels = append(labels, l)
		}
	}
	return Metric{Name: name, Help: help, Labels: union(nil, labels)}, nil
}

func union(a, b []string) []string {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}

// Metrics returns a metrics reference page at path: a title, what it
// covers, and a table of the metrics.
func Metrics(path, title, intro string, metrics []Metric) Files {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s\n\n%s\n\n| Metric | Type | Labels | Help |\n|---|---|---|---|\n", title, strings.TrimSpace(intro))
	for _, m := range metrics {
		labels := make([]string, len(m.Labels))
		for i, l := range m.Labels {
			labels[i] = "`" + l + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", m.Name, m.Type, strings.Join(labels, ", "), cell(m.Help))
	}
	return Files{path: b.Bytes()}
}

// Counters lists the families of a counters.Set snapshot (the sampler's
// metrics), each with its label names and, since a Set registers every
// series up front, the values each label takes.
func Counters(samples []counters.Sample) []Metric {
	byName := map[string]*Metric{}
	values := map[string]map[string][]string{} // name -> label -> values
	for _, s := range samples {
		m := byName[s.Name]
		if m == nil {
			typ := "gauge"
			if s.Counter {
				typ = "counter"
			}
			m = &Metric{Name: s.Name, Type: typ, Help: s.Help}
			byName[s.Name] = m
			values[s.Name] = map[string][]string{}
		}
		for _, l := range s.Labels {
			m.Labels = union(m.Labels, []string{l.Name})
			values[s.Name][l.Name] = union(values[s.Name][l.Name], []string{l.Value})
		}
	}
	var out []Metric
	for _, m := range byName {
		for i, l := range m.Labels {
			m.Labels[i] = l + ": " + strings.Join(values[m.Name][l], ", ")
		}
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
