package main

import (
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/tandem-profiler/tandem/internal/counters"
	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/sampler"
	"github.com/tandem-profiler/tandem/test/golden"
	"github.com/tandem-profiler/tandem/tools/reference"
)

// TestReference keeps tandem-sampler's reference pages (docs/reference,
// docs/man) what cobra generates from its flags.
func TestReference(t *testing.T) {
	fs, err := reference.Commands(newCommand(io.Discard, io.Discard), "Tandem")
	if err != nil {
		t.Fatal(err)
	}
	reference.Check(t, "../..", fs, golden.Updating(),
		reference.Owned{Dir: reference.MarkdownDir, Prefix: "tandem-sampler"},
		reference.Owned{Dir: reference.ManDir, Prefix: "tandem-sampler"})
}

// TestReferenceMetrics keeps docs/reference/metrics-sampler.md what
// tandem-sampler registers in its counter set: the sampler's and the ipc
// client's counters and gauges (built here without starting the tracer or
// connecting).
func TestReferenceMetrics(t *testing.T) {
	set := new(counters.Set)
	cfg := sampler.DefaultConfig()
	cfg.NodeName = "node"
	cfg.SendExecutables = false // its metrics are registered either way; this starts no workers
	if _, err := sampler.New(cfg, &streamSink{logger: slog.New(slog.DiscardHandler)}, nil, set); err != nil {
		t.Fatal(err)
	}
	if _, err := ipc.NewClient(ipc.ClientConfig{Path: filepath.Join(t.TempDir(), "s.sock")}, nil, set); err != nil {
		t.Fatal(err)
	}
	fs := reference.Metrics(reference.SamplerMetricsPage, "tandem-sampler's metrics", `Generated from the
counters and gauges `+"`tandem-sampler`"+` registers: do not edit, run `+"`make reference`"+`. The
sampler serves no HTTP: it logs them every `+"`--metrics-log-interval`"+` under the names
below, and sends them to the encoder in-band every `+"`--stats-interval`"+`, which exports
each as `+"`tandem_sampler_<name without tandem_>`"+` (a name that starts with
`+"`tandem_sampler_`"+` keeps it) with a `+"`node`"+` label (`+"`encoder/ingest/stats.go`"+`). The
labels column lists each label's values. The encoder's own metrics:
[metrics-encoder.md](metrics-encoder.md).`, reference.Counters(set.Snapshot()))
	reference.Check(t, "../..", fs, golden.Updating())
}
