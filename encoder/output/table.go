package output

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tandem-profiler/tandem/encoder/export"
	"github.com/tandem-profiler/tandem/encoder/labels"
)

// Formats an output may have: the names in Formats.
const (
	FormatOTLP    = "otlp"
	FormatArrowV2 = "arrow-v2"
	FormatArrowV1 = "arrow-v1"
	FormatPprof   = "pprof"
)

// Transport is how an output's requests reach its backend.
type Transport string

// Transports.
const (
	// TransportGRPC: RPCs over a gRPC connection to Config.Remote (dialed
	// by Open unless Deps.Conn is given).
	TransportGRPC Transport = "grpc"
	// TransportFile: files written under Config.Dir.
	TransportFile Transport = "file"
)

// Spec is everything the encoder decides by an output's format. Formats
// lists them; validation, Open, the outputs file and the command's flags
// read it instead of switching on the name.
type Spec struct {
	// Name is the format's name in --remote-store-format and an outputs
	// entry's format key.
	Name string
	// Remote: the output sends to a remote store at Config.Remote.Address;
	// otherwise it writes locally.
	Remote bool
	// Transport is how requests travel.
	Transport Transport
	// NativeSymbols: the format's backend does not name native frames, so
	// the encoder does (--symbolize-native=auto), and its encoder reads the
	// symbolizer's native line table. A format without it, symbolized
	// anyway (--symbolize-native=on), gets NameLocations as its Transform.
	NativeSymbols bool
	// SymbolUpload: the backend at the output's address also takes symbol
	// uploads (Parca's DebuginfoService beside its ProfileStoreService).
	SymbolUpload bool
	// Compressed: Config.Remote.Compression applies to its requests (the
	// others compress their own payloads, or send none).
	Compressed bool
	// validate reports the format's own requirements on a Config.
	validate func(c *Config) []error
	// open builds the Format.
	open func(cfg Config, env formatEnv) (Format, error)
}

// formatEnv is what a format's constructor gets besides its Config.
type formatEnv struct {
	client  *export.Client // over the connection; nil for a local format
	labeler *labels.Labeler
	logger  *slog.Logger
	reg     prometheus.Registerer // with the output's label; nil: none
}

// Formats is the format table, in the order help and errors list them.
var Formats = []Spec{
	{
		Name: FormatOTLP, Remote: true, Transport: TransportGRPC, NativeSymbols: true, Compressed: true,
		validate: validateRemote,
		open: func(cfg Config, env formatEnv) (Format, error) {
			env.logger.Info("exporting OTLP/profiles", "address", cfg.Remote.Address, "compression", cfg.Remote.Compression, "insecure", cfg.Remote.Insecure)
			return newOTLPFormat(cfg, env.client)
		},
	},
	{
		Name: FormatArrowV2, Remote: true, Transport: TransportGRPC, SymbolUpload: true,
		validate: validateRemote,
		open:     func(cfg Config, env formatEnv) (Format, error) { return openArrow(cfg, env, true) },
	},
	{
		Name: FormatArrowV1, Remote: true, Transport: TransportGRPC, SymbolUpload: true,
		validate: validateRemote,
		open:     func(cfg Config, env formatEnv) (Format, error) { return openArrow(cfg, env, false) },
	},
	{
		Name: FormatPprof, Transport: TransportFile, NativeSymbols: true,
		validate: func(c *Config) []error {
			var errs []error
			if c.Dir == "" {
				errs = append(errs, errors.New("a pprof output needs a directory (dir)"))
			}
			if c.MaxBytes < 0 {
				errs = append(errs, fmt.Errorf("max_bytes %d: want 0 (keep every file) or more", c.MaxBytes))
			}
			return errs
		},
		open: func(cfg Config, env formatEnv) (Format, error) {
			env.logger.Info("writing pprof files", "dir", cfg.Dir, "max_bytes", cfg.MaxBytes)
			return newPprofFormat(cfg, env)
		},
	},
}

// openArrow opens an Arrow format: v2 (WriteArrow) or v1 (Write).
func openArrow(cfg Config, env formatEnv, v2 bool) (Format, error) {
	env.logger.Info("exporting to Parca's ProfileStoreService", "format", cfg.Format, "address", cfg.Remote.Address,
		"insecure", cfg.Remote.Insecure, "max_message_bytes", cfg.Remote.MaxCallSendMsgSize)
	return newArrowFormat(cfg, env.client, env.labeler, v2)
}

// validateRemote checks a remote format's connection.
func validateRemote(c *Config) []error {
	var errs []error
	if c.Remote.Address == "" {
		errs = append(errs, fmt.Errorf("a %s output needs an address", c.Format))
	}
	if err := c.Remote.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// Lookup returns the format of that name.
func Lookup(name string) (Spec, bool) {
	for _, s := range Formats {
		if s.Name == name {
			return s, true
		}
	}
	return Spec{}, false
}

// FormatNames lists the names of the formats keep selects (nil: all) as
// "a, b or c", for help texts and errors.
func FormatNames(keep func(Spec) bool) string {
	var names []string
	for _, s := range Formats {
		if keep == nil || keep(s) {
			names = append(names, s.Name)
		}
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// SymbolOutput returns the output of outs whose connection symbol upload
// uses (its address, unless another is given, and its credentials): the
// first whose backend takes symbol uploads, else the first remote one;
// false when none is remote.
func SymbolOutput(outs []Config) (Config, bool) {
	for _, takes := range []func(Spec) bool{
		func(s Spec) bool { return s.SymbolUpload },
		func(s Spec) bool { return s.Remote },
	} {
		for _, c := range outs {
			if spec, _ := Lookup(c.Format); takes(spec) {
				return c, true
			}
		}
	}
	return Config{}, false
}
