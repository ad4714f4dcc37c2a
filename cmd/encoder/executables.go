package main

import (
	"log/slog"
	"os"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tandem-profiler/tandem/schema"
)

// executableHolder keeps the executables the sampler passed over (for the
// symbol uploader to come), bounded in number: past the bound the oldest
// descriptor is closed and counted. One descriptor per file id.
type executableHolder struct {
	mu      sync.Mutex
	max     int
	logger  *slog.Logger
	order   []schema.FileID
	files   map[schema.FileID]heldExecutable
	held    prometheus.Gauge
	evicted prometheus.Counter
	noFD    prometheus.Counter
}

type heldExecutable struct {
	notice schema.ExecutableNotice
	file   *os.File
}

func newExecutableHolder(max int, logger *slog.Logger, reg prometheus.Registerer) *executableHolder {
	h := &executableHolder{
		max:    max,
		logger: logger,
		files:  make(map[schema.FileID]heldExecutable),
		held: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "tandem_encoder_executables_held", Help: "Executable descriptors held for symbol upload.",
		}),
		evicted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tandem_encoder_executables_evicted_total", Help: "Held executable descriptors closed to stay within --max-held-executables.",
		}),
		noFD: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tandem_encoder_executable_notices_without_descriptor_total", Help: "Executable notices that arrived without a descriptor (dumps, or the sampler could not open the file).",
		}),
	}
	if reg != nil {
		reg.MustRegister(h.held, h.evicted, h.noFD)
	}
	return h
}

// hold takes ownership of f (which may be nil).
func (h *executableHolder) hold(n *schema.ExecutableNotice, f *os.File) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if f == nil {
		h.noFD.Inc()
		return
	}
	if old, ok := h.files[n.FileID]; ok {
		// Same file seen again: keep the newer descriptor.
		old.file.Close()
		h.files[n.FileID] = heldExecutable{notice: *n, file: f}
		return
	}
	if h.max == 0 {
		f.Close()
		h.evicted.Inc()
		return
	}
	for len(h.order) >= h.max {
		oldest := h.order[0]
		h.order = h.order[1:]
		if e, ok := h.files[oldest]; ok {
			e.file.Close()
			delete(h.files, oldest)
			h.evicted.Inc()
		}
	}
	h.files[n.FileID] = heldExecutable{notice: *n, file: f}
	h.order = append(h.order, n.FileID)
	h.held.Set(float64(len(h.files)))
	h.logger.Debug("holding executable", "file", n.FileName, "path", n.Path, "build_id", n.GNUBuildID)
}

func (h *executableHolder) closeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for id, e := range h.files {
		e.file.Close()
		delete(h.files, id)
	}
	h.order = nil
	h.held.Set(0)
}
