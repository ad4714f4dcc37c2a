package export

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/utils/clock"
)

// failureLogEvery is how often a failing output logs again after its first
// failure, which is logged at once.
const failureLogEvery = time.Minute

// failureReport tracks whether an output is failing and logs it plainly:
// the first failed attempt at once, with its cause and a hint; then at most
// once per failureLogEvery; the recovery once.
type failureReport struct {
	logger *slog.Logger
	name   string
	clock  clock.PassiveClock

	mu       sync.Mutex
	since    time.Time // start of the current failure streak; zero: not failing
	lastErr  error
	lastLog  time.Time
	failures int // attempts failed since lastLog
}

func newFailureReport(logger *slog.Logger, name string, clk clock.PassiveClock) *failureReport {
	return &failureReport{logger: logger, name: name, clock: clk}
}

// failure records a failed attempt, which started at started: a failure
// streak begins when its first failed attempt did.
func (r *failureReport) failure(err error, started time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	first := r.since.IsZero()
	if first {
		r.since = started
	}
	r.lastErr = err
	r.failures++
	if first || now.Sub(r.lastLog) >= failureLogEvery {
		args := []any{"err", err, "failing_for", now.Sub(r.since).Round(time.Second), "failed_attempts", r.failures}
		if h := Hint(err); h != "" {
			args = append(args, "hint", h)
		}
		msg := "export to " + r.name + " is failing; retrying"
		if !Retryable(err) {
			msg = "export to " + r.name + " was refused; not retrying it"
		}
		r.logger.Warn(msg, args...)
		r.lastLog, r.failures = now, 0
	}
}

// streakStart returns when the current failure streak began; zero when
// the output is not failing.
func (r *failureReport) streakStart() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.since
}

// failingFor returns how long the output has been failing at now.
func (r *failureReport) failingFor(now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.since.IsZero() {
		return 0
	}
	return now.Sub(r.since)
}

func (r *failureReport) success() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.since.IsZero() {
		return
	}
	r.logger.Info("export to "+r.name+" works again", "failed_for", r.clock.Since(r.since).Round(time.Second))
	r.since, r.lastErr, r.failures = time.Time{}, nil, 0
}

func (r *failureReport) failing() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.since.IsZero() {
		return nil
	}
	return fmt.Errorf("failing since %s: %w", r.since.UTC().Format(time.RFC3339), r.lastErr)
}

// Hint names the likely fix for a failed export, or returns "" when it
// has none. It reads gRPC's and the standard library's error text, which
// is all a client sees of these failures.
func Hint(err error) string {
	if err == nil {
		return ""
	}
	msg := err.Error()
	has := func(subs ...string) bool {
		for _, s := range subs {
			if strings.Contains(msg, s) {
				return true
			}
		}
		return false
	}
	switch {
	case has("first record does not look like a TLS handshake"):
		return "the server speaks plaintext while TLS is on: add --remote-store-insecure (insecure: true in an outputs entry)"
	case has("x509:", "certificate"):
		return "the server's certificate is not trusted or does not match: set --remote-store-ca-file (ca_file) to the CA that signed it, or check the address's host name"
	case has("connection refused"):
		return "nothing listens at the address: is the receiver running, and is the port right?"
	case has("no such host", "produced zero addresses", "server misbehaving", "lookup "):
		return "the host name does not resolve: check the address"
	case has("http2: frame too large", "server preface", "malformed header", "unexpected HTTP status code", "content-type", "tls: first record"):
		return "the address does not answer gRPC: is it the gRPC port (OTLP/gRPC usually 4317, Parca 7070), not HTTP?"
	case has("Decompressor is not installed for grpc-encoding"):
		return "the receiver does not accept this gRPC compression: set --remote-store-compression=none (compression: none in an outputs entry), or enable gzip on the receiver"
	case has(errNoAnswer.Error()):
		return "the receiver took the connection but answered nothing within --give-up-after: is it overloaded, or a server that is not gRPC?"
	case has("permission denied", "read-only file system"):
		return "the output directory is not writable by the encoder's user"
	case has("no space left on device"):
		return "the output directory's file system is full"
	}
	switch status.Code(err) {
	case codes.Unimplemented:
		return "the server does not implement this service: is the format right for this backend (otlp for an OpenTelemetry collector, arrow-v2 for Parca)?"
	case codes.Unauthenticated, codes.PermissionDenied:
		return "check the bearer token (--remote-store-bearer-token-file, bearer_token_file) and headers"
	case codes.DeadlineExceeded:
		return "the receiver did not answer within --remote-store-rpc-unary-timeout (rpc_timeout)"
	}
	return ""
}
