package symbolize

import (
	"container/list"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tandem-profiler/tandem/internal/prom"
	"github.com/tandem-profiler/tandem/schema"
)

// Config holds the Symbolizer's bounds.
type Config struct {
	// CacheBytes bounds the parsed tables held, in total (Table.Bytes).
	// A table larger than this is never kept: its file is not symbolized.
	CacheBytes int64
	// MaxFiles bounds the descriptors held; past it the least recently
	// used file is closed and forgotten.
	MaxFiles int
	// MaxSectionBytes is the largest section read from one file.
	MaxSectionBytes int64
	// ParseTimeout bounds one file's parse (its debug file's included); a
	// file that takes longer is given up on.
	ParseTimeout time.Duration
	// DebugDirs are the directories searched, in order, for the separate
	// debug file of an executable without a .symtab (see DebugSearch);
	// none turns the search off.
	DebugDirs []string
	// MaxDebugFileBytes is the largest debug file read.
	MaxDebugFileBytes int64

	_ struct{}
}

// DefaultCacheBytes is the default Config.CacheBytes.
const DefaultCacheBytes = 64 << 20

// DefaultConfig returns the default bounds.
func DefaultConfig() Config {
	return Config{
		CacheBytes:      DefaultCacheBytes,
		MaxFiles:        512,
		MaxSectionBytes: 128 << 20,
		ParseTimeout:    5 * time.Second,
		DebugDirs:       []string{DefaultDebugDir},
		// libc6-dbg's libc.so.6 file is 4 MB, a large C++ program's
		// with DWARF a few hundred MB; a debuglink's CRC32 reads it all.
		MaxDebugFileBytes: 1 << 30,
	}
}

// Validate reports every problem with the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.CacheBytes < 16<<10 { // a table is its symbols and a Go binary's function table: tens of KB
		errs = append(errs, fmt.Errorf("symbolizer cache of %d bytes: must be at least 16 KiB", c.CacheBytes))
	}
	if c.MaxFiles < 1 {
		errs = append(errs, fmt.Errorf("symbolizer max files %d: must be at least 1", c.MaxFiles))
	}
	if c.MaxSectionBytes < 1<<10 {
		errs = append(errs, fmt.Errorf("symbolizer max section bytes %d: must be at least 1 KiB", c.MaxSectionBytes))
	}
	if c.ParseTimeout <= 0 {
		errs = append(errs, fmt.Errorf("symbolizer parse timeout %v: must be positive", c.ParseTimeout))
	}
	for _, d := range c.DebugDirs {
		if !filepath.IsAbs(d) {
			errs = append(errs, fmt.Errorf("debug directory %q: must be an absolute path", d))
		}
	}
	if c.MaxDebugFileBytes < 1<<10 {
		errs = append(errs, fmt.Errorf("symbolizer max debug file bytes %d: must be at least 1 KiB", c.MaxDebugFileBytes))
	}
	return errors.Join(errs...)
}

// Symbolizer resolves (file id, address) pairs with the executables it
// has been given. It is safe for concurrent use.
type Symbolizer struct {
	cfg    Config
	logger *slog.Logger
	m      metrics

	mu     sync.Mutex
	files  map[schema.FileID]*file
	order  *list.List // of *file, most recently used first
	loaded int64      // bytes of the tables held
	closed bool
}

type file struct {
	id    schema.FileID
	name  string
	path  string // absolute path, for the debug file search; "" if none
	f     *os.File
	elem  *list.Element
	table *Table // nil: not parsed, or evicted
	bad   bool   // parse failed or timed out: not tried again
	// debugLogged: a rejected debug file was logged (once per file).
	debugLogged bool
}

type metrics struct {
	files, failures, evictions, parses prometheus.Counter
	resolved, unresolved, noFile       prometheus.Counter
	parseSeconds                       prometheus.Histogram
	// Separate debug files, per read of a stripped executable.
	debugFiles                   *prometheus.CounterVec // by via
	debugRejected, debugNotFound prometheus.Counter
}

// New returns a Symbolizer. reg and logger may be nil.
func New(cfg Config, logger *slog.Logger, reg prometheus.Registerer) (*Symbolizer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Symbolizer{cfg: cfg, logger: logger, files: make(map[schema.FileID]*file), order: list.New()}
	c := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: "tandem_encoder_symbolizer_" + name, Help: help})
	}
	s.m = metrics{
		files:      c("files_total", "Executables handed to the symbolizer."),
		parses:     c("parses_total", "Symbol table parses (a table evicted for memory is parsed again when needed)."),
		failures:   c("failures_total", "Executables whose symbols could not be read (bad ELF, no symbols, section over the limit, parse timeout)."),
		evictions:  c("evictions_total", "Tables and descriptors evicted to stay within --symbolizer-cache-bytes and the descriptor bound."),
		resolved:   c("resolved_total", "Locations named."),
		unresolved: c("unresolved_total", "Locations of a known executable that no symbol covers."),
		noFile:     c("no_executable_total", "Locations whose executable the symbolizer does not have (no descriptor, evicted or unreadable)."),
		debugFiles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tandem_encoder_symbolizer_debug_files_total",
			Help: "Separate debug files whose symbols were read for a stripped executable (--debuginfo-directories), by how they were found (build_id, debuglink).",
		}, []string{"via"}),
		debugRejected: c("debug_files_rejected_total", "Files at a debug file search place not used: another build id or CRC32, not ELF, over the size limit, unreadable."),
		debugNotFound: c("debug_files_not_found_total", "Reads of a stripped executable with a build id or .gnu_debuglink for which no debug file was found."),
		parseSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "tandem_encoder_symbolizer_parse_seconds", Help: "Time to read one executable's symbol tables.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 8),
		}),
	}
	cacheBytes := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tandem_encoder_symbolizer_cache_bytes", Help: "Bytes of symbol tables held (bounded by --symbolizer-cache-bytes).",
	}, func() float64 { s.mu.Lock(); defer s.mu.Unlock(); return float64(s.loaded) })
	if err := prom.Register(reg, "symbolizer", s.m.files, s.m.parses, s.m.failures, s.m.evictions,
		s.m.resolved, s.m.unresolved, s.m.noFile, s.m.parseSeconds,
		s.m.debugFiles, s.m.debugRejected, s.m.debugNotFound, cacheBytes); err != nil {
		return nil, err
	}
	return s, nil
}

// Add gives the Symbolizer an executable; it takes ownership of f (closed
// when evicted, on Close, or at once when the file id is already known).
func (s *Symbolizer) Add(n *schema.ExecutableNotice, f *os.File) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || n.FileID.IsZero() {
		f.Close()
		return
	}
	if e, ok := s.files[n.FileID]; ok {
		f.Close()
		s.order.MoveToFront(e.elem)
		return
	}
	s.m.files.Inc()
	e := &file{id: n.FileID, name: n.Path, f: f}
	if e.name == "" {
		e.name = n.FileName
	}
	if !n.IsVDSO && filepath.IsAbs(n.Path) {
		e.path = n.Path
	}
	e.elem = s.order.PushFront(e)
	s.files[n.FileID] = e
	for len(s.files) > s.cfg.MaxFiles {
		s.drop(s.order.Back().Value.(*file))
	}
}

// drop forgets e and closes its descriptor.
func (s *Symbolizer) drop(e *file) {
	s.order.Remove(e.elem)
	delete(s.files, e.id)
	if e.table != nil {
		s.loaded -= e.table.Bytes()
	}
	e.f.Close()
	s.m.evictions.Inc()
}

// Resolve appends the frames of addr (a file virtual address) in the
// executable id to dst, inlined calls first; it appends nothing when it
// cannot name the address. A first parse runs without the Symbolizer's
// lock, so Add never waits for it.
func (s *Symbolizer) Resolve(id schema.FileID, addr uint64, dst []Frame) []Frame {
	t := s.table(id)
	if t == nil {
		s.m.noFile.Inc()
		return dst
	}
	n := len(dst)
	dst = t.Lookup(addr, dst)
	if len(dst) == n {
		s.m.unresolved.Inc()
	} else {
		s.m.resolved.Inc()
	}
	return dst
}

// table returns the parsed table of id, parsing it if needed.
func (s *Symbolizer) table(id schema.FileID) *Table {
	s.mu.Lock()
	e, ok := s.files[id]
	if !ok || e.bad {
		s.mu.Unlock()
		return nil
	}
	s.order.MoveToFront(e.elem)
	if e.table != nil {
		t := e.table
		s.mu.Unlock()
		return t
	}
	s.mu.Unlock()

	t, err := s.parse(e)

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.files[id] != e {
		return nil // evicted (its descriptor closed) while parsing
	}
	if e.table != nil {
		return e.table // parsed by a concurrent caller
	}
	if err != nil {
		e.bad = true
		s.m.failures.Inc()
		s.logger.Info("cannot read symbols; its native frames stay unnamed", "executable", e.name, "file_id", e.id.Hex(), "err", err)
		return nil
	}
	s.countDebug(e, t)
	if t.Problems != nil {
		s.logger.Debug("symbols read in part", "executable", e.name, "problems", t.Problems)
	}
	b := t.Bytes()
	if b > s.cfg.CacheBytes {
		e.bad = true
		s.m.failures.Inc()
		s.logger.Info("symbol table larger than --symbolizer-cache-bytes; its native frames stay unnamed",
			"executable", e.name, "table_bytes", b, "cache_bytes", s.cfg.CacheBytes)
		return nil
	}
	// Evict other tables (keeping their descriptors) until this one fits.
	for el := s.order.Back(); s.loaded+b > s.cfg.CacheBytes && el != nil; el = el.Prev() {
		o := el.Value.(*file)
		if o != e && o.table != nil {
			s.loaded -= o.table.Bytes()
			o.table = nil
			s.m.evictions.Inc()
		}
	}
	e.table = t
	s.loaded += b
	return t
}

// countDebug counts and logs what the parse of e did about a debug file;
// called with s.mu held.
func (s *Symbolizer) countDebug(e *file, t *Table) {
	d := t.Debug
	switch {
	case d.Path != "":
		s.m.debugFiles.WithLabelValues(d.Via).Inc()
	case d.Searched:
		s.m.debugNotFound.Inc()
	}
	if d.Rejected > 0 {
		s.m.debugRejected.Add(float64(d.Rejected))
		if !e.debugLogged {
			e.debugLogged = true
			s.logger.Info("debug file found but not used", "executable", e.name, "problems", t.Problems)
		}
	}
}

// parse reads e's tables within the configured time, without s.mu (e.f
// and s.cfg do not change). A parse that overruns is abandoned: its
// goroutine finishes on its own (its work is bounded by MaxSectionBytes)
// and its result is dropped.
func (s *Symbolizer) parse(e *file) (*Table, error) {
	s.m.parses.Inc()
	st, err := e.f.Stat()
	if err != nil {
		return nil, fmt.Errorf("stat: %w", err)
	}
	type result struct {
		t   *Table
		err error
	}
	done := make(chan result, 1)
	start := time.Now()
	// Half the parse time at most for a debuglink's CRC32: a debug file
	// too slow to check must not cost the executable its own symbols.
	lim := Limits{MaxSectionBytes: s.cfg.MaxSectionBytes, MaxDebugFileBytes: s.cfg.MaxDebugFileBytes, DebugCRCTimeout: s.cfg.ParseTimeout / 2}
	search := DebugSearch{Dirs: s.cfg.DebugDirs, ExecutablePath: e.path}
	go func() {
		t, err := LoadWithDebug(e.f, st.Size(), lim, search)
		done <- result{t, err}
	}()
	timer := time.NewTimer(s.cfg.ParseTimeout)
	defer timer.Stop()
	select {
	case r := <-done:
		s.m.parseSeconds.Observe(time.Since(start).Seconds())
		return r.t, r.err
	case <-timer.C:
		return nil, fmt.Errorf("parse took longer than %v", s.cfg.ParseTimeout)
	}
}

// Close closes every descriptor held. Resolve names nothing afterwards.
func (s *Symbolizer) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, e := range s.files {
		e.f.Close()
	}
	clear(s.files)
	s.order.Init()
	s.loaded = 0
}
