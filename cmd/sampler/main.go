package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tandem-profiler/tandem/internal/buildinfo"
	"github.com/tandem-profiler/tandem/internal/cli"
	"github.com/tandem-profiler/tandem/internal/counters"
	"github.com/tandem-profiler/tandem/internal/logging"
	"github.com/tandem-profiler/tandem/ipc"
	"github.com/tandem-profiler/tandem/sampler"
)

const (
	defaultSocket             = "/run/tandem/tandem.sock"
	defaultMetricsLogInterval = 5 * time.Minute
	// defaultEncoderUID is the dedicated system user the encoder runs as
	// (deploy/systemd/tandem.sysusers; make run creates it too). Not
	// "nobody": uid 65534 is shared by NFS squashing and many daemons, any
	// of which could then serve the socket. A pod names its encoder's uid
	// explicitly (deploy/kubernetes).
	defaultEncoderUID = "tandem"
)

// options is everything the command line sets.
type options struct {
	cfg            sampler.Config
	socket         string
	encoderUIDs    []string
	record         string
	noEncoder      bool
	logLevel       string
	logFormat      string
	maxBufferBytes int
	// The executables' descriptors held to send again to a restarted
	// encoder: how many, and their files' sizes.
	maxHeldExecutables     int
	maxHeldExecutableBytes int64
	metricsLogInterval     time.Duration
	statsInterval          time.Duration
	uploadDisable          bool
	socketDirCheck         bool
	confine                bool
}

// fieldFlags maps sampler.Config fields to the flag that sets them, so that
// configuration errors name the flag.
var fieldFlags = map[string]string{
	"SamplesPerSecond":       "--profiling-cpu-sampling-frequency",
	"Tracers":                "--tracers",
	"OffCPUThreshold":        "--off-cpu-threshold",
	"ProbabilisticInterval":  "--profiling-probabilistic-interval",
	"ProbabilisticThreshold": "--profiling-probabilistic-threshold",
	"IncludeEnvVars":         "--include-env-var",
	"BPFVerifierLogLevel":    "--bpf-verifier-log-level",
	"MapScaleFactor":         "--map-scale-factor",
	"QueueBytes":             "--reporter-queue-bytes",
	"FlushInterval":          "--flush-interval",
	"ShutdownTimeout":        "--shutdown-timeout",
	"BPFFSRoot":              "--bpffs-root",
}

func main() {
	os.Exit(execute(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// execute runs the command line and returns the exit status. --help and
// --version print to stdout (as tandem-encoder's do), everything else to
// stderr.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newCommand(stdout, stderr)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return cli.ExitOK
	}
	fmt.Fprintf(stderr, "tandem-sampler: %v\n", err)
	if cli.IsUsage(err) {
		fmt.Fprintln(stderr, "run 'tandem-sampler --help' for the flags")
	}
	return cli.Status(err)
}

func newCommand(stdout, stderr io.Writer) *cobra.Command {
	o := &options{cfg: sampler.DefaultConfig()}
	cmd := &cobra.Command{
		Use:   "tandem-sampler",
		Short: "Tandem's privileged eBPF sampler: streams classified samples to tandem-encoder",
		Long: `tandem-sampler runs the OpenTelemetry eBPF profiler and streams what it
samples, classified and labelled, to tandem-encoder over a Unix socket
(--socket), and/or records the stream to a dump file (--record). It opens no
network connection. It needs root, or these capabilities: ` + sampler.RequiredCapabilities() + ".",
		Version:       buildinfo.String(),
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.complete(); err != nil {
				return cli.Usage(err)
			}
			logger, err := logging.New(stderr, o.logLevel, o.logFormat)
			if err != nil {
				return cli.Usage(err)
			}
			return run(cmd.Context(), o, logger, new(counters.Set))
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return cli.Usage(err) })
	cmd.SetErr(stderr)
	cmd.SetOut(stdout)

	hostname, _ := os.Hostname()
	o.cfg.NodeName = hostname
	f := cmd.Flags()
	f.SortFlags = false
	c := &o.cfg
	f.StringVar(&o.socket, "socket", defaultSocket, "Unix socket of tandem-encoder")
	f.StringSliceVar(&o.encoderUIDs, "encoder-uid", []string{defaultEncoderUID},
		"uid or user name tandem-encoder may run as (repeatable); the sampler sends nothing to a socket served by another uid. uid 0 is always accepted: root, or systemd holding the socket under socket activation. The default is the system user tandem (deploy/systemd/tandem.sysusers)")
	f.BoolVar(&o.socketDirCheck, "socket-dir-check", true,
		"refuse a socket whose directory (or one above it) can be written by anyone but root and the encoder; false only where nobody else can reach it (a pod's emptyDir)")
	f.StringVar(&o.record, "record", "", "also write the stream to this dump file (replay it with tandem-encoder replay)")
	f.BoolVar(&o.noEncoder, "no-encoder", false, "do not connect to an encoder (needs --record)")
	f.StringVar(&c.NodeName, "node", c.NodeName, "node name sent in the hello")
	f.IntVar(&c.SamplesPerSecond, "profiling-cpu-sampling-frequency", c.SamplesPerSecond, "CPU samples per second per CPU")
	f.StringVar(&c.Tracers, "tracers", c.Tracers,
		"interpreter tracers: all, or a comma-separated list of "+strings.Join(sampler.ListedTracers(), ", ")+" (go is added by --symbolize-go)")
	f.BoolVar(&c.SymbolizeGo, "symbolize-go", c.SymbolizeGo,
		"symbolize Go frames in the sampler (gopclntab); off, Go frames travel as native frames with their build ids")
	f.Float64Var(&c.OffCPUThreshold, "off-cpu-threshold", c.OffCPUThreshold,
		"probability (0..1) of recording an off-CPU event; 0 disables off-CPU profiling (needs kprobes)")
	f.DurationVar(&c.ProbabilisticInterval, "profiling-probabilistic-interval", c.ProbabilisticInterval,
		"time interval for which probabilistic profiling is on or off")
	f.UintVar(&c.ProbabilisticThreshold, "profiling-probabilistic-threshold", c.ProbabilisticThreshold,
		"percentage (0..100) of intervals with sampling on; 100 is always on")
	f.StringArrayVar(&c.IncludeEnvVars, "include-env-var", nil, "environment variable to record as a process label (repeatable)")
	f.BoolVar(&c.KeepEncoderSamples, "keep-encoder-samples", c.KeepEncoderSamples,
		"keep the samples of the connected encoder's process (left out by default: it would profile itself in proportion to what it is sent)")
	f.BoolVar(&c.SendErrorFrames, "profiling-enable-error-frames", c.SendErrorFrames, "keep frames of failed unwinds")
	f.Uint32Var(&c.BPFVerifierLogLevel, "bpf-verifier-log-level", c.BPFVerifierLogLevel, "eBPF verifier log level (0..2)")
	f.IntVar(&c.MapScaleFactor, "map-scale-factor", c.MapScaleFactor, "grow the tracer's eBPF maps by 2^n (0..8)")
	f.BoolVar(&c.OBIProcessCtx, "obi-process-ctx", c.OBIProcessCtx,
		"share the tracer's span map (traces_ctx_v1, pinned under --bpffs-root/otel/) with the OpenTelemetry eBPF Instrumentation, so samples of threads it instruments carry their trace and span ids")
	f.StringVar(&c.BPFFSRoot, "bpffs-root", c.BPFFSRoot, "BPF filesystem the span map is shared in (with --obi-process-ctx); OBI must pin into the same one")
	f.BoolVar(&o.uploadDisable, "debuginfo-upload-disable", false, "do not pass executables to the encoder, nor their notices to the recording (a replay then leaves native frames unnamed)")
	f.IntVar(&o.maxBufferBytes, "max-buffer-bytes", ipc.DefaultMaxUnackedBytes,
		"bound of the stream kept until the encoder acknowledges it (oldest dropped and reported beyond it)")
	f.IntVar(&o.maxHeldExecutables, "max-held-executables", ipc.DefaultMaxRetainedExecutables,
		"executables (open descriptors) kept after they were passed to the encoder, to pass again to a restarted one; past it the oldest is closed (counted)")
	f.Int64Var(&o.maxHeldExecutableBytes, "max-held-executable-bytes", ipc.DefaultMaxRetainedExecutableBytes,
		"bound on the sizes of the files whose descriptors the sampler holds, the disk a deleted executable's descriptor keeps from being reclaimed; past it the oldest kept is closed (counted). "+
			"A deleted executable's is closed anyway once the encoder has it and the process it ran in is gone")
	f.IntVar(&c.QueueBytes, "reporter-queue-bytes", c.QueueBytes, "bound of the queue between the tracer and the batcher")
	f.DurationVar(&c.FlushInterval, "flush-interval", c.FlushInterval,
		"send the batch being built at least this often (a full batch goes at once); each batch wakes both processes")
	f.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", c.ShutdownTimeout,
		"bound of each shutdown step: stopping the tracer and flushing the queue, then delivering to the encoder")
	f.DurationVar(&o.metricsLogInterval, "metrics-log-interval", defaultMetricsLogInterval, "log the sampler's metrics this often (0: only at exit)")
	f.DurationVar(&o.statsInterval, "stats-interval", defaultStatsInterval, "send the sampler's metrics to the encoder this often, in-band (0: never)")
	f.BoolVar(&o.confine, "confine", true,
		"once sampling, drop all capabilities but the steady set, set no_new_privs and install the seccomp filter on every thread (docs/security.md); exit if that fails. false only to debug")
	f.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&o.logFormat, "log-format", "auto", "auto (colored on a terminal, text otherwise), text or json")
	return cmd
}

// complete checks the flags that sampler.Config does not cover and
// validates the config, naming the flag of every problem.
func (o *options) complete() error {
	var errs []error
	// Without an encoder the notices still go into the recording (the
	// sink closes the descriptors at once): a replay names native frames
	// by reading the executables at their paths, and needs the notices
	// to know them.
	o.cfg.SendExecutables = !o.uploadDisable
	if o.noEncoder && o.record == "" {
		errs = append(errs, errors.New("--no-encoder needs --record DUMP: otherwise the samples go nowhere"))
	}
	if !o.noEncoder && o.socket == "" {
		errs = append(errs, errors.New("--socket is empty: give the encoder's socket, or --no-encoder with --record"))
	}
	if o.maxBufferBytes <= 0 {
		errs = append(errs, fmt.Errorf("--max-buffer-bytes=%d: must be positive", o.maxBufferBytes))
	}
	if o.maxHeldExecutables < 1 {
		errs = append(errs, fmt.Errorf("--max-held-executables=%d: must be at least 1", o.maxHeldExecutables))
	}
	if o.maxHeldExecutableBytes < 1<<20 {
		errs = append(errs, fmt.Errorf("--max-held-executable-bytes=%d: must be at least 1 MiB", o.maxHeldExecutableBytes))
	}
	if o.metricsLogInterval < 0 {
		errs = append(errs, fmt.Errorf("--metrics-log-interval=%v: must not be negative", o.metricsLogInterval))
	}
	if o.statsInterval < 0 {
		errs = append(errs, fmt.Errorf("--stats-interval=%v: must not be negative", o.statsInterval))
	}
	if !o.noEncoder {
		if _, err := o.peerUIDs(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := o.cfg.Validate(); err != nil {
		for _, e := range unjoin(err) {
			var fe *sampler.FieldError
			if errors.As(e, &fe) {
				if flag, ok := fieldFlags[fe.Field]; ok {
					errs = append(errs, fmt.Errorf("%s: %w", flag, fe.Err))
					continue
				}
			}
			errs = append(errs, e)
		}
	}
	return errors.Join(errs...)
}

func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// lookupUser is user.Lookup, replaced in tests.
var lookupUser = user.Lookup

// peerUIDs resolves --encoder-uid (numbers or user names); uid 0 is always
// included.
func (o *options) peerUIDs() ([]uint32, error) {
	uids := []uint32{0}
	var errs []error
	for _, s := range o.encoderUIDs {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if n, err := strconv.ParseUint(s, 10, 32); err == nil {
			uids = append(uids, uint32(n))
			continue
		}
		u, err := lookupUser(s)
		if err != nil {
			fix := ""
			if s == defaultEncoderUID {
				fix = " (create it with systemd-sysusers deploy/systemd/tandem.sysusers, or name the encoder's user with --encoder-uid)"
			}
			errs = append(errs, fmt.Errorf("--encoder-uid=%s: not a uid and not a known user%s: %w", s, fix, err))
			continue
		}
		n, err := strconv.ParseUint(u.Uid, 10, 32)
		if err != nil {
			errs = append(errs, fmt.Errorf("--encoder-uid=%s: user has uid %q: %w", s, u.Uid, err))
			continue
		}
		uids = append(uids, uint32(n))
	}
	slices.Sort(uids)
	return slices.Compact(uids), errors.Join(errs...)
}
