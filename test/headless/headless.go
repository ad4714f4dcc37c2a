package headless

import (
	"bytes"
	"context"
	"html"
	"os/exec"
	"regexp"
	"testing"
	"time"

	"github.com/tandem-profiler/tandem/test/privtest"
)

// Chromium returns the browser's path, skipping (failing under CI) when
// it is not installed.
func Chromium(t testing.TB) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	privtest.SkipOrFail(t, "needs chromium to render web pages (apt-get install chromium)")
	return ""
}

// DumpDOM loads url in a fresh headless Chromium with a 1600×1000 window
// and returns the DOM once the page has loaded and its scripts have run.
func DumpDOM(t testing.TB, url string) []byte {
	t.Helper()
	bin := Chromium(t)
	// Bounds a browser that hangs; a page renders in seconds.
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
	return dom
}

var boxText = regexp.MustCompile(`<div class="boxtext"[^>]*>([^<]*)</div>`)

// FlameGraphBoxes renders pprof's flame graph page at url and returns the
// labels of its boxes as the page's script drew them (boxes too narrow
// for a label have none).
func FlameGraphBoxes(t testing.TB, url string) []string {
	t.Helper()
	var texts []string
	for _, m := range boxText.FindAllSubmatch(DumpDOM(t, url), -1) {
		texts = append(texts, html.UnescapeString(string(m[1])))
	}
	return texts
}
