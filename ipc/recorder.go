package ipc

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/tandem-profiler/tandem/schema"
)

// FrameSource yields frames: a connection (*ipcserver.Conn), a dump
// (DumpReader) or a Tee. The one interface for a stream of frames: the
// encoder's intake and serve loop take it.
type FrameSource interface {
	Next() (Frame, error)
}

// Recorder tees every frame that arrives on any number of connections into
// one dump. Frames of several connections interleave, so whenever the
// connection changes the Recorder repeats that connection's hello first:
// every frame in the dump follows the hello of the session it belongs to.
// A reader starts an empty dictionary at every hello (protocol 1.4), so
// after the hello the Recorder also repeats the dictionary chunks that
// connection has sent in its current generation: the frames after a
// repeated hello decode as they did on their connection. Recording never
// holds up the frames: when the dump cannot be written, recording stops,
// the frames go on, and Close reports the dump incomplete. Safe for
// concurrent use.
type Recorder struct {
	mu     sync.Mutex
	w      *DumpWriter
	last   *Tee
	logger *slog.Logger
	// stopped says why and where recording stopped, for Close.
	stopped error
}

// Tee is one connection's frames, passed through to their reader and
// recorded.
type Tee struct {
	src   FrameSource
	rec   *Recorder
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

// NewRecorder returns a Recorder writing to w, which it closes on Close.
func NewRecorder(w *DumpWriter, logger *slog.Logger) *Recorder {
	return &Recorder{w: w, logger: logger}
}

// Tee returns src's frames, recording each.
func (r *Recorder) Tee(src FrameSource) *Tee { return &Tee{src: src, rec: r} }

// Next returns the source's next frame, recorded; at the end of the source
// the connection is forgotten.
func (t *Tee) Next() (Frame, error) {
	f, err := t.src.Next()
	if err == nil {
		t.rec.write(t, f)
	} else {
		t.rec.ended(t)
	}
	return f, err
}

func (r *Recorder) write(t *Tee, f Frame) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped != nil {
		return
	}
	var err error
	switch {
	case f.Type == FrameHello:
		t.hello = append(t.hello[:0], f.Payload...)
		t.chunks, t.generation = nil, 0
	case r.last != t && t.hello != nil:
		err = r.resume(t)
	}
	if f.Type == FrameDictionary {
		t.keep(f.Payload)
	}
	r.last = t
	if err == nil {
		err = r.w.WriteFrame(f.Type, f.Payload)
	}
	if err != nil {
		// The frames' reader matters more than the recording: stop
		// recording, say so once.
		r.stopped = fmt.Errorf("dump is incomplete: recording stopped at byte %d (the frames went on to their reader): %w", r.w.Offset(), err)
		r.logger.Error("recording stopped", "err", err)
	}
}

// resume writes t's hello and the chunks of its current generation, so
// that t's next frame reads in the dump as it did on its connection.
func (r *Recorder) resume(t *Tee) error {
	if err := r.w.WriteFrame(FrameHello, t.hello); err != nil {
		return err
	}
	for _, c := range t.chunks {
		if err := r.w.WriteFrame(FrameDictionary, c); err != nil {
			return err
		}
	}
	return nil
}

// keep remembers a chunk t sent. One that does not decode is written to
// the dump as it came but not kept: the reader ends t's connection at it.
func (t *Tee) keep(payload []byte) {
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
func (r *Recorder) ended(t *Tee) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t.chunks = nil
}

// Close closes the dump. It returns an error when recording stopped early
// (the dump is incomplete) or the dump could not be closed.
func (r *Recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var closeErr error
	if err := r.w.Close(); err != nil {
		closeErr = fmt.Errorf("close the recording: %w", err)
	}
	return errors.Join(r.stopped, closeErr)
}
