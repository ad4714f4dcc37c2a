package main

import (
	"bufio"
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"k8s.io/client-go/tools/cache"

	"github.com/tandem-profiler/tandem/encoder/kube"
	"github.com/tandem-profiler/tandem/test/kubetest"
)

// clientGoLog is the handler TestMain routes client-go's process-wide
// logging to, as serve's start-up routes it to the encoder's logger.
var clientGoLog = &recordingHandler{arrived: make(chan struct{}, 1)}

// recordingHandler keeps every record and signals each arrival.
type recordingHandler struct {
	mu      sync.Mutex
	records []slog.Record
	arrived chan struct{}
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.records = append(h.records, r)
	h.mu.Unlock()
	select {
	case h.arrived <- struct{}{}:
	default:
	}
	return nil
}

func (h *recordingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &attrHandler{h: h, attrs: as}
}

func (h *recordingHandler) WithGroup(string) slog.Handler { return h }

// attrHandler adds a logger's With attributes to its records, kept by h.
type attrHandler struct {
	h     *recordingHandler
	attrs []slog.Attr
}

func (a *attrHandler) Enabled(ctx context.Context, l slog.Level) bool { return a.h.Enabled(ctx, l) }
func (a *attrHandler) Handle(ctx context.Context, r slog.Record) error {
	r = r.Clone()
	r.AddAttrs(a.attrs...)
	return a.h.Handle(ctx, r)
}
func (a *attrHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return &attrHandler{h: a.h, attrs: append(append([]slog.Attr(nil), a.attrs...), as...)}
}
func (a *attrHandler) WithGroup(string) slog.Handler { return a }

// find returns the first record with message msg.
func (h *recordingHandler) find(msg string) (slog.Record, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range h.records {
		if r.Message == msg {
			return r, true
		}
	}
	return slog.Record{}, false
}

func recordAttr(r slog.Record, key string) string {
	var v string
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value.String()
		}
		return true
	})
	return v
}

// TestClientGoProcessLogger: client-go code that logs through klog's
// process-wide logger (here its cache-sync wait, on a pod informer
// against an API server over HTTPS) reaches the handler routeClientGoLogs
// was given, at debug level and as component kube.
func TestClientGoProcessLogger(t *testing.T) {
	api := kubetest.Start(t, "tok", "node-a")
	cfg := kube.DefaultConfig()
	cfg.Mode, cfg.Kubeconfig, cfg.Node = kube.ModeOn, api.Kubeconfig(t, t.TempDir()), "node-a"
	in, err := kube.New(cfg, slog.New(slog.DiscardHandler), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { in.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	if !cache.WaitForNamedCacheSync("tandem-test", ctx.Done(), in.Synced) {
		t.Fatal("the informer did not sync")
	}
	const msg = "Caches are synced" // client-go logs it through klog.Background
	for {
		if r, ok := clientGoLog.find(msg); ok {
			if r.Level != slog.LevelDebug || recordAttr(r, "component") != "kube" || recordAttr(r, "controller") != "tandem-test" {
				t.Errorf("client-go's %q arrived as level %v, component %q, controller %q; want DEBUG, kube, tandem-test",
					msg, r.Level, recordAttr(r, "component"), recordAttr(r, "controller"))
			}
			return
		}
		<-clientGoLog.arrived
	}
}

// TestClientGoLogsInBinary runs serve as the binary does (main, in a
// child) with a pod informer against an API server over HTTPS that warns
// in every answer, and reads its JSON log until client-go's line about
// the warning arrives: at debug level, as component kube, with no line of
// klog verbosity 3 or more (request and response bodies) before it.
// client-go logs a warning at klog V(0): unrouted, klog would print it
// as text, which fails the test at once.
func TestClientGoLogsInBinary(t *testing.T) {
	api := kubetest.Start(t, "tok", "node-a")
	const warning = "tandem test: this API is deprecated"
	api.Warn(warning)
	dir := t.TempDir()
	// --confine=false: a test binary built with cgo (-race) cannot confine.
	args := []string{"serve", "--confine=false", "--socket", filepath.Join(dir, "s.sock"), "--allowed-uid", strconv.Itoa(os.Getuid()),
		"--http-address=", "--output-dir", filepath.Join(dir, "out"), "--debuginfo-upload-disable",
		"--kubernetes", "on", "--kubeconfig", api.Kubeconfig(t, dir), "--node", "node-a",
		"--log-level", "debug", "--log-format", "json"}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), asEncoderEnv+"="+strings.Join(args, " "))
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		for range lines { // to the end: the child has exited
		}
		_ = cmd.Wait()
	}()

	// client-go's lines at klog V(3), logged before its requests.
	verbose := map[string]bool{"Starting reflector": true, "Listing and watching": true}
	var seen []string
	for line := range lines {
		seen = append(seen, line)
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON: %q: %v", line, err)
		}
		msg, _ := rec["msg"].(string)
		if verbose[msg] {
			t.Errorf("client-go's V(3) line %q reached the log: %s", msg, line)
		}
		if msg != "Warning: "+warning {
			continue
		}
		if rec["level"] != "DEBUG" || rec["component"] != "kube" {
			t.Errorf("client-go's line arrived as %s; want level DEBUG, component kube", line)
		}
		return
	}
	t.Fatalf("serve exited before client-go's line about the API server's warning; its log:\n%s", strings.Join(seen, "\n"))
}
