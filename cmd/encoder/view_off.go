//go:build noview

package main

import (
	"errors"

	"github.com/spf13/cobra"

	"github.com/tandem-profiler/tandem/internal/cli"
)

// newViewCommand, in a build without view (-tags noview, as the container
// image's encoder and tools/bench/compare-upstream.sh build it), says so.
// view links google/pprof's web UI, whose html/template makes the linker
// keep every exported method of every type in the binary: with gRPC's
// x/net/trace (-tags grpcnotrace drops it) that is 12 MB of binary and
// 3.7 MB of an idle encoder's resident memory (docs/benchmarks/footprint.md).
func newViewCommand(*logOptions) *cobra.Command {
	return &cobra.Command{
		Use:    "view",
		Short:  "not in this build (-tags noview): use a tandem-encoder built by make build",
		Hidden: true,
		RunE: func(*cobra.Command, []string) error {
			return cli.Usage(errors.New("this tandem-encoder was built without view (-tags noview, as the container image's): run view with a tandem-encoder built by make build"))
		},
	}
}
