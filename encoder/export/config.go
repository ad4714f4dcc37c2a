package export

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Formats and compressions Config accepts.
const (
	FormatOTLP       = "otlp"
	FormatArrowV2    = "arrow-v2"
	FormatArrowV1    = "arrow-v1"
	CompressionGzip  = "gzip"
	CompressionNone  = "none"
	defaultQueueSize = 4
)

// Defaults, as parca-agent has them where it has the knob.
const (
	DefaultConnectionTimeout   = 3 * time.Second
	DefaultRPCTimeout          = 5 * time.Minute
	DefaultAttemptTimeout      = 30 * time.Second
	DefaultMaxCallMsgSize      = 32 << 20
	DefaultRetryInitialBackoff = 1 * time.Second
	DefaultRetryMaxBackoff     = 30 * time.Second
)

// Config describes the remote store and how to talk to it. It is plain
// data; the flag names in the comments are parca-agent's (or, where it has
// none, Tandem's in the same style).
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
	// Format is the profile encoding (--remote-store-format): "otlp"
	// (OTLP/profiles Export), "arrow-v2" (WriteArrow) or "arrow-v1" (the
	// Write stream).
	Format string
	// Compression is "gzip" or "none" (--remote-store-compression).
	Compression string
	// ConnectionTimeout bounds each connection attempt
	// (--remote-store-grpc-connection-timeout).
	ConnectionTimeout time.Duration
	// RPCTimeout bounds one export, retries included
	// (--remote-store-rpc-unary-timeout).
	RPCTimeout time.Duration
	// AttemptTimeout bounds each attempt (--remote-store-rpc-attempt-timeout).
	AttemptTimeout time.Duration
	// MaxCallSendMsgSize and MaxCallRecvMsgSize limit messages
	// (--remote-store-grpc-max-call-send-msg-size, ...-recv-msg-size).
	MaxCallSendMsgSize int
	MaxCallRecvMsgSize int
	// QueueSize is how many requests Submit holds before dropping
	// (--remote-store-queue-size).
	QueueSize int
	// RetryInitialBackoff and RetryMaxBackoff bound the exponential backoff
	// between attempts (--remote-store-retry-initial-backoff,
	// --remote-store-retry-max-backoff); each wait is jittered by ±20%.
	RetryInitialBackoff time.Duration
	RetryMaxBackoff     time.Duration

	_ struct{}
}

// DefaultConfig returns the defaults: no address, TLS, OTLP, gzip.
func DefaultConfig() Config {
	return Config{
		Format:              FormatOTLP,
		Compression:         CompressionGzip,
		ConnectionTimeout:   DefaultConnectionTimeout,
		RPCTimeout:          DefaultRPCTimeout,
		AttemptTimeout:      DefaultAttemptTimeout,
		MaxCallSendMsgSize:  DefaultMaxCallMsgSize,
		MaxCallRecvMsgSize:  DefaultMaxCallMsgSize,
		QueueSize:           defaultQueueSize,
		RetryInitialBackoff: DefaultRetryInitialBackoff,
		RetryMaxBackoff:     DefaultRetryMaxBackoff,
	}
}

// Validate reports every problem with the configuration.
func (c Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch c.Format {
	case FormatOTLP, FormatArrowV2, FormatArrowV1:
	default:
		add("remote store format %q: want %q, %q or %q", c.Format, FormatArrowV2, FormatArrowV1, FormatOTLP)
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
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"connection timeout", c.ConnectionTimeout}, {"RPC timeout", c.RPCTimeout},
		{"attempt timeout", c.AttemptTimeout}, {"retry initial backoff", c.RetryInitialBackoff},
		{"retry max backoff", c.RetryMaxBackoff},
	} {
		if d.v <= 0 {
			add("%s %v: must be positive", d.name, d.v)
		}
	}
	if c.RetryMaxBackoff < c.RetryInitialBackoff {
		add("retry max backoff %v is below the initial backoff %v", c.RetryMaxBackoff, c.RetryInitialBackoff)
	}
	if c.MaxCallSendMsgSize <= 0 || c.MaxCallRecvMsgSize <= 0 {
		add("max call message sizes (%d send, %d receive) must be positive", c.MaxCallSendMsgSize, c.MaxCallRecvMsgSize)
	}
	if c.QueueSize < 1 {
		add("queue size %d: must be at least 1", c.QueueSize)
	}
	return errors.Join(errs...)
}
