package main

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/tandem-profiler/tandem/internal/ingest"
	"github.com/tandem-profiler/tandem/ipc"
)

// recorder tees every frame that arrives into one dump. Frames of several
// connections interleave, so whenever the connection changes the recorder
// repeats that connection's hello first: every frame in the dump follows
// the hello of the session it belongs to.
type recorder struct {
	mu     sync.Mutex
	w      *ipc.DumpWriter
	last   *teeSource
	logger *slog.Logger
	failed bool
}

type teeSource struct {
	src   ingest.Source
	rec   *recorder
	hello []byte
}

func newRecorder(path string, logger *slog.Logger) (*recorder, error) {
	w, err := ipc.CreateDump(path)
	if err != nil {
		return nil, fmt.Errorf("--record: %w", err)
	}
	return &recorder{w: w, logger: logger}, nil
}

func (r *recorder) tee(src ingest.Source) *teeSource { return &teeSource{src: src, rec: r} }

func (t *teeSource) Next() (ipc.Frame, error) {
	f, err := t.src.Next()
	if err == nil {
		t.rec.write(t, f)
	}
	return f, err
}

func (r *recorder) write(t *teeSource, f ipc.Frame) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failed {
		return
	}
	var err error
	if f.Type == ipc.FrameHello {
		t.hello = append(t.hello[:0], f.Payload...)
	} else if r.last != t && t.hello != nil {
		err = r.w.WriteFrame(ipc.FrameHello, t.hello)
	}
	r.last = t
	if err == nil {
		err = r.w.WriteFrame(f.Type, f.Payload)
	}
	if err != nil {
		// The live pipeline matters more than the recording: stop
		// recording, say so once.
		r.failed = true
		r.logger.Error("recording stopped", "err", err)
	}
}

func (r *recorder) close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.w.Close(); err != nil {
		return fmt.Errorf("close --record dump: %w", err)
	}
	return nil
}
