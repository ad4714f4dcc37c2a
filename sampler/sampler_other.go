//go:build !linux

package sampler

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"

	"github.com/tandem-profiler/tandem/internal/counters"
	"github.com/tandem-profiler/tandem/schema"
)

// Sampler runs the tracer and streams what it reports to a Sink. On this
// platform it cannot run: Run returns an error wrapping ErrNotSupported.
type Sampler struct {
	hello schema.Hello
}

// New validates cfg. The sampler itself only runs on Linux.
func New(cfg Config, sink Sink, logger *slog.Logger, set *counters.Set) (*Sampler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("invalid sampler config: %w", err)
	}
	return &Sampler{hello: baseHello(&cfg)}, nil
}

// Ready returns a channel that is never closed: nothing samples on this
// platform.
func (s *Sampler) Ready() <-chan struct{} { return nil }

// Hello returns the Hello the sampler would send first.
func (s *Sampler) Hello() schema.Hello { return s.hello }

// LastSequence returns 0: nothing is ever sent on this platform.
func (s *Sampler) LastSequence() uint64 { return 0 }

// Run returns an error wrapping ErrNotSupported.
func (s *Sampler) Run(context.Context) error {
	return fmt.Errorf("run sampler on %s: %w", runtime.GOOS, ErrNotSupported)
}
