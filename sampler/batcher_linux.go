package sampler

import (
	"cmp"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"
	"unique"

	"go.opentelemetry.io/ebpf-profiler/libpf"

	"github.com/tandem-profiler/tandem/schema"
)

// Per-item size estimates of the encoded batch (Cap'n Proto words plus
// list pointers), used to flush before a batch grows past BatchMaxBytes.
const (
	estFrame   = 48
	estMapping = 72
	estProcess = 64
	estSample  = 64
	estLabel   = 8
	estLink    = 28
	estString  = 16 // plus the string's length
)

// drainChunk is how many entries the batcher takes from the queue per lock
// hold.
const drainChunk = 512

// maxPendingLossReports bounds the loss reports the sink holds
// unacknowledged (it never drops them). While one is pending, new losses
// fold into the next report: an encoder stopped for ever costs one small
// frame, however many batches are evicted meanwhile.
const maxPendingLossReports = 1

// batcher turns queued trace entries into encoded schema batches (protocol
// 1.4: layout-2 batches and the dictionary chunks they need). It runs on
// one goroutine (run); nothing in it is safe for concurrent use except
// lastSeq.
type batcher struct {
	cfg    *Config
	queue  *dropQueue[traceEntry]
	sink   Sink
	logger *slog.Logger
	m      *samplerMetrics
	procs  *processCache

	// dict, frameIdx and mappingIdx last for a dictionary generation:
	// frames and mappings the tracer reported map to dictionary ids.
	dict       *sessionDict
	frameIdx   map[unique.Handle[libpf.Frame]]uint32
	mappingIdx map[libpf.FrameMapping]uint32
	// batch holds the processes and samples of the batch being built; its
	// references are dictionary ids. procIdx maps a pid to its process in
	// the batch (processes stay batch-local: they are cheap and change).
	batch    schema.Batch
	procIdx  map[uint32]uint32
	stackBuf []uint32
	labelBuf []labelPair
	drainBuf []traceEntry
	est      int // estimated encoded size of the batch and its chunk

	lastSeq atomic.Uint64

	// isEncoder tells the encoder's traces (Sink.IsEncoder); nil when
	// they are kept (Config.KeepEncoderSamples). The encoder's traces are
	// left out (counted), on-CPU and off-CPU: every batch it reads makes
	// its threads wake, work and wait, so that it profiled itself in
	// proportion to what it was sent (30% of the off-CPU samples in
	// test/vm), not to what the node's workloads did. They are told at
	// drain, not when reported, so that an encoder that was starting
	// when they were queued is known (Sink.EncoderStarting).
	isEncoder func(pid uint32) bool

	// onCycle, when set, runs before every loss report (parked
	// executables); droppedDescriptors, when set, returns the cumulative
	// count of executable descriptors closed unsent.
	onCycle            func()
	droppedDescriptors func() uint64

	// stopping makes the last cycle report its losses whatever is
	// pending: nothing would report them later.
	stopping bool

	// Losses counted (cumulative) and reported so far, to report only the
	// news.
	encodeLost          uint64 // samples of batches that failed to encode
	countedQueue        queueStats
	reportedQueue       queueStats
	reportedLost        SinkStats
	reportedEncodeLost  uint64
	reportedDescriptors uint64
}

func newBatcher(cfg *Config, queue *dropQueue[traceEntry], sink Sink, logger *slog.Logger, m *samplerMetrics) *batcher {
	bt := &batcher{
		cfg:        cfg,
		queue:      queue,
		sink:       sink,
		logger:     logger,
		m:          m,
		procs:      newProcessCache(),
		dict:       newSessionDict(),
		frameIdx:   make(map[unique.Handle[libpf.Frame]]uint32),
		mappingIdx: make(map[libpf.FrameMapping]uint32),
		procIdx:    make(map[uint32]uint32),
	}
	bt.procs.m = m
	return bt
}

// run batches until stop is closed, then drains the queue, flushes and
// returns.
func (bt *batcher) run(stop <-chan struct{}) {
	flush := time.NewTicker(bt.cfg.FlushInterval)
	defer flush.Stop()
	sweep := time.NewTicker(bt.cfg.ProcessSweepInterval)
	defer sweep.Stop()
	for {
		select {
		case <-stop:
			bt.stopping = true
			bt.cycle(true)
			return
		case <-flush.C:
			bt.cycle(true)
		case <-bt.queue.wake:
			bt.cycle(false)
		case <-sweep.C:
			if n := bt.procs.sweep(); n > 0 {
				bt.m.processesEvicted.Add(uint64(n))
			}
			bt.m.processesCached.Set(float64(bt.procs.len()))
		}
	}
}

// cycle classifies everything queued, flushes full batches (and the
// partial one when flushAll), and reports new losses.
func (bt *batcher) cycle(flushAll bool) {
	// While a socket-activated encoder starts, its first traces cannot be
	// told apart yet: they wait in the queue (bounded, losses counted).
	hold := bt.isEncoder != nil && !bt.stopping && bt.sink.EncoderStarting()
	for !hold {
		// Drain in chunks: a producer never waits for more than one
		// chunk's copy.
		bt.drainBuf = bt.queue.DrainN(bt.drainBuf[:0], drainChunk)
		if len(bt.drainBuf) == 0 {
			break
		}
		for i := range bt.drainBuf {
			if bt.isEncoder != nil && bt.isEncoder(bt.drainBuf[i].pid) {
				bt.m.encoderTraces.Inc()
			} else {
				bt.add(&bt.drainBuf[i])
			}
			bt.drainBuf[i] = traceEntry{} // release references
			if len(bt.batch.Samples) >= bt.cfg.BatchMaxSamples || bt.est >= bt.cfg.BatchMaxBytes {
				bt.flush()
			}
		}
	}
	if flushAll && len(bt.batch.Samples) > 0 {
		bt.flush()
	}
	if bt.onCycle != nil {
		bt.onCycle()
	}
	bt.reportLosses()
	st := bt.queue.Stats()
	bt.m.queueBytes.Set(float64(st.Bytes))
}

// str interns s in the dictionary and accounts for its size when new.
func (bt *batcher) str(s string) uint32 {
	s = bt.m.bound(s, maxTextBytes)
	i, isNew := bt.dict.String(s)
	if isNew {
		bt.est += estString + len(s)
	}
	return i
}

// labelPair is a sample label before interning.
type labelPair struct{ k, v string }

// add classifies one trace into the batch being built.
func (bt *batcher) add(e *traceEntry) {
	bt.stackBuf = bt.stackBuf[:0]
	for _, h := range e.frames {
		idx, ok := bt.frameIdx[h]
		if !ok {
			f := h.Value()
			var isNew bool
			idx, isNew = bt.dict.Frame(bt.frame(&f))
			if isNew {
				bt.est += estFrame
			}
			bt.frameIdx[h] = idx
		}
		bt.stackBuf = append(bt.stackBuf, idx)
	}
	stack, isNew := bt.dict.Stack(bt.stackBuf)
	if isNew {
		bt.est += 4*len(bt.stackBuf) + 4
	}

	proc, ok := bt.procIdx[e.pid]
	if !ok {
		proc = bt.process(e)
		bt.procIdx[e.pid] = proc
	}

	s := schema.Sample{
		TimestampUnixNano: e.timestamp,
		Origin:            schema.Origin(e.origin),
		Value:             sampleValue(e.origin, e.value),
		Process:           proc,
		TID:               e.tid,
		CPU:               e.cpu,
		ThreadName:        bt.str(bt.m.bound(e.comm.String(), maxLabelBytes)),
		Stack:             stack,
	}
	if len(e.labels) > 0 {
		bt.labelBuf = bt.labelBuf[:0]
		for k, v := range e.labels {
			bt.labelBuf = append(bt.labelBuf, labelPair{bt.m.bound(k.String(), maxLabelBytes), bt.m.bound(v.String(), maxLabelBytes)})
		}
		// Deterministic order: by key string.
		slices.SortFunc(bt.labelBuf, func(a, b labelPair) int { return cmp.Compare(a.k, b.k) })
		s.Labels = make([]schema.KeyValue, len(bt.labelBuf))
		for i, l := range bt.labelBuf {
			s.Labels[i] = schema.KeyValue{Key: bt.str(l.k), Value: bt.str(l.v)}
		}
		bt.est += estLabel * len(s.Labels)
	}
	if e.link.IsValid() {
		bt.batch.Links = append(bt.batch.Links, e.link)
		s.Link = uint32(len(bt.batch.Links))
		bt.est += estLink
		bt.m.linkedSamples.Inc()
	}
	bt.batch.Samples = append(bt.batch.Samples, s)
	bt.est += estSample
}

// sampleValue is the sample's value: nanoseconds for off-CPU samples, a
// count of 1 otherwise (the tracer leaves Value 0 for CPU and probe
// samples).
func sampleValue(o libpf.Origin, v int64) int64 {
	if schema.Origin(o) == schema.OriginOffCPU || v != 0 {
		return v
	}
	return 1
}

// frame converts a tracer frame into the stream's form.
func (bt *batcher) frame(f *libpf.Frame) schema.Frame {
	sf := classifyFrame(f)
	if f.Mapping.Valid() {
		idx, ok := bt.mappingIdx[f.Mapping]
		if !ok {
			md := f.Mapping.Value()
			file := md.File.Value()
			var isNew bool
			idx, isNew = bt.dict.Mapping(schema.Mapping{
				FileName:   bt.str(file.FileName.String()),
				GNUBuildID: bt.str(file.GnuBuildID),
				GoBuildID:  bt.str(file.GoBuildID),
				FileID:     schema.FileID{Hi: file.FileID.Hi(), Lo: file.FileID.Lo()},
				Start:      uint64(md.Start),
				End:        uint64(md.End),
				FileOffset: md.FileOffset,
			})
			if isNew {
				bt.est += estMapping
			}
			bt.mappingIdx[f.Mapping] = idx
		}
		sf.Mapping = idx
	}
	sf.FunctionName = bt.str(f.FunctionName.String())
	sf.SourceFile = bt.str(f.SourceFile.String())
	return sf
}

// classifyFrame fills the fields of a stream frame that need no string or
// mapping table: kind, error bit, address or line, source position.
func classifyFrame(f *libpf.Frame) schema.Frame {
	return schema.Frame{
		Kind:           schema.FrameKind(f.Type.Interpreter()),
		Error:          f.Type.IsError(),
		AddressOrLine:  uint64(f.AddressOrLineno),
		SourceLine:     clampU32(uint64(f.SourceLine)),
		SourceColumn:   clampU32(uint64(f.SourceColumn)),
		FunctionOffset: f.FunctionOffset,
	}
}

func clampU32(v uint64) uint32 {
	if v > 1<<32-1 {
		return 1<<32 - 1
	}
	return uint32(v)
}

// process adds the entry's process with its labels to the batch (its
// strings to the dictionary).
func (bt *batcher) process(e *traceEntry) uint32 {
	p := bt.procs.get(e)
	sp := schema.Process{
		PID:            e.pid,
		Comm:           bt.str(p.comm),
		ExecutablePath: bt.str(p.exe),
		ContainerID:    bt.str(p.containerID),
		SystemdUnit:    bt.str(p.unit),
		ServiceName:    bt.str(p.service),
	}
	if len(p.env) > 0 {
		sp.EnvVars = make([]schema.KeyValue, len(p.env))
		for i, kv := range p.env {
			sp.EnvVars[i] = schema.KeyValue{Key: bt.str(kv.k), Value: bt.str(kv.v)}
		}
	}
	bt.est += estProcess + estLabel*len(sp.EnvVars)
	bt.batch.Processes = append(bt.batch.Processes, sp)
	return uint32(len(bt.batch.Processes) - 1)
}

// flush hands the sink the batch's dictionary chunk (the entries it
// defined, if any), then the batch, which needs every chunk of its
// generation so far, and starts a new batch; at a cap, also a new
// generation.
func (bt *batcher) flush() {
	samples := len(bt.batch.Samples)
	d := bt.dict
	if !d.chunk.Empty() {
		payload, err := schema.EncodeDictionaryChunk(&d.chunk, nil)
		if err == nil {
			err = bt.sink.SendDictionary(d.gen, payload)
		}
		if err != nil {
			// The batch cannot be read without the chunk, nor can later
			// batches that reuse its entries: they go to a new
			// generation.
			bt.logger.Error("dictionary chunk not sent: the batch is lost, a new dictionary generation starts", "err", err,
				"samples", samples, "generation", d.gen)
			bt.encodeFailed(samples)
			bt.resetBatch()
			bt.newGeneration()
			return
		}
		d.sent(len(payload))
		bt.m.dictionaryChunks.Inc()
		bt.m.dictionaryBytes.Set(float64(d.bytes))
	}
	seq := bt.lastSeq.Load() + 1
	bt.batch.Sequence, bt.batch.Generation = seq, d.gen
	payload, err := schema.EncodeDictionaryBatch(&bt.batch, nil)
	need := DictionaryNeed{Generation: d.gen, Chunks: d.chunks}
	bt.resetBatch()
	// The handle maps count too: several tracer frames (or mappings) may
	// share one dictionary entry, and the maps keep their handles alive.
	if d.full() || len(bt.frameIdx) >= d.maxEntries || len(bt.mappingIdx) >= d.maxEntries {
		bt.newGeneration()
	}
	if err != nil {
		bt.logger.Error("encode batch", "err", err, "samples", samples)
		bt.encodeFailed(samples)
		return
	}
	bt.lastSeq.Store(seq)
	bt.sink.SendReliable(seq, MessageBatch, payload, samples, need)
	bt.m.batches.Inc()
	bt.m.batchSamples.Add(uint64(samples))
	bt.m.batchBytes.Add(uint64(len(payload)))
}

// encodeFailed counts the samples of a batch that could not be encoded or
// sent: a bug, not a runtime condition. The loss is reported at the end of
// the cycle.
func (bt *batcher) encodeFailed(samples int) {
	bt.m.classificationLost.Add(uint64(samples))
	bt.encodeLost += uint64(samples)
}

// resetBatch starts a new batch in the same generation.
func (bt *batcher) resetBatch() {
	bt.batch.Reset()
	clear(bt.procIdx)
	bt.est = 0
}

// newGeneration forgets the dictionary: the next batch starts generation
// g+1 with empty tables. The previous generation's chunks live on in the
// sink for as long as its batches wait for acknowledgement.
func (bt *batcher) newGeneration() {
	bt.dict.newGeneration()
	clear(bt.frameIdx)
	clear(bt.mappingIdx)
	bt.m.dictionaryGenerations.Inc()
	bt.m.dictionaryBytes.Set(0)
}

// reportLosses sends one LossReport with what the queue dropped, what the
// sink lost, the batches that failed to encode and the executable
// descriptors closed unsent since the last report. While
// maxPendingLossReports are unacknowledged it sends nothing: the counts
// are cumulative, so the next report carries them (the last cycle reports
// regardless).
func (bt *batcher) reportLosses() {
	q := bt.queue.Stats()
	if d := q.DroppedItems - bt.countedQueue.DroppedItems; d > 0 {
		bt.m.queueDropped.Add(uint64(d))
		bt.countedQueue = q
	}
	s := bt.sink.Stats()
	if !bt.stopping && s.PendingLossReports >= maxPendingLossReports {
		return
	}
	var losses []schema.Loss
	if d := q.DroppedItems - bt.reportedQueue.DroppedItems; d > 0 {
		losses = append(losses, schema.Loss{
			Stage:   schema.LossSamplerQueue,
			Reason:  "queue_full",
			Samples: d,
			Bytes:   q.DroppedBytes - bt.reportedQueue.DroppedBytes,
		})
		bt.reportedQueue = q
	}
	if s.LostFrames > bt.reportedLost.LostFrames {
		losses = append(losses, schema.Loss{
			Stage:   schema.LossResendBuffer,
			Reason:  "resend_buffer_full",
			Samples: s.LostSamples - bt.reportedLost.LostSamples,
			Bytes:   s.LostBytes - bt.reportedLost.LostBytes,
		})
		bt.reportedLost = s
	}
	if d := bt.encodeLost - bt.reportedEncodeLost; d > 0 {
		losses = append(losses, schema.Loss{Stage: schema.LossClassification, Reason: "encode_failed", Samples: d})
		bt.reportedEncodeLost = bt.encodeLost
	}
	if bt.droppedDescriptors != nil {
		if d := bt.droppedDescriptors(); d > bt.reportedDescriptors {
			losses = append(losses, schema.Loss{
				Stage:       schema.LossExecutableQueue,
				Reason:      "executable_not_delivered",
				Descriptors: d - bt.reportedDescriptors,
			})
			bt.reportedDescriptors = d
		}
	}
	if len(losses) > 0 {
		bt.reportLoss(losses...)
	}
}

func (bt *batcher) reportLoss(losses ...schema.Loss) {
	seq := bt.lastSeq.Load() + 1
	payload, err := schema.EncodeLossReport(&schema.LossReport{Sequence: seq, Losses: losses}, nil)
	if err != nil {
		bt.logger.Error("encode loss report", "err", err)
		return
	}
	bt.lastSeq.Store(seq)
	bt.sink.SendReliable(seq, MessageLoss, payload, 0, DictionaryNeed{})
	bt.m.lossReports.Inc()
}
