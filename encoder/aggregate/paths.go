package aggregate

import (
	"sync"

	"github.com/tandem-profiler/tandem/schema"
)

// maxExecutablePaths bounds the paths an Aggregator remembers; past it an
// arbitrary one is forgotten for each new one (its mappings then show
// their base name only).
const maxExecutablePaths = 1 << 16

// executablePaths maps file ids to the full paths their executable
// notices announced. The stream's mappings carry only base names (the
// tracer's frames do not hold paths), while a notice names the path the
// executable was opened by; pprof files want the path (so that
// PPROF_BINARY_PATH and symbolizers find the file).
type executablePaths struct {
	mu    sync.RWMutex
	paths map[schema.FileID]string
}

// NoteExecutable remembers the path of an executable the sampler
// announced, for Flush.MappingPath, and with Config.Symbolizer has the
// next Flush resolve again the native locations that waited for it: call
// it once the Symbolizer has the executable. Safe to call concurrently
// with Add, Flush and readers of earlier Flushes.
func (a *Aggregator) NoteExecutable(n *schema.ExecutableNotice) {
	if n == nil || n.FileID.IsZero() {
		return
	}
	if a.cfg.Symbolizer != nil {
		a.arrivals.add(n.FileID)
	}
	if n.Path == "" {
		return
	}
	p := &a.paths
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.paths == nil {
		p.paths = make(map[schema.FileID]string)
	}
	if _, ok := p.paths[n.FileID]; !ok && len(p.paths) >= maxExecutablePaths {
		for k := range p.paths {
			delete(p.paths, k)
			break
		}
	}
	p.paths[n.FileID] = n.Path
}

// MappingPath returns the full path of mapping m's file: the path the
// stream carried, else the path its executable's notice announced (see
// Aggregator.NoteExecutable), else "".
func (f *Flush) MappingPath(m *Mapping) string {
	if p := f.Strings[m.Path]; p != "" {
		return p
	}
	if f.owner == nil || m.FileID.IsZero() {
		return ""
	}
	p := &f.owner.paths
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.paths[m.FileID]
}
