package ipc

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"time"
)

// Defaults.
const (
	// DefaultSocketMode is the permission of a socket file the Server binds.
	// Access is enforced by peer credentials (ServerConfig.AllowedUIDs),
	// not by the file mode: a root sampler whose capabilities were dropped
	// lacks CAP_DAC_OVERRIDE and could not connect to a 0600 socket owned
	// by the encoder's uid.
	DefaultSocketMode fs.FileMode = 0o666

	// DefaultMaxPendingDescriptors bounds the descriptors a Conn holds that
	// no frame has claimed yet.
	DefaultMaxPendingDescriptors = 64

	// DefaultMaxUnackedBytes bounds the reliable frames (with headers) a
	// Client keeps until they are acknowledged.
	DefaultMaxUnackedBytes = 64 << 20

	// DefaultMaxQueuedExecutables bounds the executable notices (and their
	// descriptors) a Client queues for sending.
	DefaultMaxQueuedExecutables = 256

	// DefaultMinBackoff and DefaultMaxBackoff bound the Client's delay
	// between connection attempts; the delay doubles from min to max,
	// with jitter.
	DefaultMinBackoff = 100 * time.Millisecond
	DefaultMaxBackoff = 5 * time.Second

	// DefaultDialTimeout bounds one connection attempt.
	DefaultDialTimeout = 5 * time.Second

	// maxSocketPath is the usable length of sockaddr_un.sun_path.
	maxSocketPath = 107

	// PeerUIDsFlag and AllowedUIDsFlag are the command-line flags that set
	// ClientConfig.PeerUIDs and ServerConfig.AllowedUIDs; errors name them
	// so that an operator knows what to change.
	PeerUIDsFlag    = "--encoder-uid"
	AllowedUIDsFlag = "--allowed-uid"
)

// ServerConfig configures the encoder's end of the socket. Zero fields take
// their defaults (see DefaultServerConfig).
type ServerConfig struct {
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

// DefaultServerConfig returns the defaults, with Path empty.
func DefaultServerConfig() ServerConfig {
	return ServerConfig{
		Mode:                  DefaultSocketMode,
		AllowedUIDs:           []uint32{0},
		MaxPendingDescriptors: DefaultMaxPendingDescriptors,
	}
}

func (c ServerConfig) withDefaults() ServerConfig {
	d := DefaultServerConfig()
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
func (c ServerConfig) Validate() error {
	var errs []error
	if len(c.Path) > maxSocketPath {
		errs = append(errs, fmt.Errorf("socket path %q is %d bytes, longer than the maximum %d", c.Path, len(c.Path), maxSocketPath))
	}
	if c.Mode&^fs.ModePerm != 0 {
		errs = append(errs, fmt.Errorf("socket mode %v has bits other than permissions", c.Mode))
	}
	if c.MaxPendingDescriptors < 0 {
		errs = append(errs, fmt.Errorf("max pending descriptors %d is negative", c.MaxPendingDescriptors))
	}
	return errors.Join(errs...)
}

// ClientConfig configures the sampler's end of the socket. Zero fields
// take their defaults (see DefaultClientConfig).
type ClientConfig struct {
	// Path is the socket to connect to.
	Path string
	// PeerUIDs are the uids the server may run as (tandem-sampler --encoder-uid).
	// The Client sends nothing to a server running as another uid. Under
	// systemd socket activation the server's credentials are those of
	// systemd (uid 0), which created the socket. Default: {0}.
	PeerUIDs []uint32
	// MaxUnackedBytes bounds the reliable frames, headers included, kept
	// until acknowledged. Past it the oldest frames are evicted and
	// counted.
	MaxUnackedBytes int
	// MaxQueuedExecutables bounds executable notices waiting to be sent.
	MaxQueuedExecutables int
	// MinBackoff and MaxBackoff bound the delay between connection
	// attempts.
	MinBackoff, MaxBackoff time.Duration
	// DialTimeout bounds one connection attempt.
	DialTimeout time.Duration

	_ struct{}
}

// DefaultClientConfig returns the defaults, with Path empty.
func DefaultClientConfig() ClientConfig {
	return ClientConfig{
		PeerUIDs:             []uint32{0},
		MaxUnackedBytes:      DefaultMaxUnackedBytes,
		MaxQueuedExecutables: DefaultMaxQueuedExecutables,
		MinBackoff:           DefaultMinBackoff,
		MaxBackoff:           DefaultMaxBackoff,
		DialTimeout:          DefaultDialTimeout,
	}
}

func (c ClientConfig) withDefaults() ClientConfig {
	d := DefaultClientConfig()
	if len(c.PeerUIDs) == 0 {
		c.PeerUIDs = d.PeerUIDs
	}
	if c.MaxUnackedBytes == 0 {
		c.MaxUnackedBytes = d.MaxUnackedBytes
	}
	if c.MaxQueuedExecutables == 0 {
		c.MaxQueuedExecutables = d.MaxQueuedExecutables
	}
	if c.MinBackoff == 0 {
		c.MinBackoff = d.MinBackoff
	}
	if c.MaxBackoff == 0 {
		c.MaxBackoff = max(d.MaxBackoff, c.MinBackoff)
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = d.DialTimeout
	}
	return c
}

// Validate reports every problem with the configuration.
func (c ClientConfig) Validate() error {
	var errs []error
	if c.Path == "" {
		errs = append(errs, errors.New("socket path is empty"))
	} else if len(c.Path) > maxSocketPath {
		errs = append(errs, fmt.Errorf("socket path %q is %d bytes, longer than the maximum %d", c.Path, len(c.Path), maxSocketPath))
	}
	if c.MaxUnackedBytes < 0 {
		errs = append(errs, fmt.Errorf("max unacked bytes %d is negative", c.MaxUnackedBytes))
	}
	if c.MaxQueuedExecutables < 0 {
		errs = append(errs, fmt.Errorf("max queued executables %d is negative", c.MaxQueuedExecutables))
	}
	if c.MinBackoff < 0 || c.MaxBackoff < 0 {
		errs = append(errs, fmt.Errorf("backoff %v..%v is negative", c.MinBackoff, c.MaxBackoff))
	} else if c.MaxBackoff != 0 && c.MinBackoff > c.MaxBackoff {
		errs = append(errs, fmt.Errorf("min backoff %v exceeds max backoff %v", c.MinBackoff, c.MaxBackoff))
	}
	if c.DialTimeout < 0 {
		errs = append(errs, fmt.Errorf("dial timeout %v is negative", c.DialTimeout))
	}
	return errors.Join(errs...)
}

// ServerStats is a snapshot of a Server's cumulative counters.
type ServerStats struct {
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

// ClientStats is a snapshot of a Client's state and cumulative counters.
type ClientStats struct {
	Connected      bool   // a verified connection is up
	Connects       uint64 // connections established and verified
	PeerRejected   uint64 // connections refused because of the server's uid
	ProtocolErrors uint64 // connections dropped because the server broke the protocol
	FramesSent     uint64 // frames written, hello and resends included
	BytesSent      uint64 // bytes written, headers included
	Resent         uint64 // reliable frames written again on a later connection

	AckedSeq      uint64 // highest acknowledged sequence
	UnackedFrames int    // reliable frames kept until acknowledged
	UnackedBytes  int    // their size, headers included

	// Batches evicted from the buffer before acknowledgement (loss reports
	// never are), whatever became of them: each is lost, delivered or
	// still unconfirmed (Evicted = Lost + DeliveredEvicted + Unconfirmed).
	EvictedFrames  uint64
	EvictedBytes   uint64 // their size, headers included
	EvictedSamples uint64 // the sample counts passed with them

	// Lost: evicted frames that never reached the server, because they were
	// evicted before being written on the current connection, or were
	// written but the connection ended before the server acknowledged them.
	// This is what the sampler reports in-band.
	LostFrames  uint64
	LostBytes   uint64 // headers included
	LostSamples uint64

	// Evicted after being written, then acknowledged: delivered.
	DeliveredEvictedFrames  uint64
	DeliveredEvictedSamples uint64

	// Evicted after their write began on the current connection, waiting
	// for an acknowledgement (delivered) or the end of the connection
	// (lost).
	UnconfirmedFrames  int
	UnconfirmedSamples int

	// UnackedLossFrames counts the loss reports among UnackedFrames. They
	// are never evicted: the caller bounds them.
	UnackedLossFrames int

	RejectedFrames uint64 // reliable frames refused by SendReliable (after Close, sequence not increasing, too large)

	ExecutablesSent    uint64 // executable notices written
	ExecutablesDropped uint64 // executable notices dropped (not connected, queue full, connection lost, closed)
	DescriptorsSent    uint64 // descriptors passed to the server
	DescriptorsDropped uint64 // descriptors closed unsent (not connected, queue full, connection lost, closed)

	// LastError describes the most recent connection failure, "" if none.
	LastError string
}

func orDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
