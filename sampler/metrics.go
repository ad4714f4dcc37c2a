package sampler

import (
	"errors"

	"github.com/tandem-profiler/tandem/internal/counters"
)

// samplerMetrics are the sampler's own metrics: plain counters (package
// internal/counters), not Prometheus collectors. The sampler exposes no
// port and links no metrics client: its owner sends a snapshot in-band
// (FrameStats) and logs it, and the encoder exports it.
type samplerMetrics struct {
	traces             counters.Counter
	ownOffCPU          counters.Counter
	encoderTraces      counters.Counter
	linkedSamples      counters.Counter
	queueDropped       counters.Counter
	queueBytes         counters.Gauge
	batches            counters.Counter
	batchSamples       counters.Counter
	batchBytes         counters.Counter
	lossReports        counters.Counter
	classificationLost counters.Counter
	processesCached    counters.Gauge
	processesEvicted   counters.Counter
	processesCacheFull counters.Counter
	stringsTruncated   counters.Counter
	executables        map[string]*counters.Counter // by result, every key registered up front
	benignLogs         []*counters.Counter          // by index in benignUpstreamLogs
	executablesParked  counters.Gauge
	executablesOpening counters.Gauge
	tracerLoadSeconds  counters.Gauge
	tracerLoadRetries  counters.Counter

	dictionaryBytes       counters.Gauge
	dictionaryChunks      counters.Counter
	dictionaryGenerations counters.Counter
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
	execOpenBusy     = "open_busy"   // the openers are stuck (blocking filesystem) and their queue is full
)

var execResults = []string{execSent, execRateLimited, execTotalLimited, execOpenFailed, execUnsupported, execDropped, execDuplicate, execOpenBusy}

// newSamplerMetrics registers the metrics in set as tandem_sampler_* (a
// nil set registers nothing).
func newSamplerMetrics(set *counters.Set) (*samplerMetrics, error) {
	const p = "tandem_sampler_"
	m := &samplerMetrics{executables: make(map[string]*counters.Counter, len(execResults))}
	var errs []error
	c := func(c *counters.Counter, name, help string) { errs = append(errs, set.AddCounter(c, p+name, help)) }
	g := func(g *counters.Gauge, name, help string) { errs = append(errs, set.AddGauge(g, p+name, help)) }
	c(&m.traces, "reporter_traces_total", "Traces the tracer reported.")
	c(&m.ownOffCPU, "reporter_own_off_cpu_traces_total", "Off-CPU traces of the sampler's own threads, left out: each one handled makes those threads block and wake again, which the tracer reports in turn.")
	c(&m.encoderTraces, "reporter_encoder_traces_total", "Traces of the connected encoder's process (its pid from the socket, all its threads), left out: it would profile itself in proportion to what it is sent (--keep-encoder-samples keeps them).")
	c(&m.linkedSamples, "batch_linked_samples_total", "Samples sent with a trace link (the tracer found a span: OBI's span map or an APM agent).")
	c(&m.queueDropped, "queue_dropped_samples_total", "Traces dropped (oldest first) because the reporter queue was full.")
	g(&m.queueBytes, "queue_bytes", "Estimated bytes held by the reporter queue after the last drain.")
	c(&m.batches, "batch_batches_total", "Batches handed to the sink.")
	c(&m.batchSamples, "batch_samples_total", "Samples handed to the sink in batches.")
	c(&m.batchBytes, "batch_bytes_total", "Encoded batch bytes handed to the sink.")
	c(&m.lossReports, "batch_loss_reports_total", "Loss reports handed to the sink.")
	c(&m.classificationLost, "batch_encode_lost_samples_total", "Samples lost because their batch failed to encode.")
	g(&m.processesCached, "processes_cached", "Processes with cached labels.")
	c(&m.processesEvicted, "processes_evicted_total", "Cached processes dropped because they exited.")
	c(&m.processesCacheFull, "processes_cache_full_evicted_total", "Cached processes dropped, alive, because the cache was full (their labels are read again when next sampled).")
	c(&m.stringsTruncated, "strings_truncated_total", "Strings from workloads (names, paths, environment values, labels, function names) cut to their bound.")
	for _, r := range execResults {
		cnt, err := set.Counter(p+"executables_total", "Executables reported by the tracer, by what became of them.",
			counters.Label{Name: "result", Value: r})
		errs = append(errs, err)
		m.executables[r] = cnt
	}
	var err error
	m.benignLogs, err = registerBenignUpstreamLogs(set)
	errs = append(errs, err)
	g(&m.executablesParked, "executables_parked", "Executables kept open until the sink connects.")
	g(&m.executablesOpening, "executables_opening", "Executable opens in progress (a value stuck at the number of openers: a filesystem that blocks).")
	g(&m.tracerLoadSeconds, "tracer_load_seconds", "Time the tracer took to load the eBPF programs (NewTracer, retries included).")
	c(&m.tracerLoadRetries, "tracer_load_retries_total", "Loads of the tracer repeated because its start-up probe failed (a race of the probe with the sampler's other threads' syscalls; at most 4 before the sampler gives up).")
	g(&m.dictionaryBytes, "dictionary_bytes", "Encoded size of the current dictionary generation's chunks (protocol 1.4); a new generation starts at 8 MiB.")
	c(&m.dictionaryChunks, "dictionary_chunks_total", "Dictionary chunks handed to the sink (at most one per batch).")
	c(&m.dictionaryGenerations, "dictionary_generations_total", "Dictionary generations started after the first (a cap was reached, or a chunk could not be sent).")
	return m, errors.Join(errs...)
}

// executable counts one executable report with the given result.
func (m *samplerMetrics) executable(result string) { m.executables[result].Inc() }
