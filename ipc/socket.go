package ipc

import (
	"encoding/binary"
	"io"
)

// The hooks the encoder's end of a socket (package ipc/ipcserver) needs
// from the frame reader and writer. The server itself lives in that
// package, so that the sampler links none of it.

// NewSocketReader returns a Reader for the sampler's stream on a socket:
// unlike NewReader it accepts FlagDescriptor on FrameExecutable frames,
// and NextWithFlags reports it.
func NewSocketReader(r io.Reader) *Reader {
	rd := newReader(r, 0, false)
	rd.descriptors = true
	return rd
}

// NextWithFlags is Next that also returns the frame header's flags byte.
func (r *Reader) NextWithFlags() (Frame, uint8, error) { return r.next() }

// FrameOffset returns the offset of the frame Next returned last, for a
// caller's error about it.
func (r *Reader) FrameOffset() int64 { return r.start }

// Fail makes err the error every later Next returns, for a caller that
// found a well-formed frame the protocol does not allow, and returns it.
func (r *Reader) Fail(err error) error { return r.fail(err) }

// AppendAck appends a FrameAck acknowledging seq to dst.
func AppendAck(dst []byte, seq uint64) []byte {
	var p [AckPayloadSize]byte
	binary.LittleEndian.PutUint64(p[:], seq)
	return appendFrame(dst, FrameAck, 0, p[:])
}
