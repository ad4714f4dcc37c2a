package main

import (
	"errors"

	"github.com/spf13/pflag"

	"github.com/tandem-profiler/tandem/debuginfo"
	"github.com/tandem-profiler/tandem/encoder/output"
)

// debuginfoFlags are the symbol upload flags (serve and replay), named as
// parca-agent names them where it has them.
type debuginfoFlags struct {
	address string
	disable bool
	upload  debuginfo.Config
}

func (d *debuginfoFlags) register(fs *pflag.FlagSet) {
	d.upload = debuginfo.DefaultConfig()
	u := &d.upload
	fs.StringVar(&d.address, "debuginfo-address", "", "gRPC address (host:port) of a Parca DebuginfoService for symbol upload, dialed with the --remote-store-* TLS, token and headers; "+
		"defaults to --remote-store-address for the arrow formats (an OTLP receiver is not a Parca server)")
	fs.BoolVar(&d.disable, "debuginfo-upload-disable", false, "do not upload executables' symbols")
	fs.BoolVar(&u.Strip, "debuginfo-strip", u.Strip, "upload only the debug, symbol, string, Go, relocation/PLT and note sections of each executable, as parca-agent does (false: the whole file)")
	fs.StringVar(&u.TempDir, "debuginfo-temp-dir", u.TempDir, "scratch space for stripped copies; its tandem-debuginfo subdirectory is emptied at start")
	fs.IntVar(&u.QueueSize, "debuginfo-upload-queue-size", u.QueueSize, "executables waiting for upload; beyond it new ones are dropped (counted)")
	fs.IntVar(&u.MaxParallel, "debuginfo-upload-max-parallel", u.MaxParallel, "concurrent uploads")
	fs.DurationVar(&u.Timeout, "debuginfo-upload-timeout", u.Timeout, "bound on one upload, retries included")
}

// target returns where symbols go, given the output symbolOutput chose, or
// "" and why upload is off.
func (d *debuginfoFlags) target(out output.Config) (address, off string) {
	spec, _ := output.Lookup(out.Format)
	switch {
	case d.disable:
		return "", "--debuginfo-upload-disable"
	case d.address != "":
		return d.address, ""
	case out.Remote.Address != "" && spec.SymbolUpload:
		return out.Remote.Address, "" // a Parca server: profiles and symbols to one host
	case out.Remote.Address == "":
		return "", "no --remote-store-address and no --debuginfo-address: profiles go to pprof files and symbols nowhere"
	}
	// An OTLP receiver takes no symbols: native frames are named in the
	// encoder instead (--symbolize-native).
	return "", "an OTLP receiver takes no symbols and there is no --debuginfo-address"
}

// validate checks the symbol upload flags, given the output symbolOutput
// chose.
func (d *debuginfoFlags) validate(out output.Config) error {
	if d.disable {
		return nil
	}
	if address, _ := d.target(out); address == "" {
		return nil
	}
	if err := d.upload.Validate(); err != nil {
		return errors.Join(errors.New("symbol upload flags"), err)
	}
	return nil
}
