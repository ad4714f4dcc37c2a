// Package ipctest holds the test payloads shared by the tests of ipc and
// ipc/ipcserver. It imports nothing from ipc, so that ipc's own tests can
// use it.
package ipctest

import (
	"encoding/binary"
	"hash/crc32"
)

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

// ChecksummedFrame builds a protocol 1.3 frame from its fields as given
// (flags should include the checksum flag, 0x02): the 8-byte header, the
// CRC-32C (Castagnoli) of that header and payload, then payload. It is
// written from docs/ipc-format.md, not from ipc's code, so tests check
// the two agree.
func ChecksummedFrame(typ, flags uint8, reserved uint16, length uint32, payload []byte) []byte {
	b := make([]byte, 12, 12+len(payload))
	b[0], b[1] = typ, flags
	binary.LittleEndian.PutUint16(b[2:4], reserved)
	binary.LittleEndian.PutUint32(b[4:8], length)
	crc := crc32.Checksum(append(b[:8:8], payload...), crc32.MakeTable(crc32.Castagnoli))
	binary.LittleEndian.PutUint32(b[8:12], crc)
	return append(b, payload...)
}
