package symbolize

import (
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tandem-profiler/tandem/schema"
	"github.com/tandem-profiler/tandem/test/promtest"
)

// copyFile copies src to a new file in dir, padded with pad zero bytes
// (an ELF file reads the same with bytes after its sections), and
// returns its path.
func copyFile(t *testing.T, src, dir, name string, pad int) string {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	dst := filepath.Join(dir, name)
	out, err := os.Create(dst)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if _, err := out.Write(make([]byte, pad)); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	return dst
}

// manualSweep is a config whose sweeper runs only when woken or swept
// by the test.
func manualSweep() Config {
	cfg := DefaultConfig()
	cfg.SweepInterval = time.Hour
	return cfg
}

// TestTableDetached: a Go table made independent of its file names the
// same frames, file and line included, after the file is closed; a C
// table is already independent.
func TestTableDetached(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	f := open(t, exe)
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	tab, err := Load(f, st.Size(), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if !tab.NeedsFile() {
		t.Fatal("a Go table does not read its file")
	}
	want := tab.Lookup(goEntry(), nil)
	if len(want) == 0 || want[len(want)-1].Line == 0 {
		t.Fatalf("lookup before detaching: %+v", want)
	}
	if _, err := tab.Detached(1 << 10); err == nil {
		t.Error("detached into 1 KiB")
	}
	d, err := tab.Detached(1 << 30)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if d.NeedsFile() {
		t.Error("the detached table still reads its file")
	}
	if got := tab.Lookup(goEntry(), nil); len(got) != 0 {
		t.Errorf("the attached table named %+v with its file closed", got)
	}
	got := d.Lookup(goEntry(), nil)
	if len(got) != len(want) || got[len(got)-1] != want[len(want)-1] {
		t.Errorf("detached: %+v, want %+v", got, want)
	}
	if d.Bytes() <= tab.Bytes() {
		t.Errorf("detached table accounts %d bytes, attached %d", d.Bytes(), tab.Bytes())
	}
	c := loadFile(t, buildC(t, false))
	if c.NeedsFile() {
		t.Error("a C table reads its file")
	}
	if d, err := c.Detached(0); err != nil || d != c {
		t.Errorf("C table detached: %v, %v", d, err)
	}
}

// TestReleaseDeleted: the descriptor of a deleted executable is closed
// once its symbols are read, its frames still named; one of a file still
// linked stays.
func TestReleaseDeleted(t *testing.T) {
	wl := buildC(t, false)
	syms := objdumpSymbols(t, wl)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	goExe := copyFile(t, exe, t.TempDir(), "go", 0)
	leaf := func(s *Symbolizer, id uint64) []Frame {
		got, _ := s.Resolve(schema.FileID{Hi: id, Lo: id}, syms["tandem_leaf"], nil)
		return got
	}
	for _, tc := range []struct {
		name        string
		path        string
		parseBefore bool // resolved before the file is deleted
		resolve     func(s *Symbolizer) []Frame
	}{
		{"C, parsed before", wl, true, func(s *Symbolizer) []Frame { return leaf(s, 1) }},
		{"C, parsed by the sweep", wl, false, func(s *Symbolizer) []Frame { return leaf(s, 1) }},
		{"Go, detached", goExe, true, func(s *Symbolizer) []Frame {
			got, _ := s.Resolve(schema.FileID{Hi: 1, Lo: 1}, goEntry(), nil)
			return got
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			s, err := New(manualSweep(), nil, reg)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			dir := t.TempDir()
			deleted := copyFile(t, tc.path, dir, "deleted", 0)
			linked := copyFile(t, tc.path, dir, "linked", 0)
			df, lf := open(t, deleted), open(t, linked)
			s.Add(notice(1, deleted), df)
			s.Add(notice(2, linked), lf)
			if tc.parseBefore && len(tc.resolve(s)) == 0 {
				t.Fatal("not named before deletion")
			}
			if err := os.Remove(deleted); err != nil {
				t.Fatal(err)
			}
			s.sweep()
			if _, err := df.Stat(); err == nil {
				t.Error("the deleted file's descriptor is still open")
			}
			if _, err := lf.Stat(); err != nil {
				t.Errorf("the linked file's descriptor was closed: %v", err)
			}
			if got := tc.resolve(s); len(got) == 0 {
				t.Error("not named once its descriptor is closed")
			}
			for name, want := range map[string]float64{
				"tandem_encoder_executables_held":                 1,
				"tandem_encoder_executables_held_deleted":         0,
				"tandem_encoder_executables_released_early_total": 1,
			} {
				if got := promtest.Value(t, reg, name); got != want {
					t.Errorf("%s = %v, want %v", name, got, want)
				}
			}
		})
	}
}

// TestHeldBounds: past either bound the least recently used descriptor
// is closed, counted by bound; a table that reads nothing from its file
// outlives its descriptor, and a file larger than the byte bound is not
// held.
func TestHeldBounds(t *testing.T) {
	wl := buildC(t, false)
	syms := objdumpSymbols(t, wl)
	dir := t.TempDir()
	const pad = 400 << 10
	paths := make([]string, 4)
	for i := range paths {
		paths[i] = copyFile(t, wl, dir, string(rune('a'+i)), pad)
	}
	st, err := os.Stat(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	cfg := manualSweep()
	cfg.MaxHeldBytes = 1 << 20 // two of the padded files, not three
	cfg.MaxFiles = 3
	s, err := New(cfg, nil, reg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	name := func(id uint64) []Frame {
		got, _ := s.Resolve(schema.FileID{Hi: id, Lo: id}, syms["tandem_leaf"], nil)
		return got
	}
	files := make([]*os.File, len(paths))
	for i, p := range paths[:2] {
		files[i] = open(t, p)
		s.Add(notice(uint64(i+1), p), files[i])
	}
	if len(name(1)) == 0 { // parsed: its table outlives the descriptor
		t.Fatal("not named")
	}
	files[2] = open(t, paths[2])
	s.Add(notice(3, paths[2]), files[2]) // over the byte bound: 2 goes (1 was used since)
	if _, err := files[1].Stat(); err == nil {
		t.Error("the least recently used descriptor is still open")
	}
	if got := name(2); len(got) != 0 {
		t.Errorf("a file evicted before it was read is named: %+v", got)
	}
	if held := promtest.Value(t, reg, "tandem_encoder_executables_held_bytes"); held > float64(cfg.MaxHeldBytes) || held != float64(2*st.Size()) {
		t.Errorf("held %v bytes, want %d (bound %d)", held, 2*st.Size(), cfg.MaxHeldBytes)
	}
	// The byte bound closes 1's descriptor now; its table stays.
	files[3] = open(t, paths[3])
	s.Add(notice(4, paths[3]), files[3])
	if _, err := files[0].Stat(); err == nil {
		t.Error("descriptor of file 1 still open")
	}
	if len(name(1)) == 0 {
		t.Error("a C table did not outlive its descriptor")
	}
	big := copyFile(t, wl, dir, "big", 2<<20)
	bf := open(t, big)
	s.Add(notice(5, big), bf)
	if _, err := bf.Stat(); err == nil {
		t.Error("a file larger than the byte bound is held")
	}
	cfg.MaxHeldBytes = 1 << 30
	s2, err := New(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	for i := range 4 {
		s2.Add(notice(uint64(i+1), paths[i]), open(t, paths[i]))
	}
	if s2.held.Files != cfg.MaxFiles {
		t.Errorf("%d descriptors held, bound %d", s2.held.Files, cfg.MaxFiles)
	}
	if got := promtest.Value(t, reg, "tandem_encoder_executables_evicted_total", "bound", "bytes"); got != 3 {
		t.Errorf("evicted for bytes: %v, want 3", got)
	}
	if got := promtest.Value(t, reg, "tandem_encoder_executables_held"); got != 2 {
		t.Errorf("held: %v, want 2", got)
	}
}
