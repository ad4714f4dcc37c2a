//go:build !noview

package main

import (
	"testing"

	"github.com/tandem-profiler/tandem/test/headless"
)

// TestViewInChromium: the flame graph view serves renders in a real
// browser, with boxes named after the workload's functions as written
// (Python's <module> too), and none named <unknown>.
func TestViewInChromium(t *testing.T) {
	headless.Chromium(t)
	_, dir, _ := viewInputs(t, 3000)
	texts := headless.FlameGraphBoxes(t, startView(t, dir)+"flamegraph")
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
