package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tandem-profiler/tandem/encoder/pipeline"
)

func TestReadyzFollowsReadiness(t *testing.T) {
	var notReady error
	var warning string
	// serveHTTP does not return its address: use one that was free.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	stop, err := serveHTTP(addr, prometheus.NewRegistry(), func() error { return notReady }, func() string { return warning }, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, _ := get("/readyz"); code != http.StatusOK {
		t.Errorf("/readyz = %d while ready, want 200", code)
	}
	warning = "kubernetes list/watch pods failed (forbidden)"
	if code, body := get("/readyz"); code != http.StatusOK || !strings.Contains(body, "warning: kubernetes list/watch pods failed (forbidden)") {
		t.Errorf("/readyz = %d %q with a warning, want 200 with the warning", code, body)
	}
	warning = "kubernetes get replicasets.apps forbidden (403)\nkubernetes watch pods failed (other)"
	if code, body := get("/readyz"); code != http.StatusOK || body != "ok\nwarning: kubernetes get replicasets.apps forbidden (403)\nwarning: kubernetes watch pods failed (other)\n" {
		t.Errorf("/readyz = %d %q with two warnings, want 200 with a warning: line each", code, body)
	}
	warning = ""
	notReady = errors.New("remote store connection is TRANSIENT_FAILURE")
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "TRANSIENT_FAILURE") {
		t.Errorf("/readyz = %d %q while not ready, want 503 with the reason", code, body)
	}
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz = %d, want 200 even when not ready", code)
	}
	if code, _ := get("/metrics"); code != http.StatusOK {
		t.Errorf("/metrics = %d, want 200", code)
	}
}

func TestPipelineReadyWritingPprofFiles(t *testing.T) {
	o, err := parseOutput(t, "--output-dir", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	p, err := newPipeline(o, nil, slog.New(slog.DiscardHandler), nil, pipeline.DefaultConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close(context.Background())
	if err := p.Ready(); err != nil {
		t.Errorf("Ready() = %v writing pprof files, want nil", err)
	}
}

// TestWatchdogTicker checks that with WATCHDOG_USEC set the serve loop
// gets a ticker at half the interval, and none without it.
func TestWatchdogTicker(t *testing.T) {
	t.Setenv("WATCHDOG_USEC", "200000")
	t.Setenv("WATCHDOG_PID", "")
	os.Unsetenv("WATCHDOG_PID")

	tick, stop := watchdogTicker(slog.New(slog.DiscardHandler))
	defer stop()
	if tick == nil {
		t.Fatal("no watchdog ticker with WATCHDOG_USEC=200000")
	}
	select {
	case <-tick:
	case <-time.After(2 * time.Second):
		t.Fatal("watchdog ticker did not tick within 2s for a 200ms watchdog")
	}

	t.Setenv("WATCHDOG_USEC", "")
	os.Unsetenv("WATCHDOG_USEC")
	if tick, stop := watchdogTicker(slog.New(slog.DiscardHandler)); tick != nil {
		stop()
		t.Error("watchdog ticker without WATCHDOG_USEC")
	}
}
