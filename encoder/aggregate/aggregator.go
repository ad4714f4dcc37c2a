package aggregate

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
	"weak"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tandem-profiler/tandem/encoder/symbolize"
	"github.com/tandem-profiler/tandem/internal/prom"
	"github.com/tandem-profiler/tandem/schema"
)

// ErrInvalidBatch is wrapped by Add's errors: the batch references an index
// outside its tables. A rejected batch adds nothing.
var ErrInvalidBatch = errors.New("invalid batch")

// DefaultDictionaryTTL is the default Config.DictionaryTTL: with the usual
// 10 s flush interval an entry unused for a minute is pruned.
const DefaultDictionaryTTL = 6

// DefaultMaxLinksPerFlush is the default Config.MaxLinksPerFlush: a node
// whose instrumented services run thousands of spans per flush interval
// keeps the links of the first 8,192; the OTLP link table then costs about
// 260 KB per request (32 bytes a link: two ids and their protobuf framing).
const DefaultMaxLinksPerFlush = 8192

// MaxLinksPerFlushLimit bounds Config.MaxLinksPerFlush: a flush's link ids
// fit in 16 bits, which keeps the aggregation key at 32 bytes.
const MaxLinksPerFlushLimit = 1<<16 - 1

// defaultCompactMinStale is the least number of stale roots that makes a
// rebuild worth it.
const defaultCompactMinStale = 1024

// Config holds the Aggregator's knobs.
type Config struct {
	// DictionaryTTL is how many flushes a dictionary entry survives without
	// being used by a sample. Pruning happens when at least a quarter of
	// the entries (and at least 1024) are stale, so the dictionaries hold
	// at most 4/3 of what the last DictionaryTTL flushes used.
	DictionaryTTL int
	// Symbolizer, when set, names the native frames of every new
	// location at the next Flush (Flush.NativeLines); those of an
	// executable it does not have yet at the first Flush after
	// NoteExecutable hears of it.
	Symbolizer Symbolizer
	// Workloads, when set, resolves the container ids of each flush's
	// resources to Kubernetes workloads when the flush is taken (once, so
	// every encoding of it, a retry's included, carries the same labels):
	// a pod the API reports after its first samples still labels them if
	// it arrives before their flush (encoder/kube).
	Workloads WorkloadLookup
	// MaxLinksPerFlush bounds the distinct trace links (trace id and span
	// id pairs) one flush holds, 0 to MaxLinksPerFlushLimit. A sample
	// whose link would exceed it keeps its stack and everything else and
	// loses only the link (counted in
	// tandem_encoder_aggregator_links_dropped_samples_total).
	MaxLinksPerFlush int

	_ struct{}
}

// DefaultConfig returns the default configuration.
func DefaultConfig() Config {
	return Config{DictionaryTTL: DefaultDictionaryTTL, MaxLinksPerFlush: DefaultMaxLinksPerFlush}
}

// Validate reports every problem with the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.DictionaryTTL < 1 {
		errs = append(errs, fmt.Errorf("dictionary TTL %d: must be at least 1 flush", c.DictionaryTTL))
	}
	if c.MaxLinksPerFlush < 0 || c.MaxLinksPerFlush > MaxLinksPerFlushLimit {
		errs = append(errs, fmt.Errorf("links per flush %d: must be 0 to %d", c.MaxLinksPerFlush, MaxLinksPerFlushLimit))
	}
	return errors.Join(errs...)
}

// rowKey is the aggregation key of a sample.
type rowKey struct {
	stack, resource, hz, tid, cpu, threadName, labels uint32
	origin                                            schema.Origin
	link                                              uint16 // index into the interval's links; 0 = none
}

type event struct {
	ts, value int64
	row       uint32
}

const unset = ^uint32(0)

// Aggregator collects samples for one flush interval at a time. See the
// package documentation for its dictionaries and guarantees.
type Aggregator struct {
	mu sync.Mutex

	cfg        Config
	metrics    *metrics
	d          *dict
	generation uint64
	epoch      uint32 // current flush interval, from 1; entries record the last one that used them
	minStale   int

	// Per-interval state.
	rowSlots []uint32 // open-addressing table of row ids + 1 (0 = empty), keyed by a.rows
	rows     []rowKey
	counts   []uint32
	starts   []uint32
	events   []event
	// links are the interval's distinct trace links in first-seen order
	// (links[0] is the zero "no link"), linkIDs their index;
	// linksDropped counts the samples that lost theirs to the bound.
	links         []schema.TraceLink
	linkIDs       map[schema.TraceLink]uint16
	linksDropped  int
	intervalStart int64 // Unix ns; 0 = first interval, starts at the oldest sample
	minTS, maxTS  int64

	// The current batch's index -> dictionary id maps, unset until first
	// use. For layouts 0 and 1 they are the per-batch scratch below
	// (batchMaps); for layout 2 the arrays of the batch's stream
	// dictionary (streamdict.go), which persist across batches. procMap is
	// per batch in every layout: processes are batch-local.
	strMap, mapMap, frameMap, stackMap, procMap []uint32
	batchMaps                                   idMaps
	frameHash                                   []uint64 // weak hashes, 0 = not computed (layouts 0, 1)
	keys                                        []rowKey
	locScratch                                  []uint32
	kvScratch                                   []KeyValue

	// Stream dictionaries' id maps (layout 2), by dictionary;
	// streamBatches counts the batches that used one, for eviction.
	streams       map[weak.Pointer[schema.Dictionary]]*streamMaps
	streamBatches uint64

	// Cross-batch guesses, verified before use (see fastpath.go); they
	// hold dictionary ids and are cleared when the dictionary is rebuilt.
	stackCache map[uint64]uint32 // weak stack hash -> stack id
	procCache  map[uint32]uint32 // pid -> resource id

	spare  *Flush            // released by the caller, reused by the next Flush
	frames []symbolize.Frame // Symbolizer scratch

	paths executablePaths // file id -> path, from executable notices (paths.go)

	// Native locations waiting for their executable, and the executables
	// noticed since the last flush (late.go).
	late     lateLocations
	arrivals arrivals
}

type metrics struct {
	batches     prometheus.Counter
	samples     prometheus.Counter
	rejected    prometheus.Counter
	compactions prometheus.Counter
	// linked counts samples added with a trace link, linksDropped those
	// that lost it to Config.MaxLinksPerFlush.
	linked       prometheus.Counter
	linksDropped prometheus.Counter
	// lateNotRetried counts native locations not remembered to be named
	// when their executable arrives (maxLateLocations).
	lateNotRetried prometheus.Counter
}

// NewAggregator returns an empty Aggregator. reg may be nil.
func NewAggregator(cfg Config, reg prometheus.Registerer) (*Aggregator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("aggregator config: %w", err)
	}
	var err error
	a := &Aggregator{
		cfg:        cfg,
		d:          newDict(1024),
		epoch:      1,
		minStale:   defaultCompactMinStale,
		links:      make([]schema.TraceLink, 1),
		linkIDs:    make(map[schema.TraceLink]uint16),
		stackCache: make(map[uint64]uint32),
		procCache:  make(map[uint32]uint32),
		streams:    make(map[weak.Pointer[schema.Dictionary]]*streamMaps),
	}
	if a.metrics, err = newMetrics(a, reg); err != nil {
		return nil, err
	}
	return a, nil
}

func newMetrics(a *Aggregator, reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		batches: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tandem_encoder_aggregator_batches_total",
			Help: "Batches added to the aggregator.",
		}),
		samples: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tandem_encoder_aggregator_samples_total",
			Help: "Samples added to the aggregator.",
		}),
		rejected: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tandem_encoder_aggregator_rejected_batches_total",
			Help: "Batches rejected because they reference indices outside their tables.",
		}),
		compactions: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tandem_encoder_aggregator_dictionary_compactions_total",
			Help: "Dictionary rebuilds that pruned entries unused for the dictionary TTL.",
		}),
		linked: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tandem_encoder_aggregator_linked_samples_total",
			Help: "Samples added with a trace link (trace id and span id) from the sampler.",
		}),
		linksDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tandem_encoder_aggregator_links_dropped_samples_total",
			Help: "Samples whose trace link was left out because their flush already held --max-links-per-flush distinct links; the samples themselves are kept.",
		}),
		lateNotRetried: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tandem_encoder_aggregator_late_locations_not_retried_total",
			Help: "Native locations first flushed before their executable reached the encoder and not remembered to be named when it does, because 65536 were already waiting; they are named after the next dictionary rebuild.",
		}),
	}
	if reg == nil {
		return m, nil
	}
	entries := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tandem_encoder_aggregator_dictionary_locations",
		Help: "Locations in the aggregator's dictionary.",
	}, func() float64 { return float64(a.Stats().Locations) })
	stacks := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tandem_encoder_aggregator_dictionary_stacks",
		Help: "Stacks in the aggregator's dictionary.",
	}, func() float64 { return float64(a.Stats().Stacks) })
	late := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tandem_encoder_aggregator_late_locations",
		Help: "Native locations flushed unnamed because their executable had not reached the encoder, waiting to be named when it does (at most 65536).",
	}, func() float64 { return float64(a.Stats().LateLocations) })
	if err := prom.Register(reg, "aggregator", m.batches, m.samples, m.rejected, m.compactions, m.linked, m.linksDropped, m.lateNotRetried, entries, stacks, late); err != nil {
		return nil, err
	}
	return m, nil
}

// Stats describes the Aggregator's current state.
type Stats struct {
	Generation                                      uint64
	Strings, Mappings, Functions, Locations, Stacks int
	LabelSets, Resources                            int
	PendingSamples, PendingEvents                   int
	// LateLocations are native locations waiting for their executable.
	LateLocations int
}

// Stats returns the current dictionary sizes and pending work.
func (a *Aggregator) Stats() Stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return Stats{
		Generation:     a.generation,
		Strings:        len(a.d.strings),
		Mappings:       len(a.d.mappings),
		Functions:      len(a.d.functions),
		Locations:      len(a.d.locations),
		Stacks:         len(a.d.stackEnds),
		LabelSets:      len(a.d.labelEnds),
		Resources:      len(a.d.resources),
		PendingSamples: len(a.rows),
		PendingEvents:  len(a.events),
		LateLocations:  a.late.n,
	}
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidBatch}, args...)...)
}

// resetMap returns m as n unset entries, reusing its storage.
func resetMap(m []uint32, n int) []uint32 { return extendUnset(m[:0], n) }

// Add aggregates the samples of b, sent by the session hello describes.
// Neither is retained: b may be reused as soon as Add returns. A batch that
// references an index outside its tables is rejected whole with an error
// wrapping ErrInvalidBatch.
func (a *Aggregator) Add(hello *schema.Hello, b *schema.Batch) error {
	if hello == nil || b == nil {
		return invalid("nil hello or batch")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.add(hello, b); err != nil {
		a.metrics.rejected.Inc()
		return err
	}
	a.metrics.batches.Inc()
	a.metrics.samples.Add(float64(len(b.Samples)))
	return nil
}

func (a *Aggregator) add(hello *schema.Hello, b *schema.Batch) error {
	var m *idMaps
	if b.Dictionary != nil {
		// Layout 2: the tables are the stream's dictionary (tens of
		// thousands of entries), so nothing here may cost their length.
		m = &a.streamMapsFor(b).idMaps
	} else {
		m = &a.batchMaps
		m.truncate()
		m.cover(b)
		a.frameHash = slices.Grow(a.frameHash[:0], len(b.Frames))[:len(b.Frames)]
		clear(a.frameHash)
	}
	// Views of b's extent: a stream's maps may cover more of the
	// dictionary than b's tables do.
	a.strMap, a.mapMap = m.strs[:len(b.Strings)], m.mappings[:len(b.Mappings)+1]
	a.frameMap, a.stackMap = m.frames[:len(b.Frames)], m.stacks[:len(b.StackEnds)]
	a.procMap = resetMap(a.procMap, len(b.Processes))
	node := a.d.internString(hello.NodeName)
	hz := hello.SamplingFrequencyHz

	// Pass 1 translates every sample to its key, so that an invalid index
	// rejects the batch before any sample is aggregated. (Dictionary
	// entries it created are harmless: unused, they are pruned.)
	keys := a.keys[:0]
	for i := range b.Samples {
		s := &b.Samples[i]
		stack, err := a.stackID(b, s.Stack)
		if err != nil {
			return fmt.Errorf("sample %d: %w", i, err)
		}
		// Here, not where the stack is first translated: a layout-2
		// translation outlives the interval.
		a.d.stackUsed[stack] = a.epoch
		res, err := a.resourceID(b, s.Process, node)
		if err != nil {
			return fmt.Errorf("sample %d: %w", i, err)
		}
		tn, err := a.stringID(b, s.ThreadName)
		if err != nil {
			return fmt.Errorf("sample %d thread name: %w", i, err)
		}
		a.d.stringUsed[tn] = a.epoch
		if s.Link != 0 && int64(s.Link) > int64(len(b.Links)) {
			return invalid("sample %d: link %d of %d", i, s.Link, len(b.Links))
		}
		var labels uint32
		if len(s.Labels) > 0 {
			if labels, err = a.labelsID(b, s.Labels); err != nil {
				return fmt.Errorf("sample %d labels: %w", i, err)
			}
		}
		keys = append(keys, rowKey{
			stack: stack, resource: res, hz: hz, tid: s.TID, cpu: s.CPU,
			threadName: tn, labels: labels, origin: s.Origin,
		})
	}
	a.keys = keys

	// Pass 2: one map lookup and one append per sample (and a link lookup
	// per linked sample).
	for i := range keys {
		s := &b.Samples[i]
		if s.Link != 0 {
			keys[i].link = a.linkID(b.Links[s.Link-1])
		}
		r := a.rowID(&keys[i])
		a.counts[r]++
		a.events = append(a.events, event{ts: s.TimestampUnixNano, value: s.Value, row: r})
		if len(a.events) == 1 || s.TimestampUnixNano < a.minTS {
			a.minTS = s.TimestampUnixNano
		}
		if len(a.events) == 1 || s.TimestampUnixNano > a.maxTS {
			a.maxTS = s.TimestampUnixNano
		}
	}
	return nil
}

// linkID returns the interval's index of link l, adding it while the
// interval holds fewer than MaxLinksPerFlush links; 0 (no link) beyond
// that, counted.
func (a *Aggregator) linkID(l schema.TraceLink) uint16 {
	if !l.IsValid() {
		return 0
	}
	a.metrics.linked.Inc()
	if id, ok := a.linkIDs[l]; ok {
		return id
	}
	if len(a.links) > a.cfg.MaxLinksPerFlush {
		a.linksDropped++
		a.metrics.linksDropped.Inc()
		return 0
	}
	id := uint16(len(a.links))
	a.links = append(a.links, l)
	a.linkIDs[l] = id
	return id
}

// hash hashes a row key for rowSlots.
func (k *rowKey) hash() uint64 {
	h := mix(uint64(k.stack)<<32|uint64(k.resource), uint64(k.tid)<<32|uint64(k.cpu))
	h = mix(h, uint64(k.threadName)<<32|uint64(k.labels))
	// hz fills bits 8-39 and the origin the low byte; the link the top 16.
	return mix(h, uint64(k.link)<<48|uint64(k.hz)<<8|uint64(k.origin))
}

// rowID returns the row of k, adding it. rowSlots is an open-addressing
// (linear probing) table of row ids, at most half full: a lookup costs a
// slot and the row it names, where a Go map hashed the 32-byte key with
// its generic hash.
func (a *Aggregator) rowID(k *rowKey) uint32 {
	if 2*(len(a.rows)+1) > len(a.rowSlots) {
		a.growRows()
	}
	mask := uint64(len(a.rowSlots) - 1)
	for i := k.hash() & mask; ; i = (i + 1) & mask {
		slot := a.rowSlots[i]
		if slot == 0 {
			r := uint32(len(a.rows))
			a.rows = append(a.rows, *k)
			a.counts = append(a.counts, 0)
			a.rowSlots[i] = r + 1
			return r
		}
		if a.rows[slot-1] == *k {
			return slot - 1
		}
	}
}

// growRows doubles rowSlots (at least 1024 slots) and reinserts the rows.
func (a *Aggregator) growRows() {
	n := max(1024, 2*len(a.rowSlots))
	a.rowSlots = make([]uint32, n)
	mask := uint64(n - 1)
	for r := range a.rows {
		i := a.rows[r].hash() & mask
		for a.rowSlots[i] != 0 {
			i = (i + 1) & mask
		}
		a.rowSlots[i] = uint32(r) + 1
	}
}

func (a *Aggregator) stringID(b *schema.Batch, i uint32) (uint32, error) {
	if int(i) >= len(a.strMap) {
		return 0, invalid("string %d of %d", i, len(a.strMap))
	}
	if id := a.strMap[i]; id != unset {
		return id, nil
	}
	id := a.d.internString(b.Strings[i])
	a.strMap[i] = id
	return id, nil
}

func (a *Aggregator) mappingID(b *schema.Batch, i uint32) (uint32, error) {
	if int(i) >= len(a.mapMap) {
		return 0, invalid("mapping %d of %d", i, len(b.Mappings))
	}
	if id := a.mapMap[i]; id != unset {
		return id, nil
	}
	bm := &b.Mappings[i-1] // i > 0: callers handle "no mapping"
	m := Mapping{FileID: bm.FileID, Start: bm.Start, End: bm.End, FileOffset: bm.FileOffset}
	var err error
	if m.FileName, err = a.stringID(b, bm.FileName); err != nil {
		return 0, err
	}
	if m.Path, err = a.stringID(b, bm.Path); err != nil {
		return 0, err
	}
	if m.GNUBuildID, err = a.stringID(b, bm.GNUBuildID); err != nil {
		return 0, err
	}
	if m.GoBuildID, err = a.stringID(b, bm.GoBuildID); err != nil {
		return 0, err
	}
	id := a.d.internMapping(m)
	a.mapMap[i] = id
	return id, nil
}

func (a *Aggregator) frameID(b *schema.Batch, i uint32) (uint32, error) {
	if int(i) >= len(a.frameMap) {
		return 0, invalid("frame %d of %d", i, len(a.frameMap))
	}
	if id := a.frameMap[i]; id != unset {
		return id, nil
	}
	f := &b.Frames[i]
	loc := Location{
		Address: f.AddressOrLine,
		Line:    f.SourceLine,
		Column:  f.SourceColumn,
		Kind:    f.Kind,
		Error:   f.Error,
	}
	var err error
	if f.Mapping != 0 {
		if loc.Mapping, err = a.mappingID(b, f.Mapping); err != nil {
			return 0, fmt.Errorf("frame %d: %w", i, err)
		}
	}
	if f.FunctionName != 0 || f.SourceFile != 0 {
		var fn Function
		if fn.Name, err = a.stringID(b, f.FunctionName); err != nil {
			return 0, fmt.Errorf("frame %d function: %w", i, err)
		}
		if fn.File, err = a.stringID(b, f.SourceFile); err != nil {
			return 0, fmt.Errorf("frame %d file: %w", i, err)
		}
		loc.Function = a.d.internFunction(fn)
	}
	id := a.d.internLocation(loc)
	a.frameMap[i] = id
	return id, nil
}

func (a *Aggregator) stackID(b *schema.Batch, i uint32) (uint32, error) {
	if int(i) >= len(a.stackMap) {
		return 0, invalid("stack %d of %d", i, len(a.stackMap))
	}
	if id := a.stackMap[i]; id != unset {
		return id, nil
	}
	start := uint32(0)
	if i > 0 {
		start = b.StackEnds[i-1]
	}
	end := b.StackEnds[i]
	if start > end || int(end) > len(b.StackFrames) {
		return 0, invalid("stack %d spans [%d, %d) of %d frames", i, start, end, len(b.StackFrames))
	}
	frames := b.StackFrames[start:end]
	// A layout-2 batch's translations persist (streamdict.go): the
	// cross-batch fast path is for layouts 0 and 1.
	persistent := b.Dictionary != nil
	var h uint64
	if !persistent {
		id, wh, ok, err := a.fastStack(b, frames)
		if err != nil {
			return 0, fmt.Errorf("stack %d: %w", i, err)
		}
		if ok {
			a.stackMap[i] = id
			return id, nil
		}
		h = wh
	}
	locs := a.locScratch[:0]
	for _, fi := range frames {
		l, err := a.frameID(b, fi)
		if err != nil {
			return 0, fmt.Errorf("stack %d: %w", i, err)
		}
		locs = append(locs, l)
	}
	a.locScratch = locs
	id := a.d.internStack(locs)
	a.stackMap[i] = id
	if !persistent {
		a.stackCache[h] = id
	}
	return id, nil
}

// labelsID interns a label set in canonical (key-sorted) order.
func (a *Aggregator) labelsID(b *schema.Batch, kvs []schema.KeyValue) (uint32, error) {
	out := a.kvScratch[:0]
	for _, kv := range kvs {
		k, err := a.stringID(b, kv.Key)
		if err != nil {
			return 0, err
		}
		v, err := a.stringID(b, kv.Value)
		if err != nil {
			return 0, err
		}
		out = append(out, KeyValue{Key: k, Value: v})
	}
	// Canonical order by key content, so that ids do not depend on
	// the order in which strings were first seen.
	strs := a.d.strings
	slices.SortFunc(out, func(x, y KeyValue) int {
		if c := compareStrings(strs[x.Key], strs[y.Key]); c != 0 {
			return c
		}
		return compareStrings(strs[x.Value], strs[y.Value])
	})
	a.kvScratch = out
	id := a.d.internLabels(out)
	a.d.labelUsed[id] = a.epoch
	return id, nil
}

func compareStrings(x, y string) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// sessionResource is a Resource with only the session's fields set (the
// ProcessFields whose value is not the process's).
func sessionResource(node uint32) Resource { return Resource{NodeName: node} }

func (a *Aggregator) resourceID(b *schema.Batch, i uint32, node uint32) (uint32, error) {
	if int(i) >= len(a.procMap) {
		return 0, invalid("process %d of %d", i, len(a.procMap))
	}
	if id := a.procMap[i]; id != unset {
		return id, nil
	}
	p := &b.Processes[i]
	if id, ok := a.fastResource(b, p, node); ok {
		a.d.resourceUsed[id] = a.epoch
		a.procMap[i] = id
		return id, nil
	}
	r := sessionResource(node)
	for f := range ProcessFields {
		pf := &ProcessFields[f]
		dst, err := &r.fields()[f], error(nil)
		switch {
		case pf.FromSession():
		case pf.Kind == FieldNumber:
			*dst = batchValue(p, f)
		case pf.Kind == FieldString:
			*dst, err = a.stringID(b, batchValue(p, f))
		case pf.Kind == FieldLabelSet:
			if kvs := pf.batchSet(p); len(kvs) > 0 {
				*dst, err = a.labelsID(b, kvs)
			}
		}
		if err != nil {
			return 0, fmt.Errorf("process %d %s: %w", i, pf.Name, err)
		}
	}
	id := a.d.internResource(r)
	a.d.resourceUsed[id] = a.epoch
	a.procMap[i] = id
	a.procCache[p.PID] = id
	return id, nil
}

// Flush returns the interval's samples as an immutable snapshot and starts
// a new interval at now. The snapshot covers [previous flush, now], widened
// to include every sample timestamp; the first interval starts at its oldest
// sample. An interval without samples yields an empty Flush.
func (a *Aggregator) Flush(now time.Time) *Flush {
	a.mu.Lock()
	defer a.mu.Unlock()

	f := a.spare
	a.spare = nil
	if f == nil {
		f = &Flush{}
	}
	f.owner = a
	a.symbolizeNew()
	d := a.d
	f.resolveWorkloads(a.cfg.Workloads, d, a.epoch)
	f.Generation = a.generation
	f.Strings = d.strings[:len(d.strings):len(d.strings)]
	f.Mappings = d.mappings[:len(d.mappings):len(d.mappings)]
	f.Functions = d.functions[:len(d.functions):len(d.functions)]
	f.Locations = d.locations[:len(d.locations):len(d.locations)]
	f.StackLocations = d.stackLocs[:len(d.stackLocs):len(d.stackLocs)]
	f.StackEnds = d.stackEnds[:len(d.stackEnds):len(d.stackEnds)]
	f.LabelKVs = d.labelKVs[:len(d.labelKVs):len(d.labelKVs)]
	f.LabelEnds = d.labelEnds[:len(d.labelEnds):len(d.labelEnds)]
	f.Resources = d.resources[:len(d.resources):len(d.resources)]
	f.NativeLineTable = d.lines[:len(d.lines):len(d.lines)]
	f.NativeLineEnds = d.lineEnds[:len(d.lineEnds):len(d.lineEnds)]

	// Group events by row with a counting sort that keeps arrival order.
	n := len(a.rows)
	a.starts = slices.Grow(a.starts[:0], n)[:n]
	off := uint32(0)
	for r, c := range a.counts {
		a.starts[r] = off
		off += c
	}
	total := len(a.events)
	f.ts = slices.Grow(f.ts[:0], total)[:total]
	f.vals = slices.Grow(f.vals[:0], total)[:total]
	for _, ev := range a.events {
		pos := a.starts[ev.row]
		f.ts[pos] = ev.ts
		f.vals[pos] = ev.value
		a.starts[ev.row] = pos + 1
	}
	f.Samples = slices.Grow(f.Samples[:0], n)[:n]
	for r, k := range a.rows {
		end := a.starts[r]
		start := end - a.counts[r]
		f.Samples[r] = Sample{
			Stack: k.stack, Resource: k.resource, Origin: k.origin, FrequencyHz: k.hz,
			TID: k.tid, CPU: k.cpu, ThreadName: k.threadName, Labels: k.labels, Link: uint32(k.link),
			Timestamps: f.ts[start:end:end],
			Values:     f.vals[start:end:end],
		}
	}
	f.Events = total
	// Copied: the interval's table is reused from the next Add on.
	f.Links = append(f.Links[:0], a.links...)
	f.DroppedLinks = a.linksDropped

	end := now.UnixNano()
	start := a.intervalStart
	if total > 0 {
		if start == 0 || a.minTS < start {
			start = a.minTS
		}
		end = max(end, a.maxTS)
	} else if start == 0 {
		start = end
	}
	f.StartUnixNano, f.EndUnixNano = start, max(start, end)

	clear(a.rowSlots)
	a.links = a.links[:1]
	clear(a.linkIDs)
	a.linksDropped = 0
	a.rows = a.rows[:0]
	a.counts = a.counts[:0]
	a.events = a.events[:0]
	a.intervalStart = f.EndUnixNano
	a.sweepStreamMaps(a.epoch)
	a.epoch++
	a.maybeCompact()
	return f
}

// maybeCompact prunes the dictionaries when enough of their roots have not
// been used for DictionaryTTL flushes. It runs between intervals, when no
// pending sample references a dictionary id.
func (a *Aggregator) maybeCompact() {
	if a.epoch <= uint32(a.cfg.DictionaryTTL) {
		return
	}
	minEpoch := a.epoch - uint32(a.cfg.DictionaryTTL)
	stale, total := a.d.staleRoots(minEpoch)
	if stale < a.minStale || stale*4 < total {
		return
	}
	a.d = a.d.compact(minEpoch)
	a.forgetLate()
	a.generation++
	clear(a.stackCache)
	clear(a.procCache)
	a.metrics.compactions.Inc()
}

// Release hands a Flush's memory back to the Aggregator that produced it,
// for reuse by a later Flush. The caller must be done with f and everything
// reachable from it. Release is optional.
func (a *Aggregator) Release(f *Flush) {
	if f == nil || f.owner != a {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	clear(f.workloads)
	*f = Flush{
		Samples:   f.Samples[:0],
		Links:     f.Links[:0],
		ts:        f.ts[:0],
		vals:      f.vals[:0],
		workloads: f.workloads,
	}
	a.spare = f
}
