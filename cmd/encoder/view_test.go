//go:build !noview

package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/tandem-profiler/tandem/schema"
)

// totalsByType sums a profile's values per sample type.
func totalsByType(p *profile.Profile) map[string]int64 {
	out := map[string]int64{}
	for _, s := range p.Sample {
		for i, v := range s.Value {
			out[p.SampleType[i].Type] += v
		}
	}
	return out
}

// viewInputs writes a synthetic dump and the pprof files replay makes of
// it (one per second of stream, so their sample types differ).
func viewInputs(t *testing.T, samples int) (dump, dir string, totals map[schema.Origin]int64) {
	t.Helper()
	dump, totals = writeSynthDump(t, samples)
	dir = t.TempDir()
	if err := run(t, "replay", "--output-dir", dir, "--profiling-duration", "1s", dump); err != nil {
		t.Fatal(err)
	}
	return dump, dir, totals
}

// TestViewLoads: a directory of pprof files, a dump, and both at once
// load into one profile holding every sample once per input.
func TestViewLoads(t *testing.T) {
	dump, dir, totals := viewInputs(t, 4000)
	logger := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		name  string
		paths []string
		times int64
	}{{"directory", []string{dir}, 1}, {"dump", []string{dump}, 1}, {"both", []string{dir, dump}, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := loadProfiles(context.Background(), tc.paths, logger)
			if err != nil {
				t.Fatal(err)
			}
			if err := p.CheckValid(); err != nil {
				t.Fatal(err)
			}
			got := totalsByType(p)
			if got["samples"] != tc.times*totals[schema.OriginCPUSampling] || got["wallclock"] != tc.times*totals[schema.OriginOffCPU] || got["events"] != tc.times*totals[schema.OriginProbe] {
				t.Errorf("totals %v, want %d × cpu %d, off-CPU %d, probe %d", got, tc.times,
					totals[schema.OriginCPUSampling], totals[schema.OriginOffCPU], totals[schema.OriginProbe])
			}
			if p.PeriodType == nil || p.PeriodType.Type != "cpu" || p.DefaultSampleType != "samples" {
				t.Errorf("period type %v, default sample type %q", p.PeriodType, p.DefaultSampleType)
			}
		})
	}

	junk := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(junk, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	for _, tc := range []struct {
		paths []string
		want  string
	}{
		{[]string{junk}, "neither a dump nor a pprof profile"},
		{[]string{empty}, "holds no profile"},
		{[]string{filepath.Join(empty, "missing")}, "no such file"},
	} {
		if _, err := loadProfiles(context.Background(), tc.paths, logger); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error saying %q", tc.paths, err, tc.want)
		}
	}
}

func TestViewAddress(t *testing.T) {
	for _, tc := range []struct {
		addr string
		ok   bool
	}{
		{"127.0.0.1:8080", true}, {"127.0.0.1:0", true}, {"[::1]:8080", true}, {"localhost:9", true},
		{"0.0.0.0:8080", false}, {":8080", false}, {"10.1.2.3:80", false}, {"example.com:80", false}, {"127.0.0.1", false},
	} {
		if err := checkLoopback(tc.addr); (err == nil) != tc.ok {
			t.Errorf("%q: %v, want ok=%t", tc.addr, err, tc.ok)
		}
	}
	if err := run(t, "view", "--http-address", "0.0.0.0:8080", "x"); err == nil || !strings.Contains(err.Error(), "loopback only") {
		t.Errorf("view on 0.0.0.0: %v", err)
	}
	// Clients from elsewhere are refused even if they reach the port.
	h := loopbackOnly(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for addr, code := range map[string]int{"10.0.0.7:4000": http.StatusForbidden, "127.0.0.1:4000": http.StatusOK} {
		r := httptest.NewRequest(http.MethodGet, "/ui/", nil)
		r.RemoteAddr = addr
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != code {
			t.Errorf("client %s: status %d, want %d", addr, w.Code, code)
		}
	}
}

// startView serves paths on a free loopback port until the test ends and
// returns the UI's base URL.
func startView(t *testing.T, paths ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- view(ctx, viewConfig{address: "127.0.0.1:0", symbolize: "none", paths: paths,
			logger: slog.New(slog.DiscardHandler), out: io.Discard, ready: func(u string) { ready <- u }})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("view: %v", err)
		}
	})
	select {
	case u := <-ready:
		return u
	case err := <-done:
		t.Fatalf("view ended before serving: %v", err)
	case <-time.After(60 * time.Second):
		t.Fatal("view did not serve within 60s")
	}
	return ""
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d, %v", url, resp.StatusCode, err)
	}
	return string(b)
}

// TestViewServes: pprof's pages are served under /ui/, the root redirects
// there, and the top table names the workload's functions as written.
func TestViewServes(t *testing.T) {
	_, dir, _ := viewInputs(t, 3000)
	base := startView(t, dir)
	top := get(t, base+"top") // the table's rows, as JSON the page renders
	for _, want := range []string{`"Name":"\u003cmodule\u003e"`, `"Name":"do_nanosleep"`, `"Name":"runtime.goexit"`} {
		if !strings.Contains(top, want) {
			t.Errorf("top does not hold %s", want)
		}
	}
	if strings.Contains(top, `"Name":"\u003cunknown\u003e"`) {
		t.Error("top shows <unknown> functions")
	}
	if page := get(t, strings.TrimSuffix(base, "ui/")); !strings.Contains(page, "flame") {
		t.Error("the root does not lead to the flame graph")
	}
	// pprof titles a profile after its first mapping: the merged profile
	// of every process is not one executable's (it was "vmlinux").
	if page := get(t, base); !strings.Contains(page, "<title>"+mergedTitle+" ") {
		t.Errorf("the UI's title does not call the profile %q", mergedTitle)
	}
}
