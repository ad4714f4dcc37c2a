package ipc

import (
	"errors"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// counter is a cumulative count kept per instance (for Stats) and mirrored
// into a Prometheus counter that may be shared by instances registered with
// the same registry.
type counter struct {
	n atomic.Uint64
	p prometheus.Counter
}

func (c *counter) add(v uint64) {
	if v == 0 {
		return
	}
	c.n.Add(v)
	c.p.Add(float64(v))
}

func (c *counter) inc()         { c.add(1) }
func (c *counter) load() uint64 { return c.n.Load() }

// registerer registers collectors, reusing collectors already registered
// under the same description, and remembers the first other error.
type registerer struct {
	reg prometheus.Registerer
	err error
}

func register[T prometheus.Collector](r *registerer, c T) T {
	if r.reg == nil {
		return c
	}
	if err := r.reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(T); ok {
				return existing
			}
		}
		if r.err == nil {
			r.err = err
		}
	}
	return c
}

func (r *registerer) counter(name, help string) *counter {
	return &counter{p: register(r, prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "tandem", Subsystem: "ipc", Name: name, Help: help,
	}))}
}

func (r *registerer) gauge(name, help string) prometheus.Gauge {
	return register(r, prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "tandem", Subsystem: "ipc", Name: name, Help: help,
	}))
}

// byType is a counter per known frame type plus one for unknown types.
type byType [maxKnownFrameType + 1]*counter

func (r *registerer) byType(name, help string) *byType {
	vec := register(r, prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "tandem", Subsystem: "ipc", Name: name, Help: help,
	}, []string{"type"}))
	var b byType
	for t := range b {
		label := FrameType(t).String()
		if !FrameType(t).Known() {
			label = "unknown"
		}
		b[t] = &counter{p: vec.WithLabelValues(label)}
	}
	return &b
}

func (b *byType) get(t FrameType) *counter {
	if !t.Known() {
		return b[0]
	}
	return b[t]
}

func (b *byType) total() uint64 {
	var n uint64
	for _, c := range b {
		n += c.load()
	}
	return n
}

type serverMetrics struct {
	accepted, rejected                        *counter
	active                                    prometheus.Gauge
	frames                                    *byType
	bytes, unknown                            *counter
	fdsReceived, fdsDropped, fdsMissing, acks *counter
}

func newServerMetrics(reg prometheus.Registerer) (*serverMetrics, error) {
	r := &registerer{reg: reg}
	m := &serverMetrics{
		accepted:    r.counter("server_connections_accepted_total", "Connections accepted from peers with an allowed uid."),
		rejected:    r.counter("server_connections_rejected_total", "Connections closed because the peer's uid is not allowed or its credentials could not be read."),
		active:      r.gauge("server_connections", "Connections open now."),
		frames:      r.byType("server_frames_received_total", "Frames received, by type."),
		bytes:       r.counter("server_received_bytes_total", "Bytes received, frame headers included."),
		unknown:     r.counter("server_unknown_frames_total", "Frames of unknown type skipped."),
		fdsReceived: r.counter("server_descriptors_received_total", "File descriptors received with SCM_RIGHTS."),
		fdsDropped:  r.counter("server_descriptors_dropped_total", "Received file descriptors closed without being claimed by a frame."),
		fdsMissing:  r.counter("server_descriptors_missing_total", "Frames flagged with a descriptor that did not arrive."),
		acks:        r.counter("server_acks_sent_total", "Acknowledgements sent."),
	}
	return m, r.err
}

type clientMetrics struct {
	connects, peerRejected, protocolErrors *counter
	connected                              prometheus.Gauge
	frames                                 *byType
	bytes, resent                          *counter
	ackedSeq, unackedFrames, unackedBytes  prometheus.Gauge
	evictedFrames, evictedBytes            *counter
	evictedSamples, rejectedFrames         *counter
	lostFrames, lostBytes, lostSamples     *counter
	deliveredEvictedFrames                 *counter
	deliveredEvictedSamples                *counter
	unconfirmedSamples                     prometheus.Gauge
	fdsSent, fdsDropped                    *counter
}

func newClientMetrics(reg prometheus.Registerer) (*clientMetrics, error) {
	r := &registerer{reg: reg}
	m := &clientMetrics{
		connects:                r.counter("client_connections_total", "Connections established with a server whose uid is allowed."),
		peerRejected:            r.counter("client_peer_rejected_total", "Connections refused because the server's uid is not allowed."),
		protocolErrors:          r.counter("client_protocol_errors_total", "Connections dropped because the server sent something other than a valid acknowledgement."),
		connected:               r.gauge("client_connected", "1 while a verified connection to the server is up."),
		frames:                  r.byType("client_frames_sent_total", "Frames written, by type, resends included."),
		bytes:                   r.counter("client_sent_bytes_total", "Bytes written, frame headers included."),
		resent:                  r.counter("client_resent_frames_total", "Reliable frames written again after a reconnection."),
		ackedSeq:                r.gauge("client_acked_sequence", "Highest sequence acknowledged by the server."),
		unackedFrames:           r.gauge("client_unacked_frames", "Reliable frames kept until acknowledged."),
		unackedBytes:            r.gauge("client_unacked_bytes", "Size of the reliable frames kept until acknowledged, headers included."),
		evictedFrames:           r.counter("client_evicted_frames_total", "Batches evicted before acknowledgement because the buffer bound was exceeded, delivered or not (see client_lost_frames_total)."),
		evictedBytes:            r.counter("client_evicted_bytes_total", "Size of the evicted batches, headers included."),
		evictedSamples:          r.counter("client_evicted_samples_total", "Samples in the evicted batches, delivered or not (see client_lost_samples_total)."),
		lostFrames:              r.counter("client_lost_frames_total", "Evicted batches that never reached the server: evicted before being written, or written on a connection that ended before acknowledging them."),
		lostBytes:               r.counter("client_lost_bytes_total", "Size of the lost batches, headers included."),
		lostSamples:             r.counter("client_lost_samples_total", "Samples in the lost batches; the sampler reports them in-band."),
		deliveredEvictedFrames:  r.counter("client_evicted_delivered_frames_total", "Batches evicted after being written and then acknowledged: delivered."),
		deliveredEvictedSamples: r.counter("client_evicted_delivered_samples_total", "Samples in the evicted batches that were delivered."),
		unconfirmedSamples:      r.gauge("client_evicted_unconfirmed_samples", "Samples in batches evicted after being written on the current connection, not yet acknowledged: delivered on the next ack, lost if the connection ends first."),
		rejectedFrames:          r.counter("client_rejected_frames_total", "Reliable frames refused: sent after Close, sequence not increasing, or too large."),
		fdsSent:                 r.counter("client_descriptors_sent_total", "File descriptors passed to the server."),
		fdsDropped:              r.counter("client_descriptors_dropped_total", "File descriptors closed without being sent."),
	}
	return m, r.err
}
