package cluster

import (
	"errors"
	"io"
	"net/netip"
)

// Config says where the cluster lives and how it is addressed.
type Config struct {
	// Dir holds the cluster's state, certificates, logs and data
	// (created; Down leaves it, for the logs).
	Dir string
	// BinDir holds the Kubernetes binaries and pause (tools/kubernetes).
	BinDir string
	// NodeName is the node's name.
	NodeName string
	// Bridge names the bridge the pods are attached to.
	Bridge string
	// PodCIDR is the pods' network; its first address is the bridge's,
	// which the API server, the kubelet and the pods' gateway use.
	PodCIDR string
	// ServiceCIDR holds the Services' cluster IPs.
	ServiceCIDR string
	// Log receives one line per phase (not recorded in the state: Down
	// from another process, make cluster-down, logs to its own).
	Log io.Writer `json:"-"`

	_ struct{}
}

// DefaultConfig returns a Config for dir and the binaries in binDir.
func DefaultConfig(dir, binDir string) Config {
	return Config{
		Dir: dir, BinDir: binDir,
		NodeName:    "tandem-node",
		Bridge:      "tandemk0",
		PodCIDR:     "10.213.0.0/24",
		ServiceCIDR: "10.214.0.0/24",
		Log:         io.Discard,
	}
}

// Validate reports every problem.
func (c Config) Validate() error {
	var errs []error
	if c.Dir == "" {
		errs = append(errs, errors.New("cluster config: no Dir"))
	}
	if c.BinDir == "" {
		errs = append(errs, errors.New("cluster config: no BinDir (tools/kubernetes builds the binaries)"))
	}
	if c.NodeName == "" || c.Bridge == "" {
		errs = append(errs, errors.New("cluster config: no NodeName or Bridge"))
	}
	if len(c.Bridge) > 15 {
		errs = append(errs, errors.New("cluster config: Bridge is longer than a link name may be (15)"))
	}
	for _, p := range []struct{ name, v string }{{"PodCIDR", c.PodCIDR}, {"ServiceCIDR", c.ServiceCIDR}} {
		if pfx, err := netip.ParsePrefix(p.v); err != nil || !pfx.Addr().Is4() || pfx.Bits() > 28 {
			errs = append(errs, errors.New("cluster config: "+p.name+" "+p.v+" is not an IPv4 network of at least 16 addresses"))
		}
	}
	return errors.Join(errs...)
}

// firstHost returns the network's first address (the bridge's, or the
// `kubernetes` Service's cluster IP).
func firstHost(cidr string) string {
	return netip.MustParsePrefix(cidr).Masked().Addr().Next().String()
}
