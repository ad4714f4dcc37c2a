package ipcserver

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/tandem-profiler/tandem/ipc"
)

// Defaults.
const (
	// DefaultSocketMode is the permission of a socket file the Server binds.
	// Access is enforced by peer credentials (Config.AllowedUIDs),
	// not by the file mode: a root sampler whose capabilities were dropped
	// lacks CAP_DAC_OVERRIDE and could not connect to a 0600 socket owned
	// by the encoder's uid.
	DefaultSocketMode fs.FileMode = 0o666

	// DefaultMaxPendingDescriptors bounds the descriptors a Conn holds that
	// no frame has claimed yet.
	DefaultMaxPendingDescriptors = 64

	// AllowedUIDsFlag is the command-line flag that sets
	// Config.AllowedUIDs; errors name it so that an operator knows what
	// to change.
	AllowedUIDsFlag = "--allowed-uid"
)

// Config configures the encoder's end of the socket. Zero fields take
// their defaults (see DefaultConfig).
type Config struct {
	// Path is the socket to bind when the process was not started by
	// systemd socket activation. A stale socket file is replaced; any
	// other kind of file is left alone and Listen fails.
	Path string
	// Mode is the permission of the bound socket file.
	Mode fs.FileMode
	// AllowedUIDs are the uids a peer may run as; others are rejected,
	// logged and counted. Default: {0} (root).
	AllowedUIDs []uint32
	// MaxPendingDescriptors bounds received descriptors not yet claimed by
	// a frame; extras are closed and counted.
	MaxPendingDescriptors int

	_ struct{}
}

// DefaultConfig returns the defaults, with Path empty.
func DefaultConfig() Config {
	return Config{
		Mode:                  DefaultSocketMode,
		AllowedUIDs:           []uint32{0},
		MaxPendingDescriptors: DefaultMaxPendingDescriptors,
	}
}

func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Mode == 0 {
		c.Mode = d.Mode
	}
	if len(c.AllowedUIDs) == 0 {
		c.AllowedUIDs = d.AllowedUIDs
	}
	if c.MaxPendingDescriptors == 0 {
		c.MaxPendingDescriptors = d.MaxPendingDescriptors
	}
	return c
}

// Validate reports every problem with the configuration. An empty Path is
// valid: Listen then requires systemd socket activation.
func (c Config) Validate() error {
	var errs []error
	if len(c.Path) > ipc.MaxSocketPath {
		errs = append(errs, fmt.Errorf("socket path %q is %d bytes, longer than the maximum %d", c.Path, len(c.Path), ipc.MaxSocketPath))
	}
	if c.Mode&^fs.ModePerm != 0 {
		errs = append(errs, fmt.Errorf("socket mode %v has bits other than permissions", c.Mode))
	}
	if c.MaxPendingDescriptors < 0 {
		errs = append(errs, fmt.Errorf("max pending descriptors %d is negative", c.MaxPendingDescriptors))
	}
	return errors.Join(errs...)
}

// Stats is a snapshot of a Server's cumulative counters.
type Stats struct {
	Accepted            uint64 // connections accepted from allowed peers
	Rejected            uint64 // connections closed because of the peer's uid or unreadable credentials
	Active              int    // connections open now
	Frames              uint64 // frames of known types received
	Bytes               uint64 // bytes received, headers included
	UnknownFrames       uint64 // frames of unknown type skipped
	DescriptorsReceived uint64 // descriptors received with SCM_RIGHTS
	DescriptorsDropped  uint64 // descriptors closed unclaimed (queue full, connection closed)
	DescriptorsMissing  uint64 // frames flagged with a descriptor that did not arrive
	Acks                uint64 // acknowledgements sent
}
