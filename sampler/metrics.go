package sampler

import "github.com/prometheus/client_golang/prometheus"

// samplerMetrics are the sampler's own metrics. The sampler exposes no
// port: the registry's owner logs or otherwise exports them.
type samplerMetrics struct {
	traces             prometheus.Counter
	queueDropped       prometheus.Counter
	queueBytes         prometheus.Gauge
	batches            prometheus.Counter
	batchSamples       prometheus.Counter
	batchBytes         prometheus.Counter
	lossReports        prometheus.Counter
	classificationLost prometheus.Counter
	processesCached    prometheus.Gauge
	processesEvicted   prometheus.Counter
	executables        *prometheus.CounterVec
	executablesParked  prometheus.Gauge
	tracerLoadSeconds  prometheus.Gauge
}

// Results of an executable report (label "result" of
// tandem_sampler_executables_total).
const (
	execSent         = "sent"
	execRateLimited  = "rate_limited"
	execTotalLimited = "total_limited"
	execOpenFailed   = "open_failed"
	execUnsupported  = "unsupported" // anonymous/memfd mappings, non-file readers
	execDropped      = "dropped"     // the sink's queue was full; descriptor closed
	execDuplicate    = "duplicate"   // VDSO already sent
)

func newSamplerMetrics(reg prometheus.Registerer) *samplerMetrics {
	const ns = "tandem_sampler"
	m := &samplerMetrics{
		traces: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: "reporter", Name: "traces_total",
			Help: "Traces the tracer reported.",
		}),
		queueDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: "queue", Name: "dropped_samples_total",
			Help: "Traces dropped (oldest first) because the reporter queue was full.",
		}),
		queueBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: "queue", Name: "bytes",
			Help: "Estimated bytes held by the reporter queue after the last drain.",
		}),
		batches: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: "batch", Name: "batches_total",
			Help: "Batches handed to the sink.",
		}),
		batchSamples: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: "batch", Name: "samples_total",
			Help: "Samples handed to the sink in batches.",
		}),
		batchBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: "batch", Name: "bytes_total",
			Help: "Encoded batch bytes handed to the sink.",
		}),
		lossReports: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: "batch", Name: "loss_reports_total",
			Help: "Loss reports handed to the sink.",
		}),
		classificationLost: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: "batch", Name: "encode_lost_samples_total",
			Help: "Samples lost because their batch failed to encode.",
		}),
		processesCached: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: "processes", Name: "cached",
			Help: "Processes with cached labels.",
		}),
		processesEvicted: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: ns, Subsystem: "processes", Name: "evicted_total",
			Help: "Cached processes dropped because they exited.",
		}),
		executables: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: ns, Subsystem: "executables", Name: "total",
			Help: "Executables reported by the tracer, by what became of them.",
		}, []string{"result"}),
		executablesParked: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: "executables", Name: "parked",
			Help: "Executables kept open until the sink connects.",
		}),
		tracerLoadSeconds: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: ns, Subsystem: "tracer", Name: "load_seconds",
			Help: "Time NewTracer took to load the eBPF programs.",
		}),
	}
	for _, r := range []string{execSent, execRateLimited, execTotalLimited, execOpenFailed, execUnsupported, execDropped, execDuplicate} {
		m.executables.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(m.traces, m.queueDropped, m.queueBytes, m.batches, m.batchSamples,
			m.batchBytes, m.lossReports, m.classificationLost, m.processesCached,
			m.processesEvicted, m.executables, m.executablesParked, m.tracerLoadSeconds)
	}
	return m
}
