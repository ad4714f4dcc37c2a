package ipc

import (
	"bytes"
	"encoding/binary"
	"github.com/tandem-profiler/tandem/ipc/internal/ipctest"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// rawFrame builds a frame header with arbitrary fields, followed by payload.
func rawFrame(t FrameType, flags uint8, reserved uint16, length uint32, payload []byte) []byte {
	b := make([]byte, HeaderSize, HeaderSize+len(payload))
	b[0], b[1] = byte(t), flags
	binary.LittleEndian.PutUint16(b[2:4], reserved)
	binary.LittleEndian.PutUint32(b[4:8], length)
	return append(b, payload...)
}

// frame is a frame as a 1.0-1.2 peer writes it: no checksum.
func frame(t FrameType, payload []byte) []byte {
	return rawFrame(t, 0, 0, uint32(len(payload)), payload)
}

// rawCFrame is rawFrame with FlagChecksum added to flags and the CRC-32C
// of the header as given and of payload after it, as a 1.3 writer does.
func rawCFrame(t FrameType, flags uint8, reserved uint16, length uint32, payload []byte) []byte {
	return ipctest.ChecksummedFrame(byte(t), flags|FlagChecksum, reserved, length, payload)
}

// cframe is a frame as this build writes it: checksummed.
func cframe(t FrameType, payload []byte) []byte {
	return rawCFrame(t, 0, 0, uint32(len(payload)), payload)
}

func dumpHeader(major, minor uint16, reserved uint32) []byte {
	b := make([]byte, DumpHeaderSize)
	copy(b, DumpMagic)
	binary.LittleEndian.PutUint16(b[8:10], major)
	binary.LittleEndian.PutUint16(b[10:12], minor)
	binary.LittleEndian.PutUint32(b[12:16], reserved)
	return b
}

func concat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

var seqPayload = ipctest.SeqPayload
