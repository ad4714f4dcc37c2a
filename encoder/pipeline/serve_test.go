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
