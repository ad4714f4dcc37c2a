package pprofout

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
)

// DefaultPrefix is the default file name prefix.
const DefaultPrefix = "tandem"

// timeLayout names files by the end of their interval, in UTC, sortable.
const timeLayout = "20060102T150405.000Z"

// Config says where a Sink writes.
type Config struct {
	// Dir is the output directory; it is created if missing.
	Dir string
	// Prefix starts every file name; empty means DefaultPrefix.
	Prefix string
	// MaxBytes, when positive, bounds the bytes of this sink's files
	// (Prefix-*.pb.gz) kept in Dir: after each file is written, the oldest
	// are deleted until the rest fit. The file just written is kept even
	// when it alone is larger.
	MaxBytes int64

	_ struct{}
}

// DefaultConfig returns the defaults (the directory still has to be set).
func DefaultConfig() Config { return Config{Prefix: DefaultPrefix} }

// Validate reports every problem with the configuration.
func (c Config) Validate() error {
	var errs []error
	if c.Dir == "" {
		errs = append(errs, errors.New("pprof output directory is not set"))
	}
	if c.MaxBytes < 0 {
		errs = append(errs, fmt.Errorf("pprof output max bytes %d: want 0 (keep every file) or more", c.MaxBytes))
	}
	if strings.ContainsAny(c.Prefix, `/\`) {
		errs = append(errs, fmt.Errorf("pprof file prefix %q: must be a file name part", c.Prefix))
	}
	return errors.Join(errs...)
}

// FileMode is the mode the files a Sink writes are created with, less the
// process's umask: the owner (the encoder) writes, the directory's group
// reads (make run gives it to the user who ran sudo), nobody else. A
// umask of 077 (the systemd unit's) keeps them the owner's alone.
const FileMode = 0o640

// Sink writes one pprof file per flush.
type Sink struct {
	cfg     Config
	logger  *slog.Logger
	mu      sync.Mutex
	deleted atomic.Int64 // files deleted to stay under MaxBytes
}

// NewSink returns a Sink writing into cfg.Dir, creating it if needed.
// logger may be nil.
func NewSink(cfg Config, logger *slog.Logger) (*Sink, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultPrefix
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("create pprof output directory: %w", err)
	}
	if err := checkWritable(cfg.Dir); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Sink{cfg: cfg, logger: logger.With("component", "pprofout")}, nil
}

// createTemp creates a new hidden file in the directory with FileMode (less
// the umask), under a name no other file has.
func (s *Sink) createTemp() (*os.File, error) {
	for range 10 {
		name := filepath.Join(s.cfg.Dir, fmt.Sprintf(".%s-%d.tmp", s.cfg.Prefix, rand.Uint64()))
		f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, FileMode)
		if !errors.Is(err, fs.ErrExist) {
			return f, err
		}
	}
	return nil, fmt.Errorf("no free temporary name in %s", s.cfg.Dir)
}

// checkWritable creates and removes a file in dir: a directory this user
// cannot write fails at start, not at the first flush's retries.
func checkWritable(dir string) error {
	probe, err := os.CreateTemp(dir, ".tandem-probe-*")
	if err != nil {
		return fmt.Errorf("pprof output directory %s is not writable by this user (uid %d): %w; make it writable (chown, chmod) or choose another directory", dir, os.Getuid(), err)
	}
	probe.Close()
	return os.Remove(probe.Name())
}

// Write writes f as <dir>/<prefix>-<end of interval, UTC>.pb.gz and returns
// the path. A flush without samples writes nothing and returns "". The file
// appears complete or not at all.
func (s *Sink) Write(f *aggregate.Flush) (string, error) {
	if f.Empty() {
		return "", nil
	}
	data, err := Encode(f)
	if err != nil {
		return "", err
	}
	return s.WriteEncoded(data, f.EndUnixNano)
}

// Encode returns f as a gzipped pprof profile, the bytes Write writes.
func Encode(f *aggregate.Flush) ([]byte, error) {
	var buf bytes.Buffer
	if err := Profile(f).Write(&buf); err != nil {
		return nil, fmt.Errorf("encode pprof profile: %w", err)
	}
	return buf.Bytes(), nil
}

// WriteEncoded writes a profile Encode returned, for a flush that ended
// at endUnixNano, like Write does.
func (s *Sink) WriteEncoded(data []byte, endUnixNano int64) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()

	tmp, err := s.createTemp()
	if err != nil {
		return "", fmt.Errorf("create pprof file: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return "", fmt.Errorf("write pprof file: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return "", fmt.Errorf("sync pprof file: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("close pprof file: %w", err)
	}
	path := s.freePath(time.Unix(0, endUnixNano).UTC())
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("rename pprof file: %w", err)
	}
	committed = true
	s.logger.Debug("wrote pprof profile", "path", path, "bytes", len(data))
	if s.cfg.MaxBytes > 0 {
		s.prune(path)
	}
	return path, nil
}

// Deleted returns how many files the sink deleted to stay under MaxBytes.
func (s *Sink) Deleted() int64 { return s.deleted.Load() }

// prune deletes the oldest of the sink's files (by name: the end of their
// interval) until the rest, kept included, fit in MaxBytes. Files of other
// names are neither counted nor touched. A failure is logged: the file
// just written stands, and the next write tries again.
func (s *Sink) prune(kept string) {
	entries, err := os.ReadDir(s.cfg.Dir)
	if err != nil {
		s.logger.Warn("list the pprof directory to keep it under its size bound", "dir", s.cfg.Dir, "err", err)
		return
	}
	type file struct {
		name string
		size int64
	}
	var files []file // sorted by name: os.ReadDir sorts
	var total int64
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || !strings.HasPrefix(name, s.cfg.Prefix+"-") || !strings.HasSuffix(name, ".pb.gz") {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // deleted meanwhile
		}
		files = append(files, file{name, info.Size()})
		total += info.Size()
	}
	for _, f := range files {
		if total <= s.cfg.MaxBytes {
			return
		}
		path := filepath.Join(s.cfg.Dir, f.name)
		if path == kept {
			continue
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.logger.Warn("delete an old pprof file to keep the directory under its size bound", "path", path, "err", err)
			return
		}
		total -= f.size
		s.deleted.Add(1)
		s.logger.Debug("deleted an old pprof file: the directory is at its size bound", "path", path, "max_bytes", s.cfg.MaxBytes)
	}
}

// Dir returns the output directory.
func (s *Sink) Dir() string { return s.cfg.Dir }

// freePath returns the file name for a flush ending at t, with a numeric
// suffix when a file of that name exists.
func (s *Sink) freePath(t time.Time) string {
	base := filepath.Join(s.cfg.Dir, s.cfg.Prefix+"-"+t.Format(timeLayout))
	path := base + ".pb.gz"
	for i := 1; ; i++ {
		if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
			return path
		}
		path = base + "-" + strconv.Itoa(i) + ".pb.gz"
	}
}
