package harness

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/tandem-profiler/tandem/confine"
	"github.com/tandem-profiler/tandem/test/otlptest"
	"github.com/tandem-profiler/tandem/test/sdnotifytest"
)

// How long the pair starter waits for each readiness signal: generous for
// a loaded 2-core machine (the tracer's load verifies every eBPF program).
const (
	EncoderReadyWithin = 30 * time.Second
	SamplerReadyWithin = 2 * time.Minute
	FirstBatchWithin   = 90 * time.Second
	StopWithin         = 30 * time.Second
	DeliveredWithin    = 60 * time.Second
)

// PairConfig is a pair to start from built binaries.
type PairConfig struct {
	_ struct{}
	// Bin holds tandem-sampler and tandem-encoder (Build's directory for
	// Sampler and Encoder).
	Bin string
	// Dir is the socket's directory, owned by EncoderUID ("": SharedDir).
	Dir string
	// EncoderUID runs the encoder (0: NobodyUID). The sampler runs as
	// root.
	EncoderUID int
	// EncoderArgs follow `serve --socket S --allowed-uid 0 --http-address A`:
	// the outputs, say.
	EncoderArgs []string
	// SamplerArgs follow `--socket S --encoder-uid U`.
	SamplerArgs []string
	// SamplerFirst starts the sampler before the encoder listens: it must
	// keep retrying until it does.
	SamplerFirst bool
}

// Pair is a sampler (root) and an encoder (unprivileged) connected through
// a Unix socket. Both are children of the test, killed at its end.
type Pair struct {
	Config PairConfig
	// Dir holds the socket; Socket is its path.
	Dir, Socket string
	// HTTPAddr is the running encoder's HTTP address (/metrics, /readyz);
	// a restarted encoder gets a new one.
	HTTPAddr string
	// Encoder and Sampler are the running children.
	Encoder, Sampler *Proc
}

// NewPair prepares a pair without starting it: for tests that start its
// halves themselves (StartEncoder, StartSampler).
func NewPair(t testing.TB, cfg PairConfig) *Pair {
	t.Helper()
	if cfg.EncoderUID == 0 {
		cfg.EncoderUID = NobodyUID
	}
	if cfg.Dir == "" {
		cfg.Dir = SharedDir(t, cfg.EncoderUID)
	}
	return &Pair{Config: cfg, Dir: cfg.Dir, Socket: filepath.Join(cfg.Dir, "tandem.sock")}
}

// StartPair starts the encoder and the sampler (in the configured order),
// each waited for on its readiness, then waits for the first batch at the
// encoder (the machine is never idle: the sampler's own start-up is on
// CPU). It fails as soon as either exits.
func StartPair(t testing.TB, cfg PairConfig) *Pair {
	t.Helper()
	p := NewPair(t, cfg)
	if !cfg.SamplerFirst {
		p.StartEncoder(t)
	}
	// Ready (READY=1) means sampling: with SamplerFirst the encoder comes
	// up while the sampler already has batches waiting.
	p.StartSampler(t)
	if cfg.SamplerFirst {
		p.StartEncoder(t)
	}
	WaitFor(t, "the first batch at the encoder", FirstBatchWithin, func() bool {
		return p.Metric(t, `tandem_encoder_ingest_frames_total{type="batch"}`) > 0
	}, p.Sampler, p.Encoder)
	return p
}

// StartEncoder starts (or, after the last one stopped, restarts) the
// encoder as Config.EncoderUID on a new HTTP address, and waits until it
// listens on the socket and answers /readyz. It checks the encoder has
// confined itself (it does before its HTTP server starts).
func (p *Pair) StartEncoder(t testing.TB) *Proc {
	t.Helper()
	p.HTTPAddr = otlptest.FreeAddr(t)
	args := append([]string{"serve", "--socket", p.Socket, "--allowed-uid", "0", "--http-address", p.HTTPAddr}, p.Config.EncoderArgs...)
	p.Encoder = Start(t, ProcConfig{Name: "encoder", UID: p.Config.EncoderUID, Path: filepath.Join(p.Config.Bin, Encoder.Out), Args: args})
	WaitFor(t, "the encoder's socket", EncoderReadyWithin, func() bool { return exists(p.Socket) }, p.Encoder)
	// Its HTTP server starts after the socket.
	WaitFor(t, "the encoder's /readyz", EncoderReadyWithin, func() bool { return HTTPOK(p.HTTPAddr + "/readyz") }, p.Encoder)
	if _, err := confine.CheckConfined(p.Encoder.Pid(), confine.Encoder); err != nil {
		t.Fatalf("the serving encoder is not confined: %v", err)
	}
	return p.Encoder
}

// StartSampler starts the sampler as root and waits for its READY=1.
func (p *Pair) StartSampler(t testing.TB) *Proc {
	t.Helper()
	args := append([]string{"--socket", p.Socket, "--encoder-uid", strconv.Itoa(p.Config.EncoderUID)}, p.Config.SamplerArgs...)
	p.Sampler = StartReadySampler(t, p.Dir, ProcConfig{Name: "sampler", Path: filepath.Join(p.Config.Bin, Sampler.Out), Args: args})
	return p.Sampler
}

// StartReadySampler starts a sampler (cfg, as root) with a NOTIFY_SOCKET
// in dir and waits for its READY=1, which it sends once the tracer
// samples; it fails as soon as the sampler exits. It checks the sampler
// has confined itself (it does before READY=1), so that a call the tracer
// needs and the filter denies shows up as a failure of the test.
func StartReadySampler(t testing.TB, dir string, cfg ProcConfig) *Proc {
	t.Helper()
	notify := sdnotifytest.Listen(t, dir)
	cfg.Env = append(cfg.Env, notify.Env())
	s := Start(t, cfg)
	if err := notify.WaitFor("READY=1", s.Done(), SamplerReadyWithin); err != nil {
		t.Fatalf("the sampler did not become ready: %v (exit: %v)", err, exitOf(s))
	}
	if _, err := confine.CheckConfined(s.Pid(), confine.Sampler); err != nil {
		t.Fatalf("the ready sampler is not confined: %v", err)
	}
	return s
}

func exitOf(p *Proc) any {
	if !p.Exited() {
		return "still running"
	}
	return p.Err()
}

// Metric reads one counter of the running encoder (EncoderMetric).
func (p *Pair) Metric(t testing.TB, name string) float64 {
	t.Helper()
	return EncoderMetric(t, p.HTTPAddr, name)
}

// WaitDelivered waits, once the sampler has stopped, until the encoder
// has read its goodbye (so every batch before it is ingested) and each of
// its outputs has delivered, or counted lost, every sample ingested: the
// encoder's last flush is done and its counters are final. It fails as
// soon as the encoder exits.
func (p *Pair) WaitDelivered(t testing.TB, outputs int) {
	t.Helper()
	WaitDelivered(t, p.HTTPAddr, outputs, p.Encoder)
}

// WaitDelivered is Pair.WaitDelivered for the encoder enc serving its
// metrics at httpAddr. The counters are enc's alone: after a restart,
// what it ingested (resent batches included) against what it delivered.
func WaitDelivered(t testing.TB, httpAddr string, outputs int, enc *Proc) {
	t.Helper()
	WaitFor(t, "the encoder's last flush", DeliveredWithin, func() bool {
		if EncoderMetric(t, httpAddr, `tandem_encoder_ingest_frames_total{type="goodbye"}`) == 0 {
			return false
		}
		in := EncoderMetric(t, httpAddr, "tandem_encoder_ingest_samples_total")
		out := EncoderMetric(t, httpAddr, "tandem_encoder_delivered_samples_total") +
			EncoderMetric(t, httpAddr, "tandem_encoder_lost_samples_total")
		return in > 0 && out >= float64(outputs)*in
	}, enc)
}

// Stop stops the sampler, waits until the encoder has delivered what it
// sent to its outputs (WaitDelivered), and stops the encoder; each must
// exit cleanly on SIGTERM.
func (p *Pair) Stop(t testing.TB, outputs int) {
	t.Helper()
	p.Sampler.Stop(t, StopWithin)
	p.WaitDelivered(t, outputs)
	p.Encoder.Stop(t, StopWithin)
}

// SharedDir makes a directory the unprivileged encoder (uid) can write to:
// owned by uid and writable by nobody else (but root), as make run's, so
// that the sampler's socket-directory check accepts it. It is removed at
// the test's end.
func SharedDir(t testing.TB, uid int) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "tandem-harness-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chown(dir, uid, uid); err != nil {
		t.Fatalf("give %s to uid %d: %v", dir, uid, err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
