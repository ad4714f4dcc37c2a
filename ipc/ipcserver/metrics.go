package ipcserver

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tandem-profiler/tandem/internal/prom"
	"github.com/tandem-profiler/tandem/ipc"
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

// registerer registers the server's collectors with prom.Shared (the
// servers on one registry share them) and remembers the first error.
type registerer struct {
	reg prometheus.Registerer
	err error
}

func register[T prometheus.Collector](r *registerer, c T) T {
	c, err := prom.Shared(r.reg, "ipc server", c)
	if err != nil && r.err == nil {
		r.err = err
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

// byType is a counter per known frame type plus one for unknown types
// (index 0, which is no frame type).
type byType [256]*counter

func (r *registerer) byType(name, help string) *byType {
	vec := register(r, prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "tandem", Subsystem: "ipc", Name: name, Help: help,
	}, []string{"type"}))
	var b byType
	b[0] = &counter{p: vec.WithLabelValues("unknown")}
	for t := range b {
		if ipc.FrameType(t).Known() {
			b[t] = &counter{p: vec.WithLabelValues(ipc.FrameType(t).String())}
		}
	}
	return &b
}

func (b *byType) get(t ipc.FrameType) *counter {
	if !t.Known() {
		return b[0]
	}
	return b[t]
}

func (b *byType) total() uint64 {
	var n uint64
	for _, c := range b {
		if c != nil {
			n += c.load()
		}
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
