package release

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"helm.sh/helm/v3/pkg/registry"
)

// ChartRepository is where the chart is published as an OCI artefact, the
// directory `helm push` is given: the chart is ChartRepository/tandem.
const ChartRepository = "ghcr.io/tandem-profiler/charts"

// Pushed says where Push put a release.
type Pushed struct {
	// Image is the image's name in the registry (host/repository:tag),
	// ImageRepository that name without the tag (the chart's
	// image.repository) and ImageDigest the manifest's digest (the chart's
	// image.digest).
	Image, ImageRepository, ImageTag, ImageDigest string
	// Chart is the chart's address for helm install/pull/template
	// (oci://host/path/tandem) and ChartVersion its --version.
	Chart, ChartVersion string
}

// Push copies the image and the chart of the release in dir to the
// registry at host (host:port): the image as host/<the image's repository
// path>:<tag>, the chart as an OCI artefact under host/<ChartRepository's
// path>, as `helm push` does. A registry on a loopback address is spoken
// to over plain HTTP; credentials come from Docker's and Helm's usual
// configuration files.
func Push(ctx context.Context, dir, host string) (*Pushed, error) {
	m, err := ReadManifest(dir)
	if err != nil {
		return nil, err
	}
	plain := isLoopback(host)
	var nameOpts []name.Option
	if plain {
		nameOpts = append(nameOpts, name.Insecure)
	}
	src, err := name.NewTag(m.ImageRef, name.StrictValidation)
	if err != nil {
		return nil, fmt.Errorf("image name %q: %w", m.ImageRef, err)
	}
	p := &Pushed{ImageRepository: host + "/" + src.RepositoryStr(), ImageTag: src.TagStr(), ChartVersion: m.Version}
	p.Image = p.ImageRepository + ":" + p.ImageTag
	dst, err := name.NewTag(p.Image, nameOpts...)
	if err != nil {
		return nil, fmt.Errorf("image name %q: %w", p.Image, err)
	}
	tmp, err := os.MkdirTemp("", "tandem-push-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	idx, img, err := readArchive(filepath.Join(dir, m.Image), m.ImageDigest, tmp)
	if err != nil {
		return nil, err
	}
	// The chart artefact's creation time is the image's (the commit's), so
	// that pushing one release twice gives one digest.
	first, err := platformImage(idx, img, Platforms[0].Arch)
	if err != nil {
		return nil, err
	}
	cf, err := first.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("image config: %w", err)
	}
	created := cf.Created.UTC().Format(time.RFC3339)
	ropts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain)}
	if idx != nil {
		err = remote.WriteIndex(dst, idx, ropts...)
	} else {
		err = remote.Write(dst, img, ropts...)
	}
	if err != nil {
		return nil, fmt.Errorf("push image %s: %w", dst, err)
	}
	p.ImageDigest = m.ImageDigest

	chartData, err := os.ReadFile(filepath.Join(dir, m.Chart))
	if err != nil {
		return nil, fmt.Errorf("read chart: %w", err)
	}
	chartPath := strings.TrimPrefix(ChartRepository, strings.SplitN(ChartRepository, "/", 2)[0])
	base := host + chartPath + "/" + PackageName
	opts := []registry.ClientOption{registry.ClientOptWriter(io.Discard)}
	if plain {
		opts = append(opts, registry.ClientOptPlainHTTP())
	}
	client, err := registry.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("helm registry client: %w", err)
	}
	if _, err := client.Push(chartData, base+":"+m.Version, registry.PushOptCreationTime(created)); err != nil {
		return nil, fmt.Errorf("push chart to %s: %w", base, err)
	}
	p.Chart = "oci://" + base
	return p, nil
}

func isLoopback(host string) bool {
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		h = host
	}
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// readArchive reads what digest names in an OCI archive
// (ociimage.WriteMultiArchive's tar of an OCI image layout), extracted
// into dir, which must outlive it (its blobs are read on demand): an
// image index (several platforms) or, for one platform, an image.
func readArchive(path, digest, dir string) (v1.ImageIndex, v1.Image, error) {
	if err := untar(path, dir); err != nil {
		return nil, nil, err
	}
	lp, err := layout.FromPath(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("image archive %s: %w", path, err)
	}
	h, err := v1.NewHash(digest)
	if err != nil {
		return nil, nil, fmt.Errorf("image digest %q: %w", digest, err)
	}
	if idx, err := lp.ImageIndex(); err == nil {
		if nested, err := idx.ImageIndex(h); err == nil {
			if _, err := nested.IndexManifest(); err == nil {
				return nested, nil, nil
			}
		}
	}
	img, err := lp.Image(h)
	if err != nil {
		return nil, nil, fmt.Errorf("image archive %s has no image or image index %s: %w", path, digest, err)
	}
	return nil, img, nil
}

// platformImage returns arch's image from what readArchive read.
func platformImage(idx v1.ImageIndex, img v1.Image, arch string) (v1.Image, error) {
	if idx == nil {
		return img, nil
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range im.Manifests {
		if d.Platform != nil && d.Platform.OS == "linux" && d.Platform.Architecture == arch {
			return idx.Image(d.Digest)
		}
	}
	return nil, fmt.Errorf("the image index has no linux/%s image", arch)
}

func untar(path, dir string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open image archive: %w", err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read image archive %s: %w", path, err)
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(p, filepath.Clean(dir)+string(filepath.Separator)) {
			return fmt.Errorf("image archive %s: entry %q outside the archive", path, h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			out, err := os.Create(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(out, tr)
			if cerr := out.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return fmt.Errorf("extract %s: %w", h.Name, err)
			}
		}
	}
}
