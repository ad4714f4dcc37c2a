package export

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tandem-profiler/tandem/internal/retry"
)

// Compressions Config accepts.
const (
	CompressionGzip = "gzip"
	CompressionNone = "none"
)

// Defaults, as parca-agent has them where it has the knob.
const (
	DefaultConnectionTimeout   = 3 * time.Second
	DefaultRPCTimeout          = 30 * time.Second
	DefaultMaxCallMsgSize      = 32 << 20
	DefaultRetryInitialBackoff = 1 * time.Second
	DefaultRetryMaxBackoff     = 30 * time.Second
	// DefaultRetryJitter keeps a fleet of encoders from retrying in step.
	DefaultRetryJitter = 0.2
	// DefaultQueueSize and DefaultQueueBytes bound what one output holds
	// while its backend is slow or down: at 10 s flushes, 360 flushes are
	// an hour; 64 MiB holds (docs/benchmarks/encoding.md) about 20 minutes of a busy node's
	// OTLP at its measured wire size per sample, see the README ("What an
	// outage costs").
	DefaultQueueSize  = 360
	DefaultQueueBytes = 64 << 20
)

// QueueConfig says how one output delivers: how much it holds while its
// backend is down and how it retries. It is plain data.
type QueueConfig struct {
	// QueueSize and QueueBytes bound the flushes an output holds, queued
	// or in flight (--remote-store-queue-size, --remote-store-queue-bytes;
	// queue_size, queue_bytes in an outputs entry). Past either, the oldest
	// is given up and its samples counted lost (reason queue_full).
	QueueSize  int
	QueueBytes int
	// RPCTimeout bounds one attempt (--remote-store-rpc-unary-timeout,
	// rpc_timeout).
	RPCTimeout time.Duration
	// Retry is the backoff between attempts (no flags): from 1 s doubling
	// to 30 s, each wait jittered by ±20%, on the real clock.
	Retry retry.Policy
	// GiveUpAfter, when positive, gives up a flush once the output has
	// been failing (no attempt succeeding) for this long (reason
	// unavailable). Zero retries until the flush is delivered, refused, or
	// pushed out of the queue: serve's policy. replay sets it.
	GiveUpAfter time.Duration
	// Backpressure makes Submit wait for room instead of giving up the
	// oldest flush (replay: a dump is read faster than any backend takes
	// it, and nothing must be lost for that).
	Backpressure bool
}

// DefaultQueueConfig returns the defaults.
func DefaultQueueConfig() QueueConfig {
	return QueueConfig{
		QueueSize:  DefaultQueueSize,
		QueueBytes: DefaultQueueBytes,
		RPCTimeout: DefaultRPCTimeout,
		Retry:      retry.Policy{Initial: DefaultRetryInitialBackoff, Max: DefaultRetryMaxBackoff, Jitter: DefaultRetryJitter},
	}
}

// Validate reports every problem with the configuration.
func (c QueueConfig) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.RPCTimeout <= 0 {
		add("RPC timeout %v: must be positive", c.RPCTimeout)
	}
	if err := c.Retry.Validate("retry backoff"); err != nil {
		errs = append(errs, err)
	}
	if c.QueueSize < 1 {
		add("queue size %d: must be at least 1", c.QueueSize)
	}
	if c.QueueBytes < 1 {
		add("queue bytes %d: must be at least 1", c.QueueBytes)
	}
	if c.GiveUpAfter < 0 {
		add("give-up time %v: must not be negative", c.GiveUpAfter)
	}
	return errors.Join(errs...)
}

// Config describes the connection to a remote store: where it is and how
// to talk to it. What is sent over it (the format) and how deliveries are
// queued and retried (QueueConfig) are the output's, not the connection's.
// It is plain data; the flag names in the comments are parca-agent's (or,
// where it has none, Tandem's in the same style).
type Config struct {
	// Address is the gRPC target, host:port (--remote-store-address).
	// Empty means no remote store: nothing is dialed.
	Address string
	// Insecure sends plaintext gRPC (--remote-store-insecure).
	Insecure bool
	// InsecureSkipVerify accepts any server certificate
	// (--remote-store-insecure-skip-verify).
	InsecureSkipVerify bool
	// CAFile is a PEM bundle of roots to verify the server against instead
	// of the system pool (--remote-store-ca-file).
	CAFile string
	// ClientCert and ClientKey are PEM files for mutual TLS
	// (--remote-store-client-cert, --remote-store-client-key).
	ClientCert string
	ClientKey  string
	// BearerToken is sent as "authorization: Bearer <token>"
	// (--remote-store-bearer-token); BearerTokenFile is read once at Dial
	// and trimmed (--remote-store-bearer-token-file).
	BearerToken     string
	BearerTokenFile string
	// GRPCHeaders are added to the metadata of every RPC
	// (--remote-store-grpc-headers).
	GRPCHeaders map[string]string
	// Compression is "gzip" or "none" (--remote-store-compression).
	Compression string
	// ConnectionTimeout bounds each connection attempt
	// (--remote-store-grpc-connection-timeout).
	ConnectionTimeout time.Duration
	// MaxCallSendMsgSize and MaxCallRecvMsgSize limit messages
	// (--remote-store-grpc-max-call-send-msg-size, ...-recv-msg-size).
	MaxCallSendMsgSize int
	MaxCallRecvMsgSize int

	_ struct{}
}

// DefaultConfig returns the defaults: no address, TLS, gzip.
func DefaultConfig() Config {
	return Config{
		Compression:        CompressionGzip,
		ConnectionTimeout:  DefaultConnectionTimeout,
		MaxCallSendMsgSize: DefaultMaxCallMsgSize,
		MaxCallRecvMsgSize: DefaultMaxCallMsgSize,
	}
}

// Validate reports every problem with the configuration.
func (c Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Compression != CompressionGzip && c.Compression != CompressionNone {
		add("remote store compression %q: want %q or %q", c.Compression, CompressionGzip, CompressionNone)
	}
	if c.Insecure && (c.InsecureSkipVerify || c.CAFile != "" || c.ClientCert != "" || c.ClientKey != "") {
		add("insecure (plaintext) contradicts the TLS settings (skip-verify, CA file, client certificate)")
	}
	if (c.ClientCert == "") != (c.ClientKey == "") {
		add("client certificate and client key must be given together")
	}
	if c.BearerToken != "" && c.BearerTokenFile != "" {
		add("bearer token and bearer token file are mutually exclusive")
	}
	for k := range c.GRPCHeaders {
		if k == "" || strings.HasPrefix(strings.ToLower(k), "grpc-") || strings.ContainsAny(k, " \t\r\n:") {
			add("gRPC header %q: not a valid custom metadata key", k)
		}
	}
	if c.ConnectionTimeout <= 0 {
		add("connection timeout %v: must be positive", c.ConnectionTimeout)
	}
	if c.MaxCallSendMsgSize <= 0 || c.MaxCallRecvMsgSize <= 0 {
		add("max call message sizes (%d send, %d receive) must be positive", c.MaxCallSendMsgSize, c.MaxCallRecvMsgSize)
	}
	return errors.Join(errs...)
}
