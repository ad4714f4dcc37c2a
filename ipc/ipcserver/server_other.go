//go:build !linux

package ipcserver

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tandem-profiler/tandem/ipc"
)

// Server is the encoder's end of the socket. It needs Linux (SO_PEERCRED,
// SCM_RIGHTS); elsewhere Listen returns an error wrapping ipc.ErrNotSupported.
type Server struct{}

// Listen returns an error wrapping ipc.ErrNotSupported on this platform.
func Listen(cfg Config, logger *slog.Logger, reg prometheus.Registerer) (*Server, error) {
	return nil, fmt.Errorf("listen: %w", ipc.ErrNotSupported)
}

// Addr returns nil on this platform.
func (s *Server) Addr() net.Addr { return nil }

// Activated returns false on this platform.
func (s *Server) Activated() bool { return false }

// Accept returns an error wrapping ipc.ErrNotSupported on this platform.
func (s *Server) Accept(ctx context.Context) (*Conn, error) {
	return nil, fmt.Errorf("accept: %w", ipc.ErrNotSupported)
}

// Stats returns zero on this platform.
func (s *Server) Stats() Stats { return Stats{} }

// Close returns nil on this platform.
func (s *Server) Close() error { return nil }

// Conn is one accepted connection from a sampler (Linux only).
type Conn struct{}

// Next returns an error wrapping ipc.ErrNotSupported on this platform.
func (c *Conn) Next() (ipc.Frame, error) {
	return ipc.Frame{}, fmt.Errorf("read frame: %w", ipc.ErrNotSupported)
}

// Ack returns an error wrapping ipc.ErrNotSupported on this platform.
func (c *Conn) Ack(seq uint64) error { return fmt.Errorf("write ack: %w", ipc.ErrNotSupported) }

// SetReadDeadline returns an error wrapping ipc.ErrNotSupported on this platform.
func (c *Conn) SetReadDeadline(t time.Time) error {
	return fmt.Errorf("set read deadline: %w", ipc.ErrNotSupported)
}

// PeerUID returns 0 on this platform.
func (c *Conn) PeerUID() uint32 { return 0 }

// PeerPID returns 0 on this platform.
func (c *Conn) PeerPID() int32 { return 0 }

// Close returns nil on this platform.
func (c *Conn) Close() error { return nil }
