//go:build !linux

package confine

import (
	"errors"
	"fmt"
)

// ErrNotSupported: confinement needs Linux.
var ErrNotSupported = errors.New("confinement needs Linux (seccomp, Landlock, capabilities)")

// Install fails: only Linux can confine a process.
func Install(cfg Config) (Report, error) {
	return Report{}, fmt.Errorf("confine %s: %w", cfg.Role, ErrNotSupported)
}
