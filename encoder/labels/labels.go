package labels

import (
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/model"
	promlabels "github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/relabel"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
	"github.com/tandem-profiler/tandem/internal/prom"
	"github.com/tandem-profiler/tandem/schema"
)

// DefaultCacheTTL is how long a process's relabelled base set is reused
// (parca-agent's --profiling-label-ttl default).
const DefaultCacheTTL = 10 * time.Minute

const (
	// maxCacheEntries bounds the per-PID cache (parca-agent's smallest
	// label cache).
	maxCacheEntries = 1 << 16
	// maxSweepInterval bounds how long expired entries stay in the cache.
	maxSweepInterval = time.Minute
	// clockEvery is how many Sample calls share one reading of the clock:
	// the TTL is minutes, reading the clock costs as much as a cache hit.
	clockEvery = 64
	// Formatted numbers are cached: CPUs below maxCPUStrings, thread ids in
	// a direct-mapped table.
	maxCPUStrings = 4096
	tidSlots      = 4096 // direct-mapped: a thread's slot is tid % tidSlots
)

// Label names. The plain ones are what parca-agent sends by default; the
// __meta_* ones exist only while relabelling.
// The process's own (node, comm, __meta_process_*, __meta_env_var_*) are
// encoder.ProcessFields' Plain and Meta columns.
const (
	labelCPU        = "cpu"
	labelThreadID   = "thread_id"
	labelThreadName = "thread_name"

	metaProcessExeName = "__meta_process_executable_name" // derived from the path
	metaCPU            = "__meta_cpu"
	metaThreadID       = "__meta_thread_id"
	metaThreadComm     = "__meta_thread_comm"
)

// Config says which labels a Labeler adds and how it relabels them. The
// zero value adds node, comm, cpu, thread_id, thread_name and custom labels,
// relabels nothing and caches for DefaultCacheTTL.
type Config struct {
	// ExternalLabels are added to every sample at flush time, not
	// relabelled (--metadata-external-labels).
	ExternalLabels map[string]string
	// DisableCPULabel, DisableThreadIDLabel and DisableThreadCommLabel
	// leave out cpu, thread_id and thread_name
	// (--metadata-disable-cpu-label and its siblings).
	DisableCPULabel        bool
	DisableThreadIDLabel   bool
	DisableThreadCommLabel bool
	// RelabelConfigs are applied in order to each process's base set, and
	// to probe samples' full sets (--config-path; see LoadConfigFile).
	RelabelConfigs []*relabel.Config
	// CacheTTL is how long a process's relabelled base set is reused
	// (--profiling-label-ttl); 0 means DefaultCacheTTL.
	CacheTTL time.Duration
}

// DefaultConfig returns the configuration parca-agent runs with by default.
func DefaultConfig() Config { return Config{CacheTTL: DefaultCacheTTL} }

// Validate reports every problem of the configuration.
func (c *Config) Validate() error {
	var errs []error
	if c.CacheTTL < 0 {
		errs = append(errs, fmt.Errorf("cache TTL %v: must not be negative", c.CacheTTL))
	}
	for _, name := range sortedKeys(c.ExternalLabels) {
		value := c.ExternalLabels[name]
		switch {
		case name == "":
			errs = append(errs, errors.New("external label with an empty name"))
		case !utf8.ValidString(name):
			errs = append(errs, fmt.Errorf("external label name %q: not valid UTF-8", name))
		case value == "":
			errs = append(errs, fmt.Errorf("external label %q: empty value", name))
		case !utf8.ValidString(value):
			errs = append(errs, fmt.Errorf("external label %q: value %q is not valid UTF-8", name, value))
		}
	}
	for i, rc := range c.RelabelConfigs {
		if err := validateRelabel(rc); err != nil {
			errs = append(errs, fmt.Errorf("relabel_configs[%d]: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

// validateRelabel catches what relabel.Config.Validate lets through and
// relabel.Process would panic on (configs built in code rather than read
// from YAML).
func validateRelabel(rc *relabel.Config) error {
	if rc == nil {
		return errors.New("empty relabel config")
	}
	switch rc.Action {
	case relabel.Replace, relabel.Keep, relabel.Drop, relabel.KeepEqual, relabel.DropEqual,
		relabel.HashMod, relabel.LabelMap, relabel.LabelDrop, relabel.LabelKeep,
		relabel.Lowercase, relabel.Uppercase:
	case "":
		return errors.New("relabel action cannot be empty")
	default:
		return fmt.Errorf("unknown relabel action %q", rc.Action)
	}
	if rc.Regex.Regexp == nil {
		return errors.New("regex is not set (start from relabel.DefaultRelabelConfig)")
	}
	return rc.Validate()
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Input is what the Labeler needs to know about one sample. Strings must be
// ordinary immutable strings: the Labeler keeps them in its cache.
type Input struct {
	// Process labels: the process's base set is built from these.
	Node           string // the session's node name (Hello.NodeName)
	PID            uint32
	Comm           string
	ExecutablePath string
	ContainerID    string
	SystemdUnit    string
	ServiceName    string             // APM service name, if the sampler found one
	Env            []promlabels.Label // recorded environment variables, Name without prefix
	// Workload is the process's Kubernetes identity (encoder/kube), nil
	// outside a known pod. Its __meta_kubernetes_* labels are offered to
	// relabelling; with no relabel rules its default labels (namespace,
	// pod, container, container_image) are written.
	Workload *aggregate.Workload

	// Sample labels.
	TID        uint32
	CPU        uint32
	ThreadName string
	Custom     []promlabels.Label // Go pprof labels and other custom labels
	Origin     schema.Origin

	// Events is the number of observations the sample stands for; a
	// dropped sample counts this many (0 counts as 1).
	Events int

	// res is the flush resource Labels takes the process fields from (a
	// dictionary entry never changes, so the same pointer means the same
	// fields); nil: compare the fields. resFlush is its flush while the
	// fields other than PID are not read yet (fillProcess): a process whose
	// cache entry was built from res needs none of them.
	res      *aggregate.Resource
	resFlush *aggregate.Flush
}

// fillProcess reads the process fields Labels left for later.
func (in *Input) fillProcess() {
	if in.resFlush != nil {
		in.fromResource(in.resFlush, in.res)
		in.resFlush = nil
	}
}

// inputStrings gives, for each string field of encoder.ProcessFields (by
// index), its Input field; Input's one number is PID and its one label set
// Env. TestInputCoversProcessFields fails when a field has no Input field.
var inputStrings = func() (acc [len(aggregate.ProcessFields)]func(in *Input) *string) {
	byName := map[string]func(in *Input) *string{
		"Comm":           func(in *Input) *string { return &in.Comm },
		"ExecutablePath": func(in *Input) *string { return &in.ExecutablePath },
		"ContainerID":    func(in *Input) *string { return &in.ContainerID },
		"SystemdUnit":    func(in *Input) *string { return &in.SystemdUnit },
		"ServiceName":    func(in *Input) *string { return &in.ServiceName },
		"NodeName":       func(in *Input) *string { return &in.Node },
	}
	for i := range aggregate.ProcessFields {
		acc[i] = byName[aggregate.ProcessFields[i].Name]
	}
	return acc
}()

// FromFlush fills in from sample s of flush f, reusing in's slices.
func (in *Input) FromFlush(f *aggregate.Flush, s *aggregate.Sample) {
	r := &f.Resources[s.Resource]
	in.fromResource(f, r)
	in.res, in.resFlush = nil, nil
	in.Workload = f.Workload(r)
	in.fromSample(f, s)
}

// fromResource fills in's process fields from resource r of f.
func (in *Input) fromResource(f *aggregate.Flush, r *aggregate.Resource) {
	for i := range aggregate.ProcessFields {
		switch aggregate.ProcessFields[i].Kind {
		case aggregate.FieldString:
			*inputStrings[i](in) = f.Strings[r.Field(i)]
		case aggregate.FieldNumber:
			in.PID = r.Field(i)
		case aggregate.FieldLabelSet:
			in.Env = appendKVs(in.Env[:0], f, r.Field(i))
		}
	}
}

// fromSample fills in's sample fields from sample s of f.
func (in *Input) fromSample(f *aggregate.Flush, s *aggregate.Sample) {
	in.TID = s.TID
	in.CPU = s.CPU
	in.ThreadName = f.Strings[s.ThreadName]
	in.Custom = appendKVs(in.Custom[:0], f, s.Labels)
	in.Origin = s.Origin
	in.Events = len(s.Timestamps)
}

func appendKVs(dst []promlabels.Label, f *aggregate.Flush, set uint32) []promlabels.Label {
	if set == 0 {
		return dst
	}
	for _, kv := range f.LabelSet(set) {
		dst = append(dst, promlabels.Label{Name: f.Strings[kv.Key], Value: f.Strings[kv.Value]})
	}
	return dst
}

// Labeler computes samples' label sets. See the package documentation.
type Labeler struct {
	cfg       Config
	perSample bool // the probe relabel pass runs
	external  promlabels.Labels
	now       func() time.Time
	clockNow  time.Time // the last reading of now
	clockLeft int       // Sample calls before the next reading
	clockN    int       // clockEvery; 1 in tests
	dropped   prometheus.Counter

	cache     map[uint32]*entry
	nextSweep time.Time
	sweepEach time.Duration
	builds    uint64 // base sets built (cache misses)

	in     Input // Labels' scratch input
	lb     *promlabels.Builder
	ps     []promlabels.Label // per-sample labels
	cs     []promlabels.Label // custom labels
	bufA   []promlabels.Label
	bufB   []promlabels.Label
	cpuStr []string
	tidStr *[tidSlots]tidString
}

type tidString struct {
	tid uint32
	s   string
}

// entry is the cached base set of one process, with the process labels it
// was built from.
type entry struct {
	expires time.Time
	keep    bool
	base    []promlabels.Label // relabelled, sorted, no __meta_*
	raw     []promlabels.Label // before relabelling, for probe samples

	strs     [len(aggregate.ProcessFields)]string // by inputStrings
	env      []promlabels.Label
	workload *aggregate.Workload
	res      *aggregate.Resource // Input.res
}

func (e *entry) matches(in *Input) bool {
	if in.res != nil && in.res == e.res {
		return e.workload == in.Workload
	}
	in.fillProcess()
	for i, str := range inputStrings {
		if str != nil && e.strs[i] != *str(in) {
			return false
		}
	}
	return e.workload == in.Workload && slices.Equal(e.env, in.Env)
}

// New returns a Labeler. reg may be nil.
func New(cfg Config, reg prometheus.Registerer) (*Labeler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("labels config: %w", err)
	}
	if cfg.CacheTTL == 0 {
		cfg.CacheTTL = DefaultCacheTTL
	}
	cfg.RelabelConfigs = slices.Clone(cfg.RelabelConfigs)
	ext := make(map[string]string, len(cfg.ExternalLabels))
	for k, v := range cfg.ExternalLabels {
		ext[k] = v
	}
	cfg.ExternalLabels = ext
	l := &Labeler{
		cfg:       cfg,
		perSample: len(cfg.RelabelConfigs) > 0,
		external:  promlabels.FromMap(ext),
		now:       time.Now,
		clockN:    clockEvery,
		dropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tandem_encoder_labels_dropped_by_relabel_total",
			Help: "Samples (observations) dropped by relabel_configs.",
		}),
		cache:     make(map[uint32]*entry),
		sweepEach: min(cfg.CacheTTL, maxSweepInterval),
		lb:        promlabels.NewBuilder(promlabels.EmptyLabels()),
		tidStr:    new([tidSlots]tidString),
	}
	if err := prom.Register(reg, "labels", l.dropped); err != nil {
		return nil, err
	}
	return l, nil
}

// External returns the external labels, sorted by name. They are not
// relabelled; encoders that write a label column per flush add them once
// per flush (parca-agent), others use Labels.
func (l *Labeler) External() promlabels.Labels { return l.external }

// Labels appends to dst the labels of sample s of flush f and the external
// labels the sample does not already have (a sample label wins, as in
// Prometheus' external-label rule), sorted by name with unique names and no
// empty value, and returns the result. keep is false when relabelling drops
// the sample (counted); out is then dst unchanged. The strings may be kept.
func (l *Labeler) Labels(dst []promlabels.Label, f *aggregate.Flush, s *aggregate.Sample) (out []promlabels.Label, keep bool) {
	if r := &f.Resources[s.Resource]; r != l.in.res {
		l.in.res, l.in.resFlush, l.in.PID = r, f, r.PID // the rest when needed
	}
	l.in.Workload = f.Workload(l.in.res)
	l.in.fromSample(f, s)
	set, keep := l.Sample(&l.in)
	if !keep {
		return dst, false
	}
	if l.external.IsEmpty() {
		return append(dst, set...), true
	}
	i := 0
	l.external.Range(func(e promlabels.Label) {
		for i < len(set) && set[i].Name < e.Name {
			dst = append(dst, set[i])
			i++
		}
		if i < len(set) && set[i].Name == e.Name {
			return // the sample's own label wins
		}
		dst = append(dst, e)
	})
	dst = append(dst, set[i:]...)
	return dst, true
}

// Sample returns the labels of one sample without the external labels,
// sorted by name with unique names and no empty value, and false when
// relabelling drops the sample (counted). The slice is valid until the next
// call of Sample or Labels and must not be modified; the strings in it may
// be kept.
func (l *Labeler) Sample(in *Input) (lbls []promlabels.Label, keep bool) {
	e := l.process(in)
	if !e.keep {
		l.drop(in)
		return nil, false
	}
	out := l.addSampleLabels(e.base, in)
	if in.Origin == schema.OriginProbe && l.perSample {
		if out, keep = l.relabelSample(e, out, in); !keep {
			l.drop(in)
			return nil, false
		}
	}
	return l.addCustom(out, in.Custom), true
}

func (l *Labeler) drop(in *Input) {
	l.dropped.Add(float64(max(in.Events, 1)))
}

// process returns the cache entry of the sample's process, building it when
// it is missing, expired or built from other process labels.
func (l *Labeler) process(in *Input) *entry {
	if l.clockLeft <= 0 {
		l.clockNow, l.clockLeft = l.now(), l.clockN
	}
	l.clockLeft--
	now := l.clockNow
	e := l.cache[in.PID]
	if e != nil && now.Before(e.expires) && e.matches(in) {
		return e
	}
	if !now.Before(l.nextSweep) {
		l.sweep(now)
	}
	if _, cached := l.cache[in.PID]; !cached {
		if len(l.cache) >= maxCacheEntries {
			l.sweep(now)
			for pid := range l.cache {
				if len(l.cache) < maxCacheEntries {
					break
				}
				delete(l.cache, pid)
			}
		}
	}
	if e == nil {
		e = &entry{}
	}
	l.cache[in.PID] = e // the sweep may have deleted an expired e
	l.build(e, in)
	e.expires = now.Add(l.cfg.CacheTTL)
	return e
}

// sweep deletes expired entries.
func (l *Labeler) sweep(now time.Time) {
	for pid, e := range l.cache {
		if !now.Before(e.expires) {
			delete(l.cache, pid)
		}
	}
	l.nextSweep = now.Add(l.sweepEach)
}

// build computes a process's relabelled base set, in the order parca-agent
// builds it.
func (l *Labeler) build(e *entry, in *Input) {
	in.fillProcess()
	l.builds++
	lb := l.lb
	lb.Reset(promlabels.EmptyLabels())
	for i := range aggregate.ProcessFields {
		pf := &aggregate.ProcessFields[i]
		switch pf.Kind {
		case aggregate.FieldString:
			setProcessLabel(lb, pf, *inputStrings[i](in))
		case aggregate.FieldNumber:
			setProcessLabel(lb, pf, strconv.FormatUint(uint64(in.PID), 10))
		case aggregate.FieldLabelSet:
			for _, kv := range in.Env {
				if kv.Name != "" {
					setProcessLabel(lb, &aggregate.ProcessField{Plain: prefixed(pf.Plain, kv.Name), Meta: prefixed(pf.Meta, kv.Name)}, kv.Value)
				}
			}
		}
	}
	lb.Set(metaProcessExeName, executableName(in.ExecutablePath))
	if w := in.Workload; w != nil {
		for _, a := range w.Meta {
			lb.Set(a.Key, a.Value)
		}
		if len(l.cfg.RelabelConfigs) == 0 {
			for _, a := range w.Labels {
				lb.Set(a.Key, a.Value)
			}
		}
	}

	if l.perSample {
		e.raw = appendLabels(e.raw[:0], lb.Labels())
	}
	e.keep = relabel.ProcessBuilder(lb, l.cfg.RelabelConfigs...)
	dropMeta(lb)
	e.base = appendLabels(e.base[:0], lb.Labels())

	for i, str := range inputStrings {
		if str != nil {
			e.strs[i] = *str(in)
		}
	}
	e.env = append(e.env[:0], in.Env...)
	e.workload = in.Workload
	e.res = in.res
}

// setProcessLabel sets a process field's labels: its plain label and its
// __meta_* one, where the field has them.
func setProcessLabel(lb *promlabels.Builder, pf *aggregate.ProcessField, v string) {
	if pf.Plain != "" {
		lb.Set(pf.Plain, v)
	}
	if pf.Meta != "" {
		lb.Set(pf.Meta, v)
	}
}

// prefixed is a label set entry's label name: name after the field's
// prefix, or "" when the field has none.
func prefixed(prefix, name string) string {
	if prefix == "" {
		return ""
	}
	return prefix + name
}

func executableName(p string) string {
	if p == "" {
		return ""
	}
	if base := path.Base(p); base != "/" && base != "." {
		return base
	}
	return ""
}

// dropMeta deletes every __meta_* label; other labels starting with __ stay.
func dropMeta(lb *promlabels.Builder) {
	lb.Range(func(lbl promlabels.Label) {
		if strings.HasPrefix(lbl.Name, model.MetaLabelPrefix) {
			lb.Del(lbl.Name)
		}
	})
}

func appendLabels(dst []promlabels.Label, ls promlabels.Labels) []promlabels.Label {
	ls.Range(func(lbl promlabels.Label) { dst = append(dst, lbl) })
	return dst
}

// addSampleLabels returns base plus cpu, thread_id and thread_name (as
// enabled), which replace base labels of the same name.
func (l *Labeler) addSampleLabels(base []promlabels.Label, in *Input) []promlabels.Label {
	ps := l.ps[:0] // in name order: cpu < thread_id < thread_name
	if !l.cfg.DisableCPULabel {
		ps = append(ps, promlabels.Label{Name: labelCPU, Value: l.cpuString(in.CPU)})
	}
	if !l.cfg.DisableThreadIDLabel {
		ps = append(ps, promlabels.Label{Name: labelThreadID, Value: l.tidString(in.TID)})
	}
	if !l.cfg.DisableThreadCommLabel && in.ThreadName != "" {
		ps = append(ps, promlabels.Label{Name: labelThreadName, Value: in.ThreadName})
	}
	l.ps = ps
	l.bufA = merge(l.bufA[:0], base, ps)
	return l.bufA
}

// relabelSample relabels a probe sample: the process's labels as they were
// before relabelling, with the sample's labels (set: only those matter
// here) and their __meta_* twins. parca-agent instead runs the rules a
// second time over the already relabelled set, where a replace rule whose
// source was a __meta_* label finds it gone and deletes its own result.
func (l *Labeler) relabelSample(e *entry, set []promlabels.Label, in *Input) ([]promlabels.Label, bool) {
	lb := l.lb
	lb.Reset(promlabels.EmptyLabels())
	for _, lbl := range e.raw {
		lb.Set(lbl.Name, lbl.Value)
	}
	for _, lbl := range set {
		switch lbl.Name {
		case labelCPU, labelThreadID, labelThreadName:
			lb.Set(lbl.Name, lbl.Value)
		}
	}
	lb.Set(metaCPU, l.cpuString(in.CPU))
	lb.Set(metaThreadID, l.tidString(in.TID))
	lb.Set(metaThreadComm, in.ThreadName)
	if !relabel.ProcessBuilder(lb, l.cfg.RelabelConfigs...) {
		return nil, false
	}
	dropMeta(lb)
	// The strings alias a buffer lb.Labels allocated for this call alone.
	l.bufA = appendLabels(l.bufA[:0], lb.Labels())
	return l.bufA, true
}

// addCustom adds the custom labels that are usable and do not collide with
// a label of set.
func (l *Labeler) addCustom(set []promlabels.Label, custom []promlabels.Label) []promlabels.Label {
	if len(custom) == 0 {
		return set
	}
	cs := l.cs[:0]
	for _, c := range custom {
		if c.Name == "" || !utf8.ValidString(c.Name) {
			continue
		}
		v, ok := fixTruncation(c.Value)
		if !ok || v == "" || contains(set, c.Name) || slices.ContainsFunc(cs, func(x promlabels.Label) bool { return x.Name == c.Name }) {
			continue
		}
		cs = append(cs, promlabels.Label{Name: c.Name, Value: v})
	}
	l.cs = cs
	if len(cs) == 0 {
		return set
	}
	slices.SortFunc(cs, func(a, b promlabels.Label) int { return strings.Compare(a.Name, b.Name) })
	l.bufB = merge(l.bufB[:0], set, cs)
	return l.bufB
}

// fixTruncation returns s when it is valid UTF-8, s without its last rune
// when only that rune is incomplete (the sampler cuts values at a fixed
// byte length), and false otherwise.
func fixTruncation(s string) (string, bool) {
	if utf8.ValidString(s) {
		return s, true
	}
	for i := len(s) - 1; i >= 0 && i >= len(s)-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			if utf8.FullRuneInString(s[i:]) || !utf8.ValidString(s[:i]) {
				return "", false
			}
			return s[:i], true
		}
	}
	return "", false
}

func contains(set []promlabels.Label, name string) bool {
	_, found := slices.BinarySearchFunc(set, name, func(l promlabels.Label, n string) int { return strings.Compare(l.Name, n) })
	return found
}

// merge appends the union of a and b (both sorted by name) to dst in name
// order; b wins when both hold a name.
func merge(dst, a, b []promlabels.Label) []promlabels.Label {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch c := strings.Compare(a[i].Name, b[j].Name); {
		case c < 0:
			dst = append(dst, a[i])
			i++
		case c > 0:
			dst = append(dst, b[j])
			j++
		default:
			dst = append(dst, b[j])
			i++
			j++
		}
	}
	dst = append(dst, a[i:]...)
	return append(dst, b[j:]...)
}

func (l *Labeler) cpuString(cpu uint32) string {
	if cpu >= maxCPUStrings {
		return strconv.FormatUint(uint64(cpu), 10)
	}
	for uint32(len(l.cpuStr)) <= cpu {
		l.cpuStr = append(l.cpuStr, strconv.Itoa(len(l.cpuStr)))
	}
	return l.cpuStr[cpu]
}

func (l *Labeler) tidString(tid uint32) string {
	slot := &l.tidStr[tid%tidSlots]
	if slot.tid != tid || slot.s == "" {
		slot.tid, slot.s = tid, strconv.FormatUint(uint64(tid), 10)
	}
	return slot.s
}
