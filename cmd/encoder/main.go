package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/tandem-profiler/tandem/encoder/export"
	"github.com/tandem-profiler/tandem/internal/buildinfo"
	"github.com/tandem-profiler/tandem/internal/cli"
)

func main() {
	// grpc-go's gzip compressor is process-global and may only be registered
	// before any RPC: do it here, once, never as a side effect of dialing.
	// serve and replay set its level from --remote-store-compression-level
	// before they dial.
	export.RegisterGzip()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCommand().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "tandem-encoder:", err)
		os.Exit(cli.Status(err))
	}
}

// logOptions are the logging flags every command shares.
type logOptions struct{ level, format string }

func newRootCommand() *cobra.Command {
	var logOpts logOptions
	root := &cobra.Command{
		Use:           "tandem-encoder",
		Short:         "Tandem's unprivileged encoder: sampler stream in, OTLP/profiles or pprof out",
		Version:       buildinfo.String(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().StringVar(&logOpts.level, "log-level", "info", "log level: debug, info, warn or error")
	root.PersistentFlags().StringVar(&logOpts.format, "log-format", "auto", "auto (colored on a terminal, text otherwise), text or json")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return cli.Usage(err) })
	root.AddCommand(newServeCommand(&logOpts), newReplayCommand(&logOpts), newSynthCommand(&logOpts), newViewCommand(&logOpts), newPrepareDirCommand(&logOpts))
	return root
}

// needArgs accepts one or more arguments; none is bad usage (exit 2),
// naming what the command wants.
func needArgs(what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cli.Usage(fmt.Errorf("%s needs at least one %s: %s", cmd.Name(), what, cmd.UseLine()))
		}
		return nil
	}
}
