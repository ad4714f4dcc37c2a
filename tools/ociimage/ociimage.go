package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// Where things are in the image.
const (
	SamplerPath  = "/tandem-sampler"
	EncoderPath  = "/tandem-encoder"
	CABundlePath = "/etc/ssl/certs/ca-certificates.crt"
)

// NonRootUID is the image's default user and the encoder's uid in the pod
// (distroless's nonroot).
const NonRootUID = 65532

// Config says what goes into the image.
type Config struct {
	// SamplerBinary and EncoderBinary are the static binaries' paths.
	SamplerBinary, EncoderBinary string
	// Version, Revision (the commit) and Source (the repository's URL)
	// become OCI labels.
	Version, Revision, Source string
	// Licenses is the SPDX expression of the org.opencontainers.image.licenses label.
	Licenses string
	// Authors and Vendor, when set, are the org.opencontainers.image.authors
	// (who to contact) and org.opencontainers.image.vendor labels.
	Authors, Vendor string
	// Arch is the binaries' architecture, in Go's (and OCI's) name: amd64, arm64.
	Arch string
	// Created is the image's creation time and every file's time: the
	// commit's time, so that one commit gives one digest.
	Created time.Time

	_ struct{}
}

// Validate reports every missing field.
func (c Config) Validate() error {
	var errs []error
	for _, f := range []struct{ name, v string }{
		{"sampler binary", c.SamplerBinary}, {"encoder binary", c.EncoderBinary},
		{"version", c.Version}, {"revision", c.Revision}, {"source", c.Source}, {"licenses", c.Licenses},
		{"architecture", c.Arch},
	} {
		if f.v == "" {
			errs = append(errs, fmt.Errorf("image config: no %s", f.name))
		}
	}
	if c.Created.IsZero() {
		errs = append(errs, errors.New("image config: no creation time (use the commit's time)"))
	}
	return errors.Join(errs...)
}

// passwd and group name root and nonroot: runAsNonRoot needs a numeric
// user, and tools that resolve the uid find a name.
var (
	passwd = fmt.Sprintf("root:x:0:0:root:/:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/:/sbin/nologin\n", NonRootUID, NonRootUID)
	group  = fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", NonRootUID)
)

// CABundle returns the PEM bundle of the NSS roots that carry no extra
// constraint (a PEM file cannot express a distrust-after date, so such
// roots are left out rather than trusted without it).
func CABundle() []byte {
	var b bytes.Buffer
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate})
	}
	return b.Bytes()
}

// file is one entry of the image's layer.
type file struct {
	path string
	mode int64
	data []byte // nil for a directory
}

// Build builds the image.
func Build(cfg Config) (v1.Image, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	sampler, err := os.ReadFile(cfg.SamplerBinary)
	if err != nil {
		return nil, fmt.Errorf("read sampler binary: %w", err)
	}
	encoder, err := os.ReadFile(cfg.EncoderBinary)
	if err != nil {
		return nil, fmt.Errorf("read encoder binary: %w", err)
	}
	files := []file{
		{path: "etc/", mode: 0o755},
		{path: "etc/group", mode: 0o644, data: []byte(group)},
		{path: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{path: "etc/ssl/", mode: 0o755},
		{path: "etc/ssl/certs/", mode: 0o755},
		{path: CABundlePath[1:], mode: 0o644, data: CABundle()},
		// Scratch space for a runtime without a read-only root (the
		// chart mounts an emptyDir here).
		{path: "tmp/", mode: 0o1777},
		{path: EncoderPath[1:], mode: 0o755, data: encoder},
		{path: SamplerPath[1:], mode: 0o755, data: sampler},
	}
	layerTar, err := tarFiles(files, cfg.Created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithCompressionLevel(gzip.BestCompression), tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("make layer: %w", err)
	}
	created := v1.Time{Time: cfg.Created.UTC()}
	base := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	base = mutate.ConfigMediaType(base, types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: created, CreatedBy: "make image (tools/ociimage)", Comment: "tandem-sampler, tandem-encoder, CA bundle, passwd, group"},
	})
	if err != nil {
		return nil, fmt.Errorf("append layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("read image config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = cfg.Arch, "linux"
	cf.Created = created
	cf.Config = v1.Config{
		User:       fmt.Sprintf("%d:%d", NonRootUID, NonRootUID),
		Entrypoint: []string{EncoderPath},
		Cmd:        []string{"serve", "--socket=/run/tandem/tandem.sock"},
		WorkingDir: "/",
		Env:        []string{"SSL_CERT_FILE=" + CABundlePath},
		Labels: map[string]string{
			"org.opencontainers.image.title":       "tandem",
			"org.opencontainers.image.description": "Tandem: a root eBPF sampler with only the capabilities it needs and an unprivileged encoder (run one per container)",
			"org.opencontainers.image.version":     cfg.Version,
			"org.opencontainers.image.revision":    cfg.Revision,
			"org.opencontainers.image.source":      cfg.Source,
			"org.opencontainers.image.licenses":    cfg.Licenses,
			"org.opencontainers.image.created":     cfg.Created.UTC().Format(time.RFC3339),
		},
	}
	for k, v := range map[string]string{"authors": cfg.Authors, "vendor": cfg.Vendor} {
		if v != "" {
			cf.Config.Labels["org.opencontainers.image."+k] = v
		}
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("set image config: %w", err)
	}
	return img, nil
}

// tarFiles writes files as a tar with fixed owners and times.
func tarFiles(files []file, mtime time.Time) ([]byte, error) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, f := range files {
		h := &tar.Header{Name: f.path, Mode: f.mode, ModTime: mtime.UTC(), Uname: "root", Gname: "root", Format: tar.FormatPAX}
		if f.data == nil {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("tar %s: %w", f.path, err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, fmt.Errorf("tar %s: %w", f.path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("tar: %w", err)
	}
	return b.Bytes(), nil
}

// WriteArchive writes img, named ref (registry/repository:tag), to path:
// an OCI image layout (oci-layout, index.json, blobs/sha256/...) that also
// carries docker load's manifest.json.
func WriteArchive(img v1.Image, ref, path string) error {
	_, err := WriteMultiArchive([]v1.Image{img}, ref, path)
	return err
}

// WriteMultiArchive writes one image per platform (each image's config
// names its architecture), named ref, to path as WriteArchive does. With
// more than one image, index.json points at one image index (a
// multi-platform image, as a registry serves it) that lists each
// platform's manifest: podman load and ctr import take the host's
// platform from it, and a push (skopeo copy, crane push) sends them all.
// docker load's manifest.json names the first image only (it has no
// notion of platforms). The order of imgs is kept, so that the same
// images give the same bytes. It returns the digest ref names: the
// image's, or the image index's.
func WriteMultiArchive(imgs []v1.Image, ref, path string) (v1.Hash, error) {
	if len(imgs) == 0 {
		return v1.Hash{}, errors.New("write image archive: no image")
	}
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("image name %q: %w (want registry/repository:tag)", ref, err)
	}
	refAnnotations := map[string]string{
		// containerd (ctr import) names the image from the first,
		// podman and skopeo from the second.
		"io.containerd.image.name":          tag.Name(),
		"org.opencontainers.image.ref.name": tag.Name(),
	}
	blob := func(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }
	entries := []file{{path: "blobs/", mode: 0o755}, {path: "blobs/sha256/", mode: 0o755}}
	have := map[string]bool{}
	add := func(h v1.Hash, data []byte) {
		if !have[h.String()] {
			have[h.String()] = true
			entries = append(entries, file{path: blob(h), mode: 0o644, data: data})
		}
	}
	var (
		descs      []v1.Descriptor
		created    time.Time
		platforms  = map[string]bool{}
		layerPaths []string // the first image's, for manifest.json
		firstConf  v1.Hash
	)
	for i, img := range imgs {
		manifest, err := img.RawManifest()
		if err != nil {
			return v1.Hash{}, fmt.Errorf("image manifest: %w", err)
		}
		digest, err := img.Digest()
		if err != nil {
			return v1.Hash{}, fmt.Errorf("image digest: %w", err)
		}
		configName, err := img.ConfigName()
		if err != nil {
			return v1.Hash{}, fmt.Errorf("image config digest: %w", err)
		}
		config, err := img.RawConfigFile()
		if err != nil {
			return v1.Hash{}, fmt.Errorf("image config: %w", err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return v1.Hash{}, fmt.Errorf("image config: %w", err)
		}
		platform := cf.OS + "/" + cf.Architecture
		if platforms[platform] {
			return v1.Hash{}, fmt.Errorf("write image archive: two images for %s", platform)
		}
		platforms[platform] = true
		layers, err := img.Layers()
		if err != nil {
			return v1.Hash{}, fmt.Errorf("image layers: %w", err)
		}
		for _, l := range layers {
			d, err := l.Digest()
			if err != nil {
				return v1.Hash{}, fmt.Errorf("layer digest: %w", err)
			}
			rc, err := l.Compressed()
			if err != nil {
				return v1.Hash{}, fmt.Errorf("layer: %w", err)
			}
			data, err := io.ReadAll(rc)
			rc.Close()
			if err != nil {
				return v1.Hash{}, fmt.Errorf("read layer: %w", err)
			}
			add(d, data)
			if i == 0 {
				layerPaths = append(layerPaths, blob(d))
			}
		}
		add(configName, config)
		add(digest, manifest)
		if i == 0 {
			created, firstConf = cf.Created.Time, configName
		}
		descs = append(descs, v1.Descriptor{
			MediaType: types.OCIManifestSchema1,
			Size:      int64(len(manifest)),
			Digest:    digest,
			Platform:  &v1.Platform{Architecture: cf.Architecture, OS: cf.OS},
		})
	}
	top := descs
	if len(descs) == 1 {
		top[0].Annotations = refAnnotations
	} else {
		multi, err := json.Marshal(v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: descs})
		if err != nil {
			return v1.Hash{}, err
		}
		h, _, err := v1.SHA256(bytes.NewReader(multi))
		if err != nil {
			return v1.Hash{}, err
		}
		add(h, multi)
		top = []v1.Descriptor{{MediaType: types.OCIImageIndex, Size: int64(len(multi)), Digest: h, Annotations: refAnnotations}}
	}
	indexJSON, err := json.Marshal(v1.IndexManifest{SchemaVersion: 2, MediaType: types.OCIImageIndex, Manifests: top})
	if err != nil {
		return v1.Hash{}, err
	}
	dockerManifest, err := json.Marshal([]struct {
		Config   string
		RepoTags []string
		Layers   []string
	}{{Config: blob(firstConf), RepoTags: []string{tag.Name()}, Layers: layerPaths}})
	if err != nil {
		return v1.Hash{}, err
	}
	entries = append(entries,
		file{path: "index.json", mode: 0o644, data: indexJSON},
		file{path: "manifest.json", mode: 0o644, data: dockerManifest},
		file{path: "oci-layout", mode: 0o644, data: []byte(`{"imageLayoutVersion":"1.0.0"}`)})
	data, err := tarFiles(entries, created)
	if err != nil {
		return v1.Hash{}, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return v1.Hash{}, err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return v1.Hash{}, fmt.Errorf("write image archive: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return v1.Hash{}, err
	}
	return top[0].Digest, nil
}
