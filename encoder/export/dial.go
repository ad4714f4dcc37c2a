package export

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"

	"github.com/tandem-profiler/tandem/internal/buildinfo"
	"github.com/tandem-profiler/tandem/internal/prom"
)

// ErrNoAddress is returned by Dial when Config.Address is empty: without a
// remote store there is nothing to dial.
var ErrNoAddress = errors.New("no remote store address")

// DialOptions returns the dial options cfg describes: transport security,
// per-RPC credentials, metadata headers, message limits and connection
// timeout. It reads the bearer token file and the certificate files.
func DialOptions(cfg Config) ([]grpc.DialOption, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	opts := []grpc.DialOption{
		grpc.WithUserAgent("tandem-encoder/" + buildinfo.String()),
		grpc.WithDefaultCallOptions(
			grpc.MaxCallSendMsgSize(cfg.MaxCallSendMsgSize),
			grpc.MaxCallRecvMsgSize(cfg.MaxCallRecvMsgSize),
		),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.DefaultConfig,
			MinConnectTimeout: cfg.ConnectionTimeout,
		}),
	}
	if cfg.Insecure {
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	} else {
		tc, err := tlsConfig(cfg)
		if err != nil {
			return nil, err
		}
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	}
	token := cfg.BearerToken
	if cfg.BearerTokenFile != "" {
		b, err := os.ReadFile(cfg.BearerTokenFile)
		if err != nil {
			return nil, fmt.Errorf("read bearer token: %w", err)
		}
		token = strings.TrimSpace(string(b))
	}
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer{token: token, insecure: cfg.Insecure}))
	}
	if len(cfg.GRPCHeaders) > 0 {
		var kv []string
		for k, v := range cfg.GRPCHeaders {
			kv = append(kv, strings.ToLower(k), v)
		}
		opts = append(opts,
			grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				return invoker(metadata.AppendToOutgoingContext(ctx, kv...), method, req, reply, cc, opts...)
			}),
			grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
				return streamer(metadata.AppendToOutgoingContext(ctx, kv...), desc, cc, method, opts...)
			}),
		)
	}
	return opts, nil
}

func tlsConfig(cfg Config) (*tls.Config, error) {
	tc := &tls.Config{
		MinVersion:         tls.VersionTLS13,
		InsecureSkipVerify: cfg.InsecureSkipVerify, //nolint:gosec // the user asked for it
	}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s: no PEM certificates", cfg.CAFile)
		}
		tc.RootCAs = pool
	}
	if cfg.ClientCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.ClientCert, cfg.ClientKey)
		if err != nil {
			return nil, fmt.Errorf("load client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// Dial creates the remote-store connection cfg describes, counting payload
// bytes into reg (nil: not counted). The connection is established lazily,
// at the first RPC. extra options come last and win. It returns
// ErrNoAddress when cfg.Address is empty.
func Dial(cfg Config, reg prometheus.Registerer, extra ...grpc.DialOption) (*grpc.ClientConn, error) {
	if cfg.Address == "" {
		return nil, ErrNoAddress
	}
	opts, err := DialOptions(cfg)
	if err != nil {
		return nil, err
	}
	if reg != nil {
		h := newByteCounter()
		if err := h.register(reg); err != nil {
			return nil, err
		}
		opts = append(opts, grpc.WithStatsHandler(h))
	}
	conn, err := grpc.NewClient(cfg.Address, append(opts, extra...)...)
	if err != nil {
		return nil, fmt.Errorf("dial remote store %s: %w", cfg.Address, err)
	}
	return conn, nil
}

// bearer sends a bearer token with every RPC.
type bearer struct {
	token    string
	insecure bool
}

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

// RequireTransportSecurity keeps the token off plaintext connections unless
// the user chose plaintext.
func (b bearer) RequireTransportSecurity() bool { return !b.insecure }

// byteCounter counts the bytes of outgoing messages per method, on the wire
// (after compression) and before compression.
type byteCounter struct {
	bytes *prometheus.CounterVec
}

type methodKey struct{}

func newByteCounter() *byteCounter {
	return &byteCounter{bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "tandem_encoder_remote_store_sent_bytes_total",
		Help: "Message bytes sent to the remote store, per method, on the wire (compressed) and uncompressed.",
	}, []string{"method", "encoding"})}
}

func (h *byteCounter) register(reg prometheus.Registerer) error {
	return prom.Register(reg, "remote store", h.bytes)
}

func (h *byteCounter) TagRPC(ctx context.Context, info *stats.RPCTagInfo) context.Context {
	return context.WithValue(ctx, methodKey{}, info.FullMethodName)
}

func (h *byteCounter) HandleRPC(ctx context.Context, s stats.RPCStats) {
	out, ok := s.(*stats.OutPayload)
	if !ok {
		return
	}
	method, _ := ctx.Value(methodKey{}).(string)
	h.bytes.WithLabelValues(method, "wire").Add(float64(out.WireLength))
	h.bytes.WithLabelValues(method, "uncompressed").Add(float64(out.Length))
}

func (h *byteCounter) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }

func (h *byteCounter) HandleConn(context.Context, stats.ConnStats) {}
