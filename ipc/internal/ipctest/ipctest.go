// Package ipctest holds the test payloads shared by the tests of ipc and
// ipc/ipcserver. It imports nothing from ipc, so that ipc's own tests can
// use it.
package ipctest

import "encoding/binary"

// SeqPayload is a test payload of size bytes (at least 8) that starts with
// its sequence number, the rest derived from it.
func SeqPayload(seq uint64, size int) []byte {
	b := make([]byte, max(size, 8))
	binary.LittleEndian.PutUint64(b, seq)
	for i := 8; i < len(b); i++ {
		b[i] = byte(seq) + byte(i)
	}
	return b
}

// PayloadSeq returns the sequence number a SeqPayload starts with.
func PayloadSeq(p []byte) uint64 { return binary.LittleEndian.Uint64(p) }
