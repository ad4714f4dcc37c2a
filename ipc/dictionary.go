package ipc

import (
	"fmt"
	"sync"
)

// DictionaryLog is the definition log of one dictionary generation
// (protocol 1.4): the FrameDictionary payloads the sampler defined, in
// order, numbered from 0. It is append-only and shared: the Client and a
// DumpWriter each keep a cursor into it, per connection and per dump, and
// write the chunks a reliable frame needs before that frame. ipc never
// parses a chunk; the dependency is a number. A log is not part of the
// resend buffer (MaxUnackedBytes): the frames that refer to it keep it
// alive, and the garbage collector frees it once none does. Safe for
// concurrent use.
type DictionaryLog struct {
	generation uint64

	mu     sync.Mutex
	frames [][]byte // whole frames, header and checksum included
	bytes  int
}

// NewDictionaryLog returns an empty log for generation (1 and up).
func NewDictionaryLog(generation uint64) *DictionaryLog {
	return &DictionaryLog{generation: generation}
}

// Generation returns the log's generation.
func (l *DictionaryLog) Generation() uint64 { return l.generation }

// Append copies payload, an encoded schema.DictionaryChunk, into the log as
// its next chunk, and returns the number of chunks the log then holds: a
// frame that needs this chunk needs that many. A payload larger than
// MaxFrameSize is refused.
func (l *DictionaryLog) Append(payload []byte) (int, error) {
	if len(payload) > MaxFrameSize {
		return 0, fmt.Errorf("dictionary chunk of generation %d: %d bytes: %w", l.generation, len(payload), ErrFrameTooLarge)
	}
	buf := encodeFrame(FrameDictionary, 0, payload)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.frames = append(l.frames, buf)
	l.bytes += len(buf)
	return len(l.frames), nil
}

// Len returns the number of chunks in the log.
func (l *DictionaryLog) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.frames)
}

// Bytes returns the size of the log's frames, headers included.
func (l *DictionaryLog) Bytes() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.bytes
}

// chunks returns frames [from, to) of the log.
func (l *DictionaryLog) chunks(from, to int) [][]byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.frames[from:to:to]
}

// DictionaryRef says which dictionary chunks a reliable frame needs: the
// first Chunks chunks of Log. The zero value needs none (loss reports,
// batches of protocol 1.3 and older).
type DictionaryRef struct {
	Log    *DictionaryLog
	Chunks int
}

// check validates the reference against its log.
func (r DictionaryRef) check() error {
	if r.Log == nil {
		if r.Chunks != 0 {
			return fmt.Errorf("needs %d dictionary chunks of no log", r.Chunks)
		}
		return nil
	}
	if n := r.Log.Len(); r.Chunks < 1 || r.Chunks > n {
		return fmt.Errorf("needs %d chunks of dictionary generation %d, whose log holds %d (and a frame that refers to a dictionary needs at least its first chunk)",
			r.Chunks, r.Log.generation, n)
	}
	return nil
}

// goesBack reports whether r needs an older generation than last, the log
// an earlier frame needed (nil: none did), or another log of the same
// generation: generations never go backwards on a connection or in a dump.
func (r DictionaryRef) goesBack(last *DictionaryLog) bool {
	return r.Log != nil && last != nil && r.Log != last && r.Log.generation <= last.generation
}

// dictCursor is how far one connection or dump has written the definition
// logs: the log of the generation it wrote last, and how many of its
// chunks. A connection starts with the zero cursor, so it gets the whole
// generation again before the first frame that needs any of it: the
// receiver's dictionary holds exactly what was written on its connection.
type dictCursor struct {
	log     *DictionaryLog
	written int
}

// advance returns the chunk frames to write before a frame that needs r,
// and moves the cursor past them. A new generation starts the cursor at its
// first chunk. Callers guarantee that generations never go backwards on a
// connection (ledger.add and DumpWriter check it).
func (c *dictCursor) advance(r DictionaryRef) [][]byte {
	if r.Log == nil {
		return nil
	}
	if c.log != r.Log {
		*c = dictCursor{log: r.Log}
	}
	if r.Chunks <= c.written {
		return nil
	}
	frames := r.Log.chunks(c.written, r.Chunks)
	c.written = r.Chunks
	return frames
}
