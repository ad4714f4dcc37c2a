package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/tandem-profiler/tandem/tools/ociimage"
)

func main() {
	var cfg ociimage.Config
	var ref, out, created string
	flag.StringVar(&cfg.SamplerBinary, "sampler", "bin/static/tandem-sampler", "static tandem-sampler")
	flag.StringVar(&cfg.EncoderBinary, "encoder", "bin/static/tandem-encoder", "static tandem-encoder")
	flag.StringVar(&cfg.Version, "version", "", "version label")
	flag.StringVar(&cfg.Revision, "revision", "", "commit the binaries were built from")
	flag.StringVar(&cfg.Source, "source", "https://github.com/tandem-profiler/tandem", "source repository label")
	flag.StringVar(&cfg.Licenses, "licenses", "NOASSERTION", "SPDX license expression label")
	flag.StringVar(&created, "created", "", "creation time, Unix seconds (the commit's time)")
	flag.StringVar(&ref, "ref", "", "image name, registry/repository:tag")
	flag.StringVar(&out, "out", "bin/tandem-image.oci.tar", "archive to write")
	flag.Parse()
	secs, err := strconv.ParseInt(created, 10, 64)
	if err != nil {
		fmt.Fprintf(os.Stderr, "mkimage: --created=%q: want Unix seconds (git log -1 --format=%%ct)\n", created)
		os.Exit(2)
	}
	cfg.Created = time.Unix(secs, 0)
	img, err := ociimage.Build(cfg)
	if err == nil {
		err = ociimage.WriteArchive(img, ref, out)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "mkimage: %v\n", err)
		os.Exit(1)
	}
	digest, _ := img.Digest()
	st, _ := os.Stat(out)
	fmt.Printf("%s %s %s (%d bytes)\n", out, ref, digest, st.Size())
}
