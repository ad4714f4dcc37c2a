// Package buildinfo holds the version stamped into Tandem's binaries.
package buildinfo

import "runtime/debug"

// Version is set by the Makefile with -ldflags -X; it falls back to the
// module version recorded by the Go toolchain.
var Version = ""

// String returns the build version, never empty.
func String() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "dev"
}
