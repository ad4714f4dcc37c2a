package cluster

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/tandem-profiler/tandem/tools/ociimage"
)

// File is one file of an Image.
type File struct {
	Path   string // in the image, absolute
	Source string // on the host
	Mode   int64
}

// Image is an image of a few static binaries on no base (the pause
// image, a test's workload).
type Image struct {
	Files      []File
	Entrypoint []string
	User       string

	_ struct{}
}

// WriteImage writes img as an OCI archive named ref to path, for
// ImportImage.
func WriteImage(path, ref string, img Image) error {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, f := range img.Files {
		data, err := os.ReadFile(f.Source)
		if err != nil {
			return fmt.Errorf("image %s: %w", ref, err)
		}
		h := &tar.Header{Name: f.Path[1:], Mode: f.Mode, Size: int64(len(data)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b.Bytes())), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return fmt.Errorf("image %s: %w", ref, err)
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	im, err := mutate.AppendLayers(base, layer)
	if err != nil {
		return fmt.Errorf("image %s: %w", ref, err)
	}
	im, err = mutate.ConfigFile(im, &v1.ConfigFile{
		Architecture: "amd64", OS: "linux", RootFS: v1.RootFS{Type: "layers", DiffIDs: mustDiffIDs(layer)},
		Config: v1.Config{Entrypoint: img.Entrypoint, User: img.User, WorkingDir: "/"},
	})
	if err != nil {
		return fmt.Errorf("image %s: %w", ref, err)
	}
	return ociimage.WriteArchive(im, ref, path)
}

func mustDiffIDs(l v1.Layer) []v1.Hash {
	h, err := l.DiffID()
	if err != nil {
		return nil
	}
	return []v1.Hash{h}
}
