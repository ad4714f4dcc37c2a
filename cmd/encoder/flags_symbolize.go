package main

import (
	"errors"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/pflag"

	"github.com/tandem-profiler/tandem/encoder/output"
	"github.com/tandem-profiler/tandem/encoder/symbolize"
)

// --symbolize-native values.
const (
	symbolizeAuto = "auto"
	symbolizeOn   = "on"
	symbolizeOff  = "off"
)

// symbolizeFlags are the native symbolization flags (serve and replay).
type symbolizeFlags struct {
	mode string
	cfg  symbolize.Config
}

func (s *symbolizeFlags) register(fs *pflag.FlagSet) {
	s.cfg = symbolize.DefaultConfig()
	c := &s.cfg
	fs.StringVar(&s.mode, "symbolize-native", symbolizeAuto, "name native frames (C, C++, Rust, Go) in the encoder from the executables the sampler passes: "+
		"auto (for OTLP and pprof outputs; the Parca formats leave them to the server, which symbolizes uploads), on (every output) or off")
	fs.Int64Var(&c.CacheBytes, "symbolizer-cache-bytes", c.CacheBytes, "bound on the symbol tables held in memory (least recently used evicted, parsed again when needed)")
	fs.IntVar(&c.MaxFiles, "max-held-executables", c.MaxFiles, "executable descriptors the encoder holds to read symbols from; past it the least recently used is closed (counted in tandem_encoder_executables_evicted_total{bound=\"count\"})")
	fs.Int64Var(&c.MaxHeldBytes, "max-held-executable-bytes", c.MaxHeldBytes, "bound on the sizes of the files whose descriptors the encoder holds, the disk a deleted executable's descriptor keeps from being reclaimed; "+
		"past it the least recently used is closed (counted, bound=\"bytes\"). A deleted executable's descriptor is closed anyway once its symbols are read")
	fs.IntVar(&c.MaxFiles, "symbolizer-max-files", c.MaxFiles, "old name of --max-held-executables")
	_ = fs.MarkDeprecated("symbolizer-max-files", "use --max-held-executables")
	fs.DurationVar(&c.ParseTimeout, "symbolizer-parse-timeout", c.ParseTimeout, "give up on an executable whose symbols take longer than this to read")
	fs.StringSliceVar(&c.DebugDirs, "debuginfo-directories", c.DebugDirs, "ordered list of local directories searched for the separate debug files of stripped executables "+
		"(by build id, <dir>/.build-id/xx/yyyy.debug, and by .gnu_debuglink), read-only, for their full symbol tables; empty turns the search off")
}

func (s *symbolizeFlags) validate() error {
	switch s.mode {
	case symbolizeAuto, symbolizeOn, symbolizeOff:
	default:
		return fmt.Errorf("--symbolize-native=%q: must be auto, on or off", s.mode)
	}
	if s.mode == symbolizeOff {
		return nil
	}
	if err := s.cfg.Validate(); err != nil {
		return errors.Join(errors.New("symbolizer flags (--symbolizer-*, --debuginfo-directories)"), err)
	}
	return nil
}

// forFormat reports whether an output of this format gets native frames
// named by the encoder.
func (s *symbolizeFlags) forFormat(spec output.Spec) bool {
	switch s.mode {
	case symbolizeOn:
		return true
	case symbolizeAuto:
		return spec.NativeSymbols
	}
	return false
}

// newSymbolizer returns the Symbolizer when some output wants native frames
// named, else nil.
func (s *symbolizeFlags) newSymbolizer(outs []output.Config, logger *slog.Logger, reg prometheus.Registerer) (*symbolize.Symbolizer, error) {
	var names []string
	for _, o := range outs {
		if spec, _ := output.Lookup(o.Format); s.forFormat(spec) {
			names = append(names, o.Name)
		}
	}
	if len(names) == 0 {
		logger.Info("native symbolization off", "symbolize_native", s.mode)
		return nil, nil
	}
	sym, err := symbolize.New(s.cfg, logger.With("component", "symbolize"), reg)
	if err != nil {
		return nil, fmt.Errorf("start the symbolizer: %w", err)
	}
	logger.Info("naming native frames in the encoder", "outputs", names, "cache_bytes", s.cfg.CacheBytes, "debuginfo_directories", s.cfg.DebugDirs)
	return sym, nil
}
