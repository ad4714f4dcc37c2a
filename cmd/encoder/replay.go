package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/tandem-profiler/tandem/internal/ingest"
	"github.com/tandem-profiler/tandem/internal/logging"
	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/schema"
)

func newReplayCommand(opts *logOptions) *cobra.Command {
	var out outputFlags
	cmd := &cobra.Command{
		Use:   "replay DUMP...",
		Short: "feed recorded dumps through the encoder, as if a sampler were connected",
		Long: `replay reads dumps written by 'tandem-sampler --record', 'tandem-encoder serve --record'
or 'tandem-encoder synth' and runs them through the same pipeline serve uses.
Flushes are cut by the samples' own timestamps every --profiling-duration, so
a replay produces the profiles the live run would have.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := out.validate(); err != nil {
				return err
			}
			logger, err := logging.New(os.Stderr, opts.level, opts.format)
			if err != nil {
				return usageError{err}
			}
			return replay(cmd.Context(), &out, args, logger, os.Stderr)
		},
	}
	out.register(cmd.Flags())
	return cmd
}

// replaySink cuts flushes by stream time: when a batch starts past the
// current window, the window is flushed first.
type replaySink struct {
	*pipeline
	ctx         context.Context
	window      time.Duration
	windowStart int64
	samples     int
}

func (r *replaySink) Batch(s *ingest.Session, b *schema.Batch) {
	if len(b.Samples) > 0 {
		first := b.Samples[0].TimestampUnixNano
		if r.windowStart == 0 {
			r.windowStart = first
		} else if first-r.windowStart >= int64(r.window) {
			r.flushWindow(time.Unix(0, first))
			r.windowStart = first
		}
	}
	r.samples += len(b.Samples)
	r.pipeline.Batch(s, b)
}

func (r *replaySink) flushWindow(end time.Time) {
	r.deliver(r.ctx, r.agg.Flush(end), func() {})
}

func replay(ctx context.Context, out *outputFlags, dumps []string, logger *slog.Logger, progress io.Writer) error {
	reg := prometheus.NewRegistry()
	conn, err := dialRemote(out, reg)
	if err != nil {
		return err
	}
	if conn != nil {
		defer conn.Close()
	}
	logger, stopLogging, err := startLogging(&out.logging, &out.remote, conn, logger, reg)
	if err != nil {
		return err
	}
	defer stopLogging() // before conn.Close: the last records go over conn
	p, err := newPipeline(out, conn, logger, reg)
	if err != nil {
		return err
	}
	p.syncExport = true
	rs := &replaySink{pipeline: p, ctx: ctx, window: out.profilingDuration}
	tracker := ingest.NewTracker(rs, logger.With("component", "ingest"), nil)
	showProgress := false
	if f, ok := progress.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		showProgress = true
	}
	var runErr error
	for _, path := range dumps {
		if err := replayOne(ctx, tracker, path, showProgress, progress); err != nil {
			runErr = err
			break
		}
	}
	// Whatever was read is delivered, even when a later dump is corrupt.
	rs.flushWindow(time.Now())
	closeCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := p.close(closeCtx); err != nil && runErr == nil {
		runErr = fmt.Errorf("finish export: %w", err)
	}
	if n := p.execs.withoutDescriptor(); n > 0 {
		// Dumps carry notices, never descriptors: nothing to upload.
		logger.Info("symbol upload skipped: dumps carry no executable descriptors", "executables", n)
	}
	logger.Info("replay done", "dumps", len(dumps), "samples", rs.samples, "aggregator", fmt.Sprintf("%+v", p.agg.Stats()))
	return runErr
}

func replayOne(ctx context.Context, tracker *ingest.Tracker, path string, showProgress bool, progress io.Writer) error {
	d, err := ipc.OpenDump(path)
	if err != nil {
		return fmt.Errorf("replay %s: %w", path, err)
	}
	defer d.Close()
	src := ingest.Source(d)
	if showProgress {
		src = &progressSource{Source: d, dump: d, name: path, w: progress}
		defer fmt.Fprintln(progress)
	}
	if err := tracker.Serve(ctx, src, nil); err != nil {
		return fmt.Errorf("replay %s: %w", path, err)
	}
	return nil
}

// progressSource prints how far through the dump the replay is, at most
// a few times a second.
type progressSource struct {
	ingest.Source
	dump *ipc.DumpReader
	name string
	w    io.Writer
	last time.Time
}

func (p *progressSource) Next() (ipc.Frame, error) {
	f, err := p.Source.Next()
	if now := time.Now(); now.Sub(p.last) > 200*time.Millisecond || err != nil {
		p.last = now
		size := p.dump.Size()
		pct := 100.0
		if size > 0 {
			pct = 100 * float64(p.dump.Offset()) / float64(size)
		}
		fmt.Fprintf(p.w, "\rreplay %s: %5.1f%% (%d of %d bytes)", p.name, pct, p.dump.Offset(), size)
	}
	return f, err
}

var _ ingest.Sink = (*replaySink)(nil)
