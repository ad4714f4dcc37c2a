package ingest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tandem-profiler/tandem/internal/prom"
	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/schema"
)

// Sink consumes decoded stream content. Calls are serialized by the Tracker.
type Sink interface {
	// Batch receives a batch; b is only valid during the call.
	Batch(s *Session, b *schema.Batch)
	// Loss receives a sampler loss report.
	Loss(s *Session, r *schema.LossReport)
	// Executable receives a notice and, on a socket, its descriptor (which
	// the Sink owns and must close); f is nil when none was attached.
	Executable(s *Session, n *schema.ExecutableNotice, f *os.File)
}

// Acker acknowledges a sequence to the sampler (an *ipcserver.Conn).
type Acker interface {
	Ack(seq uint64) error
}

// Session is one sampler run, identified by its Hello's session id.
type Session struct {
	Hello schema.Hello

	received uint64 // highest sequence handed to the Sink
	acked    uint64 // highest sequence acknowledged
	acker    Acker  // current connection, nil when disconnected or a dump
	lastSeen time.Time
}

// ID returns the session id.
func (s *Session) ID() [16]byte { return s.Hello.SessionID }

// Tracker holds the state of every session.
type Tracker struct {
	mu       sync.Mutex
	sink     Sink
	sessions map[[16]byte]*Session
	logger   *slog.Logger
	metrics  *metrics
	stats    *samplerStats
	batch    schema.Batch // decode buffer, reused under mu
}

type metrics struct {
	frames     *prometheus.CounterVec
	duplicates prometheus.Counter
	gaps       prometheus.Counter
	lost       *prometheus.CounterVec
	samples    [4]prometheus.Counter // by schema.Origin; index 0 also counts origins this build does not know
	acks       prometheus.Counter
	malformed  prometheus.Counter
	// Connections whose sampler went away without its goodbye, and the
	// last sequence acknowledged to the latest such session, by node.
	noGoodbye      prometheus.Counter
	noGoodbyeAcked *prometheus.GaugeVec
}

// NewTracker returns a Tracker feeding sink. reg may be nil; registering
// its metrics there fails when reg already has them.
func NewTracker(sink Sink, logger *slog.Logger, reg prometheus.Registerer) (*Tracker, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m := &metrics{
		frames: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tandem_encoder_ingest_frames_total", Help: "Frames received from samplers, by type.",
		}, []string{"type"}),
		duplicates: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tandem_encoder_ingest_duplicate_frames_total", Help: "Resent frames dropped because they were already received.",
		}),
		gaps: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tandem_encoder_ingest_sequence_gaps_total", Help: "Sequences missing from a session (the sampler reports why in loss reports).",
		}),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tandem_encoder_sampler_lost_samples_total", Help: "Samples the sampler reported as dropped, by stage.",
		}, []string{"stage"}),
		acks: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tandem_encoder_ingest_acks_total", Help: "Acknowledgements sent to samplers.",
		}),
		malformed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tandem_encoder_ingest_malformed_frames_total", Help: "Frames that failed to decode; the stream is closed.",
		}),
		noGoodbye: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tandem_encoder_ingest_sessions_ended_without_goodbye_total",
			Help: "Sampler connections that ended without the sampler's goodbye (killed, crashed, or its connection lost): what it held unacknowledged may be missing, unless the session resumes.",
		}),
		noGoodbyeAcked: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "tandem_encoder_ingest_ended_without_goodbye_acked_sequence",
			Help: "The last sequence acknowledged to the node's latest session that ended without a goodbye: samples after it may be missing.",
		}, []string{"node"}),
	}
	samples := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tandem_encoder_ingest_samples_total", Help: "Samples received from samplers (duplicates excluded), by origin.",
	}, []string{"origin"})
	for i := range m.samples {
		m.samples[i] = samples.WithLabelValues(schema.Origin(i).String())
	}
	stats := newSamplerStats()
	if err := prom.Register(reg, "ingest", m.frames, m.duplicates, m.gaps, m.lost, samples, m.acks, m.malformed,
		m.noGoodbye, m.noGoodbyeAcked, stats); err != nil {
		return nil, err
	}
	return &Tracker{sink: sink, sessions: make(map[[16]byte]*Session), logger: logger, metrics: m, stats: stats}, nil
}

// Serve reads src until it ends and feeds the Sink. The first frame must be a
// Hello. acker may be nil (dumps). It returns nil at a clean end of stream
// (io.EOF or a Goodbye), and the first error otherwise.
func (t *Tracker) Serve(ctx context.Context, src ipc.FrameSource, acker Acker) error {
	var sess *Session
	// The stream's dictionary (protocol 1.4): what this connection's or
	// dump's FrameDictionary chunks defined, so it lives exactly as long
	// as the stream. Layout-2 batches refer to it.
	st := &stream{}
	// peerGone: the stream ended at the sampler's end (EOF or a read
	// error) while the encoder was not stopping, before any goodbye.
	peerGone := false
	defer func() {
		if sess != nil {
			t.mu.Lock()
			if sess.acker == acker {
				sess.acker = nil
			}
			if peerGone && acker != nil {
				t.endedWithoutGoodbye(sess)
			}
			t.mu.Unlock()
		}
	}()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		f, err := src.Next()
		if err != nil {
			peerGone = ctx.Err() == nil
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("read stream: %w", err)
		}
		t.metrics.frames.WithLabelValues(frameName(f.Type)).Inc()
		if f.Type == ipc.FrameHello {
			if sess, err = t.hello(f.Payload, acker); err != nil {
				return err
			}
			// A hello starts a stream's dictionary afresh. On a socket it
			// comes once, first; in a dump recorded by an encoder it also
			// marks where the frames of another connection (or the same
			// session's next one) begin, and that connection's chunks
			// start again at the beginning of their generation.
			st.dict = &schema.Dictionary{}
			continue
		}
		if sess == nil {
			closeFile(f.File)
			return fmt.Errorf("stream starts with a %s frame: want a hello first", frameName(f.Type))
		}
		done, err := t.frame(sess, st, f)
		if err != nil {
			t.metrics.malformed.Inc()
			return err
		}
		if done {
			return nil
		}
	}
}

func (t *Tracker) hello(payload []byte, acker Acker) (*Session, error) {
	h, err := schema.DecodeHello(payload)
	if err != nil {
		return nil, fmt.Errorf("read hello: %w", err)
	}
	if err := ipc.CheckVersion(h.MajorVersion, h.MinorVersion); err != nil {
		return nil, fmt.Errorf("hello from node %q: %w: run an encoder and sampler of the same major version", h.NodeName, err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.sessions[h.SessionID]
	if !ok {
		s = &Session{}
		t.sessions[h.SessionID] = s
		t.logger.Info("sampler session started", "node", h.NodeName, "sampler_version", h.SamplerVersion,
			"kernel", h.KernelRelease, "hz", h.SamplingFrequencyHz, "tracers", h.Tracers)
	} else {
		t.logger.Info("sampler session resumed", "node", h.NodeName, "received_sequence", s.received, "acked_sequence", s.acked)
	}
	s.Hello = h
	if acker != nil {
		s.acker = acker
		// Re-acknowledge what is already exported so the sampler frees it
		// before resending.
		if s.acked > 0 {
			if err := acker.Ack(s.acked); err == nil {
				t.metrics.acks.Inc()
			}
		}
	}
	s.lastSeen = time.Now()
	return s, nil
}

// stream is the state of one Serve call.
type stream struct {
	dict  *schema.Dictionary
	chunk schema.DictionaryChunk // decode buffer
}

// frame handles one non-hello frame; done reports a goodbye.
func (t *Tracker) frame(s *Session, st *stream, f ipc.Frame) (done bool, err error) {
	switch f.Type {
	case ipc.FrameDictionary:
		// Not sequenced: a chunk extends this stream's dictionary even
		// when the batch after it is a duplicate, since the sampler
		// writes a connection's chunks exactly once, in order.
		if err := schema.DecodeDictionaryChunk(f.Payload, &st.chunk); err != nil {
			return false, fmt.Errorf("read dictionary chunk: %w", err)
		}
		if err := st.dict.Apply(&st.chunk); err != nil {
			return false, fmt.Errorf("apply dictionary chunk: %w", err)
		}
	case ipc.FrameBatch:
		t.mu.Lock()
		defer t.mu.Unlock()
		// The batch must not keep this stream's dictionary alive once
		// the stream ends: the Tracker's decode buffer outlives it.
		defer t.batch.Reset()
		if err := schema.DecodeBatchWith(f.Payload, st.dict, &t.batch); err != nil {
			return false, fmt.Errorf("read batch: %w", err)
		}
		if !t.sequenced(s, t.batch.Sequence) {
			return false, nil
		}
		var byOrigin [len(t.metrics.samples)]int
		for i := range t.batch.Samples {
			o := int(t.batch.Samples[i].Origin)
			if o >= len(byOrigin) {
				o = 0
			}
			byOrigin[o]++
		}
		for o, n := range byOrigin {
			if n > 0 {
				t.metrics.samples[o].Add(float64(n))
			}
		}
		t.sink.Batch(s, &t.batch)
	case ipc.FrameLoss:
		r, err := schema.DecodeLossReport(f.Payload)
		if err != nil {
			return false, fmt.Errorf("read loss report: %w", err)
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		if !t.sequenced(s, r.Sequence) {
			return false, nil
		}
		for _, l := range r.Losses {
			t.metrics.lost.WithLabelValues(l.Stage.String()).Add(float64(l.Samples))
			if l.Samples > 0 || l.Descriptors > 0 {
				t.logger.Warn("sampler reported loss", "stage", l.Stage.String(), "reason", l.Reason,
					"samples", l.Samples, "bytes", l.Bytes, "descriptors", l.Descriptors)
			}
		}
		t.sink.Loss(s, &r)
	case ipc.FrameExecutable:
		n, err := schema.DecodeExecutableNotice(f.Payload)
		if err != nil {
			closeFile(f.File)
			return false, fmt.Errorf("read executable notice: %w", err)
		}
		t.mu.Lock()
		defer t.mu.Unlock()
		t.sink.Executable(s, &n, f.File)
	case ipc.FrameGoodbye:
		g, err := schema.DecodeGoodbye(f.Payload)
		if err != nil {
			return false, fmt.Errorf("read goodbye: %w", err)
		}
		t.logger.Info("sampler said goodbye", "node", s.Hello.NodeName, "reason", g.Reason, "last_sequence", g.LastSequence)
		return true, nil
	case ipc.FrameStats:
		st, err := schema.DecodeSamplerStats(f.Payload)
		if err != nil {
			return false, fmt.Errorf("read sampler stats: %w", err)
		}
		t.stats.set(s.Hello.NodeName, st)
	default:
		closeFile(f.File)
	}
	return false, nil
}

// endedWithoutGoodbye counts and logs a live connection of s that ended
// without the sampler's goodbye. Called with t.mu held.
func (t *Tracker) endedWithoutGoodbye(s *Session) {
	t.metrics.noGoodbye.Inc()
	t.metrics.noGoodbyeAcked.WithLabelValues(s.Hello.NodeName).Set(float64(s.acked))
	t.logger.Warn("sampler went away without its goodbye (killed or crashed?): unless its session resumes, samples after the last acknowledged sequence may be missing",
		"node", s.Hello.NodeName, "session", fmt.Sprintf("%x", s.Hello.SessionID),
		"last_acked_sequence", s.acked, "received_sequence", s.received)
}

// sequenced reports whether seq is new for the session, and records it.
// Called with t.mu held.
func (t *Tracker) sequenced(s *Session, seq uint64) bool {
	s.lastSeen = time.Now()
	if seq <= s.received {
		t.metrics.duplicates.Inc()
		return false
	}
	if s.received > 0 && seq > s.received+1 {
		t.metrics.gaps.Add(float64(seq - s.received - 1))
	}
	s.received = seq
	return true
}

// Cut runs snapshot while no Sink call is in progress and returns, per
// session, the highest sequence handed to the Sink before it.
func (t *Tracker) Cut(snapshot func()) map[[16]byte]uint64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	snapshot()
	seqs := make(map[[16]byte]uint64, len(t.sessions))
	for id, s := range t.sessions {
		if s.received > s.acked {
			seqs[id] = s.received
		}
	}
	return seqs
}

// Ack acknowledges exported sequences to the sessions' current connections
// and forgets sessions idle for longer than idle.
func (t *Tracker) Ack(seqs map[[16]byte]uint64, idle time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for id, seq := range seqs {
		s, ok := t.sessions[id]
		if !ok || seq <= s.acked {
			continue
		}
		s.acked = seq
		if s.acker != nil {
			if err := s.acker.Ack(seq); err != nil {
				t.logger.Debug("acknowledge", "sequence", seq, "err", err)
				continue
			}
			t.metrics.acks.Inc()
		}
	}
	now := time.Now()
	for id, s := range t.sessions {
		if s.acker == nil && s.acked >= s.received && now.Sub(s.lastSeen) > idle {
			delete(t.sessions, id)
		}
	}
}

func closeFile(f *os.File) {
	if f != nil {
		_ = f.Close()
	}
}

func frameName(t ipc.FrameType) string {
	switch t {
	case ipc.FrameHello:
		return "hello"
	case ipc.FrameBatch:
		return "batch"
	case ipc.FrameExecutable:
		return "executable"
	case ipc.FrameLoss:
		return "loss"
	case ipc.FrameGoodbye:
		return "goodbye"
	case ipc.FrameAck:
		return "ack"
	case ipc.FrameStats:
		return "stats"
	case ipc.FrameDictionary:
		return "dictionary"
	default:
		return "unknown"
	}
}
