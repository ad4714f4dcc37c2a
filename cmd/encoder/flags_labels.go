package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/tandem-profiler/tandem/encoder/labels"
	"github.com/tandem-profiler/tandem/internal/cli"
)

// labelFlags are parca-agent's label flags, with its names: what the Arrow
// exports label samples with (encoder/labels).
type labelFlags struct {
	externalLabels         []string
	disableCPULabel        bool
	disableThreadIDLabel   bool
	disableThreadCommLabel bool
	configPath             string
	labelTTL               time.Duration
}

func (f *labelFlags) register(fs *pflag.FlagSet) {
	fs.StringArrayVar(&f.externalLabels, "metadata-external-labels", nil, "labels added to every sample at flush time, not relabelled: key=value (repeat, or separate with ';')")
	fs.BoolVar(&f.disableCPULabel, "metadata-disable-cpu-label", false, "do not label samples with their cpu")
	fs.BoolVar(&f.disableThreadIDLabel, "metadata-disable-thread-id-label", false, "do not label samples with their thread_id")
	fs.BoolVar(&f.disableThreadCommLabel, "metadata-disable-thread-comm-label", false, "do not label samples with their thread_name")
	fs.StringVar(&f.configPath, "config-path", "", "YAML file whose relabel_configs (Prometheus relabelling) apply to every process's labels")
	fs.DurationVar(&f.labelTTL, "profiling-label-ttl", labels.DefaultCacheTTL, "how long a process's relabelled labels are reused")
}

// config checks the flags, reads --config-path and returns the labels
// configuration. Errors name the flag; they are usage errors.
func (f *labelFlags) config() (labels.Config, error) {
	cfg := labels.Config{
		DisableCPULabel:        f.disableCPULabel,
		DisableThreadIDLabel:   f.disableThreadIDLabel,
		DisableThreadCommLabel: f.disableThreadCommLabel,
		CacheTTL:               f.labelTTL,
	}
	var errs []error
	ext, err := parseKeyValues("--metadata-external-labels", f.externalLabels, false)
	if err != nil {
		errs = append(errs, err)
	}
	cfg.ExternalLabels = ext
	if f.labelTTL <= 0 {
		errs = append(errs, fmt.Errorf("--profiling-label-ttl=%v: must be positive", f.labelTTL))
	}
	if f.configPath != "" {
		rc, err := labels.LoadConfigFile(f.configPath)
		if err != nil {
			errs = append(errs, fmt.Errorf("--config-path: %w", err))
		}
		cfg.RelabelConfigs = rc
	}
	if len(errs) == 0 {
		if err := cfg.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("label flags: %w", err))
		}
	}
	if len(errs) > 0 {
		return labels.Config{}, cli.Usage(errors.Join(errs...))
	}
	return cfg, nil
}
