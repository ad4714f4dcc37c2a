package main

import (
	"bytes"
	"context"
	"html"
	"os/exec"
	"regexp"
	"testing"
	"time"

	"github.com/tandem-profiler/tandem/internal/privtest"
)

// chromium returns Debian's headless-capable browser (`make test`
// installs the chromium package), skipping (failing under CI) without it.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	privtest.SkipOrFail(t, "needs chromium to render pprof's web UI (apt-get install chromium)")
	return ""
}

var boxText = regexp.MustCompile(`<div class="boxtext"[^>]*>([^<]*)</div>`)

// renderFlameGraph loads url in a fresh headless Chromium and returns the
// texts of the flame graph's boxes, as the page's script drew them.
func renderFlameGraph(t *testing.T, url string) []string {
	t.Helper()
	bin := chromium(t)
	// Bounds a browser that hangs; the page itself renders in seconds.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+t.TempDir(), "--window-size=1600,1000", "--dump-dom", url)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	dom, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom %s: %v\n%s", url, err, stderr.Bytes())
	}
	var texts []string
	for _, m := range boxText.FindAllSubmatch(dom, -1) {
		texts = append(texts, html.UnescapeString(string(m[1])))
	}
	return texts
}

// TestViewInChromium: the flame graph view serves renders in a real
// browser, with boxes named after the workload's functions as written
// (Python's <module> too), and none named <unknown>.
func TestViewInChromium(t *testing.T) {
	chromium(t)
	_, dir, _ := viewInputs(t, 3000)
	texts := renderFlameGraph(t, startView(t, dir)+"flamegraph")
	seen := map[string]bool{}
	for _, s := range texts {
		seen[s] = true
	}
	for _, want := range []string{"root", "<module>", "runtime.goexit", "entry_SYSCALL_64_after_hwframe"} {
		if !seen[want] {
			t.Errorf("no flame graph box names %q (%d boxes with text: %q)", want, len(texts), texts)
		}
	}
	if seen["<unknown>"] {
		t.Error("a flame graph box shows <unknown>")
	}
}
