package sampler

import (
	"strings"
	"unicode/utf8"
)

// Bounds on what a workload controls. A process chooses its name, its
// command path, its environment, its cgroup's name (inside a container)
// and how many processes it starts; none of that may grow the sampler's
// memory or a batch without bound, or make the encoder reject a batch (its
// decoder refuses strings over 64 KiB). Invalid UTF-8 is passed on as is:
// the encoder escapes it where it becomes a label.
const (
	// maxPathBytes bounds executable paths (PATH_MAX).
	maxPathBytes = 4096
	// maxLabelBytes bounds the other process and sample labels: names,
	// environment values, systemd units, service names, container ids,
	// custom labels.
	maxLabelBytes = 1024
	// maxTextBytes bounds any string put into a batch (function and file
	// names from interpreters included).
	maxTextBytes = 16 << 10
	// maxCachedProcesses bounds the process cache. Past it, exited
	// processes are swept (at most every fullSweepInterval), then
	// arbitrary entries dropped: a dropped live process costs one more
	// read of /proc/PID/cgroup, not data.
	maxCachedProcesses = 8192
)

// bound returns s cut to at most n bytes, and whether it was cut. A cut
// that would split a valid multi-byte character backs off to its start.
// The result is a copy, so that a huge original is not kept alive.
func bound(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	cut := n
	// s[n] is the first byte left out: when it continues a character,
	// leave that character out whole.
	for i := n; i > 0 && i > n-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			cut = i
			break
		}
	}
	return strings.Clone(s[:cut]), true
}

// bound is the package's bound, counting a cut in
// strings_truncated_total (a nil m counts nothing).
func (m *samplerMetrics) bound(s string, n int) string {
	s, cut := bound(s, n)
	if cut && m != nil {
		m.stringsTruncated.Inc()
	}
	return s
}
