package ipc

import (
	"fmt"
	"slices"
	"sort"

	"github.com/tandem-profiler/tandem/internal/counters"
)

// ledger is the Client's resend state, with no I/O: the reliable frames
// kept until acknowledged, which of them were written on the current
// connection, the eviction of the oldest batches past the byte bound, the
// accounting of evicted frames as lost or delivered, and the validation of
// acknowledgements. The Client's mutex guards it; it is kept apart from
// the socket code so that every rule can be tested as a table of
// operations (ledger_test.go).
type ledger struct {
	maxBytes int // ClientConfig.MaxUnackedBytes

	unacked      []*pending // in sequence order
	unackedBytes int
	unackedLoss  int // FrameLoss frames among unacked (never evicted)
	lossBytes    int // their size
	// unconfirmed records, in sequence order, the frames evicted after
	// their write began on the current connection: an acknowledgement
	// retires them as delivered, the end of the connection as lost.
	unconfirmed        []evictedFrames
	unconfirmedSamples int

	lastSeq     uint64 // last sequence accepted by add
	hasSeq      bool
	highestSent uint64 // highest sequence whose write began, on any connection
	hasSent     bool
	ackedSeq    uint64
	hasAck      bool

	connected bool
	// Per connection: the next reliable frame to write is the first one
	// after resumeAfter, or the first one of all when resumeFromStart.
	resumeAfter     uint64
	resumeFromStart bool
	// Per connection: the dictionary chunks written so far.
	cursor dictCursor

	// lastLog is the dictionary log of the last frame add accepted that
	// needs one: generations never go backwards. logs counts the unacked
	// frames that need each log (what keeps it alive), for the
	// dictionary_bytes gauge.
	lastLog *DictionaryLog
	logs    map[*DictionaryLog]int

	c *ledgerCounters
}

// ledgerCounters are the ledger's cumulative counts and gauges, read by
// Client.Stats and registered as tandem_ipc_client_* series.
type ledgerCounters struct {
	evictedFrames, evictedBytes, evictedSamples counters.Counter
	lostFrames, lostBytes, lostSamples          counters.Counter
	deliveredEvictedFrames                      counters.Counter
	deliveredEvictedSamples                     counters.Counter
	rejectedFrames, resent                      counters.Counter

	ackedSeq, unackedFrames, unackedBytes, unconfirmedSamples counters.Gauge
	dictionaryBytes                                           counters.Gauge
}

type pending struct {
	seq     uint64
	samples int
	buf     []byte        // the whole frame
	dict    DictionaryRef // the dictionary chunks to write before it
}

func (p *pending) loss() bool { return FrameType(p.buf[0]) == FrameLoss }

// evictedFrames is one or more frames evicted after their write began,
// up to and including sequence seq, whose fate waits for an ack.
type evictedFrames struct {
	seq                    uint64
	frames, samples, bytes int
}

// maxUnconfirmed bounds ledger.unconfirmed: past it the two oldest
// records merge (under the later sequence), so a server that reads but
// never acknowledges costs bounded memory.
const maxUnconfirmed = 1024

func newLedger(maxBytes int, c *ledgerCounters) *ledger {
	if c == nil {
		c = new(ledgerCounters)
	}
	return &ledger{maxBytes: maxBytes, resumeFromStart: true, c: c, logs: make(map[*DictionaryLog]int)}
}

// add takes a reliable frame buf (header included) carrying sequence seq
// and samples samples, which needs the dictionary chunks dict. It returns
// an error, and counts the frame rejected, when seq does not increase, or
// dict is not in its log or goes back to an older generation. A batch that
// does not fit beside the loss reports is evicted at once; otherwise the
// oldest batches are evicted until the new frame fits within maxBytes.
// Loss reports are never evicted. The chunks are not part of the frame:
// they live in their log, whatever becomes of the frame.
func (l *ledger) add(seq uint64, buf []byte, samples int, dict DictionaryRef) error {
	if l.hasSeq && seq <= l.lastSeq {
		l.c.rejectedFrames.Inc()
		return fmt.Errorf("sequence %d does not increase (last %d)", seq, l.lastSeq)
	}
	if err := dict.check(); err != nil {
		l.c.rejectedFrames.Inc()
		return fmt.Errorf("sequence %d: %w", seq, err)
	}
	if dict.goesBack(l.lastLog) {
		l.c.rejectedFrames.Inc()
		return fmt.Errorf("sequence %d needs dictionary generation %d after a frame that needed generation %d: generations must increase",
			seq, dict.Log.generation, l.lastLog.generation)
	}
	l.lastSeq, l.hasSeq = seq, true
	if dict.Log != nil {
		l.lastLog = dict.Log
	}
	p := &pending{seq: seq, samples: max(samples, 0), buf: buf, dict: dict}
	size := len(buf)
	defer l.updateGauges()
	if !p.loss() && size > l.maxBytes-l.lossBytes {
		// It does not fit even with every other batch evicted: it is
		// lost at once.
		l.evict(p)
		return nil
	}
	if over := l.unackedBytes + size - l.maxBytes; over > 0 {
		kept := l.unacked[:0]
		for _, q := range l.unacked {
			if over > 0 && !q.loss() {
				over -= len(q.buf)
				l.unackedBytes -= len(q.buf)
				l.hold(q, -1)
				l.evict(q)
				continue
			}
			kept = append(kept, q)
		}
		clear(l.unacked[len(kept):])
		l.unacked = kept
	}
	l.unacked = append(l.unacked, p)
	l.unackedBytes += size
	l.hold(p, 1)
	if p.loss() {
		l.unackedLoss++
		l.lossBytes += size
	}
	return nil
}

// reject counts a frame refused before it reached the ledger.
func (l *ledger) reject() { l.c.rejectedFrames.Inc() }

// hold counts p's need of its dictionary log up (delta 1, p is kept) or
// down (-1, p is gone), forgetting logs no kept frame needs.
func (l *ledger) hold(p *pending, delta int) {
	if p.dict.Log == nil {
		return
	}
	if n := l.logs[p.dict.Log] + delta; n > 0 {
		l.logs[p.dict.Log] = n
	} else {
		delete(l.logs, p.dict.Log)
	}
}

// evict counts p as evicted, and as lost unless its write began on the
// current connection, in which case its fate waits for an ack.
func (l *ledger) evict(p *pending) {
	l.c.evictedFrames.Inc()
	l.c.evictedBytes.Add(uint64(len(p.buf)))
	l.c.evictedSamples.Add(uint64(p.samples))
	if !l.connected || l.resumeFromStart || p.seq > l.resumeAfter {
		l.countLost(1, len(p.buf), p.samples)
		return
	}
	if len(l.unconfirmed) >= maxUnconfirmed {
		a, b := l.unconfirmed[0], l.unconfirmed[1]
		l.unconfirmed[1] = evictedFrames{seq: b.seq, frames: a.frames + b.frames, samples: a.samples + b.samples, bytes: a.bytes + b.bytes}
		l.unconfirmed = slices.Delete(l.unconfirmed, 0, 1)
	}
	l.unconfirmed = append(l.unconfirmed, evictedFrames{seq: p.seq, frames: 1, samples: p.samples, bytes: len(p.buf)})
	l.unconfirmedSamples += p.samples
}

func (l *ledger) countLost(frames, bytes, samples int) {
	l.c.lostFrames.Add(uint64(frames))
	l.c.lostBytes.Add(uint64(bytes))
	l.c.lostSamples.Add(uint64(samples))
}

// settleUnconfirmed retires the unconfirmed records up to and including
// seq as delivered, or all of them as lost when the connection ended
// (lost).
func (l *ledger) settleUnconfirmed(seq uint64, lost bool) {
	i := len(l.unconfirmed)
	if !lost {
		i = sort.Search(len(l.unconfirmed), func(i int) bool { return l.unconfirmed[i].seq > seq })
	}
	for _, e := range l.unconfirmed[:i] {
		if lost {
			l.countLost(e.frames, e.bytes, e.samples)
		} else {
			l.c.deliveredEvictedFrames.Add(uint64(e.frames))
			l.c.deliveredEvictedSamples.Add(uint64(e.samples))
		}
		l.unconfirmedSamples -= e.samples
	}
	l.unconfirmed = slices.Delete(l.unconfirmed, 0, i)
}

func (l *ledger) updateGauges() {
	dict := 0
	for log := range l.logs {
		dict += log.Bytes()
	}
	l.c.dictionaryBytes.Set(float64(dict))
	l.c.unackedFrames.Set(float64(len(l.unacked)))
	l.c.unackedBytes.Set(float64(l.unackedBytes))
	l.c.unconfirmedSamples.Set(float64(l.unconfirmedSamples))
}

// connect starts a connection: every unacknowledged frame is to be
// written (again), from the first.
func (l *ledger) connect() {
	l.connected = true
	l.resumeFromStart = true
	l.cursor = dictCursor{}
}

// disconnect ends the connection. What was written on it but not
// acknowledged may never have been read: evicted frames among it are lost
// (the rest will be resent).
func (l *ledger) disconnect() {
	l.connected = false
	l.resumeFromStart = true
	l.settleUnconfirmed(0, true)
	l.updateGauges()
}

// next returns the first reliable frame not yet written on this
// connection, nil when there is none, and records that its write begins.
// resend says that it was written before, on an earlier connection. chunks
// are the dictionary frames to write before it, in order: those it needs
// that this connection has not had yet (the cursor moves past them).
func (l *ledger) next() (p *pending, chunks [][]byte, resend bool) {
	i := 0
	if !l.resumeFromStart {
		i = sort.Search(len(l.unacked), func(i int) bool { return l.unacked[i].seq > l.resumeAfter })
	}
	if i >= len(l.unacked) {
		return nil, nil, false
	}
	p = l.unacked[i]
	chunks = l.cursor.advance(p.dict)
	resend = l.hasSent && p.seq <= l.highestSent
	if !resend {
		l.highestSent, l.hasSent = p.seq, true
	} else {
		l.c.resent.Inc()
	}
	l.resumeAfter, l.resumeFromStart = p.seq, false
	return p, chunks, resend
}

// ack frees every reliable frame up to and including seq and retires the
// evicted ones up to it as delivered. An ack for a sequence never
// written, or lower than an earlier ack, is an error and changes nothing:
// the encoder is not trusted.
func (l *ledger) ack(seq uint64) error {
	if !l.hasSent {
		return fmt.Errorf("server acked sequence %d, but nothing was sent", seq)
	}
	if seq > l.highestSent {
		return fmt.Errorf("server acked sequence %d, higher than the highest sent %d", seq, l.highestSent)
	}
	if l.hasAck && seq < l.ackedSeq {
		return fmt.Errorf("server acked sequence %d after %d: acks went backwards", seq, l.ackedSeq)
	}
	l.ackedSeq, l.hasAck = seq, true
	l.c.ackedSeq.Set(float64(seq))
	i := sort.Search(len(l.unacked), func(i int) bool { return l.unacked[i].seq > seq })
	for _, p := range l.unacked[:i] {
		l.hold(p, -1)
		l.unackedBytes -= len(p.buf)
		if p.loss() {
			l.unackedLoss--
			l.lossBytes -= len(p.buf)
		}
	}
	clear(l.unacked[:i])
	l.unacked = l.unacked[i:]
	l.settleUnconfirmed(seq, false)
	l.updateGauges()
	return nil
}

// drained reports whether nothing waits for an acknowledgement.
func (l *ledger) drained() bool { return len(l.unacked) == 0 && len(l.unconfirmed) == 0 }

// stats fills the ledger's part of s.
func (l *ledger) stats(s *ClientStats) {
	s.AckedSeq = l.ackedSeq
	s.UnackedFrames = len(l.unacked)
	s.UnackedBytes = l.unackedBytes
	s.UnackedLossFrames = l.unackedLoss
	s.EvictedFrames = l.c.evictedFrames.Load()
	s.EvictedBytes = l.c.evictedBytes.Load()
	s.EvictedSamples = l.c.evictedSamples.Load()
	s.LostFrames = l.c.lostFrames.Load()
	s.LostBytes = l.c.lostBytes.Load()
	s.LostSamples = l.c.lostSamples.Load()
	s.DeliveredEvictedFrames = l.c.deliveredEvictedFrames.Load()
	s.DeliveredEvictedSamples = l.c.deliveredEvictedSamples.Load()
	s.UnconfirmedSamples = l.unconfirmedSamples
	s.UnconfirmedFrames = 0
	for _, e := range l.unconfirmed {
		s.UnconfirmedFrames += e.frames
	}
	s.RejectedFrames = l.c.rejectedFrames.Load()
	s.DictionaryBytes = int(l.c.dictionaryBytes.Load())
	s.Resent = l.c.resent.Load()
}
