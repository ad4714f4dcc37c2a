package debuginfo

import (
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/tandem-profiler/tandem/internal/retry"
)

// Defaults, as parca-agent has them where it has the knob.
const (
	DefaultQueueSize   = 4096   // --debuginfo-upload-queue-size
	DefaultMaxParallel = 25     // --debuginfo-upload-max-parallel
	DefaultTempDir     = "/tmp" // --debuginfo-temp-dir
	// DefaultChunkSize is the gRPC Upload chunk. parca-agent sends 8 MiB;
	// the server takes any size. 1 MiB bounds each worker's buffer (25
	// workers: 25 MiB, not 200) and was faster on loopback (BenchmarkUpload:
	// 76 MB/s against 56 MB/s with 8 MiB on a loaded 2-core VM).
	DefaultChunkSize  = 1 << 20
	DefaultCacheSize  = 65536            // do-not-retry entries (parca-agent's minimum cache size)
	DefaultRetryLater = 5 * time.Minute  // do-not-retry lifetime for "in progress" and FailedPrecondition
	DefaultTimeout    = 15 * time.Minute // one upload; the server's --debuginfo-upload-max-duration
	// DefaultRPCRetries is how often a unary RPC is retried on Unavailable
	// or ResourceExhausted (parca-agent: 10, backoff from 1 s, jittered).
	DefaultRPCRetries = 10
	DefaultRPCBackoff = time.Second
	// DefaultRPCMaxBackoff caps the wait between retries of a unary RPC.
	DefaultRPCMaxBackoff = 30 * time.Second
	// maxUploadMsgSize is the per-call send limit of the Upload stream
	// (parca-agent's, and the server's receive limit).
	maxUploadMsgSize = 64 << 20
	// scratchSubdir is the directory under TempDir that holds stripped
	// copies; New removes and recreates it.
	scratchSubdir = "tandem-debuginfo"
)

// Config is the uploader's knobs. It is plain data.
type Config struct {
	// QueueSize bounds the executables waiting for a worker; past it new
	// ones are dropped and counted (--debuginfo-upload-queue-size).
	QueueSize int
	// MaxParallel is the number of concurrent uploads
	// (--debuginfo-upload-max-parallel).
	MaxParallel int
	// Strip uploads a copy with only debug, symbol, string, Go and note
	// section contents (Strip); false uploads the whole file
	// (--debuginfo-strip).
	Strip bool
	// TempDir holds the stripped copies, in a subdirectory New removes and
	// recreates (--debuginfo-temp-dir). Only used when Strip is set.
	TempDir string
	// Timeout bounds one upload from ShouldInitiateUpload to
	// MarkUploadFinished (--debuginfo-upload-timeout).
	Timeout time.Duration
	// ChunkSize is the size of the gRPC Upload stream's chunks.
	ChunkSize int
	// CacheSize bounds the do-not-retry cache (least recently used out).
	CacheSize int
	// RetryLater is how long a file is not retried after the server said
	// another upload is in progress, or refused a precondition.
	RetryLater time.Duration
	// RPCRetries and RPCRetry: unary RPCs failing with a retryable error
	// (internal/grpcretry: Unavailable, ResourceExhausted, ...) are retried
	// up to RPCRetries times within Timeout, waiting as RPCRetry says
	// (the one retry policy: 1 s doubling to 30 s, ±10%).
	RPCRetries int
	RPCRetry   retry.Policy

	_ struct{}
}

// DefaultConfig returns parca-agent's defaults.
func DefaultConfig() Config {
	return Config{
		QueueSize:   DefaultQueueSize,
		MaxParallel: DefaultMaxParallel,
		Strip:       true,
		TempDir:     DefaultTempDir,
		Timeout:     DefaultTimeout,
		ChunkSize:   DefaultChunkSize,
		CacheSize:   DefaultCacheSize,
		RetryLater:  DefaultRetryLater,
		RPCRetries:  DefaultRPCRetries,
		RPCRetry:    retry.Policy{Initial: DefaultRPCBackoff, Max: DefaultRPCMaxBackoff, Jitter: 0.1},
	}
}

// Validate reports every problem with the configuration. Messages name
// the flags.
func (c Config) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.QueueSize < 1 {
		add("--debuginfo-upload-queue-size=%d: must be at least 1", c.QueueSize)
	}
	if c.MaxParallel < 1 {
		add("--debuginfo-upload-max-parallel=%d: must be at least 1", c.MaxParallel)
	}
	if c.Strip && c.TempDir == "" {
		add("--debuginfo-temp-dir is empty: stripping needs scratch space (or set --debuginfo-strip=false)")
	}
	if c.Timeout <= 0 {
		add("--debuginfo-upload-timeout=%v: must be positive", c.Timeout)
	}
	if c.ChunkSize < 1 || c.ChunkSize > maxUploadMsgSize-1024 {
		add("upload chunk size %d: must be between 1 and %d", c.ChunkSize, maxUploadMsgSize-1024)
	}
	if c.CacheSize < 1 {
		add("do-not-retry cache size %d: must be at least 1", c.CacheSize)
	}
	if c.RetryLater <= 0 || c.RPCRetries < 0 {
		add("retry settings (later %v, retries %d): the duration must be positive, retries not negative", c.RetryLater, c.RPCRetries)
	}
	if err := c.RPCRetry.Validate("upload RPC backoff"); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ScratchDir is the directory under TempDir where an Uploader keeps
// stripped copies.
func (c *Config) ScratchDir() string { return filepath.Join(c.TempDir, scratchSubdir) }
