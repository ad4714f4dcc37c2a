package symbolize

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tandem-profiler/tandem/schema"
	"github.com/tandem-profiler/tandem/test/promtest"
)

func notice(id uint64, path string) *schema.ExecutableNotice {
	return &schema.ExecutableNotice{FileID: schema.FileID{Hi: id, Lo: id}, Path: path, HasDescriptor: true}
}

func open(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestSymbolizer(t *testing.T) {
	wl := buildC(t, false)
	syms := objdumpSymbols(t, wl)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	junk := filepath.Join(t.TempDir(), "junk")
	if err := os.WriteFile(junk, bytes.Repeat([]byte("\x7fELF junk"), 100), 0o600); err != nil {
		t.Fatal(err)
	}
	goTab := loadFile(t, exe)
	cTab := loadFile(t, wl)

	t.Run("resolves, and counts what it cannot", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		s, err := New(DefaultConfig(), nil, reg)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		s.Add(notice(1, wl), open(t, wl))
		s.Add(notice(2, junk), open(t, junk))
		s.Add(notice(1, wl), open(t, wl)) // a second notice of a known file: closed
		if got, known := s.Resolve(schema.FileID{Hi: 1, Lo: 1}, syms["tandem_leaf"]+2, nil); len(got) != 1 || got[0].Function != "tandem_leaf" || !known {
			t.Errorf("tandem_leaf: got %+v, known %v", got, known)
		}
		if got, known := s.Resolve(schema.FileID{Hi: 1, Lo: 1}, 1, nil); len(got) != 0 || !known {
			t.Errorf("an address no symbol covers: got %+v, known %v", got, known)
		}
		if got, known := s.Resolve(schema.FileID{Hi: 2, Lo: 2}, 0x1000, nil); len(got) != 0 || known {
			t.Errorf("junk file named %+v, known %v", got, known)
		}
		s.Resolve(schema.FileID{Hi: 2, Lo: 2}, 0x1000, nil) // not parsed again
		if got, known := s.Resolve(schema.FileID{Hi: 3, Lo: 3}, 0x1000, nil); len(got) != 0 || known {
			t.Errorf("unknown file named %+v, known %v", got, known)
		}
		for name, want := range map[string]float64{
			"tandem_encoder_symbolizer_files_total":         2,
			"tandem_encoder_symbolizer_parses_total":        2,
			"tandem_encoder_symbolizer_failures_total":      1,
			"tandem_encoder_symbolizer_resolved_total":      1,
			"tandem_encoder_symbolizer_no_executable_total": 3,
		} {
			if got := promtest.Value(t, reg, name); got != want {
				t.Errorf("%s = %v, want %v", name, got, want)
			}
		}
	})

	t.Run("bounded bytes: evicts tables, parses again", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		cfg := DefaultConfig()
		cfg.CacheBytes = goTab.Bytes() + cTab.Bytes()/2 // not both at once
		s, err := New(cfg, nil, reg)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		s.Add(notice(1, wl), open(t, wl))
		s.Add(notice(2, exe), open(t, exe))
		leaf := func() {
			t.Helper()
			if got, _ := s.Resolve(schema.FileID{Hi: 1, Lo: 1}, syms["tandem_leaf"], nil); len(got) != 1 || got[0].Function != "tandem_leaf" {
				t.Fatalf("tandem_leaf: got %+v", got)
			}
		}
		goFn := func() {
			t.Helper()
			if got, _ := s.Resolve(schema.FileID{Hi: 2, Lo: 2}, goEntry(), nil); len(got) == 0 {
				t.Fatal("Go function not named")
			}
		}
		leaf()
		goFn()
		leaf()
		if got := promtest.Value(t, reg, "tandem_encoder_symbolizer_parses_total"); got != 3 {
			t.Errorf("parses = %v, want 3 (the C table evicted by the Go one, then parsed again)", got)
		}
		if got := promtest.Value(t, reg, "tandem_encoder_symbolizer_cache_bytes"); got > float64(cfg.CacheBytes) {
			t.Errorf("holds %v bytes, bound %d", got, cfg.CacheBytes)
		}
	})

	t.Run("bounded descriptors", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.MaxFiles = 1
		s, err := New(cfg, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		first := open(t, wl)
		s.Add(notice(1, wl), first)
		s.Add(notice(2, exe), open(t, exe))
		if _, err := first.Stat(); err == nil {
			t.Error("the least recently used descriptor is still open")
		}
		if got, _ := s.Resolve(schema.FileID{Hi: 1, Lo: 1}, syms["tandem_leaf"], nil); len(got) != 0 {
			t.Errorf("evicted file still named: %+v", got)
		}
	})

	t.Run("parse timeout", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.ParseTimeout = time.Nanosecond
		reg := prometheus.NewRegistry()
		s, err := New(cfg, nil, reg)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		s.Add(notice(2, exe), open(t, exe))
		// Either the parse lost the race with a 1 ns timer (counted as a
		// failure), or it won it; it must never block or crash.
		got, _ := s.Resolve(schema.FileID{Hi: 2, Lo: 2}, goEntry(), nil)
		if fails := promtest.Value(t, reg, "tandem_encoder_symbolizer_failures_total"); (fails == 1) == (len(got) > 0) {
			t.Errorf("failures %v with %d frames", fails, len(got))
		}
	})

	t.Run("concurrent Add, Resolve and eviction", func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.MaxFiles = 4
		s, err := New(cfg, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		done := make(chan struct{})
		go func() {
			defer close(done)
			for i := range 40 {
				s.Add(notice(uint64(i%8+1), exe), open(t, exe))
			}
		}()
		for i := range 200 {
			s.Resolve(schema.FileID{Hi: uint64(i%8 + 1), Lo: uint64(i%8 + 1)}, goEntry(), nil)
		}
		<-done
	})

	t.Run("config", func(t *testing.T) {
		if _, err := New(Config{}, nil, nil); err == nil {
			t.Error("zero config accepted")
		}
	})
}

func goEntry() uint64 {
	return uint64(funcPC(TestSymbolizer))
}
