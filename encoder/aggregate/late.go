package aggregate

import (
	"slices"
	"sync"

	"github.com/tandem-profiler/tandem/schema"
)

// Executables that arrive after their frames.
//
// A native location is resolved once, at the first flush that holds it
// (symbolizeNew). When the Symbolizer does not have its executable yet
// (its notice is still on the way: the sampler passes each executable
// once, beside the stream), the location is remembered under the
// executable's file id, the id the Symbolizer names files by, and resolved
// again at the first flush after NoteExecutable hears of that file. A
// location already named, or whose executable was read, costs nothing
// more.

// maxLateLocations bounds the locations waiting for their executable, so
// about 256 KiB of location ids. Past it a location is not remembered
// (counted in tandem_encoder_aggregator_late_locations_not_retried_total):
// it stays unnamed until the dictionary is rebuilt, when every location
// is resolved again.
const maxLateLocations = 1 << 16

// maxArrivals bounds the file ids NoteExecutable keeps between two
// flushes; past it the flush resolves every waiting location again, so
// nothing is lost.
const maxArrivals = 4096

// arrivals are the file ids NoteExecutable heard of since the last flush.
// It has its own lock: notices come from the ingest goroutines, and a
// flush may hold a.mu for the time parsing an executable takes.
type arrivals struct {
	mu  sync.Mutex
	ids map[schema.FileID]struct{}
	all bool // more than maxArrivals: retry every file
}

func (r *arrivals) add(id schema.FileID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.all:
	case len(r.ids) >= maxArrivals:
		r.all = true
		clear(r.ids)
	default:
		if r.ids == nil {
			r.ids = make(map[schema.FileID]struct{})
		}
		r.ids[id] = struct{}{}
	}
}

// take appends the arrivals to dst and forgets them; all: every file.
func (r *arrivals) take(dst []schema.FileID) (_ []schema.FileID, all bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id := range r.ids {
		dst = append(dst, id)
	}
	clear(r.ids)
	all, r.all = r.all, false
	return dst, all
}

// lateLocations are the native locations of the current dictionary
// generation whose executable the Symbolizer did not have, by file id.
type lateLocations struct {
	byFile  map[schema.FileID][]uint32
	n       int
	arrived []schema.FileID // scratch of retryLate
	lines   []Line          // scratch of retryLate
	named   []lateNamed     // scratch of retryLate
}

type lateNamed struct{ loc, from, to uint32 } // lines[from:to] of loc

// awaitExecutable remembers location id until file arrives. a.mu held.
func (a *Aggregator) awaitExecutable(file schema.FileID, id uint32) {
	l := &a.late
	if l.n >= maxLateLocations {
		a.metrics.lateNotRetried.Inc()
		return
	}
	if l.byFile == nil {
		l.byFile = make(map[schema.FileID][]uint32)
	}
	l.byFile[file] = append(l.byFile[file], id)
	l.n++
}

// retryLate resolves again the locations waiting for the executables
// that arrived since the last flush. The dictionary's line tables are
// shared with earlier Flushes, so when a location gets lines they are
// copied, with its lines in place. a.mu held.
func (a *Aggregator) retryLate(s Symbolizer) {
	l := &a.late
	var all bool
	l.arrived, all = a.arrivals.take(l.arrived[:0])
	if l.n == 0 || (len(l.arrived) == 0 && !all) {
		return
	}
	if all {
		l.arrived = l.arrived[:0]
		for file := range l.byFile {
			l.arrived = append(l.arrived, file)
		}
	}
	d := a.d
	buf, named := l.lines[:0], l.named[:0]
	for _, file := range l.arrived {
		locs, ok := l.byFile[file]
		if !ok {
			continue
		}
		keep := locs[:0]
		for _, id := range locs {
			from := len(buf)
			var known bool
			buf, known = a.resolveLines(s, file, d.locations[id].Address, buf)
			switch {
			case !known: // refused or unreadable: its next notice may do
				keep = append(keep, id)
			case len(buf) > from:
				named = append(named, lateNamed{id, uint32(from), uint32(len(buf))})
			}
		}
		l.n -= len(locs) - len(keep)
		if len(keep) == 0 {
			delete(l.byFile, file)
		} else {
			l.byFile[file] = keep
		}
	}
	l.lines, l.named = buf, named
	if len(named) == 0 {
		return
	}
	slices.SortFunc(named, func(x, y lateNamed) int { return int(x.loc) - int(y.loc) })
	lines := make([]Line, 0, len(d.lines)+len(buf))
	ends := make([]uint32, len(d.lineEnds))
	start := uint32(0)
	for id, end := range d.lineEnds {
		if len(named) > 0 && named[0].loc == uint32(id) {
			lines = append(lines, buf[named[0].from:named[0].to]...)
			named = named[1:]
		} else {
			lines = append(lines, d.lines[start:end]...)
		}
		start = end
		ends[id] = uint32(len(lines))
	}
	d.lines, d.lineEnds = lines, ends
}

// forgetLate drops the waiting locations: the dictionary was rebuilt, and
// its next flush resolves every location again. a.mu held.
func (a *Aggregator) forgetLate() {
	clear(a.late.byFile)
	a.late.n = 0
}
