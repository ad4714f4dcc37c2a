package symbolize

import (
	"container/list"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tandem-profiler/tandem/internal/heldfd"
	"github.com/tandem-profiler/tandem/internal/prom"
	"github.com/tandem-profiler/tandem/schema"
)

// Config holds the Symbolizer's bounds.
type Config struct {
	// CacheBytes bounds the parsed tables held, in total (Table.Bytes).
	// A table larger than this is never kept: its file is not symbolized.
	CacheBytes int64
	// MaxFiles bounds the executables' descriptors held
	// (--max-held-executables); past it the least recently used is closed:
	// its table stays when it reads nothing from the file, and the file is
	// forgotten otherwise.
	MaxFiles int
	// MaxHeldBytes bounds the sizes of the files whose descriptors are
	// held (--max-held-executable-bytes), the disk a deleted file's
	// descriptor keeps from being reclaimed; past it the least recently
	// used is closed, as for MaxFiles. A file larger than this is not held.
	MaxHeldBytes int64
	// SweepInterval is how often the held descriptors are checked for a
	// deleted file (link count 0): its symbols are read, the table made
	// independent of the file (Table.Detached), and the descriptor closed.
	SweepInterval time.Duration
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

// Defaults of Config.
const (
	DefaultCacheBytes = 64 << 20
	// DefaultMaxFiles and DefaultMaxHeldBytes bound the descriptors held
	// (BenchmarkHeldExecutable, docs/executables.md): a linked file's
	// costs about 0.5 KiB of memory (its struct file in the kernel and
	// the entry here) and no disk, so the bounds are sized for a node's
	// executables, Kubernetes' own unstripped binaries (about 0.5-0.8 GiB)
	// with its workloads'. Disk is what a deleted file's descriptor keeps,
	// and that one is closed once its symbols are read.
	DefaultMaxFiles      = 4096
	DefaultMaxHeldBytes  = 4 << 30
	DefaultSweepInterval = time.Second
)

// DefaultConfig returns the default bounds.
func DefaultConfig() Config {
	return Config{
		CacheBytes:      DefaultCacheBytes,
		MaxFiles:        DefaultMaxFiles,
		MaxHeldBytes:    DefaultMaxHeldBytes,
		SweepInterval:   DefaultSweepInterval,
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
		errs = append(errs, fmt.Errorf("--max-held-executables=%d: must be at least 1", c.MaxFiles))
	}
	if c.MaxHeldBytes < 1<<20 {
		errs = append(errs, fmt.Errorf("--max-held-executable-bytes=%d: must be at least 1 MiB", c.MaxHeldBytes))
	}
	if c.SweepInterval <= 0 {
		errs = append(errs, fmt.Errorf("symbolizer sweep interval %v: must be positive", c.SweepInterval))
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
	// The descriptors held: how many, the sizes of their files, and how
	// many of those files were deleted at the last check.
	held      heldfd.Tally
	bigLogged bool // a file over MaxHeldBytes was logged

	kick chan struct{} // capacity 1: a deleted file to release
	done chan struct{} // closed by Close: the sweeper returns
	wg   sync.WaitGroup
}

type file struct {
	id   schema.FileID
	name string
	path string // absolute path, for the debug file search; "" if none
	// The descriptor (File nil once closed: the entry then lives on for
	// its table, one that reads nothing from the file, or as a marker of
	// a file whose symbols could not be read), its size when added and
	// whether its file was deleted at the last check.
	heldfd.Desc
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
	// Descriptors closed before the bounds required: the file was deleted
	// and its symbols were read (or could not be).
	releasedEarly prometheus.Counter
	evicted       *prometheus.CounterVec // by bound: count, bytes
}

// Labels of tandem_encoder_executables_evicted_total.
const (
	boundCount = "count" // --max-held-executables
	boundBytes = "bytes" // --max-held-executable-bytes
)

// maxEntriesPerFile bounds the files known (descriptor or not) to this
// many times MaxFiles: an entry without a descriptor costs a few hundred
// bytes beside its table (about 300 B with one, BenchmarkHeldExecutable),
// so at the default MaxFiles the entries cost at most about 2.5 MB.
const maxEntriesPerFile = 2

// New returns a Symbolizer. reg and logger may be nil.
func New(cfg Config, logger *slog.Logger, reg prometheus.Registerer) (*Symbolizer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Symbolizer{
		cfg: cfg, logger: logger, files: make(map[schema.FileID]*file), order: list.New(),
		kick: make(chan struct{}, 1), done: make(chan struct{}),
	}
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
		releasedEarly: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "tandem_encoder_executables_released_early_total",
			Help: "Executable descriptors closed as soon as their file was found deleted and its symbols read, before any bound required it.",
		}),
		evicted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tandem_encoder_executables_evicted_total",
			Help: "Executable descriptors closed to stay within a bound: count (--max-held-executables) or bytes (--max-held-executable-bytes).",
		}, []string{"bound"}),
	}
	s.m.evicted.WithLabelValues(boundCount)
	s.m.evicted.WithLabelValues(boundBytes)
	gauge := func(name, help string, v func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { s.mu.Lock(); defer s.mu.Unlock(); return v() })
	}
	held := gauge("tandem_encoder_executables_held", "Executable descriptors the symbolizer holds (bounded by --max-held-executables).",
		func() float64 { return float64(s.held.Files) })
	heldBytes := gauge("tandem_encoder_executables_held_bytes", "Sizes of the files whose descriptors the symbolizer holds (bounded by --max-held-executable-bytes).",
		func() float64 { return float64(s.held.Bytes) })
	heldDeleted := gauge("tandem_encoder_executables_held_deleted", "Held executable descriptors whose file was deleted at the last check (closed once their symbols are read).",
		func() float64 { return float64(s.held.Deleted) })
	cacheBytes := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "tandem_encoder_symbolizer_cache_bytes", Help: "Bytes of symbol tables held (bounded by --symbolizer-cache-bytes).",
	}, func() float64 { s.mu.Lock(); defer s.mu.Unlock(); return float64(s.loaded) })
	if err := prom.Register(reg, "symbolizer", s.m.files, s.m.parses, s.m.failures, s.m.evictions,
		s.m.resolved, s.m.unresolved, s.m.noFile, s.m.parseSeconds,
		s.m.debugFiles, s.m.debugRejected, s.m.debugNotFound, cacheBytes,
		s.m.releasedEarly, s.m.evicted, held, heldBytes, heldDeleted); err != nil {
		return nil, err
	}
	s.wg.Go(s.sweeper)
	return s, nil
}

// Add gives the Symbolizer an executable; it takes ownership of f (closed
// when evicted, on Close, or at once when the file id is already known).
// A file found deleted is released by the sweeper soon after.
func (s *Symbolizer) Add(n *schema.ExecutableNotice, f *os.File) {
	size, deleted, statErr := statFile(f)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || n.FileID.IsZero() || statErr != nil {
		f.Close()
		return
	}
	if e, ok := s.files[n.FileID]; ok {
		f.Close()
		s.order.MoveToFront(e.elem)
		return
	}
	if size > s.cfg.MaxHeldBytes {
		// Alone over the bound: closed at once, the others kept.
		f.Close()
		s.m.evicted.WithLabelValues(boundBytes).Inc()
		if !s.bigLogged {
			s.bigLogged = true
			s.logger.Info("executable larger than --max-held-executable-bytes not held; its native frames stay unnamed",
				"executable", n.Path, "bytes", size, "max_held_executable_bytes", s.cfg.MaxHeldBytes)
		}
		return
	}
	s.m.files.Inc()
	e := &file{id: n.FileID, name: n.Path, Desc: heldfd.Desc{File: f, Size: size, Deleted: deleted}}
	if e.name == "" {
		e.name = n.FileName
	}
	if !n.IsVDSO && filepath.IsAbs(n.Path) {
		e.path = n.Path
	}
	e.elem = s.order.PushFront(e)
	s.files[n.FileID] = e
	s.held.Hold(&e.Desc)
	if deleted {
		s.wake()
	}
	s.enforce()
}

// statFile returns f's size and whether its file was deleted (link count
// 0: only open descriptors and mappings keep it, and its disk space).
func statFile(f *os.File) (size int64, deleted bool, err error) {
	st, err := f.Stat()
	if err != nil {
		return 0, false, err
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		deleted = sys.Nlink == 0
	}
	return st.Size(), deleted, nil
}

// wake asks the sweeper to run now.
func (s *Symbolizer) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// enforce closes the least recently used descriptors past MaxFiles and
// MaxHeldBytes, and forgets the least recently used files past
// maxEntriesPerFile*MaxFiles; called with s.mu held.
func (s *Symbolizer) enforce() {
	for el := s.order.Back(); el != nil && (s.held.Files > s.cfg.MaxFiles || s.held.Bytes > s.cfg.MaxHeldBytes); {
		e, prev := el.Value.(*file), el.Prev()
		if e.File != nil {
			bound := boundBytes
			if s.held.Files > s.cfg.MaxFiles {
				bound = boundCount
			}
			s.closeFile(e)
			s.m.evicted.WithLabelValues(bound).Inc()
			s.m.evictions.Inc()
		}
		el = prev
	}
	for len(s.files) > maxEntriesPerFile*s.cfg.MaxFiles {
		s.drop(s.order.Back().Value.(*file))
	}
}

// closeFile closes e's descriptor; called with s.mu held. A table that
// reads from the file goes with it, and so does the entry when it keeps
// no table and is no marker of a failed parse.
func (s *Symbolizer) closeFile(e *file) {
	if !s.held.Close(&e.Desc) {
		return
	}
	if e.table != nil && e.table.NeedsFile() {
		s.loaded -= e.table.Bytes()
		e.table = nil
	}
	if e.table == nil && !e.bad {
		s.order.Remove(e.elem)
		delete(s.files, e.id)
	}
}

// drop forgets e and closes its descriptor; called with s.mu held.
func (s *Symbolizer) drop(e *file) {
	if e.table != nil {
		s.loaded -= e.table.Bytes()
		e.table = nil
	}
	e.bad = true // closeFile keeps the entry: it is removed here
	s.closeFile(e)
	s.order.Remove(e.elem)
	delete(s.files, e.id)
	s.m.evictions.Inc()
}

// Resolve appends the frames of addr (a file virtual address) in the
// executable id to dst, inlined calls first; it appends nothing when it
// cannot name the address. known is false when it has no symbols of the
// executable (never given, forgotten, or unreadable): asking again may
// name the address once the executable is added. A first parse runs
// without the Symbolizer's lock, so Add never waits for it.
func (s *Symbolizer) Resolve(id schema.FileID, addr uint64, dst []Frame) (_ []Frame, known bool) {
	t := s.table(id)
	if t == nil {
		s.m.noFile.Inc()
		return dst, false
	}
	n := len(dst)
	dst = t.Lookup(addr, dst)
	if len(dst) == n {
		s.m.unresolved.Inc()
	} else {
		s.m.resolved.Inc()
	}
	return dst, true
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
	if e.table != nil || e.File == nil {
		t := e.table
		s.mu.Unlock()
		return t
	}
	f := e.File
	s.mu.Unlock()

	t, err := s.parse(e, f)

	s.mu.Lock()
	defer s.mu.Unlock()
	if s.files[id] != e || e.table != nil || e.File != f {
		// Evicted or released (its descriptor closed) while parsing, or
		// parsed by a concurrent caller.
		return e.table
	}
	if err != nil {
		e.bad = true
		s.closeFile(e) // nothing to read it for: the entry stays, a marker
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
		s.closeFile(e)
		s.m.failures.Inc()
		s.logger.Info("symbol table larger than --symbolizer-cache-bytes; its native frames stay unnamed",
			"executable", e.name, "table_bytes", b, "cache_bytes", s.cfg.CacheBytes)
		return nil
	}
	s.fit(e, b)
	e.table = t
	s.loaded += b
	if e.Deleted {
		s.wake() // its descriptor can go now
	}
	return t
}

// fit evicts tables other than e's until b more bytes fit in CacheBytes;
// called with s.mu held. A file whose table goes keeps its descriptor,
// to parse it again, or is forgotten when it has none.
func (s *Symbolizer) fit(e *file, b int64) {
	for el := s.order.Back(); s.loaded+b > s.cfg.CacheBytes && el != nil; {
		o, prev := el.Value.(*file), el.Prev()
		if o != e && o.table != nil {
			s.loaded -= o.table.Bytes()
			o.table = nil
			s.m.evictions.Inc()
			if o.File == nil {
				s.order.Remove(o.elem)
				delete(s.files, o.id)
			}
		}
		el = prev
	}
}

// sweeper checks the held descriptors for deleted files every
// SweepInterval, and when woken, until Close.
func (s *Symbolizer) sweeper() {
	tick := time.NewTicker(s.cfg.SweepInterval)
	defer tick.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-tick.C:
		case <-s.kick:
		}
		s.sweep()
	}
}

// sweep releases the descriptors of deleted files: it reads their
// symbols if that was not done yet, makes the table independent of the
// file, and closes the descriptor.
func (s *Symbolizer) sweep() {
	type held struct {
		e *file
		f *os.File
	}
	s.mu.Lock()
	all := make([]held, 0, s.held.Files)
	for el := s.order.Front(); el != nil; el = el.Next() {
		if e := el.Value.(*file); e.File != nil {
			all = append(all, held{e, e.File})
		}
	}
	s.mu.Unlock()
	for _, h := range all {
		select {
		case <-s.done:
			return
		default:
		}
		_, deleted, err := statFile(h.f)
		if err != nil { // closed meanwhile
			continue
		}
		s.mu.Lock()
		if h.e.File == h.f {
			s.held.SetDeleted(&h.e.Desc, deleted)
		}
		s.mu.Unlock()
		if deleted {
			s.release(h.e, h.f)
		}
	}
}

// release closes f, e's descriptor of a deleted file, keeping what was
// read from it.
func (s *Symbolizer) release(e *file, f *os.File) {
	t := s.table(e.id) // parses it if needed
	var detached *Table
	var err error
	if t != nil && t.NeedsFile() {
		detached, err = t.Detached(s.cfg.CacheBytes)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.files[e.id] != e || e.File != f {
		return // closed meanwhile
	}
	switch {
	case err != nil:
		s.logger.Info("symbols of a deleted executable not kept; its native frames stay unnamed", "executable", e.name, "err", err)
	case detached != nil && e.table == t:
		s.loaded -= t.Bytes()
		s.fit(e, detached.Bytes())
		e.table = detached
		s.loaded += detached.Bytes()
	}
	s.closeFile(e)
	s.m.releasedEarly.Inc()
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

// parse reads e's tables from f, its descriptor, within the configured
// time, without s.mu. A parse that overruns is abandoned: its
// goroutine finishes on its own (its work is bounded by MaxSectionBytes)
// and its result is dropped.
func (s *Symbolizer) parse(e *file, f *os.File) (*Table, error) {
	s.m.parses.Inc()
	st, err := f.Stat()
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
		t, err := LoadWithDebug(f, st.Size(), lim, search)
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

// Close stops the sweeper and closes every descriptor held. Resolve
// names nothing afterwards. Calling it again does nothing.
func (s *Symbolizer) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	close(s.done)
	s.mu.Unlock()
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.files {
		s.held.Close(&e.Desc)
	}
	clear(s.files)
	s.order.Init()
	s.loaded = 0
}
