package ipcserver

import (
	"bytes"
	"encoding/binary"
	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/ipc/internal/ipctest"
	"io"
	"log/slog"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// helperEnv makes the test binary act as a helper process (see
// runHelper) instead of running tests.
const helperEnv = "GO_WANT_HELPER_PROCESS"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode))
	}
	goleak.VerifyTestMain(m)
}

// testLogger formats every record, at every level, and throws it away:
// tests never assert on log text.
func testLogger() *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// rawFrame builds a frame header with arbitrary fields, followed by payload.
func rawFrame(t ipc.FrameType, flags uint8, reserved uint16, length uint32, payload []byte) []byte {
	b := make([]byte, ipc.HeaderSize, ipc.HeaderSize+len(payload))
	b[0], b[1] = byte(t), flags
	binary.LittleEndian.PutUint16(b[2:4], reserved)
	binary.LittleEndian.PutUint32(b[4:8], length)
	return append(b, payload...)
}

func frame(t ipc.FrameType, payload []byte) []byte {
	return rawFrame(t, 0, 0, uint32(len(payload)), payload)
}

// rawCFrame is rawFrame with FlagChecksum added and the CRC-32C after the
// header, as a 1.3 sampler writes it (computed by ipctest, independently
// of ipc's own code).
func rawCFrame(t ipc.FrameType, flags uint8, reserved uint16, length uint32, payload []byte) []byte {
	return ipctest.ChecksummedFrame(byte(t), flags|ipc.FlagChecksum, reserved, length, payload)
}

// cframe is a frame as this build's sampler writes it: checksummed.
func cframe(t ipc.FrameType, payload []byte) []byte {
	return rawCFrame(t, 0, 0, uint32(len(payload)), payload)
}

func concat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

var (
	seqPayload = ipctest.SeqPayload
	payloadSeq = ipctest.PayloadSeq
)
