package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	"github.com/spf13/pflag"

	"github.com/tandem-profiler/tandem/internal/synth"
	"github.com/tandem-profiler/tandem/test/otlptest"
	"github.com/tandem-profiler/tandem/test/parcatest"
	"github.com/tandem-profiler/tandem/test/streamtest"
)

// TestServeMetricsLint lints the encoder's whole Prometheus registry, as
// serve builds it and /metrics exposes it, with promlint: serve with every
// kind of output (OTLP, Arrow v2 with symbol upload, pprof files) takes a
// synthetic session from the real ipc client, so that the labelled series
// exist too. Left out: the Kubernetes metadata's collectors (--kube-*; they
// need an API server), and the sampler's counters, which the encoder
// re-exports under the sampler's own names as they arrive in-band (the
// privileged e2e tests see those).
func TestServeMetricsLint(t *testing.T) {
	recv := otlptest.StartReceiver(t)
	parca := parcatest.StartServer(t)
	cfgPath := everyOutputConfig(t, recv.Addr(), parca.Addr(), t.TempDir())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	httpAddr := ln.Addr().String()
	ln.Close()

	sock := filepath.Join(t.TempDir(), "s.sock")
	uid := uint(os.Getuid())
	f := &serveFlags{socket: sock, allowedUIDs: []uint{uid}, httpAddress: httpAddr}
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	f.out.register(fs)
	if err := fs.Parse([]string{"--config-path", cfgPath, "--profiling-duration", "1s", "--confine=false"}); err != nil {
		t.Fatal(err)
	}
	if err := f.out.validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := startServe(ctx, f)

	cfg := synth.DefaultConfig()
	cfg.Samples = 2000
	_, hello, batches := streamtest.Session(t, cfg)
	sampler := streamtest.Start(t, newTestClient(t, sock, uint32(uid)), hello)
	sampler.WaitAcked(t, sampler.Send(t, batches...), 30*time.Second, served.done, func() string {
		return fmt.Sprintf("%s(parca errors %v)", served, parca.Errors())
	})

	resp, err := http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	problems, err := promlint.New(resp.Body).Lint()
	resp.Body.Close()
	if err != nil {
		t.Fatalf("lint /metrics: %v", err)
	}
	for _, p := range problems {
		t.Errorf("metric %s: %s", p.Metric, p.Text)
	}

	// What was linted is the whole registry: every component's metrics.
	resp, err = http.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("TANDEM_SHOW_METRICS") != "" {
		t.Logf("%s", body)
	}
	for _, family := range []string{
		"go_goroutines", "process_resident_memory_bytes", // runtime and process collectors
		"tandem_ipc_server_", "tandem_encoder_ingest_", // socket, ingest
		"tandem_encoder_aggregator_", "tandem_encoder_export_", "tandem_encoder_labels_", // pipeline and outputs
		"tandem_encoder_debuginfo_", "tandem_encoder_symbolizer_", "tandem_encoder_executable", // symbols
	} {
		if !strings.Contains(string(body), "\n# TYPE "+family) {
			t.Errorf("/metrics has no %s* family", family)
		}
	}

	sampler.Stop()
	cancel()
	if err := served.wait(); err != nil {
		t.Fatalf("serve: %v", err)
	}
}
