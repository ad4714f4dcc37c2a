// Package ipc carries Tandem's stream from the privileged sampler to the
// unprivileged encoder: one frame format for the Unix socket and for dump
// files, and the sampler's Client. The encoder's end of the socket is
// package ipc/ipcserver, kept apart so that the root process links no
// server, socket-activation or Prometheus code. It never looks inside
// payloads; the schema package encodes and decodes them. The byte layout
// is specified in docs/ipc-format.md.
//
// # Frames
//
// A frame is an 8-byte header (type u8, flags u8, reserved u16 = 0, payload
// length u32 little-endian), since protocol 1.3 a CRC-32C of the header and
// payload (FlagChecksum), and the payload. A declared length above
// MaxFrameSize is an error detected before anything is allocated; so are
// non-zero reserved bits and flags, except FlagDescriptor on a
// FrameExecutable read from a socket and FlagChecksum. Writers checksum
// every frame but the ack; readers check the sum before returning (or
// skipping) a frame, and require it on every frame or on none: a dump's
// header version decides (1.3 on: all), on a socket the first frame does,
// so 1.0-1.2 samplers and dumps still read. Frames of unknown types are skipped
// by length and counted, so that an older encoder can read a newer
// sampler's stream within one major protocol version.
//
// Reader and Writer handle any byte stream. A dump (CreateDump, OpenDump)
// is a 16-byte file header ("TANDEM\x00D", protocol major u16, minor u16,
// reserved u32) followed by the very frames that crossed the socket, minus
// descriptors. Readers return io.EOF only at a clean frame boundary, a
// *FrameError naming the byte offset and what was expected otherwise
// (errors.Is(err, io.ErrUnexpectedEOF) when truncated, ErrChecksum on a
// checksum mismatch), and a
// *VersionError (errors.Is(err, ErrVersionMismatch)) for a dump of another
// major version. A Recorder writes the frames of several connections into
// one dump as they arrive (tandem-encoder serve --record), repeating a
// connection's hello and its generation's dictionary chunks whenever the
// connection changes, so every stretch between two hellos decodes as its
// connection did.
//
// # Sockets
//
// The server (ipc/ipcserver) admits only peers whose SO_PEERCRED uid it
// allows. Descriptors travel as SCM_RIGHTS ancillary data on the first
// byte of their FrameExecutable, whose header carries FlagDescriptor
// (NewSocketReader accepts that flag). The only frame the encoder sends is
// FrameAck: 8 bytes, the sequence up to which reliable frames arrived.
//
// Client never blocks its caller. SendReliable, SendExecutable and
// SendStats queue; Run writes. SendStats keeps only the latest FrameStats
// waiting: stats are best effort, never resent. Reliable frames (FrameBatch, FrameLoss) stay in a buffer
// bounded by ClientConfig.MaxUnackedBytes until acknowledged, the oldest
// batches evicted when the bound is exceeded (loss reports never are: the
// caller bounds them). An evicted batch is counted lost (ClientStats.Lost*)
// when it was never written on the current connection, or when the
// connection ends before an ack covers it; one written and then
// acknowledged was delivered, so the lost counts are exactly what never
// reached the server. Every connection starts with the hello and resends
// what is unacknowledged, in sequence order.
//
// # Dictionaries (protocol 1.4)
//
// A layout-2 batch refers to its connection's dictionary, which
// FrameDictionary frames build (not sequenced, not acknowledged). The
// sampler appends each chunk to its generation's DictionaryLog and names,
// with each batch, the chunks it needs (DictionaryRef: the first n of the
// log). The Client (SendReliableWith) and a DumpWriter (WriteFrameWith)
// each keep a cursor per connection or dump, (log, chunks written), and
// write the missing chunks just before the frame; a new connection or dump
// starts at no chunk, so the receiver's dictionary holds exactly what was
// written on that connection. Chunks are not in the resend buffer: the
// acknowledgement and eviction rules are those of batches without
// dictionaries. The rules are in the ledger and tested there
// (ledger_test.go, TestLedgerDictionary).
//
// Client checks that the server runs as one of ClientConfig.PeerUIDs
// before sending anything, and drops a connection on anything but a
// well-formed, in-range, non-decreasing ack: the encoder is not trusted.
// The resend state (what is kept, evicted, lost, delivered, and which acks
// are valid) is a ledger with no I/O (ledger.go); client_linux.go does the
// socket I/O around it.
//
// # Concurrency and lifecycle
//
// Client and DumpWriter are safe for concurrent use. Reader, Writer and
// DumpReader are for one goroutine. Frame.Payload is valid until
// the next Next call on the same reader; Frame.File belongs to the caller.
//
// Client.Close stops accepting frames, flushes,
// sends the goodbye within its context and ends Run. After Close, methods
// return errors wrapping ErrClosed (which is net.ErrClosed).
//
// # Errors and observability
//
// Sentinels: ErrClosed, ErrVersionMismatch, ErrFrameTooLarge, ErrCorrupt,
// ErrChecksum,
// ErrProtocol, ErrPeerRejected and ErrNotSupported (the socket API on
// platforms other than Linux). Loggers (*slog.Logger) and counter sets
// (*counters.Set) are injected; nil means discard and do not register.
// The Client's counters are named tandem_ipc_client_*: plain counters
// that the sampler sends in-band, not Prometheus collectors; Client.Stats
// returns them as a snapshot.
package ipc
