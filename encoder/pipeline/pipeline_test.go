package pipeline_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tandem-profiler/tandem/encoder/export"
	"github.com/tandem-profiler/tandem/encoder/labels"
	"github.com/tandem-profiler/tandem/encoder/output"
	"github.com/tandem-profiler/tandem/encoder/pipeline"
	"github.com/tandem-profiler/tandem/internal/synth"
	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/schema"
	"github.com/tandem-profiler/tandem/test/otlptest"
	"github.com/tandem-profiler/tandem/test/parcatest"
	"github.com/tandem-profiler/tandem/test/promtest"
	"github.com/tandem-profiler/tandem/test/waittest"
)

// testQueue retries quickly, so that an outage of a few hundred
// milliseconds spans many attempts.
func testQueue() export.QueueConfig {
	q := export.DefaultQueueConfig()
	q.Retry.Initial, q.Retry.Max = 10*time.Millisecond, 50*time.Millisecond
	q.RPCTimeout = 5 * time.Second
	return q
}

func otlpOutput(name, addr string) output.Config {
	c := output.DefaultConfig(name, output.FormatOTLP)
	c.Remote.Address = addr
	c.Remote.Insecure = true
	c.Queue = testQueue()
	return c
}

func pprofOutput(name, dir string) output.Config {
	c := output.DefaultConfig(name, output.FormatPprof)
	c.Dir = dir
	c.Queue = testQueue()
	return c
}

func arrowOutput(name, addr string) output.Config {
	c := output.DefaultConfig(name, output.FormatArrowV2)
	c.Remote.Address = addr
	c.Remote.Insecure = true
	c.Queue = testQueue()
	return c
}

// harness runs a Pipeline fed by a live session: frames go through the
// real ingest tracker one at a time, and acknowledgements are recorded.
type harness struct {
	t      *testing.T
	p      *pipeline.Pipeline
	frames chan ipc.Frame
	served chan error
	acks   *acker
	hello  schema.Hello
	// batches of the stream, in order, and how many were sent.
	batches []*schema.Batch
	sent    int
	flushes int // flushes cut with batches in them
	reg     *prometheus.Registry
}

type acker struct {
	mu  sync.Mutex
	max uint64
}

func (a *acker) Ack(seq uint64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.max = max(a.max, seq)
	return nil
}

func (a *acker) acked() uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.max
}

type chanSource chan ipc.Frame

func (c chanSource) Next() (ipc.Frame, error) {
	f, ok := <-c
	if !ok {
		return ipc.Frame{}, io.EOF
	}
	return f, nil
}

// syncFrame is a frame type the tracker ignores: sending it returns once
// the frame before it has been handled.
const syncFrame ipc.FrameType = 200

func newHarness(t *testing.T, cfg synth.Config, outs ...output.Config) *harness {
	t.Helper()
	msgs, err := synth.Collect(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, frames: make(chan ipc.Frame), served: make(chan error, 1), acks: &acker{}, reg: prometheus.NewRegistry()}
	hello, batches := synth.Split(msgs)
	h.hello, h.batches = *hello, batches
	labeler, err := labels.New(labels.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var opened []*output.Output
	for _, c := range outs {
		o, err := output.Open(c, output.Deps{Labeler: labeler})
		if err != nil {
			t.Fatal(err)
		}
		opened = append(opened, o)
	}
	if h.p, err = pipeline.New(pipeline.DefaultConfig(), opened, nil, nil, h.reg); err != nil {
		t.Fatal(err)
	}
	go func() { h.served <- h.p.Tracker().Serve(context.Background(), chanSource(h.frames), h.acks) }()
	payload, err := schema.EncodeHello(&h.hello, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.frames <- ipc.Frame{Type: ipc.FrameHello, Payload: payload}
	t.Cleanup(func() {
		if h.frames != nil {
			close(h.frames)
			<-h.served
		}
		_ = h.p.Close(context.Background())
	})
	return h
}

// interval sends the next n batches and cuts a flush.
func (h *harness) interval(n int) {
	h.t.Helper()
	if n > 0 && h.sent < len(h.batches) {
		h.flushes++
	}
	for ; n > 0 && h.sent < len(h.batches); n-- {
		b := h.batches[h.sent]
		payload, err := schema.EncodeBatch(b, nil)
		if err != nil {
			h.t.Fatal(err)
		}
		h.frames <- ipc.Frame{Type: ipc.FrameBatch, Payload: payload}
		h.sent++
	}
	h.frames <- ipc.Frame{Type: syncFrame}
	h.p.Flush(time.Now())
}

// rest sends every remaining batch in intervals of n.
func (h *harness) rest(n int) {
	for h.sent < len(h.batches) {
		h.interval(n)
	}
}

// lastSeq is the sequence of the last batch sent.
func (h *harness) lastSeq() uint64 { return h.batches[h.sent-1].Sequence }

// produced counts the samples of the batches sent.
func (h *harness) produced() int {
	n := 0
	for _, b := range h.batches[:h.sent] {
		n += len(b.Samples)
	}
	return n
}

func (h *harness) idle() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.p.WaitIdle(ctx); err != nil {
		h.t.Fatalf("flushes still pending: %v; summary %+v", err, h.p.Summary())
	}
}

func (h *harness) summary(name string) pipeline.OutputSummary {
	for _, s := range h.p.Summary() {
		if s.Name == name {
			return s
		}
	}
	h.t.Fatalf("no output %s", name)
	return pipeline.OutputSummary{}
}

// checkBalance checks produced = received + lost for one output, exactly,
// where received is what the receiver really holds.
func (h *harness) checkBalance(name string, received int) pipeline.OutputSummary {
	h.t.Helper()
	s := h.summary(name)
	if got, want := received+s.LostSamples(), h.produced(); got != want {
		h.t.Errorf("%s: produced %d != received %d + lost %d (%v)", name, want, received, s.LostSamples(), s.Lost)
	}
	if s.Delivered != received {
		h.t.Errorf("%s: the pipeline counts %d delivered, the receiver holds %d", name, s.Delivered, received)
	}
	return s
}

// cpuOnly is a stream of CPU samples only (value 1 each), so a pprof
// file's sample values count them.
func cpuOnly(samples int) synth.Config {
	cfg := synth.DefaultConfig()
	cfg.Samples = samples
	cfg.BatchSize = 100
	cfg.OffCPUFraction, cfg.ProbeFraction = 0, 0
	return cfg
}

func mixed(samples int) synth.Config {
	cfg := synth.DefaultConfig()
	cfg.Samples = samples
	cfg.BatchSize = 100
	cfg.OffCPUFraction, cfg.ProbeFraction = 0.2, 0.05
	return cfg
}

// TestStoreDownThenBack: flushes cut while the store is unreachable are
// retried, none acknowledged, and all delivered once it is back.
func TestStoreDownThenBack(t *testing.T) {
	addr := otlptest.FreeAddr(t)
	h := newHarness(t, mixed(2000), otlpOutput("store", addr))
	for range 4 {
		h.interval(3)
	}
	waittest.For(t, "the output to report failing", func() bool { return h.p.Ready() != nil })
	if err := h.p.Ready(); !strings.Contains(err.Error(), "output store") {
		t.Errorf("Ready = %v, want it to name the output", err)
	}
	if a := h.acks.acked(); a != 0 {
		t.Fatalf("acknowledged sequence %d while the store is down", a)
	}
	recv := otlptest.StartReceiverAt(t, addr)
	h.rest(5)
	h.idle()
	s := h.checkBalance("store", recv.Observations(t))
	if s.LostSamples() != 0 {
		t.Errorf("lost %v within the bound", s.Lost)
	}
	waittest.For(t, "the last sequence acknowledged", func() bool { return h.acks.acked() == h.lastSeq() })
	if err := h.p.Ready(); err != nil {
		t.Errorf("Ready = %v after recovery", err)
	}
}

// TestStoreDownBeyondBound: past the queue bound the oldest flushes are
// given up, counted exactly, and the acknowledgement moves on.
func TestStoreDownBeyondBound(t *testing.T) {
	addr := otlptest.FreeAddr(t)
	cfg := otlpOutput("store", addr)
	cfg.Queue.QueueSize = 2
	h := newHarness(t, mixed(2000), cfg)
	for range 5 {
		h.interval(3)
	}
	waittest.For(t, "three flushes given up", func() bool {
		return h.summary("store").Lost[export.ReasonQueueFull] > 0 && h.acks.acked() > 0
	})
	recv := otlptest.StartReceiverAt(t, addr)
	h.rest(5)
	h.idle()
	s := h.checkBalance("store", recv.Observations(t))
	if s.Lost[export.ReasonQueueFull] == 0 || len(s.Lost) != 1 {
		t.Errorf("lost %v, want only queue_full", s.Lost)
	}
	waittest.For(t, "the last sequence acknowledged", func() bool { return h.acks.acked() == h.lastSeq() })
}

// TestStoreRejects: a permanent rejection is not retried; its samples are
// counted and acknowledged (resending would be rejected again).
func TestStoreRejects(t *testing.T) {
	recv := otlptest.StartReceiver(t)
	recv.Reject(func(otlptest.Call) error { return status.Error(codes.PermissionDenied, "tenant unknown") })
	h := newHarness(t, mixed(1000), otlpOutput("store", recv.Addr()))
	h.rest(4)
	h.idle()
	s := h.checkBalance("store", recv.Observations(t))
	if s.Lost[export.ReasonRejected] != h.produced() {
		t.Errorf("lost %v, want every sample rejected", s.Lost)
	}
	if got := promtest.Value(t, h.reg, "tandem_encoder_flushes_total", "output", "store", "result", "lost"); got != float64(h.flushes) {
		t.Errorf("flushes_total{store,lost} = %v, want all %d flushes", got, h.flushes)
	}
	waittest.For(t, "the last sequence acknowledged", func() bool { return h.acks.acked() == h.lastSeq() })
}

// TestStoreRefusesSomeProfiles runs the balance against each way real
// receivers answer a request some of whose profiles they refuse (here the
// probe profiles): all-or-nothing (the OpenTelemetry Collector),
// store-valid-then-error (Pyroscope), partial success (the OTLP
// specification). Whatever the receiver does, no sample is stored twice
// (nothing is resent), produced = delivered + lost exactly, and what the
// receiver holds lies between the delivered count and the delivered plus
// the unconfirmed (refused after the receiver may have stored part):
// exactly the delivered count when nothing is unconfirmed.
func TestStoreRefusesSomeProfiles(t *testing.T) {
	for _, b := range otlptest.Behaviours {
		t.Run(b.String(), func(t *testing.T) {
			recv := otlptest.StartReceiver(t)
			recv.SetBehaviour(b)
			recv.RefuseProfiles(otlptest.RefuseType("events"))
			h := newHarness(t, mixed(1000), otlpOutput("store", recv.Addr()))
			h.rest(4)
			h.idle()
			probes := 0
			for _, b := range h.batches {
				for _, smp := range b.Samples {
					if smp.Origin == schema.OriginProbe {
						probes++
					}
				}
			}
			stored, dup := recv.Observations(t), recv.Duplicates()
			s := h.summary("store")
			if dup != 0 {
				t.Errorf("%d samples stored twice", dup)
			}
			if got := s.Delivered + s.LostSamples(); got != h.produced() {
				t.Errorf("produced %d != delivered %d + lost %d (%v)", h.produced(), s.Delivered, s.LostSamples(), s.Lost)
			}
			unconfirmed := s.Lost[export.ReasonUnconfirmed]
			if stored < s.Delivered || stored > s.Delivered+unconfirmed {
				t.Errorf("the receiver holds %d samples, the pipeline counts %d delivered and %d unconfirmed (%v)", stored, s.Delivered, unconfirmed, s.Lost)
			}
			if probes == 0 || recv.Refused() == 0 {
				t.Fatalf("%d probe samples, %d profiles refused: the test refused nothing", probes, recv.Refused())
			}
			switch b {
			case otlptest.AllOrNothing:
				// Nothing of a refused request is stored: the exact balance.
				if stored != s.Delivered {
					t.Errorf("all-or-nothing: stored %d, delivered %d", stored, s.Delivered)
				}
			case otlptest.StoreValidThenError, otlptest.PartialSuccess:
				// Everything but the probes is stored, once.
				if stored != h.produced()-probes {
					t.Errorf("%s: stored %d, want the %d samples that are not probes", b, stored, h.produced()-probes)
				}
			}
			if b == otlptest.PartialSuccess && s.Lost[export.ReasonRejected] == 0 {
				t.Errorf("partial success: lost %v, want the refused profiles' smallest share counted rejected", s.Lost)
			}
		})
	}
}

// pprofSamples sums the CPU sample counts of every pprof file in dir.
func pprofSamples(t *testing.T, dir string) int {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.pb.gz"))
	n := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		p, err := profile.ParseData(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, s := range p.Sample {
			for i, st := range p.SampleType {
				if st.Type == "samples" || st.Type == "events" {
					n += int(s.Value[i])
				}
			}
		}
	}
	return n
}

// TestOutputDirUnwritableThenWritable: while the directory cannot be
// written (here it is replaced by a file, which stops root too) flushes are
// retried and the output reports failing; once it is a directory again
// everything is written.
func TestOutputDirUnwritableThenWritable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "profiles")
	h := newHarness(t, cpuOnly(1500), pprofOutput("files", dir))
	h.interval(3)
	h.idle()
	if err := os.Rename(dir, dir+".away"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	h.interval(3)
	h.interval(3)
	waittest.For(t, "the output to report failing", func() bool { return h.p.Ready() != nil })
	if err := h.p.Ready(); !strings.Contains(err.Error(), "output files") {
		t.Errorf("Ready = %v, want it to name the output", err)
	}
	if a := h.acks.acked(); a >= h.lastSeq() {
		t.Fatalf("acknowledged sequence %d, written only up to before %d", a, h.batches[3].Sequence)
	}
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dir+".away", dir); err != nil {
		t.Fatal(err)
	}
	h.rest(4)
	h.idle()
	s := h.checkBalance("files", pprofSamples(t, dir))
	if s.LostSamples() != 0 {
		t.Errorf("lost %v", s.Lost)
	}
	waittest.For(t, "the last sequence acknowledged", func() bool { return h.acks.acked() == h.lastSeq() })
	if err := h.p.Ready(); err != nil {
		t.Errorf("Ready = %v once writable", err)
	}
}

// TestFanOut: one stream to OTLP, Arrow v2 and pprof outputs at once; every
// output gets every sample. Then the OTLP store goes away for a while: the
// other outputs keep delivering at once, nothing is acknowledged past what
// the OTLP store lacks, and once it is back it gets everything (within its
// bound nothing is lost).
func TestFanOut(t *testing.T) {
	addr := otlptest.FreeAddr(t)
	parca := parcatest.StartServer(t)
	dir := t.TempDir()
	h := newHarness(t, cpuOnly(3000), otlpOutput("collector", addr), arrowOutput("parca", parca.Addr()), pprofOutput("local", dir))

	// The collector is down from the start: the other two deliver
	// everything of the first intervals meanwhile.
	for range 4 {
		h.interval(3)
	}
	waittest.For(t, "parca and local to deliver while the collector is down", func() bool {
		return h.summary("parca").Delivered == h.produced() && h.summary("local").Delivered == h.produced()
	})
	if a := h.acks.acked(); a != 0 {
		t.Fatalf("acknowledged %d while the collector has nothing", a)
	}
	recv := otlptest.StartReceiverAt(t, addr)
	h.rest(6)
	h.idle()
	h.checkBalance("collector", recv.Observations(t))
	h.checkBalance("local", pprofSamples(t, dir))
	rows := 0
	for _, r := range parca.Rows() {
		rows += int(r.Value)
	}
	h.checkBalance("parca", rows)
	want := parcatest.Expected(parcatest.Stream{Hello: h.hello, Batches: h.batches}, "v2", nil)
	if diff := parcatest.Diff(want, parca.Rows(), 5); diff != nil {
		t.Errorf("parca rows differ from the stream:\n%s", strings.Join(diff, "\n"))
	}
	for _, s := range h.p.Summary() {
		if s.LostSamples() != 0 {
			t.Errorf("%s lost %v", s.Name, s.Lost)
		}
		if got := promtest.Value(t, h.reg, "tandem_encoder_flushes_total", "output", s.Name, "result", "delivered"); got != float64(h.flushes) {
			t.Errorf("flushes_total{%s,delivered} = %v, want all %d flushes", s.Name, got, h.flushes)
		}
	}
	waittest.For(t, "the last sequence acknowledged", func() bool { return h.acks.acked() == h.lastSeq() })
}

func TestPipelineNeedsDistinctNames(t *testing.T) {
	a, err := output.Open(pprofOutput("x", t.TempDir()), output.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := output.Open(pprofOutput("x", t.TempDir()), output.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	defer b.Close(context.Background())
	if _, err := pipeline.New(pipeline.DefaultConfig(), []*output.Output{a, b}, nil, nil, nil); err == nil || !strings.Contains(err.Error(), `"x"`) {
		t.Fatalf("NewPipeline = %v, want two outputs named x refused", err)
	}
	if _, err := pipeline.New(pipeline.DefaultConfig(), nil, nil, nil, nil); err == nil {
		t.Fatal("a pipeline without outputs was accepted")
	}
}
