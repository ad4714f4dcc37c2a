package output

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/tandem-profiler/tandem/encoder/aggregate"
	"github.com/tandem-profiler/tandem/encoder/arrow"
	"github.com/tandem-profiler/tandem/encoder/export"
	"github.com/tandem-profiler/tandem/encoder/labels"
	"github.com/tandem-profiler/tandem/encoder/otlp"
)

// Format encodes flushes for one kind of backend. Encode is called from
// one goroutine at a time; the flush it gets stays valid until the request
// it returns is released, so a request may keep reading it.
type Format interface {
	Encode(f *aggregate.Flush) (export.Request, error)
	Close() error
}

// Transform rewrites a flush for one output before it is encoded (for
// example, symbolizing native frames for a backend that cannot). out must
// stay valid until release is called, which happens once the output is done
// with the flush; release may be nil. Returning f itself is allowed.
type Transform func(f *aggregate.Flush) (out *aggregate.Flush, release func(), err error)

// Config describes one output. It is plain data. Its tags, and those of
// the export.Config and export.QueueConfig inside it, are the one
// description of an output's settings: their keys in an outputs entry
// (yaml), their flags and help, and the transport they apply to (see
// Settings).
type Config struct {
	// Name labels the output's metrics and log lines; unique in a pipeline.
	Name string `yaml:"name" help:"labels the output's metrics and log lines; unique among the outputs (letters, digits, '_', '-', '.')"`
	// Format is the name of one of Formats.
	Format string `yaml:"format" flag:"remote-store-format" help:"profile encoding: otlp (OTLP/profiles), arrow-v2 (Parca WriteArrow) or arrow-v1 (Parca Write stream); an outputs entry may also be pprof (gzipped pprof files)"`
	// Remote is the connection of a remote format (address, TLS,
	// credentials, compression, message sizes).
	Remote export.Config `yaml:",inline" transport:"grpc"`
	// Dir is a file format's output directory.
	Dir string `yaml:"dir" flag:"output-dir" transport:"file" help:"write each flush here as a gzipped pprof file: the default without --remote-store-address; given with it, as well as exporting (an output named files)"`
	// MaxBytes bounds the bytes of a file format's files kept in Dir.
	MaxBytes int `yaml:"max_bytes" flag:"output-dir-max-bytes" transport:"file" help:"keep at most this many bytes of pprof files in the directory: after each file, the oldest are deleted (tandem_encoder_pprof_files_deleted_total); 0 keeps every file"`
	// Queue bounds what the output holds while its backend is down and
	// says how it retries (every format).
	Queue export.QueueConfig `yaml:",inline"`
	// OTLP is the OTLP encoder's configuration; Arrow the Arrow encoders'
	// (its MaxMessageBytes is set from Remote.MaxCallSendMsgSize).
	OTLP  otlp.Config  `yaml:"-"`
	Arrow arrow.Config `yaml:"-"`

	_ struct{}
}

// DefaultConfig returns an output of the given name and format with every
// default set.
func DefaultConfig(name, format string) Config {
	return Config{Name: name, Format: format, Remote: export.DefaultConfig(), Queue: export.DefaultQueueConfig(),
		OTLP: otlp.DefaultConfig(), Arrow: arrow.DefaultConfig()}
}

var validName = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// Validate reports every problem with the configuration.
func (c Config) Validate() error {
	var errs []error
	if !validName.MatchString(c.Name) {
		errs = append(errs, fmt.Errorf("output name %q: want letters, digits, '_', '-' or '.'", c.Name))
	}
	if spec, ok := Lookup(c.Format); ok {
		errs = append(errs, spec.validate(&c)...)
	} else {
		errs = append(errs, fmt.Errorf("output format %q: want %s", c.Format, FormatNames(nil)))
	}
	if err := c.Queue.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Deps are an output's live dependencies.
type Deps struct {
	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// Conn is the remote store connection to use (the caller closes it);
	// nil makes Open dial Config.Remote and the Output close it.
	Conn *grpc.ClientConn
	// Labeler labels the samples of the formats that carry labels (Arrow's
	// rows), shared by all outputs: the label flags are global. nil means
	// no labels beyond the defaults.
	Labeler *labels.Labeler
	// Transform, if not nil, rewrites each flush for this output.
	Transform Transform
}

// Output is one destination of flushes: a Format, an optional Transform and
// an Exporter (its own queue, retries and metrics).
type Output struct {
	name      string
	format    Format
	transform Transform
	exp       *export.Exporter
	conn      *grpc.ClientConn
	ownConn   bool
	logger    *slog.Logger
}

// Open builds the output cfg describes.
func Open(cfg Config, deps Deps) (*Output, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("output %s: %w", cfg.Name, err)
	}
	logger := deps.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	logger = logger.With("output", cfg.Name)
	o := &Output{name: cfg.Name, transform: deps.Transform, logger: logger}
	spec, _ := Lookup(cfg.Format) // Validate checked it
	env := formatEnv{labeler: deps.Labeler, logger: logger}
	if deps.Registerer != nil {
		env.reg = prometheus.WrapRegistererWith(prometheus.Labels{"output": cfg.Name}, deps.Registerer)
	}
	var err error
	if spec.Transport == TransportGRPC {
		o.conn = deps.Conn
		if o.conn == nil {
			var reg prometheus.Registerer
			if deps.Registerer != nil {
				reg = prometheus.WrapRegistererWith(prometheus.Labels{"output": cfg.Name}, deps.Registerer)
			}
			if o.conn, err = export.Dial(cfg.Remote, reg); err != nil {
				return nil, fmt.Errorf("output %s: %w", cfg.Name, err)
			}
			o.ownConn = true
		}
		env.client = export.NewClient(cfg.Remote, o.conn)
	}
	o.format, err = spec.open(cfg, env)
	if err == nil {
		if o.exp, err = export.New(cfg.Queue, cfg.Name, logger, deps.Registerer); err != nil {
			_ = o.format.Close()
		}
	}
	if err != nil {
		o.closeConn()
		return nil, fmt.Errorf("output %s: %w", cfg.Name, err)
	}
	return o, nil
}

// Name returns the output's name.
func (o *Output) Name() string { return o.name }

// Conn returns the output's remote store connection (nil for a local
// format).
func (o *Output) Conn() *grpc.ClientConn { return o.conn }

// Submit transforms, encodes and queues f; done gets what became of its
// samples, exactly once.
func (o *Output) Submit(f *aggregate.Flush, done func(export.Result)) {
	in, release := f, func() {}
	if o.transform != nil {
		out, rel, err := o.transform(f)
		if err != nil {
			o.logger.Error("transform the flush; its samples are lost", "err", err)
			done(lostResult(f.Events, reasonEncode, err))
			return
		}
		in = out
		if rel != nil {
			release = rel
		}
	}
	req, err := o.format.Encode(in)
	if err != nil {
		release()
		o.logger.Error("encode the flush; its samples are lost", "err", err)
		done(lostResult(f.Events, reasonEncode, err))
		return
	}
	o.exp.Submit(releasing{req, release}, done)
}

// releasing adds the transform's release to a request's.
type releasing struct {
	export.Request
	release func()
}

func (r releasing) Release() { r.Request.Release(); r.release() }

// reasonEncode: the flush could not be encoded (or transformed) for the
// output.
const reasonEncode = "encode_failed"

func lostResult(n int, reason string, err error) export.Result {
	r := export.Result{Err: err}
	if n > 0 {
		r.Lost = map[string]int{reason: n}
	}
	return r
}

// Ready returns nil unless the output is failing: its last attempt failed
// (an unwritable directory counts), or its connection refuses to connect
// (TRANSIENT_FAILURE). A connection that is idle or connecting is ready, so
// a merely slow backend does not take the encoder out of service.
func (o *Output) Ready() error {
	if err := o.exp.Failing(); err != nil {
		return err
	}
	if o.conn != nil {
		if s := o.conn.GetState(); s == connectivity.TransientFailure || s == connectivity.Shutdown {
			return fmt.Errorf("remote store connection is %s", s)
		}
	}
	return nil
}

// Close drains the output's queue (bounded by ctx), then closes its format
// and the connection it dialed.
func (o *Output) Close(ctx context.Context) error {
	err := o.exp.Close(ctx)
	err = errors.Join(err, o.format.Close())
	o.closeConn()
	return err
}

func (o *Output) closeConn() {
	if o.ownConn && o.conn != nil {
		_ = o.conn.Close()
	}
}
