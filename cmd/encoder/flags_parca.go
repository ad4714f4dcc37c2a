package main

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/tandem-profiler/tandem/encoder/labels"
	"github.com/tandem-profiler/tandem/encoder/output"
	"github.com/tandem-profiler/tandem/internal/cli"
)

// parcaFlags are the flags of the Parca (Arrow) export paths: parca-agent's
// deprecated schema booleans and the label flags (flags_labels.go).
type parcaFlags struct {
	fs       *pflag.FlagSet
	useV2    bool // --remote-store-use-v2-schema
	useV2Old bool // --use-v2-schema
	labels   labelFlags
	// labelConfig is the label flags' result, set by validate.
	labelConfig labels.Config
}

// Deprecated boolean flags that select an Arrow schema.
const (
	flagUseV2    = "remote-store-use-v2-schema"
	flagUseV2Old = "use-v2-schema"
	flagFormat   = "remote-store-format"
)

func (p *parcaFlags) register(fs *pflag.FlagSet) {
	p.fs = fs
	fs.BoolVar(&p.useV2, flagUseV2, true, "deprecated: true means --remote-store-format=arrow-v2, false means arrow-v1")
	fs.BoolVar(&p.useV2Old, flagUseV2Old, true, "deprecated alias of --remote-store-use-v2-schema")
	_ = fs.MarkDeprecated(flagUseV2, "use --remote-store-format=arrow-v2 or arrow-v1")
	_ = fs.MarkDeprecated(flagUseV2Old, "use --remote-store-format=arrow-v2 or arrow-v1")
	p.labels.register(fs)
}

// validate maps the deprecated booleans onto *format (--remote-store-format)
// and reads the label flags. A boolean that contradicts --remote-store-format (or the other
// boolean) is an error naming both flags.
func (p *parcaFlags) validate(format *string) error {
	var errs []error
	chosen, by := "", ""
	for _, b := range []struct {
		name string
		v    bool
	}{{flagUseV2, p.useV2}, {flagUseV2Old, p.useV2Old}} {
		if p.fs == nil || !p.fs.Changed(b.name) {
			continue
		}
		want := output.FormatArrowV1
		if b.v {
			want = output.FormatArrowV2
		}
		switch {
		case chosen != "" && chosen != want:
			errs = append(errs, fmt.Errorf("--%s=%t contradicts --%s (%s)", b.name, b.v, by, chosen))
		case p.fs.Changed(flagFormat) && *format != want:
			errs = append(errs, fmt.Errorf("--%s=%t means --%s=%s, but --%s=%s was given", b.name, b.v, flagFormat, want, flagFormat, *format))
		}
		chosen, by = want, b.name+"="+strconv.FormatBool(b.v)
	}
	if chosen != "" && len(errs) == 0 {
		*format = chosen
	}
	cfg, err := p.labels.config()
	if err != nil {
		errs = append(errs, err)
	}
	p.labelConfig = cfg
	if len(errs) > 0 {
		return cli.Usage(errors.Join(errs...))
	}
	return nil
}
