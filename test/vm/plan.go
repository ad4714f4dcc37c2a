package vm

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// PlanPath is where the initramfs holds the guest agent's plan.
const PlanPath = "/tandem/plan.json"

// Command is one process the guest agent starts.
type Command struct {
	Args []string `json:"args"`
	Env  []string `json:"env,omitempty"`
	UID  int      `json:"uid,omitempty"` // 0: root
	Log  string   `json:"log"`           // file its stdout and stderr go to
}

// Plan is what the guest agent does, written by the host: start the
// workload and the encoder, then the sampler, wait for the sampler's
// readiness, let it profile, stop the pair in order, and write Collect
// to the results disk.
type Plan struct {
	Workload Command `json:"workload"`
	Encoder  Command `json:"encoder"`
	Sampler  Command `json:"sampler"`
	// Socket is the encoder's socket; SocketDirUID owns its directory
	// (the sampler checks who can write it).
	Socket       string `json:"socket"`
	SocketDirUID int    `json:"socket_dir_uid"`
	// EncoderHTTP is the encoder's --http-address: /readyz before the
	// sampler starts, /metrics after it stopped.
	EncoderHTTP string `json:"encoder_http"`
	// MetricsFile receives the encoder's /metrics, read after the
	// sampler stopped and before the encoder is stopped.
	MetricsFile string `json:"metrics_file"`
	// DrainedMetric is a series of the encoder's metrics (name and
	// labels, as exposed) that is positive once the encoder has read all
	// the sampler sent: MetricsFile is read after it is.
	DrainedMetric string `json:"drained_metric"`
	// ProfileFor is how long the sampler profiles once ready.
	ProfileFor time.Duration `json:"profile_for"`
	// ReadyWithin bounds the sampler's start (tracer load) and StopWithin
	// each process's exit after SIGTERM.
	ReadyWithin time.Duration `json:"ready_within"`
	StopWithin  time.Duration `json:"stop_within"`
	// WritableDirs are created before anything starts, owned by
	// SocketDirUID (the encoder writes its outputs there).
	WritableDirs []string `json:"writable_dirs"`
	// Cover are directories hidden under an empty read-only tmpfs before
	// anything starts: a test takes a kernel feature away (/sys/kernel/btf).
	Cover []string `json:"cover,omitempty"`
	// Writes are files written before anything starts, in order: a test
	// switches a kernel feature off (/sys/kernel/debug/kprobes/enabled).
	Writes []FileWrite `json:"writes,omitempty"`
	// ExpectSamplerExit: the sampler is expected to refuse this kernel;
	// the agent reports its exit (EventSamplerExited) instead of failing.
	ExpectSamplerExit bool `json:"expect_sampler_exit,omitempty"`
	// KernelLog receives the kernel's log buffer (dmesg) before the
	// results are written.
	KernelLog string `json:"kernel_log,omitempty"`
	// Collect are the files and directories written to the results disk.
	Collect []string `json:"collect"`
	// ResultsDevice is the raw disk the results tar goes to.
	ResultsDevice string `json:"results_device"`
}

// FileWrite is one file the guest agent writes.
type FileWrite struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

// Event names, in the order a good run sends them.
const (
	EventBooted        = "booted"         // the agent runs (Value: seconds since the kernel booted)
	EventEncoderReady  = "encoder-ready"  // the encoder answers /readyz
	EventSamplerReady  = "sampler-ready"  // READY=1 (Value: seconds since the sampler started; Detail: "confined" or why not)
	EventSamplerExited = "sampler-exited" // after SIGTERM (Detail: exit status)
	EventEncoderExited = "encoder-exited" // after SIGTERM (Detail: exit status)
	EventResults       = "results"        // the results disk is written (Value: bytes)
	EventFailed        = "failed"         // the run cannot go on (Detail: why); results follow
	// EventKernelWarning is the host's: the console showed a kernel
	// warning (Detail: its kind, see kernelWarnings).
	EventKernelWarning = "kernel-warning"
)

// eventPrefix frames an event on the console, among kernel messages.
const eventPrefix = "TANDEM-VM "

// Event is one progress report of the guest agent.
type Event struct {
	Name   string  `json:"name"`
	Value  float64 `json:"value,omitempty"`
	Detail string  `json:"detail,omitempty"`
}

// Line formats e as one console line.
func (e Event) Line() string {
	b, _ := json.Marshal(e) // a struct of strings and a float: never fails
	return eventPrefix + string(b) + "\n"
}

// ParseEvent finds an event in one console line (the framing may follow
// other output on the same line). ok is false for lines without one.
func ParseEvent(line string) (e Event, ok bool, err error) {
	i := strings.Index(line, eventPrefix)
	if i < 0 {
		return Event{}, false, nil
	}
	body := strings.TrimRight(line[i+len(eventPrefix):], "\r\n")
	dec := json.NewDecoder(bytes.NewReader([]byte(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return Event{}, true, fmt.Errorf("console event %q: %w", body, err)
	}
	if e.Name == "" {
		return Event{}, true, fmt.Errorf("console event %q has no name", body)
	}
	return e, true, nil
}

// scanEvents reads console output, copies it to log and sends every event
// it finds to events (malformed ones as EventFailed naming the problem),
// and the first kernel warning of each kind as EventKernelWarning (its
// excerpt collected in warn).
func scanEvents(r io.Reader, log io.Writer, events chan<- Event, warn *warningWatch) {
	defer warn.end()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		_, _ = io.WriteString(log, line+"\n")
		e, ok, err := ParseEvent(line)
		switch {
		case err != nil:
			events <- Event{Name: EventFailed, Detail: err.Error()}
		case ok:
			events <- e
		default:
			if w := warn.line(strings.TrimRight(line, "\r")); w != nil {
				events <- Event{Name: EventKernelWarning, Detail: w.Kind}
			}
		}
	}
}
