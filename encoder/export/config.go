package export

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tandem-profiler/tandem/internal/cli"
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
	// OTLP at its measured wire size per sample, see docs/delivery.md ("What an
	// outage costs").
	DefaultQueueSize  = 360
	DefaultQueueBytes = 64 << 20
)

// QueueConfig says how one output delivers: how much it holds while its
// backend is down and how it retries. It is plain data. The tags name a
// field's key in an outputs entry and its flag (encoder/output.Settings
// reads them; see there).
type QueueConfig struct {
	// QueueSize and QueueBytes bound the flushes an output holds, queued
	// or in flight. Past either, the oldest is given up and its samples
	// counted lost (reason queue_full).
	QueueSize  int `yaml:"queue_size" flag:"remote-store-queue-size,every" help:"flushes an output holds while its backend is slow or down; past it the oldest is given up (counted in tandem_encoder_lost_samples_total)"`
	QueueBytes int `yaml:"queue_bytes" flag:"remote-store-queue-bytes,every" help:"encoded bytes an output holds while its backend is slow or down; past it the oldest flush is given up (counted)"`
	// RPCTimeout bounds one attempt.
	RPCTimeout time.Duration `yaml:"rpc_timeout" flag:"remote-store-rpc-unary-timeout,every" transport:"grpc" help:"bound on one export attempt (failed attempts are retried)"`
	// Retry is the backoff between attempts (no flags): from 1 s doubling
	// to 30 s, each wait jittered by ±20%, on the real clock.
	Retry retry.Policy `yaml:"-"`
	// GiveUpAfter, when positive, gives up a flush once the output has
	// been failing (no attempt succeeding) for this long (reason
	// unavailable). Zero retries until the flush is delivered, refused, or
	// pushed out of the queue: serve's policy. replay sets it.
	GiveUpAfter time.Duration `yaml:"-"`
	// Backpressure makes Submit wait for room instead of giving up the
	// oldest flush (replay: a dump is read faster than any backend takes
	// it, and nothing must be lost for that).
	Backpressure bool `yaml:"-"`
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
// It is plain data. The tags name a field's key in an outputs entry
// (yaml) and its flag, parca-agent's name where it has one
// (encoder/output.Settings reads them; see there).
type Config struct {
	// Address is the gRPC target, host:port. Empty means no remote store:
	// nothing is dialed.
	Address string `yaml:"address" flag:"remote-store-address" help:"gRPC address (host:port) of an OTLP/profiles receiver; empty writes pprof files instead"`
	// Insecure sends plaintext gRPC.
	Insecure bool `yaml:"insecure" flag:"remote-store-insecure" help:"send plaintext gRPC (no TLS)"`
	// InsecureSkipVerify accepts any server certificate.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify" flag:"remote-store-insecure-skip-verify" help:"accept any server certificate"`
	// CAFile is a PEM bundle of roots to verify the server against instead
	// of the system pool.
	CAFile string `yaml:"ca_file" flag:"remote-store-ca-file" help:"PEM roots to verify the server with instead of the system pool"`
	// ClientCert and ClientKey are PEM files for mutual TLS.
	ClientCert string `yaml:"client_cert" flag:"remote-store-client-cert" help:"PEM client certificate for mutual TLS"`
	ClientKey  string `yaml:"client_key" flag:"remote-store-client-key" help:"PEM client key for mutual TLS"`
	// BearerToken is sent as "authorization: Bearer <token>" (a flag
	// only: an outputs file names a file); BearerTokenFile is read once at
	// Dial and trimmed.
	BearerToken     string `yaml:"-" flag:"remote-store-bearer-token" help:"bearer token sent with every RPC"`
	BearerTokenFile string `yaml:"bearer_token_file" flag:"remote-store-bearer-token-file" help:"file holding the bearer token (read once, trimmed)"`
	// GRPCHeaders are added to the metadata of every RPC.
	GRPCHeaders map[string]string `yaml:"headers" flag:"remote-store-grpc-headers" help:"extra gRPC metadata, key=value (repeat or separate with ';' or ','; in an outputs entry a mapping)"`
	// Compression is "gzip" or "none".
	Compression string `yaml:"compression" flag:"remote-store-compression" help:"gRPC compression for OTLP: gzip (level 1) or none (best over loopback)"`
	// ConnectionTimeout bounds each connection attempt.
	ConnectionTimeout time.Duration `yaml:"-" flag:"remote-store-grpc-connection-timeout,every" help:"bound on each connection attempt"`
	// MaxCallSendMsgSize and MaxCallRecvMsgSize limit messages.
	MaxCallSendMsgSize int `yaml:"-" flag:"remote-store-grpc-max-call-send-msg-size,every" help:"largest message sent to the remote store; a flush that would exceed it is split into several requests (Arrow formats)"`
	MaxCallRecvMsgSize int `yaml:"-" flag:"remote-store-grpc-max-call-recv-msg-size,every" help:"largest message received from the remote store"`

	_ struct{}
}

// Compressions lists the values Config.Compression takes.
var Compressions = []string{CompressionGzip, CompressionNone}

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
	// A gRPC target with a scheme (dns:///, unix:) is the resolver's to
	// parse; a plain one without a port would be dialed on 443.
	if c.Address != "" && !strings.Contains(c.Address, "://") && !strings.HasPrefix(c.Address, "unix:") {
		if err := cli.CheckHostPort(c.Address); err != nil {
			add("remote store address %w", err)
		}
	}
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
