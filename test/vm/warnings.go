package vm

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
)

// kernelWarnings are the console messages of a kernel in trouble. The
// first pattern a line matches names it (a soft lockup's line also holds
// "BUG:").
var kernelWarnings = []struct {
	kind string
	re   *regexp.Regexp
}{
	{"soft lockup", regexp.MustCompile(`soft lockup`)},
	{"hard lockup", regexp.MustCompile(`(?i)hard lockup`)},
	{"RCU stall", regexp.MustCompile(`rcu_\w+ detected (expedited )?stalls|rcu: INFO: .*stall|self-detected stall`)},
	{"hung task", regexp.MustCompile(`blocked for more than \d+ seconds|hung_task`)},
	{"verifier bug", regexp.MustCompile(`(?i)verifier (bug|backtracking bug)|verifier.*internal error`)},
	{"BUG", regexp.MustCompile(`\bBUG:|kernel BUG at`)},
	{"WARNING", regexp.MustCompile(`\bWARNING:`)},
	{"Oops", regexp.MustCompile(`\bOops\b`)},
	{"general protection fault", regexp.MustCompile(`general protection fault`)},
	{"panic", regexp.MustCompile(`Kernel panic`)},
}

// excerptLines is how many console lines a warning's excerpt holds: the
// message and what the kernel printed after it (the task, the stack).
const excerptLines = 30

// Warning is one kind of kernel warning seen on a console: the first
// occurrence's excerpt and how many lines of that kind followed.
type Warning struct {
	Kind    string
	Lines   []string
	Repeats int
}

func (w Warning) String() string {
	s := fmt.Sprintf("kernel warning (%s", w.Kind)
	if w.Repeats > 0 {
		s += fmt.Sprintf(", %d more lines of that kind", w.Repeats)
	}
	return s + "):\n" + strings.Join(w.Lines, "\n")
}

// warningWatch collects kernel warnings from console lines. Safe for
// concurrent use.
type warningWatch struct {
	mu       sync.Mutex
	list     []*Warning
	open     *Warning      // the excerpt still being filled
	complete chan struct{} // closed when open is full or the console ends
}

// line takes one console line (not an event) and returns the warning it
// starts, if it is the first of its kind.
func (w *warningWatch) line(l string) *Warning {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.open != nil {
		w.open.Lines = append(w.open.Lines, l)
		if len(w.open.Lines) >= excerptLines {
			w.closeOpen()
		}
	}
	kind := ""
	for _, k := range kernelWarnings {
		if k.re.MatchString(l) {
			kind = k.kind
			break
		}
	}
	if kind == "" {
		return nil
	}
	for _, seen := range w.list {
		if seen.Kind == kind {
			seen.Repeats++
			return nil
		}
	}
	nw := &Warning{Kind: kind, Lines: []string{l}}
	w.list = append(w.list, nw)
	if w.open == nil {
		w.open, w.complete = nw, make(chan struct{})
	}
	return nw
}

func (w *warningWatch) closeOpen() {
	if w.open != nil {
		close(w.complete)
		w.open = nil
	}
}

// end marks the console's end: every excerpt is as full as it gets.
func (w *warningWatch) end() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closeOpen()
}

// filled returns a channel closed once the excerpt being filled, if any,
// is full.
func (w *warningWatch) filled() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.open == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	return w.complete
}

// warnings returns copies of the warnings seen so far.
func (w *warningWatch) warnings() []Warning {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]Warning, 0, len(w.list))
	for _, x := range w.list {
		c := *x
		c.Lines = append([]string(nil), x.Lines...)
		out = append(out, c)
	}
	return out
}

// FindKernelWarnings returns the kernel warnings in a log (a console
// capture or the guest's dmesg).
func FindKernelWarnings(log string) []Warning {
	var w warningWatch
	for _, l := range strings.Split(log, "\n") {
		if !strings.Contains(l, eventPrefix) {
			w.line(strings.TrimRight(l, "\r"))
		}
	}
	w.end()
	return w.warnings()
}

// FormatWarnings joins warnings for a test failure.
func FormatWarnings(ws []Warning) string {
	var b strings.Builder
	for i, w := range ws {
		if i > 0 {
			b.WriteString("\n")
		}
		b.WriteString(w.String())
	}
	return b.String()
}
