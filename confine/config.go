package confine

import (
	"errors"
	"fmt"
	"path/filepath"
)

// Config says what a confined process may still write.
type Config struct {
	Role Role
	// The writable paths apply to the encoder; the sampler cannot have a
	// Landlock domain (see Install).
	// WritableDirs are directories the process may create, write and
	// remove files in (and below). Missing ones are left out: nothing
	// can be written there then.
	WritableDirs []string
	// WritableFiles are existing files the process may write.
	WritableFiles []string
}

// Validate checks that every path is absolute.
func (c *Config) Validate() error {
	var errs []error
	if c.Role != Sampler && c.Role != Encoder {
		errs = append(errs, fmt.Errorf("unknown role %d", int(c.Role)))
	}
	for _, p := range append(append([]string(nil), c.WritableDirs...), c.WritableFiles...) {
		if !filepath.IsAbs(p) {
			errs = append(errs, fmt.Errorf("writable path %q is not absolute", p))
		}
	}
	return errors.Join(errs...)
}

// Report says what Install put in place.
type Report struct {
	// Capabilities is the permitted and effective set kept.
	Capabilities CapSet
	// Bounding is what the bounding set still holds: the kept set, plus
	// what could not be dropped without CAP_SETPCAP (no_new_privs and
	// the filter keep those unusable: only execve could raise them).
	Bounding CapSet
	// LandlockABI is the Landlock ABI the kernel enforces (0: none, the
	// write rules are then not enforced).
	LandlockABI int
	// SeccompFilters is how many filters Install added.
	SeccompFilters int
}
