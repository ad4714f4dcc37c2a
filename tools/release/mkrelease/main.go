package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/tandem-profiler/tandem/tools/release"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	fs := flag.NewFlagSet("mkrelease "+os.Args[1], flag.ExitOnError)
	var err error
	switch os.Args[1] {
	case "build":
		out := fs.String("out", "bin/release", "release directory (replaced)")
		_ = fs.Parse(os.Args[2:])
		err = build(*out)
	case "image":
		out := fs.String("out", "bin/tandem-image.oci.tar", "image archive to write")
		_ = fs.Parse(os.Args[2:])
		err = image(*out)
	case "push":
		dir := fs.String("dir", "bin/release", "release directory (make release)")
		host := fs.String("registry", "", "registry host[:port] to push the image and the chart to")
		_ = fs.Parse(os.Args[2:])
		if *host == "" {
			err = errors.New("push: --registry is required")
			break
		}
		var p *release.Pushed
		if p, err = release.Push(ctx, *dir, *host); err == nil {
			fmt.Printf("image %s@%s\nchart %s --version %s\n", p.Image, p.ImageDigest, p.Chart, p.ChartVersion)
		}
	case "version":
		var src release.Source
		if src, err = release.Describe("."); err == nil {
			fmt.Println(src.Version)
		}
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "mkrelease: %v\n", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: mkrelease build|image|push|version [flags] (run in the repository's root)")
	os.Exit(2)
}

func build(out string) error {
	src, err := release.Describe(".")
	if err != nil {
		return err
	}
	scratch, err := os.MkdirTemp("", "tandem-release-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	m, err := release.Build(src, out, scratch)
	if err != nil {
		return err
	}
	fmt.Printf("%s: tandem %s\n", out, m.Version)
	for _, f := range append([]string{m.Image, m.Chart}, m.Packages...) {
		st, err := os.Stat(filepath.Join(out, f))
		if err != nil {
			return err
		}
		fmt.Printf("  %-60s %10d bytes\n", f, st.Size())
	}
	fmt.Printf("  image %s@%s\n", m.ImageRef, m.ImageDigest)
	return nil
}

// image writes the image alone, as make release does.
func image(out string) error {
	src, err := release.Describe(".")
	if err != nil {
		return err
	}
	scratch, err := os.MkdirTemp("", "tandem-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	var bins []release.Binaries
	for _, p := range release.Platforms {
		b, err := release.BuildBinaries(src, p, filepath.Join(scratch, p.OS+"_"+p.Arch))
		if err != nil {
			return err
		}
		bins = append(bins, b)
	}
	ch, err := release.LoadChart(src.Root)
	if err != nil {
		return err
	}
	repo, err := release.ImageRepository(ch)
	if err != nil {
		return err
	}
	ref := release.ImageRef(repo, src.Version)
	digest, err := release.WriteImage(src, bins, ref, out)
	if err != nil {
		return err
	}
	st, err := os.Stat(out)
	if err != nil {
		return err
	}
	fmt.Printf("%s %s %s (%d bytes)\n", out, ref, digest, st.Size())
	return nil
}
