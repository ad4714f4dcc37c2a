package pipeline_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tandem-profiler/tandem/encoder/output"
	"github.com/tandem-profiler/tandem/encoder/pipeline"
	"github.com/tandem-profiler/tandem/internal/synth"
	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/schema"
)

// events is the order in which Serve's parts happened.
type events struct {
	mu   sync.Mutex
	list []string
}

func (e *events) add(s string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, s)
}

func (e *events) index(s string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Index(e.list, s)
}

// liveSampler stands for a connected sampler as *ipcserver.Conn shows it:
// its frames, then nothing until the connection is closed (a sampler
// waits for acknowledgements), then ipc.ErrClosed. Acks and Close after
// Close fail, as on a closed socket.
type liveSampler struct {
	frames  []ipc.Frame
	waiting chan struct{} // closed once every frame was read
	closed  chan struct{}
	once    sync.Once
	ev      *events
}

func (s *liveSampler) Next() (ipc.Frame, error) {
	if len(s.frames) > 0 {
		f := s.frames[0]
		s.frames = s.frames[1:]
		return f, nil
	}
	select {
	case <-s.waiting:
	default:
		close(s.waiting)
	}
	<-s.closed
	return ipc.Frame{}, ipc.ErrClosed
}

func (s *liveSampler) Ack(seq uint64) error {
	select {
	case <-s.closed:
		return ipc.ErrClosed
	default:
	}
	s.ev.add(fmt.Sprintf("ack %d", seq))
	return nil
}

func (s *liveSampler) Close() error {
	err := ipc.ErrClosed
	s.once.Do(func() {
		s.ev.add("sampler closed")
		close(s.closed)
		err = nil
	})
	return err
}

// listener hands out its samplers, then waits for the end; Close closes
// every sampler it handed out, as *ipcserver.Server's does.
type listener struct {
	conns  chan *liveSampler
	closed chan struct{}
	once   sync.Once
	ev     *events
	mu     sync.Mutex
	open   []*liveSampler
}

func (l *listener) Accept(ctx context.Context) (*liveSampler, error) {
	select {
	case c := <-l.conns:
		l.mu.Lock()
		defer l.mu.Unlock()
		l.open = append(l.open, c)
		return c, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-l.closed:
		return nil, ipc.ErrClosed
	}
}

func (l *listener) Close() error {
	l.once.Do(func() {
		l.ev.add("listener closed")
		close(l.closed)
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, c := range l.open {
			_ = c.Close()
		}
	})
	return nil
}

// TestServeShutdownOrder: at the end of Serve the final flush is cut and
// delivered while the sampler is still connected, so it is acknowledged
// up to the last batch before the connection closes; the listener and the
// connection close only once the outputs are closed. Every sample sent is
// in the output.
func TestServeShutdownOrder(t *testing.T) {
	msgs, err := synth.Collect(cpuOnly(2000))
	if err != nil {
		t.Fatal(err)
	}
	hello, batches := synth.Split(msgs)
	ev := &events{}
	s := &liveSampler{waiting: make(chan struct{}), closed: make(chan struct{}), ev: ev}
	payload, err := schema.EncodeHello(hello, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.frames = append(s.frames, ipc.Frame{Type: ipc.FrameHello, Payload: payload})
	produced := 0
	for _, b := range batches {
		payload, err := schema.EncodeBatch(b, nil)
		if err != nil {
			t.Fatal(err)
		}
		s.frames = append(s.frames, ipc.Frame{Type: ipc.FrameBatch, Payload: payload})
		produced += len(b.Samples)
	}
	last := batches[len(batches)-1].Sequence

	dir := t.TempDir()
	o, err := output.Open(pprofOutput("files", dir), output.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := pipeline.New(pipeline.DefaultConfig(), []*output.Output{o}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := &listener{conns: make(chan *liveSampler, 1), closed: make(chan struct{}), ev: ev}
	l.conns <- s
	ctx, cancel := context.WithCancel(context.Background())
	stopping := 0
	done := make(chan error, 1)
	go func() {
		done <- pipeline.Serve(ctx, p, l, pipeline.ServeConfig{
			FlushEvery:      time.Hour, // only the final flush
			ShutdownTimeout: 30 * time.Second,
			Close: func(ctx context.Context) error {
				err := p.Close(ctx)
				ev.add("outputs closed")
				return err
			},
			Stopping: func() { stopping++ },
		})
	}()
	select {
	case <-s.waiting: // every frame was handed to the pipeline
	case err := <-done:
		t.Fatalf("Serve returned before the sampler was served: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	finalAck, closed := ev.index(fmt.Sprintf("ack %d", last)), ev.index("outputs closed")
	switch {
	case finalAck < 0:
		t.Errorf("the last batch (%d) was never acknowledged: %q", last, ev.list)
	case finalAck > ev.index("sampler closed"):
		t.Errorf("the final acknowledgement came after the connection closed: %q", ev.list)
	}
	if closed < 0 || closed > ev.index("listener closed") || closed > ev.index("sampler closed") {
		t.Errorf("the connections closed before the outputs: %q", ev.list)
	}
	if stopping != 1 {
		t.Errorf("Stopping called %d times, want 1", stopping)
	}
	if got := pprofSamples(t, dir); got != produced {
		t.Errorf("%d samples in the pprof files, %d sent", got, produced)
	}
}

// stoppingSampler stands for a sampler stopped together with the encoder
// (a pod's containers get SIGTERM at once): its first frames, then, once
// released, its last batch and its goodbye, then the end of the stream.
type stoppingSampler struct {
	first, last []ipc.Frame
	waiting     chan struct{} // closed once the first frames were read
	release     chan struct{} // closed by the test after the encoder's stop
	ended       chan struct{} // closed when the encoder closes the connection
	once, end   sync.Once
}

func (s *stoppingSampler) Next() (ipc.Frame, error) {
	if len(s.first) > 0 {
		f := s.first[0]
		s.first = s.first[1:]
		return f, nil
	}
	s.once.Do(func() { close(s.waiting) })
	<-s.release
	if len(s.last) > 0 {
		f := s.last[0]
		s.last = s.last[1:]
		return f, nil
	}
	return ipc.Frame{}, ipc.ErrClosed
}

func (s *stoppingSampler) Ack(uint64) error { return nil }

func (s *stoppingSampler) Close() error {
	s.end.Do(func() { close(s.ended) })
	return nil
}

type stoppingListener struct {
	conns  chan *stoppingSampler
	closed chan struct{}
	once   sync.Once
}

func (l *stoppingListener) Accept(ctx context.Context) (*stoppingSampler, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-l.closed:
		return nil, ipc.ErrClosed
	}
}

func (l *stoppingListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

// TestServeDrainsStoppingSampler: a sampler's last batch and goodbye sent
// after the encoder was told to stop are read before the final cut (the
// drain): the pipeline is closed only after the sampler's stream ended,
// and every sample is in the output. Serve returns once the stream has
// ended, not at the drain timeout.
func TestServeDrainsStoppingSampler(t *testing.T) {
	msgs, err := synth.Collect(cpuOnly(2000))
	if err != nil {
		t.Fatal(err)
	}
	hello, batches := synth.Split(msgs)
	if len(batches) < 2 {
		t.Fatalf("want at least 2 batches, got %d", len(batches))
	}
	// frame(type)(payload, err) is a frame of an encoded payload.
	frame := func(typ ipc.FrameType) func([]byte, error) ipc.Frame {
		return func(payload []byte, err error) ipc.Frame {
			if err != nil {
				t.Fatal(err)
			}
			return ipc.Frame{Type: typ, Payload: payload}
		}
	}
	s := &stoppingSampler{waiting: make(chan struct{}), release: make(chan struct{}), ended: make(chan struct{})}
	s.first = append(s.first, frame(ipc.FrameHello)(schema.EncodeHello(hello, nil)))
	produced := 0
	for i, b := range batches {
		f := frame(ipc.FrameBatch)(schema.EncodeBatch(b, nil))
		if i < len(batches)-1 {
			s.first = append(s.first, f)
		} else {
			s.last = append(s.last, f)
		}
		produced += len(b.Samples)
	}
	s.last = append(s.last, frame(ipc.FrameGoodbye)(schema.EncodeGoodbye(&schema.Goodbye{Reason: "shutdown", LastSequence: batches[len(batches)-1].Sequence}, nil)))

	dir := t.TempDir()
	o, err := output.Open(pprofOutput("files", dir), output.Deps{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := pipeline.New(pipeline.DefaultConfig(), []*output.Output{o}, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := &stoppingListener{conns: make(chan *stoppingSampler, 1), closed: make(chan struct{})}
	l.conns <- s
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var cutBeforeEnd bool
	go func() {
		done <- pipeline.Serve(ctx, p, l, pipeline.ServeConfig{
			FlushEvery:      time.Hour, // only the final flush
			ShutdownTimeout: 30 * time.Second,
			DrainTimeout:    time.Hour, // returning at all shows the goodbye ended the wait
			// The sampler stops when the encoder does.
			Stopping: func() { close(s.release) },
			Close: func(ctx context.Context) error {
				select {
				case <-s.ended:
				default:
					cutBeforeEnd = true
				}
				return p.Close(ctx)
			},
		})
	}()
	select {
	case <-s.waiting:
	case err := <-done:
		t.Fatalf("Serve returned before the sampler was served: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if cutBeforeEnd {
		t.Error("the final flush was cut while the stopping sampler's stream was still open")
	}
	if got := pprofSamples(t, dir); got != produced {
		t.Errorf("%d samples in the pprof files, %d sent (the last batch came after the stop)", got, produced)
	}
}
