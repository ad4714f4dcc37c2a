//go:build !linux

package ipc

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/tandem-profiler/tandem/internal/counters"
)

// Client is the sampler's end of the socket. It needs Linux (SO_PEERCRED,
// SCM_RIGHTS); elsewhere NewClient returns an error wrapping
// ErrNotSupported.
type Client struct{}

// NewClient returns an error wrapping ErrNotSupported on this platform.
func NewClient(cfg ClientConfig, logger *slog.Logger, set *counters.Set) (*Client, error) {
	return nil, fmt.Errorf("new client: %w", ErrNotSupported)
}

// SetHello does nothing on this platform.
func (c *Client) SetHello(payload []byte) {}

// SendReliable does nothing on this platform.
func (c *Client) SendReliable(seq uint64, t FrameType, payload []byte, samples int) {}

// SendReliableWith does nothing on this platform.
func (c *Client) SendReliableWith(seq uint64, t FrameType, payload []byte, samples int, dict DictionaryRef) {
}

// SendStats returns false on this platform.
func (c *Client) SendStats(payload []byte) bool { return false }

// SendExecutable closes f and returns false on this platform.
func (c *Client) SendExecutable(payload []byte, f *os.File) bool {
	if f != nil {
		f.Close()
	}
	return false
}

// Run returns an error wrapping ErrNotSupported on this platform.
func (c *Client) Run(ctx context.Context) error { return fmt.Errorf("run: %w", ErrNotSupported) }

// Close returns nil on this platform.
func (c *Client) Close(ctx context.Context, goodbye []byte) error { return nil }

// IsServer returns false on this platform.
func (c *Client) IsServer(pid uint32) bool { return false }

// ServerStarting returns false on this platform.
func (c *Client) ServerStarting() bool { return false }

// Stats returns zero on this platform.
func (c *Client) Stats() ClientStats { return ClientStats{} }
