package kube

import (
	"errors"
	"fmt"
	"os"
	"time"
)

// Mode says whether the encoder looks pods up (--kubernetes).
type Mode string

// The modes.
const (
	// ModeAuto is on in a cluster (a service-account token and
	// KUBERNETES_SERVICE_HOST) or when a kubeconfig is given.
	ModeAuto Mode = "auto"
	ModeOn   Mode = "on"
	ModeOff  Mode = "off"
)

// Defaults.
const (
	// DefaultLabelTTL is how long a deleted pod's labels keep answering
	// (parca-agent's --profiling-label-ttl default).
	DefaultLabelTTL = 10 * time.Minute
	// DefaultMaxPods bounds the pods (live and recently deleted) a Store
	// holds: far above the kubelet's default limit of 110 per node.
	DefaultMaxPods = 1024
	// DefaultMaxOwners bounds the cached owner lookups.
	DefaultMaxOwners = 1024
)

// Config configures a Store. Plain data.
type Config struct {
	Mode Mode
	// Kubeconfig is a kubeconfig file (outside a cluster, and tests);
	// empty uses the in-cluster configuration.
	Kubeconfig string
	// Node is this node's name as the API knows it (--node; the
	// DaemonSet passes spec.nodeName).
	Node string
	// LabelTTL is how long a deleted pod's labels keep answering.
	LabelTTL time.Duration
	// PodLabelAttributes adds every pod label as a k8s.pod.label.<key>
	// resource attribute (off by default: cardinality).
	PodLabelAttributes bool
	// MaxPods and MaxOwners bound what the Store keeps.
	MaxPods   int
	MaxOwners int

	_ struct{}
}

// DefaultConfig returns the defaults: auto mode, the label TTL, the bounds.
func DefaultConfig() Config {
	return Config{Mode: ModeAuto, LabelTTL: DefaultLabelTTL, MaxPods: DefaultMaxPods, MaxOwners: DefaultMaxOwners}
}

// ParseMode parses --kubernetes.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case ModeAuto, ModeOn, ModeOff:
		return m, nil
	}
	return "", fmt.Errorf("%q: must be auto, on or off", s)
}

// Validate reports every problem of the configuration.
func (c *Config) Validate() error {
	var errs []error
	if _, err := ParseMode(string(c.Mode)); err != nil {
		errs = append(errs, fmt.Errorf("mode %w", err))
	}
	if c.Mode != ModeOff && c.Enabled() && c.Node == "" {
		errs = append(errs, errors.New("node name is empty: pass --node (the DaemonSet passes $(NODE_NAME))"))
	}
	if c.LabelTTL <= 0 {
		errs = append(errs, fmt.Errorf("label TTL %v: must be positive", c.LabelTTL))
	}
	if c.MaxPods < 1 || c.MaxOwners < 1 {
		errs = append(errs, fmt.Errorf("bounds %d pods, %d owners: must be at least 1", c.MaxPods, c.MaxOwners))
	}
	if c.Mode == ModeOn && c.Kubeconfig == "" && !inCluster() {
		errs = append(errs, errors.New("--kubernetes=on but not in a cluster (no KUBERNETES_SERVICE_HOST or no service-account token) and no --kubeconfig"))
	}
	return errors.Join(errs...)
}

// Enabled reports whether pods are looked up: on, or auto with a
// kubeconfig or in a cluster.
func (c *Config) Enabled() bool {
	switch c.Mode {
	case ModeOn:
		return true
	case ModeAuto:
		return c.Kubeconfig != "" || inCluster()
	}
	return false
}

// tokenFile is where the kubelet projects the service-account token.
const tokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"

func inCluster() bool {
	if os.Getenv("KUBERNETES_SERVICE_HOST") == "" || os.Getenv("KUBERNETES_SERVICE_PORT") == "" {
		return false
	}
	_, err := os.Stat(tokenFile)
	return err == nil
}
