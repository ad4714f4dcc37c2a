package main

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/tandem-profiler/tandem/test/golden"
	"github.com/tandem-profiler/tandem/test/kubetest"
	"github.com/tandem-profiler/tandem/test/otlptest"
	"github.com/tandem-profiler/tandem/test/parcatest"
	"github.com/tandem-profiler/tandem/test/waittest"
	"github.com/tandem-profiler/tandem/tools/reference"
)

// TestReference keeps tandem-encoder's reference pages (docs/reference,
// docs/man) what cobra generates from its flags.
func TestReference(t *testing.T) {
	fs, err := reference.Commands(newRootCommand(), "Tandem")
	if err != nil {
		t.Fatal(err)
	}
	reference.Check(t, "../..", fs, golden.Updating(),
		reference.Owned{Dir: reference.MarkdownDir, Prefix: "tandem-encoder"},
		reference.Owned{Dir: reference.ManDir, Prefix: "tandem-encoder"})
}

// TestReferenceMetrics keeps docs/reference/metrics-encoder.md what serve
// registers: every component's metrics, from the registry serve builds.
// Two serves between them build every component: one with an output of
// every format, symbol upload and the Kubernetes metadata, one with the
// single OTLP output and --otlp-logging (which needs it). The sampler's
// counters, re-exported as they arrive in-band, are listed from
// tandem-sampler's own set (cmd/sampler's TestReferenceMetrics).
func TestReferenceMetrics(t *testing.T) {
	recv := otlptest.StartReceiver(t)
	parca := parcatest.StartServer(t)
	api := kubetest.Start(t, "token", "node-a")
	var collectors []prometheus.Collector
	for _, args := range [][]string{
		{"--config-path", everyOutputConfig(t, recv.Addr(), parca.Addr(), t.TempDir()),
			"--kubernetes", "on", "--kubeconfig", api.Kubeconfig(t, t.TempDir()), "--node", "node-a"},
		{"--remote-store-address", recv.Addr(), "--remote-store-insecure", "--otlp-logging", "--kubernetes", "off"},
	} {
		collectors = append(collectors, servedCollectors(t, args)...)
	}
	metrics, err := reference.Describe(collectors, "go_", "process_")
	if err != nil {
		t.Fatal(err)
	}
	fs := reference.Metrics(reference.EncoderMetricsPage, "tandem-encoder's metrics", `Generated from the
registry `+"`tandem-encoder serve`"+` builds: do not edit, run `+"`make reference`"+`. Served on
`+"`/metrics`"+` (`+"`--http-address`"+`, [operations.md](../operations.md#health-and-metrics));
`+"`replay`"+` registers the same pipeline's and outputs' metrics. Besides these: the Go
runtime's and the process's collectors (`+"`go_*`, `process_*`"+`), and the sampler's
counters, re-exported as they arrive in-band with a `+"`node`"+` label
([metrics-sampler.md](metrics-sampler.md)). An `+"`output`"+` label names the output
(`+"`default`"+` for the one the flags describe).`, metrics)
	reference.Check(t, "../..", fs, golden.Updating())
}

// servedCollectors starts serve with args and returns what it registered
// once it serves HTTP (every component is built by then).
func servedCollectors(t *testing.T, args []string) []prometheus.Collector {
	t.Helper()
	httpAddr := otlptest.FreeAddr(t)
	f := &serveFlags{socket: filepath.Join(t.TempDir(), "s.sock"), allowedUIDs: []uint{uint(os.Getuid())}, httpAddress: httpAddr}
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	f.out.register(fs)
	f.kube.register(fs)
	// serve runs in the test process: confining it would confine the test.
	if err := fs.Parse(append(args, "--confine=false")); err != nil {
		t.Fatal(err)
	}
	if err := f.out.validate(); err != nil {
		t.Fatal(err)
	}
	rec := reference.NewRecorder()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, f, slog.New(slog.DiscardHandler), rec) }()
	waittest.For(t, "serve answering /healthz", func() bool {
		select {
		case err := <-done:
			t.Fatalf("serve %v returned before serving: %v", args, err)
		default:
		}
		resp, err := http.Get("http://" + httpAddr + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("serve %v: %v", args, err)
	}
	return rec.Collectors()
}
