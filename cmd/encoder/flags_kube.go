package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
	"github.com/tandem-profiler/tandem/encoder/kube"
	"github.com/tandem-profiler/tandem/internal/cli"
)

// kubeFlags say whether and how samples get their Kubernetes identity
// (encoder/kube).
type kubeFlags struct {
	mode          string
	kubeconfig    string
	podLabelAttrs bool
}

func (f *kubeFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.mode, "kubernetes", string(kube.ModeAuto), "look up pods on this node (--node) through the Kubernetes API: auto (in a cluster, or with --kubeconfig), on or off")
	fs.StringVar(&f.kubeconfig, "kubeconfig", "", "kubeconfig file of the API server (outside a cluster); empty uses the in-cluster service account")
	fs.BoolVar(&f.podLabelAttrs, "kubernetes-pod-label-attributes", false, "also write every pod label as the OTLP resource attribute k8s.pod.label.<key> (cardinality)")
}

// config returns the encoder/kube configuration for this node (--node);
// deleted pods' labels last ttl (--profiling-label-ttl).
func (f *kubeFlags) config(node string, ttl time.Duration) (kube.Config, error) {
	cfg := kube.DefaultConfig()
	if ttl > 0 {
		cfg.LabelTTL = ttl
	}
	mode := f.mode
	if mode == "" { // flags not registered (tests building serveFlags)
		mode = string(kube.ModeAuto)
	}
	m, err := kube.ParseMode(mode)
	if err != nil {
		return cfg, cli.Usage(fmt.Errorf("--kubernetes=%w", err))
	}
	cfg.Mode, cfg.Kubeconfig, cfg.Node, cfg.PodLabelAttributes = m, f.kubeconfig, node, f.podLabelAttrs
	if err := cfg.Validate(); err != nil {
		return cfg, cli.Usage(fmt.Errorf("kubernetes flags: %w", err))
	}
	return cfg, nil
}

// startKube starts the pod informer when enabled. It returns the lookup
// (nil when off), the readiness warning and a stop function that waits
// for the informer to end.
func startKube(ctx context.Context, cfg kube.Config, logger *slog.Logger, reg prometheus.Registerer) (aggregate.WorkloadLookup, func() string, func(), error) {
	none := func() string { return "" }
	if !cfg.Enabled() {
		return nil, none, func() {}, nil
	}
	in, err := kube.New(cfg, logger.With("component", "kube"), reg)
	if err != nil {
		return nil, none, nil, cli.Usage(err)
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); in.Run(ctx) }()
	logger.Info("looking up this node's pods", "node", cfg.Node, "kubeconfig", cfg.Kubeconfig)
	return in, in.Warning, func() { cancel(); wg.Wait() }, nil
}

// clientGoLogs makes routeClientGoLogs set klog's logger once.
var clientGoLogs sync.Once

// routeClientGoLogs sends client-go's process-wide (klog) logging to
// logger, through kube.ClientGoHandler (debug level, klog V(0) to V(2)),
// as component kube. serve's start-up calls it, before any informer
// runs: klog's logger is a global that client-go's goroutines read
// without a lock, so it is set once per process and never again (later
// calls do nothing). The pod informer logs client-go's lines about its
// own work to its own logger; this is for client-go's other lines.
func routeClientGoLogs(logger *slog.Logger) {
	clientGoLogs.Do(func() {
		klog.SetSlogLogger(slog.New(kube.ClientGoHandler(logger.With("component", "kube").Handler())))
	})
}
