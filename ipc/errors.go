package ipc

import (
	"errors"
	"fmt"
	"net"

	"github.com/tandem-profiler/tandem/schema"
)

// Sentinel errors. Test for them with errors.Is.
var (
	// ErrClosed is returned by operations on a closed Server, Conn, Client
	// or reader. It is net.ErrClosed, so errors from the socket layer
	// match it too.
	ErrClosed = net.ErrClosed

	// ErrVersionMismatch is wrapped by every *VersionError.
	ErrVersionMismatch = errors.New("protocol version mismatch")

	// ErrFrameTooLarge is wrapped by a *FrameError whose declared length
	// exceeds MaxFrameSize, and returned by writers given such a payload.
	ErrFrameTooLarge = errors.New("frame too large")

	// ErrCorrupt is wrapped by a *FrameError for a stream that breaks the
	// format in a way other than truncation or size: bad magic, non-zero
	// reserved bits, flags where none are allowed.
	ErrCorrupt = errors.New("corrupt frame stream")

	// ErrChecksum is wrapped by a *FrameError for a frame whose CRC-32C
	// does not match its header and payload (protocol 1.3). It wraps
	// ErrCorrupt, so errors.Is(err, ErrCorrupt) holds too.
	ErrChecksum = fmt.Errorf("frame checksum mismatch: %w", ErrCorrupt)

	// ErrProtocol is returned when a peer sends a well-formed frame that
	// the protocol does not allow at that point (an ack sent to the
	// encoder, an ack for a sequence never sent).
	ErrProtocol = errors.New("protocol violation")

	// ErrPeerRejected is returned when the process at the other end of the
	// socket runs as a uid that the configuration does not allow.
	ErrPeerRejected = errors.New("peer rejected")

	// ErrNotSupported is wrapped by errors from the socket API on
	// platforms other than Linux. Frames and dumps work everywhere.
	ErrNotSupported = errors.New("not supported on this platform")
)

// FrameError reports a malformed or truncated frame stream. Offset is the
// byte offset, from the start of the stream or dump file, of the frame (or
// file header) that could not be read; Reason says what was expected there.
//
// Err classifies the failure: io.ErrUnexpectedEOF (truncated),
// ErrFrameTooLarge, ErrChecksum or ErrCorrupt; errors.Is sees through to
// it.
type FrameError struct {
	Offset int64     // where the bad frame or header starts
	Type   FrameType // the frame's type byte, 0 if the header was not read
	Dump   bool      // the stream is a dump file
	Reason string    // what was expected, e.g. "truncated frame payload: want 2048 bytes, file ends after 17"
	Err    error     // io.ErrUnexpectedEOF, ErrFrameTooLarge, ErrChecksum or ErrCorrupt
}

func (e *FrameError) Error() string {
	if e.Dump {
		return fmt.Sprintf("dump corrupt at byte %d: %s", e.Offset, e.Reason)
	}
	return fmt.Sprintf("frame at byte %d: %s", e.Offset, e.Reason)
}

func (e *FrameError) Unwrap() error { return e.Err }

// VersionError reports a protocol version this build cannot read. It wraps
// ErrVersionMismatch.
type VersionError struct {
	Major, Minor                   uint16 // the version found
	SupportedMajor, SupportedMinor uint16 // the version this build speaks
}

func (e *VersionError) Error() string {
	if e.Major > e.SupportedMajor {
		return fmt.Sprintf("protocol version %d.%d is newer than this build's %d.%d",
			e.Major, e.Minor, e.SupportedMajor, e.SupportedMinor)
	}
	return fmt.Sprintf("protocol version %d.%d is not supported by this build's %d.%d",
		e.Major, e.Minor, e.SupportedMajor, e.SupportedMinor)
}

func (e *VersionError) Unwrap() error { return ErrVersionMismatch }

// CheckVersion returns a *VersionError unless a peer speaking major.minor
// can be understood by this build: same major version, any minor (minor
// revisions are additive). The encoder uses it on Hello; dumps use it on
// their file header.
func CheckVersion(major, minor uint16) error {
	if major != schema.MajorVersion {
		return &VersionError{
			Major: major, Minor: minor,
			SupportedMajor: schema.MajorVersion, SupportedMinor: schema.MinorVersion,
		}
	}
	return nil
}
