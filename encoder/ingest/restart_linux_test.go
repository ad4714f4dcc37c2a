package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/ipc/ipcserver"
	"github.com/tandem-profiler/tandem/schema"
	"github.com/tandem-profiler/tandem/test/harness"
	"github.com/tandem-profiler/tandem/test/proctest"
	"github.com/tandem-profiler/tandem/test/waittest"
)

// lockedSink is a contentSink read by the test while a Tracker feeds it.
type lockedSink struct {
	mu sync.Mutex
	contentSink
}

func (s *lockedSink) Batch(sess *Session, b *schema.Batch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.contentSink.Batch(sess, b)
}

func (s *lockedSink) seen() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.batches...)
}

// socketEncoder is the encoder's ingest side on a real socket: a server
// whose connections a Tracker serves, one after the other.
type socketEncoder struct {
	tr     *Tracker
	sink   *lockedSink
	srv    *ipcserver.Server
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	conn   *ipcserver.Conn
	err    error // of the last Serve
}

func startSocketEncoder(t *testing.T, sock string, logger *slog.Logger) *socketEncoder {
	t.Helper()
	srv, err := ipcserver.Listen(ipcserver.Config{Path: sock, AllowedUIDs: []uint32{uint32(os.Getuid())}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := &socketEncoder{sink: &lockedSink{}, srv: srv, done: make(chan struct{})}
	e.tr = newTracker(t, e.sink, logger, nil)
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	go func() {
		defer close(e.done)
		for {
			c, err := srv.Accept(ctx)
			if err != nil {
				return
			}
			e.mu.Lock()
			e.conn = c
			e.mu.Unlock()
			err = e.tr.Serve(ctx, c, c)
			_ = c.Close()
			e.mu.Lock()
			e.err = err
			e.mu.Unlock()
		}
	}()
	t.Cleanup(e.stop)
	return e
}

// stop ends the encoder as a crash would: the socket and the connection
// close, and nothing more is exported or acknowledged.
func (e *socketEncoder) stop() {
	e.cancel()
	_ = e.srv.Close()
	e.mu.Lock()
	if e.conn != nil {
		_ = e.conn.Close()
	}
	e.mu.Unlock()
	<-e.done
}

func (e *socketEncoder) lastErr() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

// TestEncoderRestartOverSocket is TestEncoderRestartWithDictionaries with
// the real parts: the sampler's ipc.Client, with its per-connection
// dictionary cursor, writes to a real ipcserver. The first encoder
// receives batches 1-4 and acknowledges 1-2, then dies; a new encoder
// process (a new server and Tracker on the same socket path) gets the
// reconnect, with the whole generation's chunks before the resent batches,
// and then the rest of the session. Each batch reaches a Sink exactly
// once (the first encoder's 3 and 4 were never exported), with its
// content, and the second encoder counts nothing lost or duplicated.
func TestEncoderRestartOverSocket(t *testing.T) {
	s := newDictStream(t)
	n := len(s.batches)
	sock := filepath.Join(t.TempDir(), "s.sock")
	first := startSocketEncoder(t, sock, nil)

	cfg := ipc.DefaultClientConfig()
	cfg.Path = sock
	cfg.PeerUIDs = []uint32{uint32(os.Getuid())}
	cfg.MinBackoff = 10 * time.Millisecond
	client, err := ipc.NewClient(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	hp, err := schema.EncodeHello(s.hello, nil)
	if err != nil {
		t.Fatal(err)
	}
	client.SetHello(hp)
	ctx, cancel := context.WithCancel(context.Background())
	clientDone := make(chan struct{})
	go func() { _ = client.Run(ctx); close(clientDone) }()
	t.Cleanup(func() { cancel(); <-clientDone })

	// The sampler side: a generation's log, each batch needing every
	// chunk up to its own.
	log := ipc.NewDictionaryLog(1)
	chunks := 0
	send := func(i int) {
		if c := s.chunks[i]; c != nil {
			if chunks, err = log.Append(c.Payload); err != nil {
				t.Fatal(err)
			}
		}
		client.SendReliableWith(s.seqs[i], ipc.FrameBatch, s.batches[i].Payload, s.samples[i], ipc.DictionaryRef{Log: log, Chunks: chunks})
	}
	for i := range 4 {
		send(i)
	}
	waittest.For(t, "the first encoder to receive 4 batches", func() bool { return len(first.sink.seen()) == 4 || first.lastErr() != nil })
	if err := first.lastErr(); err != nil {
		t.Fatalf("first encoder: %v", err)
	}
	first.tr.Ack(map[[16]byte]uint64{s.hello.SessionID: s.seqs[1]}, time.Hour)
	waittest.For(t, "the client to see batch 2 acknowledged", func() bool { return client.Stats().AckedSeq == s.seqs[1] })
	first.stop()

	second := startSocketEncoder(t, sock, nil)
	for i := 4; i < n; i++ {
		send(i)
	}
	waittest.For(t, "the second encoder to receive the rest", func() bool {
		return len(second.sink.seen()) >= n-2 || second.lastErr() != nil
	})
	if err := second.lastErr(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("second encoder: %v", err)
	}
	if got := second.sink.seen(); !reflect.DeepEqual(got, s.want[2:]) {
		t.Fatalf("second encoder saw\n%q\nwant\n%q", got, s.want[2:])
	}
	if got := first.sink.seen(); !reflect.DeepEqual(got, s.want[:4]) {
		t.Fatalf("first encoder saw\n%q\nwant\n%q", got, s.want[:4])
	}
	second.tr.Ack(second.tr.Cut(func() {}), time.Hour)
	waittest.For(t, "every batch acknowledged", func() bool { return client.Stats().AckedSeq == s.seqs[n-1] })
	for name, v := range map[string]float64{
		"duplicates": testutil.ToFloat64(second.tr.metrics.duplicates),
		"gaps":       testutil.ToFloat64(second.tr.metrics.gaps),
		"malformed":  testutil.ToFloat64(second.tr.metrics.malformed),
	} {
		if v != 0 {
			t.Errorf("second encoder counted %v %s, want 0", v, name)
		}
	}
	if st := client.Stats(); st.UnackedFrames != 0 || st.DictionaryBytes != 0 {
		t.Errorf("client after every ack: %+v", st)
	}
}

// childSamplerEnv makes the test binary a sampler (see TestMain): an
// ipc.Client, in a process of its own, that sends the first batches of
// the dictionary stream to the socket the variable names and then waits
// to be killed.
const childSamplerEnv = "TANDEM_INGEST_TEST_SAMPLER"

// childSamplerBatches is how many batches the child sends.
const childSamplerBatches = 4

func TestMain(m *testing.M) {
	if sock := os.Getenv(childSamplerEnv); sock != "" {
		os.Exit(runChildSampler(sock))
	}
	os.Exit(m.Run())
}

func runChildSampler(sock string) int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "child sampler:", err); return 1 }
	s, err := buildDictStream(2000)
	if err != nil {
		return fail(err)
	}
	cfg := ipc.DefaultClientConfig()
	cfg.Path = sock
	cfg.PeerUIDs = []uint32{uint32(os.Getuid())}
	client, err := ipc.NewClient(cfg, slog.New(slog.NewTextHandler(os.Stderr, nil)), nil)
	if err != nil {
		return fail(err)
	}
	hp, err := schema.EncodeHello(s.hello, nil)
	if err != nil {
		return fail(err)
	}
	client.SetHello(hp)
	log := ipc.NewDictionaryLog(1)
	chunks := 0
	for i := range childSamplerBatches {
		if c := s.chunks[i]; c != nil {
			if chunks, err = log.Append(c.Payload); err != nil {
				return fail(err)
			}
		}
		client.SendReliableWith(s.seqs[i], ipc.FrameBatch, s.batches[i].Payload, s.samples[i], ipc.DictionaryRef{Log: log, Chunks: chunks})
	}
	return fail(client.Run(context.Background())) // until killed
}

// TestSamplerKilledWithoutGoodbye: a sampler process killed with SIGKILL
// (no goodbye) after the encoder received 4 batches and acknowledged 2 is
// visible at the encoder's ingest: the connection is counted as ended
// without goodbye, the gauge holds the last acknowledged sequence, and one
// WARN line says samples after it may be missing.
func TestSamplerKilledWithoutGoodbye(t *testing.T) {
	s := newDictStream(t)
	sock := filepath.Join(t.TempDir(), "s.sock")
	logs := &proctest.Output{}
	enc := startSocketEncoder(t, sock, slog.New(slog.NewTextHandler(logs, nil)))
	child := harness.Start(t, harness.ProcConfig{Name: "child sampler", Path: os.Args[0], Args: []string{"-test.run=^$"},
		Env: []string{childSamplerEnv + "=" + sock}})
	watch := waittest.Poll{Watch: []waittest.Watched{child}}
	watch.For(t, "the encoder to receive the child's batches", func() bool { return len(enc.sink.seen()) == childSamplerBatches })
	enc.tr.Ack(map[[16]byte]uint64{s.hello.SessionID: s.seqs[1]}, time.Hour)

	child.Kill() // SIGKILL: no goodbye
	waittest.For(t, "the connection's end to be counted", func() bool { return testutil.ToFloat64(enc.tr.metrics.noGoodbye) == 1 })
	if got := testutil.ToFloat64(enc.tr.metrics.noGoodbyeAcked.WithLabelValues(s.hello.NodeName)); got != float64(s.seqs[1]) {
		t.Errorf("tandem_encoder_ingest_ended_without_goodbye_acked_sequence{node=%q} = %v, want %d (the last acknowledged)", s.hello.NodeName, got, s.seqs[1])
	}
	var warns []string
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "level=WARN") {
			warns = append(warns, l)
		}
	}
	want := fmt.Sprintf("last_acked_sequence=%d received_sequence=%d", s.seqs[1], s.seqs[childSamplerBatches-1])
	if len(warns) != 1 || !strings.Contains(warns[0], "may be missing") || !strings.Contains(warns[0], want) {
		t.Errorf("WARN lines %q, want one saying samples may be missing, with %s", warns, want)
	}
}
