package arrow

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
	"github.com/tandem-profiler/tandem/encoder/labels"
	"github.com/tandem-profiler/tandem/schema"
)

// Schema metadata and fixed values (docs/parca-protocols.md §3).
const (
	MetadataSchemaVersion = "parca_write_schema_version"
	SchemaV1              = "v1"
	SchemaV2              = "v2"
	// ColumnLabelsPrefix prefixes v1 label columns.
	ColumnLabelsPrefix = "labels."
	// DefaultProducer is the producer (Parca's profile name) parca-agent
	// writes, so profiles land under the same names.
	DefaultProducer  = "parca_agent"
	temporalityDelta = "delta"
	// durationNanos is the duration parca-agent writes for delta profiles.
	durationNanos = 1_000_000_000
	// poolLimit bounds the free buffers an encoder keeps between flushes.
	poolLimit = 64 << 20
	// ipcOverhead is what the gRPC message adds around an IPC buffer.
	ipcOverhead = 64
)

// ErrTooLarge is returned when a single aggregated sample does not fit in
// Config.MaxMessageBytes.
var ErrTooLarge = errors.New("arrow record larger than the message size limit")

// Config holds an encoder's knobs.
type Config struct {
	// Producer is written to the producer column, which Parca uses as the
	// profile name.
	Producer string
	// MaxMessageBytes bounds each request (the gRPC message around the
	// IPC buffer included): a flush that would exceed it is split into
	// several requests. 0 = no limit.
	MaxMessageBytes int

	_ struct{}
}

// DefaultConfig returns the defaults: producer parca_agent, no size limit.
func DefaultConfig() Config { return Config{Producer: DefaultProducer} }

// Validate reports every problem with the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.Producer == "" {
		errs = append(errs, errors.New("producer must not be empty"))
	}
	if c.MaxMessageBytes < 0 || (c.MaxMessageBytes > 0 && c.MaxMessageBytes < 4*ipcOverhead) {
		errs = append(errs, fmt.Errorf("max message bytes %d: must be 0 (no limit) or at least %d", c.MaxMessageBytes, 4*ipcOverhead))
	}
	return errors.Join(errs...)
}

type sortKey struct {
	key uint64 // thread id << 32 | cpu
	idx int32  // sample index, the tie-breaker
}

func compareSortKeys(x, y sortKey) int {
	if x.key != y.key {
		return cmp.Compare(x.key, y.key)
	}
	return cmp.Compare(x.idx, y.idx)
}

type typeKey struct {
	origin schema.Origin
	hz     uint32
}

// base is what both encoders share: sample order, sample types, labels,
// frame resolution and the IPC writer.
type base struct {
	cfg     Config
	v1      bool
	labeler Labeler
	mem     memory.Allocator
	b       *builder
	frames  frameCache

	types      []typeKey
	sampleType []aggregate.SampleType
	rowType    []int32 // per sample index
	order      []int32 // kept samples (indices into Flush.Samples), by (type, resource)
	nrows      []int32 // per position in order: the sample's events
	lbls       []Label // the Labeler's output for one sample
	labels     labelCols
	bucket     []int32
	keyed      []sortKey
	packed     []uint64
	segCopy    []int32
	lastSize   int
}

func newBase(cfg Config, v1 bool, labeler Labeler, mem memory.Allocator) (base, error) {
	if err := cfg.Validate(); err != nil {
		return base{}, fmt.Errorf("arrow encoder config: %w", err)
	}
	if labeler == nil {
		l, err := labels.New(labels.Config{}, nil)
		if err != nil {
			return base{}, fmt.Errorf("arrow encoder's default labeler: %w", err)
		}
		labeler = l
	}
	if mem == nil {
		mem = newPool(poolLimit)
	}
	return base{
		cfg: cfg, v1: v1, labeler: labeler, mem: mem, b: newBuilder(mem),
		frames: frameCache{v1: v1},
	}, nil
}

// prepare computes the sample types and the row order of f, then labels
// each sample in that order, building the label columns. Rows are grouped
// by sample type and process, then ordered by thread and CPU (sortBucket),
// so that the run-end encoded columns stay short.
func (e *base) prepare(f *aggregate.Flush) {
	e.frames.begin(f)
	e.types = e.types[:0]
	e.sampleType = e.sampleType[:0]
	e.rowType = e.rowType[:0]
	for i := range f.Samples {
		s := &f.Samples[i]
		k := typeKey{origin: s.Origin, hz: s.FrequencyHz}
		t := slices.Index(e.types, k)
		if t < 0 {
			t = len(e.types)
			e.types = append(e.types, k)
			e.sampleType = append(e.sampleType, e.sampleTypeOf(k))
		}
		e.rowType = append(e.rowType, int32(t))
	}
	// Counting sort by (type, resource), keeping flush order within.
	nt := len(e.types)
	nb := nt*len(f.Resources) + 1
	e.bucket = slices.Grow(e.bucket[:0], nb)[:nb]
	clear(e.bucket)
	for i := range f.Samples {
		e.bucket[int(e.rowType[i])*len(f.Resources)+int(f.Samples[i].Resource)+1]++
	}
	for i := 1; i < nb; i++ {
		e.bucket[i] += e.bucket[i-1]
	}
	n := len(f.Samples)
	e.order = slices.Grow(e.order[:0], n)[:n]
	for i := range f.Samples {
		b := int(e.rowType[i])*len(f.Resources) + int(f.Samples[i].Resource)
		e.order[e.bucket[b]] = int32(i)
		e.bucket[b]++
	}
	// Within a (type, process) bucket, order by thread then CPU (then
	// flush order): the thread_id, thread_name and cpu columns then have
	// runs instead of a value per sample (fewer dictionary lookups, less to
	// compress).
	start := 0
	for b := range nb - 1 {
		end := int(e.bucket[b])
		if end-start > 1 {
			e.sortBucket(f, e.order[start:end])
		}
		start = end
	}
	// Labels in row order; samples the Labeler drops leave the order.
	e.labels.reset()
	e.nrows = e.nrows[:0]
	kept := 0
	for _, i := range e.order {
		s := &f.Samples[i]
		lbls, keep := e.labeler.Labels(e.lbls[:0], f, s)
		e.lbls = lbls[:0]
		if !keep {
			continue
		}
		e.order[kept] = i
		kept++
		n := int32(len(s.Timestamps))
		e.nrows = append(e.nrows, n)
		e.labels.add(lbls, n)
	}
	e.order = e.order[:kept]
	e.labels.finish()
}

// Packed sort keys: thread id, CPU and position in the bucket in one
// uint64, so that a bucket sorts as plain integers.
const (
	packPosBits = 20
	packCPUBits = 32 - packPosBits
)

// sortBucket orders seg (sample indices in flush order) by thread, then
// CPU, then flush order.
func (e *base) sortBucket(f *aggregate.Flush, seg []int32) {
	if len(seg) <= 1<<packPosBits {
		keys := e.packed[:0]
		for pos, i := range seg {
			s := &f.Samples[i]
			if s.CPU >= 1<<packCPUBits {
				break
			}
			keys = append(keys, uint64(s.TID)<<32|uint64(s.CPU)<<packPosBits|uint64(pos))
		}
		e.packed = keys
		if len(keys) == len(seg) {
			slices.Sort(keys)
			e.segCopy = append(e.segCopy[:0], seg...)
			for k, key := range keys {
				seg[k] = e.segCopy[key&(1<<packPosBits-1)]
			}
			return
		}
	}
	keyed := e.keyed[:0]
	for _, i := range seg {
		s := &f.Samples[i]
		keyed = append(keyed, sortKey{key: uint64(s.TID)<<32 | uint64(s.CPU), idx: i})
	}
	e.keyed = keyed
	slices.SortFunc(keyed, compareSortKeys)
	for k, sk := range keyed {
		seg[k] = sk.idx
	}
}

func (e *base) sampleTypeOf(k typeKey) aggregate.SampleType {
	st := aggregate.SampleTypeOf(k.origin, k.hz)
	if e.v1 && k.origin == schema.OriginOffCPU && k.hz > 0 {
		// parca-agent's v1 record gives off-CPU the CPU sampling period
		// (its v2 record gives 0).
		st.Period = 1e9 / int64(k.hz)
	}
	return st
}

// labelColumns returns the label names, sorted, and their columns over
// the rows of the samples at positions [lo, hi) of e.order.
func (e *base) labelColumns(lo, hi int) ([]string, []*strRuns) {
	r0 := int32(e.events(0, lo))
	return e.labels.columns(r0, r0+int32(e.events(lo, hi)))
}

// events counts the rows of the samples at positions [lo, hi).
func (e *base) events(lo, hi int) int {
	n := 0
	for _, r := range e.nrows[lo:hi] {
		n += int(r)
	}
	return n
}

// write serializes rec as one IPC stream, into a buffer sized from the
// previous stream (the result is handed to gRPC, so it is not reused).
func (e *base) write(rec arrow.RecordBatch, lz4 bool) ([]byte, error) {
	buf := bytes.NewBuffer(make([]byte, 0, e.lastSize+e.lastSize/8+1024))
	opts := []ipc.Option{ipc.WithSchema(rec.Schema()), ipc.WithAllocator(e.mem)}
	if lz4 {
		opts = append(opts, ipc.WithLZ4())
	}
	w := ipc.NewWriter(buf, opts...)
	if err := w.Write(rec); err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("write arrow record: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("close arrow stream: %w", err)
	}
	e.lastSize = buf.Len()
	return buf.Bytes(), nil
}

// split encodes the samples at positions [lo, hi) of e.order with enc,
// halving the range until every request fits Config.MaxMessageBytes.
func (e *base) split(lo, hi int, enc func(lo, hi int) ([]byte, error), out [][]byte) ([][]byte, error) {
	buf, err := enc(lo, hi)
	if err != nil {
		return out, err
	}
	if e.cfg.MaxMessageBytes == 0 || len(buf)+ipcOverhead <= e.cfg.MaxMessageBytes {
		return append(out, buf), nil
	}
	if hi-lo == 1 {
		return out, fmt.Errorf("%w: one sample takes %d bytes, limit %d", ErrTooLarge, len(buf), e.cfg.MaxMessageBytes)
	}
	h := lo + (hi-lo)/2
	if out, err = e.split(lo, h, enc, out); err != nil {
		return out, err
	}
	return e.split(h, hi, enc, out)
}

func metadata(version string) *arrow.Metadata {
	md := arrow.NewMetadata([]string{MetadataSchemaVersion}, []string{version})
	return &md
}

func newRecord(fields []arrow.Field, version string, cols []arrow.Array, rows int) arrow.RecordBatch {
	return array.NewRecordBatch(arrow.NewSchema(fields, metadata(version)), cols, int64(rows))
}
