package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/tandem-profiler/tandem/encoder/export"
	"github.com/tandem-profiler/tandem/encoder/ingest"
	"github.com/tandem-profiler/tandem/encoder/pipeline"
	"github.com/tandem-profiler/tandem/internal/cli"
	"github.com/tandem-profiler/tandem/internal/logging"
	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/schema"
)

// errLost marks a replay that lost or rejected samples: the exit status is
// exitLost.
var errLost = errors.New("samples were lost")

// exitLost is replay's exit status when any sample was lost or rejected.
const exitLost = 3

// defaultReplayGiveUp is how long replay keeps retrying an output that
// fails before giving its flushes up (counted): long enough to ride out a
// restart, short enough that a dead backend ends the replay.
const defaultReplayGiveUp = time.Minute

type replayFlags struct {
	out        outputFlags
	giveUp     time.Duration
	timestamps string
}

// Values of --timestamps.
const (
	timestampsOriginal = "original"
	timestampsNow      = "now"
)

func newReplayCommand(opts *logOptions) *cobra.Command {
	var f replayFlags
	cmd := &cobra.Command{
		Use:   "replay DUMP...",
		Short: "feed recorded dumps through the encoder, as if a sampler were connected",
		Long: `replay reads dumps written by 'tandem-sampler --record', 'tandem-encoder serve --record'
or 'tandem-encoder synth' and runs them through the same pipeline serve uses.
Flushes are cut by the samples' own timestamps every --profiling-duration, the
last one too, so a replay produces the profiles the live run would have.
With --timestamps now, every timestamp is moved by one offset so that the
dumps' last sample is the time replay starts (the times between samples are
kept): for backends that refuse old samples, such as Pyroscope (older than
an hour by default).

It ends with a summary per output (samples delivered, lost and why) and exits
with status 3 when any sample was lost or rejected, 1 on other errors and 2
on bad flags.`,
		Args: needArgs("DUMP (a file written by --record or synth)"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.out.validate(); err != nil {
				return err
			}
			if f.timestamps != timestampsOriginal && f.timestamps != timestampsNow {
				return cli.Usage(fmt.Errorf("--timestamps=%q: want %s or %s", f.timestamps, timestampsOriginal, timestampsNow))
			}
			if f.giveUp <= 0 {
				return cli.Usage(fmt.Errorf("--give-up-after=%v: must be positive", f.giveUp))
			}
			var w io.Writer = os.Stderr
			var guard *lineGuard
			if term.IsTerminal(int(os.Stderr.Fd())) {
				guard = &lineGuard{w: os.Stderr}
				w = guard
			}
			logger, err := logging.New(w, opts.level, opts.format)
			if err != nil {
				return cli.Usage(err)
			}
			return replay(cmd.Context(), &f, args, logger, guard)
		},
	}
	f.out.register(cmd.Flags())
	cmd.Flags().DurationVar(&f.giveUp, "give-up-after", defaultReplayGiveUp, "give an output's flushes up (counted lost) once it has failed this long without a success")
	cmd.Flags().StringVar(&f.timestamps, "timestamps", timestampsOriginal,
		"original (the samples' recorded times) or now (every time moved by one offset so that the last sample is now, for backends that refuse old samples)")
	return cmd
}

func replay(ctx context.Context, f *replayFlags, dumps []string, logger *slog.Logger, progress *lineGuard) error {
	out := &f.out
	reg := prometheus.NewRegistry()
	conn, err := dialRemote(out, reg)
	if err != nil {
		return err
	}
	if conn != nil {
		defer conn.Close()
	}
	logger, stopLogging, err := startLogging(&out.logging, &out.def.Remote, conn, logger, reg)
	if err != nil {
		return err
	}
	defer stopLogging() // before conn.Close: the last records go over conn
	pcfg := pipeline.DefaultConfig()
	pcfg.StreamWindow = out.profilingDuration
	if f.timestamps == timestampsNow {
		end, err := dumpsEnd(ctx, dumps)
		if err != nil {
			return err
		}
		if end > 0 {
			pcfg.TimeShift = time.Since(time.Unix(0, end))
			logger.Info("moving the dumps' timestamps to now", "last_sample", time.Unix(0, end).UTC(), "shift", pcfg.TimeShift.Round(time.Second))
		}
	}
	p, err := newPipeline(out, conn, logger, reg, pcfg, func(q *export.QueueConfig) {
		// A dump is read faster than any backend takes it: wait for room
		// rather than give flushes up, and give up on a dead backend.
		q.Backpressure = true
		q.GiveUpAfter = f.giveUp
	})
	if err != nil {
		return err
	}
	if err := out.confineSelf(logger, nil, nil); err != nil {
		_ = p.close(ctx)
		return err
	}
	var runErr error
	for _, path := range dumps {
		if err := replayOne(ctx, p.Tracker(), path, progress); err != nil {
			runErr = err
			break
		}
	}
	// Whatever was read is delivered, even when a later dump is corrupt.
	p.FlushStreamEnd()
	// Every output gives up on time (its give-up is a deadline), so this
	// bound is only reached when an output's last attempts hang; what it
	// still holds is then counted lost (shutdown) and the summary says so.
	closeCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout+f.giveUp)
	defer cancel()
	closeErr := p.close(closeCtx)
	if closeErr != nil {
		logger.Error("replay: the outputs did not finish in time; what they still held is counted lost (shutdown)", "err", closeErr)
	}
	if n := p.execs.WithoutDescriptor(); n > 0 {
		// Dumps carry notices, never descriptors: nothing to upload. The
		// symbolizer reads what is still on this machine by path.
		logger.Info("symbol upload skipped: dumps carry no executable descriptors", "executables", n,
			"read_by_path_for_symbols", p.execs.ReopenedByPath())
	}
	lost := false
	produced := p.Produced()
	for _, s := range p.Summary() {
		args := []any{"output", s.Name, "samples", produced, "delivered", s.Delivered, "lost", s.LostSamples()}
		for _, reason := range slices.Sorted(maps.Keys(s.Lost)) {
			args = append(args, "lost_"+reason, s.Lost[reason])
		}
		if s.LostSamples() > 0 {
			lost = true
			args = append(args, "last_error", s.LastErr)
			logger.Error("replay output summary: samples lost", args...)
			continue
		}
		logger.Info("replay output summary", args...)
	}
	batches, samples := p.Rejected()
	if batches > 0 {
		lost = true
		logger.Error("replay: the aggregator rejected batches", "batches", batches, "samples", samples)
	}
	logger.Info("replay done", "dumps", len(dumps), "samples", produced, "aggregator", fmt.Sprintf("%+v", p.Aggregator().Stats()))
	switch {
	case runErr != nil:
	case lost:
		runErr = cli.ExitError{Code: exitLost, Err: fmt.Errorf("%w: see the summary above", errLost)}
	case closeErr != nil:
		runErr = fmt.Errorf("finish export: %w", closeErr)
	}
	return runErr
}

func replayOne(ctx context.Context, tracker *ingest.Tracker, path string, progress *lineGuard) error {
	d, err := ipc.OpenDump(path)
	if err != nil {
		return fmt.Errorf("replay %s: %w", path, err)
	}
	defer d.Close()
	src := ipc.FrameSource(d)
	if progress != nil {
		src = &progressSource{FrameSource: d, dump: d, name: path, w: progress}
		defer progress.done()
	}
	if err := tracker.Serve(ctx, src, nil); err != nil {
		return fmt.Errorf("replay %s: %w", path, err)
	}
	return nil
}

// dumpsEnd returns the latest sample timestamp of the dumps (0 when they
// hold no sample), reading them through a tracker of their own. It stops
// where the replay will stop, at the first dump that cannot be read to
// its end: the replay delivers what comes before and reports the error,
// so the latest sample read so far is the last one replayed.
func dumpsEnd(ctx context.Context, dumps []string) (int64, error) {
	var sink lastSample
	tracker, err := ingest.NewTracker(&sink, nil, nil)
	if err != nil {
		return 0, fmt.Errorf("find the dumps' last sample: %w", err)
	}
	for _, path := range dumps {
		if err := replayOne(ctx, tracker, path, nil); err != nil {
			break
		}
	}
	return sink.last, ctx.Err()
}

// lastSample is an ingest.Sink keeping the latest sample timestamp.
type lastSample struct{ last int64 }

func (l *lastSample) Batch(_ *ingest.Session, b *schema.Batch) {
	for i := range b.Samples {
		l.last = max(l.last, b.Samples[i].TimestampUnixNano)
	}
}

func (l *lastSample) Loss(*ingest.Session, *schema.LossReport) {}

func (l *lastSample) Executable(_ *ingest.Session, _ *schema.ExecutableNotice, f *os.File) {
	if f != nil {
		_ = f.Close()
	}
}

// progressSource prints how far through the dump the replay is, at most
// a few times a second.
type progressSource struct {
	ipc.FrameSource
	dump *ipc.DumpReader
	name string
	w    *lineGuard
	last time.Time
}

func (p *progressSource) Next() (ipc.Frame, error) {
	f, err := p.FrameSource.Next()
	if now := time.Now(); now.Sub(p.last) > 200*time.Millisecond || err != nil {
		p.last = now
		size := p.dump.Size()
		pct := 100.0
		if size > 0 {
			pct = 100 * float64(p.dump.Offset()) / float64(size)
		}
		p.w.progress(fmt.Sprintf("replay %s: %5.1f%% (%d of %d bytes)", p.name, pct, p.dump.Offset(), size))
	}
	return f, err
}

// lineGuard shares a terminal between log lines and a progress line: a log
// line first erases the progress line (it is redrawn at the next update),
// so the two never run into each other.
type lineGuard struct {
	mu    sync.Mutex
	w     io.Writer
	shown bool // a progress line is on screen, without a newline
}

// eraseLine returns the cursor to the line's start and clears it (ANSI).
const eraseLine = "\r\x1b[K"

// Write writes log output.
func (g *lineGuard) Write(b []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shown {
		_, _ = io.WriteString(g.w, eraseLine)
		g.shown = false
	}
	return g.w.Write(b)
}

func (g *lineGuard) progress(line string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, _ = io.WriteString(g.w, eraseLine+line)
	g.shown = true
}

// done ends the progress line with a newline, keeping it on screen.
func (g *lineGuard) done() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.shown {
		_, _ = io.WriteString(g.w, "\n")
		g.shown = false
	}
}
