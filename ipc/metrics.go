package ipc

import (
	"errors"

	"github.com/tandem-profiler/tandem/internal/counters"
)

// clientMetrics are the Client's counters. They are plain counters, not
// Prometheus collectors: the Client runs in the privileged sampler, which
// sends them in-band (FrameStats) for the encoder to export.
type clientMetrics struct {
	connects, peerRejected, protocolErrors counters.Counter
	connected                              counters.Gauge
	frames                                 [maxKnownFrameType + 1]counters.Counter // by type, 0 = unknown
	bytes                                  counters.Counter
	fdsSent, fdsDropped                    counters.Counter
	// The executables' descriptors held (queued or kept to send again).
	execsHeld, execsHeldBytes, execsHeldDeleted counters.Gauge
	execsReleasedEarly                          counters.Counter
	execsEvicted                                [2]counters.Counter // by bound: count, bytes
	ledger                                      ledgerCounters
}

// Bounds on the executables held, as labelled in executables_evicted_total.
const (
	boundCount = "count"
	boundBytes = "bytes"
)

// frameCounter returns the counter of frames of type t.
func (m *clientMetrics) frameCounter(t FrameType) *counters.Counter {
	if !t.Known() {
		return &m.frames[0]
	}
	return &m.frames[t]
}

func (m *clientMetrics) framesTotal() uint64 {
	var n uint64
	for i := range m.frames {
		n += m.frames[i].Load()
	}
	return n
}

// newClientMetrics registers the counters in set as tandem_ipc_client_*
// (a nil set registers nothing).
func newClientMetrics(set *counters.Set) (*clientMetrics, error) {
	m := new(clientMetrics)
	l := &m.ledger
	const p = "tandem_ipc_client_"
	var errs []error
	c := func(c *counters.Counter, name, help string, labels ...counters.Label) {
		errs = append(errs, set.AddCounter(c, p+name, help, labels...))
	}
	g := func(g *counters.Gauge, name, help string) { errs = append(errs, set.AddGauge(g, p+name, help)) }
	c(&m.connects, "connections_total", "Connections established with a server whose uid is allowed.")
	c(&m.peerRejected, "peer_rejected_total", "Connections refused because the server's uid is not allowed or the socket's directory is writable by others.")
	c(&m.protocolErrors, "protocol_errors_total", "Connections dropped because the server sent something other than a valid acknowledgement.")
	g(&m.connected, "connected", "1 while a verified connection to the server is up.")
	for t := range m.frames {
		label := FrameType(t).String()
		if !FrameType(t).Known() {
			label = "unknown"
		}
		c(&m.frames[t], "frames_sent_total", "Frames written, by type, resends included.", counters.Label{Name: "type", Value: label})
	}
	c(&m.bytes, "sent_bytes_total", "Bytes written, frame headers included.")
	c(&l.resent, "resent_frames_total", "Reliable frames written again after a reconnection.")
	g(&l.ackedSeq, "acked_sequence", "Highest sequence acknowledged by the server.")
	g(&l.unackedFrames, "unacked_frames", "Reliable frames kept until acknowledged.")
	g(&l.unackedBytes, "unacked_bytes", "Size of the reliable frames kept until acknowledged, headers included.")
	c(&l.evictedFrames, "evicted_frames_total", "Batches evicted before acknowledgement because the buffer bound was exceeded, delivered or not (see client_lost_frames_total).")
	c(&l.evictedBytes, "evicted_bytes_total", "Size of the evicted batches, headers included.")
	c(&l.evictedSamples, "evicted_samples_total", "Samples in the evicted batches, delivered or not (see client_lost_samples_total).")
	c(&l.lostFrames, "lost_frames_total", "Evicted batches that never reached the server: evicted before being written, or written on a connection that ended before acknowledging them.")
	c(&l.lostBytes, "lost_bytes_total", "Size of the lost batches, headers included.")
	c(&l.lostSamples, "lost_samples_total", "Samples in the lost batches; the sampler reports them in-band.")
	c(&l.deliveredEvictedFrames, "evicted_delivered_frames_total", "Batches evicted after being written and then acknowledged: delivered.")
	c(&l.deliveredEvictedSamples, "evicted_delivered_samples_total", "Samples in the evicted batches that were delivered.")
	g(&l.dictionaryBytes, "dictionary_bytes", "Size of the dictionary definition logs (protocol 1.4) that unacknowledged frames need, headers included; not part of unacked_bytes.")
	g(&l.unconfirmedSamples, "evicted_unconfirmed_samples", "Samples in batches evicted after being written on the current connection, not yet acknowledged: delivered on the next ack, lost if the connection ends first.")
	c(&l.rejectedFrames, "rejected_frames_total", "Reliable frames refused: sent after Close, sequence not increasing, or too large.")
	c(&m.fdsSent, "descriptors_sent_total", "File descriptors passed to the server.")
	c(&m.fdsDropped, "descriptors_dropped_total", "File descriptors closed without being sent.")
	g(&m.execsHeld, "executables_held", "Executable descriptors held, queued or kept to send again after a reconnection (bounded by --max-held-executables).")
	g(&m.execsHeldBytes, "executables_held_bytes", "Sizes of the files whose descriptors are held (bounded by --max-held-executable-bytes).")
	g(&m.execsHeldDeleted, "executables_held_deleted", "Held executable descriptors whose file was deleted at the last check.")
	c(&m.execsReleasedEarly, "executables_released_early_total", "Kept executable descriptors closed once their file was deleted, the encoder had acknowledged the notice and the process it was seen in was gone.")
	for i, bound := range []string{boundCount, boundBytes} {
		c(&m.execsEvicted[i], "executables_evicted_total", "Kept executable descriptors closed to stay within a bound: count (--max-held-executables) or bytes (--max-held-executable-bytes).",
			counters.Label{Name: "bound", Value: bound})
	}
	return m, errors.Join(errs...)
}
