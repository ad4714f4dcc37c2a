package release

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/tandem-profiler/tandem/tools/ociimage"
)

// License is Tandem's licence (the file LICENSE), as an SPDX expression:
// the image's org.opencontainers.image.licenses label and the packages'
// licence field.
const License = "Apache-2.0"

// SourceURL is the repository's address, for labels and package metadata.
const SourceURL = "https://github.com/tandem-profiler/tandem"

// StaticScript builds the static binaries the image and the packages
// hold; relative to the repository's root.
const StaticScript = "deploy/container/build-static.sh"

// Binaries are one platform's static tandem-sampler and tandem-encoder.
type Binaries struct {
	Platform         Platform
	Sampler, Encoder string
}

// BuildBinaries builds the static binaries for p into dir with
// build-static.sh (the script every image build uses), stamped with the
// version.
func BuildBinaries(src Source, p Platform, dir string) (Binaries, error) {
	cmd := exec.Command(filepath.Join(src.Root, StaticScript), dir)
	cmd.Dir = src.Root
	cmd.Env = append(os.Environ(), "VERSION="+src.Version, "GOOS="+p.OS, "GOARCH="+p.Arch)
	if out, err := cmd.CombinedOutput(); err != nil {
		return Binaries{}, fmt.Errorf("build the %s binaries (%s): %w\n%s", p, StaticScript, err, out)
	}
	return Binaries{Platform: p, Sampler: filepath.Join(dir, "tandem-sampler"), Encoder: filepath.Join(dir, "tandem-encoder")}, nil
}

// ImageRef is the image's name: the chart's default image.repository,
// tagged with ImageTag(version).
func ImageRef(repository, version string) string { return repository + ":" + ImageTag(version) }

// WriteImage builds the image of each platform's binaries and writes them
// to path as one OCI archive named ref: with several platforms, one image
// index (a multi-platform image) listing each. It returns the digest ref
// names (the index's, or the one image's).
func WriteImage(src Source, bins []Binaries, ref, path string) (v1.Hash, error) {
	var imgs []v1.Image
	for _, b := range bins {
		img, err := ociimage.Build(ociimage.Config{
			SamplerBinary: b.Sampler, EncoderBinary: b.Encoder,
			Version: src.Version, Revision: src.Revision, Source: SourceURL, Licenses: License,
			Authors: Maintainer.Contact() + " " + Maintainer.URL, Vendor: Maintainer.Name,
			Arch: b.Platform.Arch, Created: src.Created,
		})
		if err != nil {
			return v1.Hash{}, fmt.Errorf("build the %s image: %w", b.Platform, err)
		}
		imgs = append(imgs, img)
	}
	return ociimage.WriteMultiArchive(imgs, ref, path)
}
