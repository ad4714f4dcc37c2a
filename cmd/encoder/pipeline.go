package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
	"github.com/tandem-profiler/tandem/encoder/executables"
	"github.com/tandem-profiler/tandem/encoder/export"
	"github.com/tandem-profiler/tandem/encoder/labels"
	"github.com/tandem-profiler/tandem/encoder/otlp"
	"github.com/tandem-profiler/tandem/encoder/output"
	"github.com/tandem-profiler/tandem/encoder/pipeline"
	"github.com/tandem-profiler/tandem/internal/cli"
)

// outputFlags are the flags serve and replay share: where flushes go.
type outputFlags struct {
	profilingDuration time.Duration
	// def is the default output the flags describe: its settings' flags
	// come from output.Settings, and those marked EveryOutput are every
	// outputs entry's defaults too.
	def output.Config
	// mapFlags holds the raw key=value items of the map settings' flags
	// (--remote-store-grpc-headers), parsed by validate.
	mapFlags  map[string]*[]string
	gzipLevel int
	maxLinks  int
	debuginfo debuginfoFlags
	symbolize symbolizeFlags
	parca     parcaFlags
	logging   loggingFlags
	confine   bool

	fs *pflag.FlagSet
	// fileOutputs are the outputs --config-path lists (validate reads
	// them); when set they replace the default output.
	fileOutputs []output.Config
}

func (o *outputFlags) register(fs *pflag.FlagSet) {
	o.fs = fs
	fs.DurationVar(&o.profilingDuration, "profiling-duration", 10*time.Second, "aggregate samples for this long before each export")
	fs.BoolVar(&o.confine, "confine", true,
		"once listening with its outputs open, set no_new_privs, install the seccomp filter and Landlock rules (writes only to the output, scratch and socket directories and --record) on every thread (docs/security.md); exit if that fails. false only to debug")
	o.registerOutput(fs)
	fs.IntVar(&o.gzipLevel, "remote-store-compression-level", export.DefaultGzipLevel, "gzip level of everything the encoder sends gzip-compressed, every output's OTLP included: 1 (fastest) to 9; 5 makes OTLP about 12% smaller for about 2.5x the compression CPU")
	fs.IntVar(&o.maxLinks, "max-links-per-flush", aggregate.DefaultMaxLinksPerFlush,
		fmt.Sprintf("distinct trace links (trace id, span id) one flush keeps, 0 to %d; samples beyond it keep their stacks and lose the link (counted)", aggregate.MaxLinksPerFlushLimit))
	o.debuginfo.register(fs)
	o.symbolize.register(fs)
	o.parca.register(fs)
	o.logging.register(fs)
}

// registerOutput registers a flag for each output setting that has one
// (output.Settings), setting the default output o.def.
func (o *outputFlags) registerOutput(fs *pflag.FlagSet) {
	o.def = output.DefaultConfig(defaultOutput, output.FormatOTLP)
	o.def.Dir = "./profiles"
	o.mapFlags = map[string]*[]string{}
	for _, s := range output.Settings() {
		if s.Flag == "" {
			continue
		}
		switch p := s.Field(&o.def).(type) {
		case *string:
			fs.StringVar(p, s.Flag, *p, s.Help)
		case *bool:
			fs.BoolVar(p, s.Flag, *p, s.Help)
		case *int:
			fs.IntVar(p, s.Flag, *p, s.Help)
		case *time.Duration:
			fs.DurationVar(p, s.Flag, *p, s.Help)
		case *map[string]string:
			raw := new([]string)
			o.mapFlags[s.Flag] = raw
			fs.StringSliceVar(raw, s.Flag, nil, s.Help)
		default:
			panic(fmt.Sprintf("output setting --%s: no flag for a %T", s.Flag, p))
		}
	}
}

// parseMapFlags parses the map settings' flags into o.def.
func (o *outputFlags) parseMapFlags() error {
	var errs []error
	for _, s := range output.Settings() {
		raw, ok := o.mapFlags[s.Flag]
		if !ok {
			continue
		}
		m, err := parseKeyValues("--"+s.Flag, *raw, true)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		*s.Field(&o.def).(*map[string]string) = m
	}
	return errors.Join(errs...)
}

// validate checks the flags and completes the export config.
func (o *outputFlags) validate() error {
	var errs []error
	if o.profilingDuration < time.Second {
		errs = append(errs, fmt.Errorf("--profiling-duration=%v: must be at least 1s", o.profilingDuration))
	}
	if err := o.parseMapFlags(); err != nil {
		errs = append(errs, err)
	}
	if err := o.parca.validate(&o.def.Format); err != nil {
		errs = append(errs, err)
	}
	if spec, ok := output.Lookup(o.def.Format); !ok || !spec.Remote {
		errs = append(errs, fmt.Errorf("--%s: remote store format %q: want %s", flagFormat, o.def.Format, output.FormatNames(func(s output.Spec) bool { return s.Remote })))
	}
	if err := errors.Join(o.def.Remote.Validate(), o.def.Queue.Validate()); err != nil {
		errs = append(errs, fmt.Errorf("remote store flags: %w", err))
	}
	if err := o.loadOutputs(); err != nil {
		errs = append(errs, err)
	}
	if o.def.Remote.Address == "" && o.def.Dir == "" && len(o.fileOutputs) == 0 {
		errs = append(errs, errors.New("neither --remote-store-address nor --output-dir is set: flushes would go nowhere"))
	}
	if err := o.debuginfo.validate(o.symbolOutput()); err != nil {
		errs = append(errs, err)
	}
	if err := o.symbolize.validate(); err != nil {
		errs = append(errs, err)
	}
	if err := o.logging.validate(&o.def.Remote); err != nil {
		errs = append(errs, err)
	}
	if o.maxLinks < 0 || o.maxLinks > aggregate.MaxLinksPerFlushLimit {
		errs = append(errs, fmt.Errorf("--max-links-per-flush=%d: must be 0 to %d", o.maxLinks, aggregate.MaxLinksPerFlushLimit))
	}
	if err := o.validateGzipLevel(); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return cli.Usage(errors.Join(errs...))
	}
	// grpc-go has one gzip compressor per process (export.RegisterGzip,
	// from main): its level is set here, before anything is dialed.
	if err := export.SetGzipLevel(o.gzipLevel); err != nil {
		return fmt.Errorf("--remote-store-compression-level: %w", err)
	}
	return nil
}

// validateGzipLevel checks --remote-store-compression-level: in range, and
// given only when some output sends gzip-compressed OTLP.
func (o *outputFlags) validateGzipLevel() error {
	if o.gzipLevel < export.MinGzipLevel || o.gzipLevel > export.MaxGzipLevel {
		return fmt.Errorf("--remote-store-compression-level=%d: want %d (fastest) to %d (smallest); --remote-store-compression=none for no compression",
			o.gzipLevel, export.MinGzipLevel, export.MaxGzipLevel)
	}
	if o.fs == nil || !o.fs.Changed("remote-store-compression-level") {
		return nil
	}
	used := false
	for _, c := range o.outputs() {
		spec, _ := output.Lookup(c.Format)
		used = used || (spec.Remote && spec.Compressed && c.Remote.Compression == export.CompressionGzip)
	}
	if !used {
		return fmt.Errorf("--remote-store-compression-level=%d has no effect: no output sends gzip-compressed OTLP (format otlp, compression gzip)", o.gzipLevel)
	}
	return nil
}

// parseKeyValues reads a repeatable flag's key=value items, each possibly
// several separated with ';' (parca-agent's map syntax). A later key wins;
// values may be empty only when allowEmpty is set.
func parseKeyValues(flag string, raw []string, allowEmpty bool) (map[string]string, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	out := make(map[string]string)
	for _, item := range raw {
		for _, kv := range strings.Split(item, ";") {
			if strings.TrimSpace(kv) == "" {
				continue
			}
			k, v, ok := strings.Cut(kv, "=")
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			if !ok || k == "" || (v == "" && !allowEmpty) {
				return nil, fmt.Errorf("%s: %q is not key=value", flag, kv)
			}
			out[k] = v
		}
	}
	return out, nil
}

// defaultOutput names the output the --remote-store-* or --output-dir
// flags define.
const defaultOutput = "default"

// filesOutput names the pprof files output --output-dir adds when it is
// given beside --remote-store-address.
const filesOutput = "files"

// loadOutputs reads the outputs --config-path lists. They replace the
// default output, so giving --remote-store-address or --output-dir too is
// a contradiction.
func (o *outputFlags) loadOutputs() error {
	path := o.parca.labels.configPath
	if path == "" {
		return nil
	}
	cfgs, err := output.LoadConfigFile(path, o.outputBase)
	if errors.Is(err, output.ErrNotYAML) {
		return nil // the label flags, which read the file too, report it once
	}
	if err != nil {
		return fmt.Errorf("--config-path: %w", err)
	}
	if len(cfgs) == 0 {
		return nil
	}
	var clash []string
	if o.def.Remote.Address != "" {
		clash = append(clash, "--remote-store-address")
	}
	if o.fs != nil {
		// The flags that describe only the default output (and the
		// deprecated aliases of --remote-store-format); the others are
		// every entry's defaults.
		names := []string{flagUseV2, flagUseV2Old}
		for _, s := range output.Settings() {
			if s.Flag != "" && !s.EveryOutput && s.Flag != "remote-store-address" {
				names = append(names, s.Flag)
			}
		}
		for _, name := range names {
			if o.fs.Changed(name) {
				clash = append(clash, "--"+name)
			}
		}
	}
	if len(clash) > 0 {
		return fmt.Errorf("--config-path %s lists outputs, which replace the default output %s defines: use one or the other", path, strings.Join(clash, " and "))
	}
	o.fileOutputs = cfgs
	return nil
}

// outputBase is an outputs entry's defaults: the package defaults, with the
// values of the flags that are every output's (the connection timeout,
// message size and queue flags) and the default output's retry policy.
func (o *outputFlags) outputBase(name, format string) output.Config {
	c := output.WithEveryOutputFlags(output.DefaultConfig(name, format), o.def)
	c.Queue.Retry = o.def.Queue.Retry
	return c
}

// outputs returns the outputs the flags define, without their OTLP
// encoder's configuration (outputConfigs adds it): the outputs file's, or
// the default output, to the remote store or pprof files in --output-dir.
func (o *outputFlags) outputs() []output.Config {
	if len(o.fileOutputs) > 0 {
		return slices.Clone(o.fileOutputs)
	}
	if o.def.Remote.Address == "" {
		c := o.outputBase(defaultOutput, output.FormatPprof)
		c.Dir, c.MaxBytes = o.def.Dir, o.def.MaxBytes
		return []output.Config{c}
	}
	c := o.outputBase(defaultOutput, o.def.Format)
	c.Remote, c.Queue = o.def.Remote, o.def.Queue
	outs := []output.Config{c}
	if o.fs != nil && o.fs.Changed("output-dir") && o.def.Dir != "" {
		// Both given: the files too (make run's TANDEM_REMOTE_STORE_ADDRESS
		// adds a remote store to ./profiles), not one of them ignored.
		files := o.outputBase(filesOutput, output.FormatPprof)
		files.Dir, files.MaxBytes = o.def.Dir, o.def.MaxBytes
		outs = append(outs, files)
	}
	return outs
}

// symbolOutput is the output whose address (unless --debuginfo-address is
// given) and credentials symbol upload uses: the first whose backend takes
// symbol uploads, else the first remote one; with neither, the
// --remote-store-* connection flags without an address.
func (o *outputFlags) symbolOutput() output.Config {
	if c, ok := output.SymbolOutput(o.outputs()); ok {
		return c
	}
	return output.Config{Remote: o.def.Remote}
}

// otlpConfig is the OTLP encoder's configuration. When symbols are
// uploaded, executables without a GNU build id are uploaded under their
// file id, so their mappings carry it as the GNU build id too: Parca's
// OTLP ingestion looks symbols up by that attribute alone.
func (o *outputFlags) otlpConfig() otlp.Config {
	cfg := otlp.DefaultConfig()
	symbols, _ := o.debuginfo.target(o.symbolOutput())
	cfg.FileIDAsGNUBuildID = symbols != ""
	return cfg
}

// outputConfigs returns the outputs the flags define, complete.
func (o *outputFlags) outputConfigs() []output.Config {
	cfgs := o.outputs()
	for i := range cfgs {
		cfgs[i].OTLP = o.otlpConfig()
	}
	return cfgs
}

// dialRemote dials the remote store, or returns nil without
// --remote-store-address. The profile exporter and --otlp-logging share
// the connection; the caller closes it.
func dialRemote(o *outputFlags, reg prometheus.Registerer) (*grpc.ClientConn, error) {
	if o.def.Remote.Address == "" {
		return nil, nil
	}
	conn, err := export.Dial(o.def.Remote, prometheus.WrapRegistererWith(prometheus.Labels{"output": defaultOutput}, reg))
	if err != nil {
		return nil, fmt.Errorf("dial remote store %s: %w", o.def.Remote.Address, err)
	}
	return conn, nil
}

// encoderPipeline is the shipped pipeline and the symbol uploader beside it.
type encoderPipeline struct {
	*pipeline.Pipeline
	execs *executables.Router
}

// newPipeline builds the outputs and the pipeline over them. conn is the
// remote store connection from dialRemote (nil without an address); the
// default output uses it but does not close it. queue adjusts every
// output's delivery policy (replay's).
func newPipeline(o *outputFlags, conn *grpc.ClientConn, logger *slog.Logger, reg prometheus.Registerer, pcfg pipeline.Config, queue func(*export.QueueConfig)) (*encoderPipeline, error) {
	labeler, err := labels.New(o.parca.labelConfig, reg)
	if err != nil {
		return nil, fmt.Errorf("create labeler: %w", err)
	}
	sym, err := o.symbolize.newSymbolizer(o.outputConfigs(), logger, reg)
	if err != nil {
		return nil, err
	}
	execs, err := newExecutables(o, sym, logger, reg)
	if err != nil {
		if sym != nil {
			sym.Close()
		}
		return nil, err
	}
	if sym != nil {
		pcfg.Aggregator.Symbolizer = sym
	}
	pcfg.Aggregator.MaxLinksPerFlush = o.maxLinks
	var outs []*output.Output
	fail := func(err error) (*encoderPipeline, error) {
		for _, out := range outs {
			_ = out.Close(context.Background())
		}
		_ = execs.Close(context.Background())
		return nil, err
	}
	for _, cfg := range o.outputConfigs() {
		if queue != nil {
			queue(&cfg.Queue)
		}
		deps := output.Deps{Logger: logger, Registerer: reg, Labeler: labeler}
		if cfg.Name == defaultOutput {
			deps.Conn = conn
		}
		if spec, _ := output.Lookup(cfg.Format); sym != nil && o.symbolize.forFormat(spec) && !spec.NativeSymbols {
			deps.Transform = output.NameLocations // its encoder reads Location.Function only
		}
		out, err := output.Open(cfg, deps)
		if err != nil {
			return fail(err)
		}
		outs = append(outs, out)
	}
	p, err := pipeline.New(pcfg, outs, execs, logger, reg)
	if err != nil {
		return fail(err)
	}
	return &encoderPipeline{Pipeline: p, execs: execs}, nil
}

// close drains the outputs (bounded by ctx) and stops symbol upload.
func (p *encoderPipeline) close(ctx context.Context) error {
	return errors.Join(p.Close(ctx), p.execs.Close(ctx))
}
