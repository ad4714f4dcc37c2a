// Package ipcserver is the encoder's end of Tandem's Unix socket (the
// frame format and the sampler's Client are package ipc). It lives in its
// own package so that the privileged sampler links none of it: not the
// server, not systemd socket activation (go-systemd's activation package
// brings crypto/tls), not the Prometheus client.
//
// Server binds a path or takes the listening socket systemd passes
// (LISTEN_FDS), and admits only peers whose SO_PEERCRED uid is in
// Config.AllowedUIDs (root by default); others are closed, logged and
// counted. Descriptors travel as SCM_RIGHTS ancillary data on the first
// byte of their FrameExecutable; Conn queues received descriptors (at most
// Config.MaxPendingDescriptors) and hands one out only with a frame whose
// header carries ipc.FlagDescriptor. The only frame the encoder sends is
// ipc.FrameAck.
//
// Server is safe for concurrent use. A Conn is read (Next) by one
// goroutine while others may Ack or Close it. Server.Close stops
// listening, removes the socket file it created and closes open
// connections; Conn.Close closes the connection and every unclaimed
// descriptor. After Close, methods return errors wrapping ipc.ErrClosed.
//
// Loggers (*slog.Logger) and Prometheus registerers are injected; nil
// means discard and do not register. Metrics are named
// tandem_ipc_server_*; Server.Stats returns them as a snapshot.
package ipcserver
