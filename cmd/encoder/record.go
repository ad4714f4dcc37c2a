package main

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/tandem-profiler/tandem/internal/ingest"
	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/schema"
)

// recorder tees every frame that arrives into one dump. Frames of several
// connections interleave, so whenever the connection changes the recorder
// repeats that connection's hello first: every frame in the dump follows
// the hello of the session it belongs to. A reader starts an empty
// dictionary at every hello (protocol 1.4), so after the hello the
// recorder also repeats the dictionary chunks that connection has sent in
// its current generation: the frames after a repeated hello decode as
// they did on their connection.
type recorder struct {
	mu     sync.Mutex
	w      *ipc.DumpWriter
	last   *teeSource
	logger *slog.Logger
	failed bool
	// stopped says why and where recording stopped, for close: the
	// command's exit status must say that the dump is incomplete.
	stopped error
}

type teeSource struct {
	src   ingest.Source
	rec   *recorder
	hello []byte
	// chunks are the FrameDictionary payloads of this connection's
	// current generation, in order: what a dump must repeat after the
	// hello when it resumes this connection. The sampler bounds a
	// generation (8 MiB of chunks), the receiver's Dictionary.Apply
	// bounds what it accepts; a new generation replaces the list.
	chunks     [][]byte
	generation uint64
	chunk      schema.DictionaryChunk // decode buffer
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
	} else {
		t.rec.ended(t)
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
	switch {
	case f.Type == ipc.FrameHello:
		t.hello = append(t.hello[:0], f.Payload...)
		t.chunks, t.generation = nil, 0
	case r.last != t && t.hello != nil:
		err = r.resume(t)
	}
	if f.Type == ipc.FrameDictionary {
		t.keep(f.Payload)
	}
	r.last = t
	if err == nil {
		err = r.w.WriteFrame(f.Type, f.Payload)
	}
	if err != nil {
		// The live pipeline matters more than the recording: stop
		// recording, say so once.
		r.failed = true
		r.stopped = fmt.Errorf("--record dump is incomplete: recording stopped at byte %d (the live pipeline went on): %w", r.w.Offset(), err)
		r.logger.Error("recording stopped", "err", err)
	}
}

// resume writes t's hello and the chunks of its current generation, so
// that t's next frame reads in the dump as it did on its connection.
func (r *recorder) resume(t *teeSource) error {
	if err := r.w.WriteFrame(ipc.FrameHello, t.hello); err != nil {
		return err
	}
	for _, c := range t.chunks {
		if err := r.w.WriteFrame(ipc.FrameDictionary, c); err != nil {
			return err
		}
	}
	return nil
}

// keep remembers a chunk t sent. One that does not decode is written to
// the dump as it came but not kept: the Tracker ends t's connection at it.
func (t *teeSource) keep(payload []byte) {
	if err := schema.DecodeDictionaryChunk(payload, &t.chunk); err != nil {
		return
	}
	if t.chunk.Generation != t.generation {
		t.chunks, t.generation = nil, t.chunk.Generation
	}
	t.chunks = append(t.chunks, bytes.Clone(payload))
}

// ended forgets what t kept: its connection is over and will not be
// resumed.
func (r *recorder) ended(t *teeSource) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t.chunks = nil
}

func (r *recorder) close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var closeErr error
	if err := r.w.Close(); err != nil {
		closeErr = fmt.Errorf("close --record dump: %w", err)
	}
	return errors.Join(r.stopped, closeErr)
}
