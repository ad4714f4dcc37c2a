package ipc

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/tandem-profiler/tandem/internal/retry"
)

// Defaults.
const (
	// DefaultMaxUnackedBytes bounds the reliable frames (with headers) a
	// Client keeps until they are acknowledged.
	DefaultMaxUnackedBytes = 64 << 20

	// DefaultMaxQueuedExecutables bounds the executable notices (and their
	// descriptors) a Client queues for sending.
	DefaultMaxQueuedExecutables = 256

	// DefaultMaxRetainedExecutables bounds the executable notices (and
	// their descriptors) a Client keeps after sending them, to send them
	// again on every new connection: an encoder that restarted knows no
	// executable, and the tracer reports each one only once.
	DefaultMaxRetainedExecutables = 4096

	// DefaultMaxRetainedExecutableBytes bounds the sizes of the files
	// whose descriptors a Client holds (queued or kept to send again): a
	// descriptor keeps a deleted file's disk space from being reclaimed
	// (a linked file's costs none, and about 0.2 KiB of kernel memory).
	// Sized, as the encoder's, for a node's executables: Kubernetes' own
	// unstripped binaries alone are about 0.5-0.8 GiB
	// (docs/executables.md).
	DefaultMaxRetainedExecutableBytes = 4 << 30

	// DefaultExecutableCheckInterval is how often a Client checks the
	// executables it keeps for deleted files whose process is gone.
	DefaultExecutableCheckInterval = time.Second

	// DefaultMinBackoff and DefaultMaxBackoff bound the Client's delay
	// between connection attempts; the delay doubles from min to max,
	// with jitter.
	DefaultMinBackoff = 100 * time.Millisecond
	DefaultMaxBackoff = 5 * time.Second
	// reconnectJitter spreads the samplers of a fleet whose encoders
	// restarted together.
	reconnectJitter = 0.2

	// DefaultDialTimeout bounds one connection attempt.
	DefaultDialTimeout = 5 * time.Second

	// MaxSocketPath is the usable length of sockaddr_un.sun_path.
	MaxSocketPath = 107

	// PeerUIDsFlag is the command-line flag that sets
	// ClientConfig.PeerUIDs; errors name it so that an operator knows
	// what to change.
	PeerUIDsFlag = "--encoder-uid"
)

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
	// MaxRetainedExecutables bounds the executable notices kept, with
	// their descriptors, to be sent again on each new connection; past it
	// the oldest is closed and forgotten.
	MaxRetainedExecutables int
	// MaxRetainedExecutableBytes bounds the sizes of the files whose
	// descriptors the Client holds, queued or kept; past it the oldest
	// kept is closed and forgotten.
	MaxRetainedExecutableBytes int64
	// ExecutableCheckInterval is how often the kept executables are
	// checked: one whose file was deleted is closed once the server has
	// acknowledged its notice and the process it was seen in is gone.
	ExecutableCheckInterval time.Duration
	// MinBackoff and MaxBackoff bound the delay between connection
	// attempts: the one retry policy (internal/retry), ±20% jitter.
	MinBackoff, MaxBackoff time.Duration
	// Clock times the delays between connection attempts; nil is the
	// real clock (tests use a fake one).
	Clock retry.Clock
	// DialTimeout bounds one connection attempt.
	DialTimeout time.Duration
	// TrustSocketDir skips CheckSocketDir before each connection attempt
	// (tandem-sampler --socket-dir-check=false): for a directory only the
	// sampler and the encoder can reach, such as a pod's emptyDir, whose
	// mode says everyone may write it.
	TrustSocketDir bool

	_ struct{}
}

// DefaultClientConfig returns the defaults, with Path empty.
func DefaultClientConfig() ClientConfig {
	return ClientConfig{
		PeerUIDs:               []uint32{0},
		MaxUnackedBytes:        DefaultMaxUnackedBytes,
		MaxQueuedExecutables:   DefaultMaxQueuedExecutables,
		MaxRetainedExecutables: DefaultMaxRetainedExecutables,
		MinBackoff:             DefaultMinBackoff,
		MaxBackoff:             DefaultMaxBackoff,
		DialTimeout:            DefaultDialTimeout,

		MaxRetainedExecutableBytes: DefaultMaxRetainedExecutableBytes,
		ExecutableCheckInterval:    DefaultExecutableCheckInterval,
	}
}

func (c ClientConfig) backoff() retry.Policy {
	return retry.Policy{Initial: c.MinBackoff, Max: c.MaxBackoff, Jitter: reconnectJitter, Clock: c.Clock}
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
	if c.MaxRetainedExecutables == 0 {
		c.MaxRetainedExecutables = d.MaxRetainedExecutables
	}
	if c.MaxRetainedExecutableBytes == 0 {
		c.MaxRetainedExecutableBytes = d.MaxRetainedExecutableBytes
	}
	if c.ExecutableCheckInterval == 0 {
		c.ExecutableCheckInterval = d.ExecutableCheckInterval
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
	} else if len(c.Path) > MaxSocketPath {
		errs = append(errs, fmt.Errorf("socket path %q is %d bytes, longer than the maximum %d", c.Path, len(c.Path), MaxSocketPath))
	}
	if c.MaxUnackedBytes < 0 {
		errs = append(errs, fmt.Errorf("max unacked bytes %d is negative", c.MaxUnackedBytes))
	}
	if c.MaxQueuedExecutables < 0 {
		errs = append(errs, fmt.Errorf("max queued executables %d is negative", c.MaxQueuedExecutables))
	}
	if c.MaxRetainedExecutables < 0 {
		errs = append(errs, fmt.Errorf("max retained executables %d is negative", c.MaxRetainedExecutables))
	}
	if c.MaxRetainedExecutableBytes < 0 {
		errs = append(errs, fmt.Errorf("max retained executable bytes %d is negative", c.MaxRetainedExecutableBytes))
	}
	if c.ExecutableCheckInterval < 0 {
		errs = append(errs, fmt.Errorf("executable check interval %v is negative", c.ExecutableCheckInterval))
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

// ClientStats is a snapshot of a Client's state and cumulative counters.
type ClientStats struct {
	Connected      bool   // a verified connection is up
	Connects       uint64 // connections established and verified
	PeerRejected   uint64 // connections refused because of the server's uid or an unsafe socket directory
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

	RejectedFrames uint64 // reliable frames refused by SendReliable (after Close, sequence not increasing, too large, bad dictionary reference)

	// DictionaryBytes is the size of the dictionary definition logs the
	// unacknowledged frames need (protocol 1.4), headers included. Not
	// part of UnackedBytes: the logs are shared with a dump and bounded by
	// the sampler's generation cap.
	DictionaryBytes int

	ExecutablesSent    uint64 // executable notices written
	ExecutablesDropped uint64 // executable notices dropped (not connected, queue full, connection lost, closed)
	DescriptorsSent    uint64 // descriptors passed to the server
	DescriptorsDropped uint64 // descriptors closed unsent (not connected, queue full, connection lost, closed)

	// The executables' descriptors held, queued or kept to send again:
	// how many, the sizes of their files, and how many of those files
	// were deleted at the last check.
	ExecutablesHeld, ExecutablesHeldDeleted int
	ExecutablesHeldBytes                    int64
	// Kept descriptors closed early (deleted file, notice acknowledged,
	// process gone) and closed past MaxRetainedExecutables or
	// MaxRetainedExecutableBytes.
	ExecutablesReleasedEarly                               uint64
	ExecutablesEvictedForCount, ExecutablesEvictedForBytes uint64

	// LastError describes the most recent connection failure, "" if none.
	LastError string
}

func orDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
