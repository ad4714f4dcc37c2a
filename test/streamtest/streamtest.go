package streamtest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tandem-profiler/tandem/internal/synth"
	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/schema"
)

// Session generates the synthetic session of cfg and returns its messages,
// its hello and its batches in order.
func Session(t testing.TB, cfg synth.Config) ([]synth.Message, *schema.Hello, []*schema.Batch) {
	t.Helper()
	msgs, err := synth.Collect(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hello, batches := synth.Split(msgs)
	return msgs, hello, batches
}

// Sampler is a running ipc.Client with a session's hello set.
type Sampler struct {
	Client *ipc.Client

	cancel context.CancelFunc
	done   chan struct{}
	stop   sync.Once
}

// Start sets hello on client and runs the client until Stop or the end of
// the test.
func Start(t testing.TB, client *ipc.Client, hello *schema.Hello) *Sampler {
	t.Helper()
	p, err := schema.EncodeHello(hello, nil)
	if err != nil {
		t.Fatal(err)
	}
	client.SetHello(p)
	ctx, cancel := context.WithCancel(context.Background())
	s := &Sampler{Client: client, cancel: cancel, done: make(chan struct{})}
	go func() { _ = client.Run(ctx); close(s.done) }()
	t.Cleanup(s.Stop)
	return s
}

// Send encodes the batches and sends them reliably, in order; it returns
// the sequence of the last.
func (s *Sampler) Send(t testing.TB, batches ...*schema.Batch) uint64 {
	t.Helper()
	var last uint64
	for _, b := range batches {
		p, err := schema.EncodeBatch(b, nil)
		if err != nil {
			t.Fatal(err)
		}
		s.Client.SendReliable(b.Sequence, ipc.FrameBatch, p, len(b.Samples))
		last = b.Sequence
	}
	return last
}

// WaitAcked waits until the encoder has acknowledged seq. It fails the
// test as soon as encoderDone is closed (pass the channel closed when the
// encoder under test exits; nil when the test does not run it), or once
// within has passed; describe, when not nil, adds context to the failure.
func (s *Sampler) WaitAcked(t testing.TB, seq uint64, within time.Duration, encoderDone <-chan struct{}, describe func() string) {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for s.Client.Stats().AckedSeq < seq {
		more := ""
		select {
		case <-tick.C:
			continue
		case <-encoderDone:
			if s.Client.Stats().AckedSeq >= seq {
				return
			}
			if describe != nil {
				more = describe()
			}
			t.Fatalf("the encoder exited with %d of %d sequences acknowledged: %+v %s", s.Client.Stats().AckedSeq, seq, s.Client.Stats(), more)
		case <-deadline.C:
			if describe != nil {
				more = describe()
			}
			t.Fatalf("acked %d of %d sequences within %v: %+v %s", s.Client.Stats().AckedSeq, seq, within, s.Client.Stats(), more)
		}
	}
}

// Stop stops the client and waits for its Run to return.
func (s *Sampler) Stop() {
	s.stop.Do(func() {
		s.cancel()
		<-s.done
	})
}
