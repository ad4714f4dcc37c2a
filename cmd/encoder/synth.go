package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/tandem-profiler/tandem/internal/cli"
	"github.com/tandem-profiler/tandem/internal/logging"
	"github.com/tandem-profiler/tandem/internal/synth"
	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/schema"
)

func newSynthCommand(opts *logOptions) *cobra.Command {
	cfg := synth.DefaultConfig()
	var out, start string
	cmd := &cobra.Command{
		Use:   "synth --samples N --seed S --out DUMP",
		Short: "write a deterministic, realistic synthetic stream to a dump",
		Long: `synth writes a stream shaped like a busy node's: ~33 frames per sample mixing
kernel, native, Python and Go frames, hundreds of processes, tens of mappings,
Zipf-distributed stacks and some off-CPU and probe samples. Its samples end
now unless --start gives the first one's time; with --start, the same flags
always give the same bytes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return cli.Usage(errors.New("--out is required: the dump file to write"))
			}
			if cfg.Samples <= 0 {
				return cli.Usage(fmt.Errorf("--samples=%d: must be positive", cfg.Samples))
			}
			if start == "" {
				// Relative to now, so that backends refusing old samples
				// take it.
				cfg.Start = time.Now().Add(-cfg.Duration)
			} else {
				t, err := time.Parse(time.RFC3339Nano, start)
				if err != nil {
					return cli.Usage(fmt.Errorf("--start=%q: want an RFC 3339 time such as %s", start, synth.DefaultStart.Format(time.RFC3339)))
				}
				cfg.Start = t
			}
			if err := cfg.Validate(); err != nil {
				return cli.Usage(err)
			}
			logger, err := logging.New(os.Stderr, opts.level, opts.format)
			if err != nil {
				return cli.Usage(err)
			}
			n, err := writeSynth(cfg, out)
			if err != nil {
				return err
			}
			logger.Info("wrote synthetic dump", "path", out, "samples", cfg.Samples, "seed", cfg.Seed, "bytes", n)
			return nil
		},
	}
	fs := cmd.Flags()
	fs.IntVar(&cfg.Samples, "samples", cfg.Samples, "number of samples")
	fs.Int64Var(&cfg.Seed, "seed", cfg.Seed, "random seed; the same seed gives the same stream")
	fs.IntVar(&cfg.BatchSize, "batch-size", cfg.BatchSize, "samples per batch")
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, "time span of the samples")
	fs.StringVar(&out, "out", "", "dump file to write")
	fs.StringVar(&start, "start", "", "time of the first sample, RFC 3339 (default: --duration before now, so that the stream ends now)")
	return cmd
}

func writeSynth(cfg synth.Config, path string) (int64, error) {
	d, err := ipc.CreateDump(path)
	if err != nil {
		return 0, fmt.Errorf("create %s: %w", path, err)
	}
	var buf []byte
	err = synth.Generate(cfg, func(m synth.Message) error {
		var t ipc.FrameType
		var err error
		switch m.Kind {
		case synth.KindHello:
			t = ipc.FrameHello
			buf, err = schema.EncodeHello(m.Hello, buf[:0])
		case synth.KindBatch:
			t = ipc.FrameBatch
			buf, err = schema.EncodeBatch(m.Batch, buf[:0])
		case synth.KindExecutable:
			t = ipc.FrameExecutable
			buf, err = schema.EncodeExecutableNotice(m.Executable, buf[:0])
		default:
			return fmt.Errorf("unknown synthetic message kind %v", m.Kind)
		}
		if err != nil {
			return err
		}
		return d.WriteFrame(t, buf)
	})
	if err != nil {
		d.Close()
		os.Remove(path)
		return 0, fmt.Errorf("write synthetic stream: %w", err)
	}
	n := d.Offset()
	if err := d.Close(); err != nil {
		return 0, fmt.Errorf("close %s: %w", path, err)
	}
	return n, nil
}
