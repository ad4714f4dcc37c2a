package ociimage

import (
	"archive/tar"
	"bytes"
	"crypto/x509"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"encoding/pem"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/tandem-profiler/tandem/test/harness"
)

// buildStatic runs the script make image runs into a new directory.
func buildStatic(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: not building the static binaries")
	}
	root := harness.ModuleRoot(t)
	out := t.TempDir()
	cmd := exec.Command(filepath.Join(root, "deploy/container/build-static.sh"), out)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "VERSION=reprotest")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build-static.sh: %v\n%s", err, b)
	}
	return out
}

func testConfig(dir string) Config {
	return Config{
		SamplerBinary: filepath.Join(dir, "tandem-sampler"), EncoderBinary: filepath.Join(dir, "tandem-encoder"),
		Version: "reprotest", Revision: "0123456789abcdef0123456789abcdef01234567",
		Source: "https://github.com/tandem-profiler/tandem", Licenses: "Apache-2.0", Arch: runtime.GOARCH,
		Created: time.Date(2026, 12, 2, 5, 0, 0, 0, time.UTC),
	}
}

// TestImageReproducible builds the image twice from the same binaries, the
// second time copied elsewhere with other times and modes (what a second
// checkout and build would give): the digests and the archives' bytes are
// the same. It then checks what the image holds.
func TestImageReproducible(t *testing.T) {
	bins := buildStatic(t)
	other := t.TempDir()
	for _, name := range []string{"tandem-sampler", "tandem-encoder"} {
		data, err := os.ReadFile(filepath.Join(bins, name))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(other, name)
		if err := os.WriteFile(p, data, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, time.Unix(1, 0), time.Unix(1, 0)); err != nil {
			t.Fatal(err)
		}
	}
	var digests []v1.Hash
	var archives [][]byte
	for _, dir := range []string{bins, other} {
		img, err := Build(testConfig(dir))
		if err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, d)
		path := filepath.Join(t.TempDir(), "image.tar")
		if err := WriteArchive(img, "ghcr.io/tandem-profiler/tandem:reprotest", path); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		archives = append(archives, data)
	}
	if digests[0] != digests[1] {
		t.Errorf("two builds of the same binaries: digests %s and %s", digests[0], digests[1])
	}
	if !bytes.Equal(archives[0], archives[1]) {
		t.Error("two builds of the same binaries: the archives differ")
	}
	t.Logf("digest %s, archive %d bytes", digests[0], len(archives[0]))
	checkArchive(t, archives[0], digests[0])
	for _, name := range []string{"tandem-sampler", "tandem-encoder"} {
		checkStatic(t, filepath.Join(bins, name))
	}
}

// checkArchive reads the archive back as an OCI layout (go-containerregistry's
// reader) and as docker load would, and checks the image's config and files.
func checkArchive(t *testing.T, archive []byte, digest v1.Hash) {
	dir := t.TempDir()
	entries := untar(t, archive)
	for name, data := range entries {
		if strings.HasSuffix(name, "/") {
			continue
		}
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// docker load's manifest.json points at the config and layers.
	var dm []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(entries["manifest.json"], &dm); err != nil || len(dm) != 1 {
		t.Fatalf("manifest.json: %v", err)
	}
	if !slices.Equal(dm[0].RepoTags, []string{"ghcr.io/tandem-profiler/tandem:reprotest"}) {
		t.Errorf("manifest.json RepoTags %v", dm[0].RepoTags)
	}
	for _, p := range append([]string{dm[0].Config}, dm[0].Layers...) {
		if _, ok := entries[p]; !ok {
			t.Errorf("manifest.json names %s, which the archive lacks", p)
		}
	}
	lp, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	img, err := lp.Image(digest)
	if err != nil {
		t.Fatalf("the OCI layout has no image %s: %v", digest, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532 (nonroot)", cf.Config.User)
	}
	for _, l := range []string{"version", "revision", "source", "licenses", "created"} {
		if cf.Config.Labels["org.opencontainers.image."+l] == "" {
			t.Errorf("no org.opencontainers.image.%s label", l)
		}
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers (%v), want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	layer, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	files := untar(t, layer)
	var names []string
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	want := []string{"etc/", "etc/group", "etc/passwd", "etc/ssl/", "etc/ssl/certs/", "etc/ssl/certs/ca-certificates.crt", "tandem-encoder", "tandem-sampler", "tmp/"}
	if !slices.Equal(names, want) {
		t.Errorf("the layer holds %v, want exactly %v (no shell, no package manager)", names, want)
	}
	if !strings.Contains(string(files["etc/passwd"]), "nonroot:x:65532:65532:") || !strings.Contains(string(files["etc/group"]), "nonroot:x:65532:") {
		t.Errorf("passwd/group do not name nonroot 65532:\n%s%s", files["etc/passwd"], files["etc/group"])
	}
	var certs int
	for rest := files["etc/ssl/certs/ca-certificates.crt"]; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			t.Errorf("CA bundle: %v", err)
		}
		certs++
	}
	if certs < 100 {
		t.Errorf("the CA bundle holds %d certificates, want the NSS roots (over 100)", certs)
	}
}

// untar returns the entries of a tar by name (directories with no data),
// failing on an entry not owned by root or with a time other than the
// image's.
func untar(t *testing.T, data []byte) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Uid != 0 || h.Gid != 0 {
			t.Errorf("%s owned by %d:%d, want root", h.Name, h.Uid, h.Gid)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = b
	}
}

// checkStatic fails unless p is a static ELF built without cgo and with
// -trimpath.
func checkStatic(t *testing.T, p string) {
	t.Helper()
	f, err := elf.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP || prog.Type == elf.PT_DYNAMIC {
			t.Errorf("%s is dynamically linked (%v)", filepath.Base(p), prog.Type)
		}
	}
	bi, err := buildinfo.ReadFile(p)
	if err != nil {
		t.Fatalf("%s: %v", p, err)
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" {
		t.Errorf("%s built with CGO_ENABLED=%q -trimpath=%q, want 0 and true", filepath.Base(p), settings["CGO_ENABLED"], settings["-trimpath"])
	}
}

// TestConfigValidate names every missing field.
func TestConfigValidate(t *testing.T) {
	err := Config{}.Validate()
	if err == nil {
		t.Fatal("an empty config validated")
	}
	for _, want := range []string{"sampler binary", "encoder binary", "version", "revision", "source", "licenses", "architecture", "creation time"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not name the missing %s", err, want)
		}
	}
}

// TestMultiPlatformArchive writes an amd64 and an arm64 image into one
// archive twice: the bytes are the same, index.json names one image
// index (the multi-platform image) whose manifests carry each platform,
// and docker load's manifest.json names the first.
func TestMultiPlatformArchive(t *testing.T) {
	dir := t.TempDir()
	var imgs []v1.Image
	for _, arch := range []string{"amd64", "arm64"} {
		for _, b := range []string{"tandem-sampler", "tandem-encoder"} {
			if err := os.WriteFile(filepath.Join(dir, b), []byte(b+" for "+arch), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		img, err := Build(testConfig(dir))
		if err != nil {
			t.Fatal(err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		cf = cf.DeepCopy()
		cf.Architecture = arch
		if img, err = mutate.ConfigFile(img, cf); err != nil {
			t.Fatal(err)
		}
		imgs = append(imgs, img)
	}
	const ref = "ghcr.io/tandem-profiler/tandem:reprotest"
	var archives [][]byte
	var digests []v1.Hash
	for range 2 {
		path := filepath.Join(t.TempDir(), "image.tar")
		digest, err := WriteMultiArchive(imgs, ref, path)
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, digest)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		archives = append(archives, data)
	}
	if !bytes.Equal(archives[0], archives[1]) {
		t.Error("two writes of the same images: the archives differ")
	}
	entries := untar(t, archives[0])
	out := t.TempDir()
	for name, data := range entries {
		if strings.HasSuffix(name, "/") {
			continue
		}
		p := filepath.Join(out, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	lp, err := layout.FromPath(out)
	if err != nil {
		t.Fatal(err)
	}
	top, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	tm, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(tm.Manifests) != 1 || tm.Manifests[0].MediaType != types.OCIImageIndex ||
		tm.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != ref {
		t.Fatalf("index.json: %+v, want one image index named %s", tm.Manifests, ref)
	}
	multi, err := top.ImageIndex(tm.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	mm, err := multi.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for i, d := range mm.Manifests {
		platforms = append(platforms, d.Platform.String())
		img, err := multi.Image(d.Digest)
		if err != nil {
			t.Fatalf("%s: %v", d.Platform, err)
		}
		want, _ := imgs[i].Digest()
		if d.Digest != want {
			t.Errorf("%s: digest %s, want %s", d.Platform, d.Digest, want)
		}
		cf, err := img.ConfigFile()
		if err != nil || cf.Architecture != d.Platform.Architecture {
			t.Errorf("%s: config architecture %v (%v)", d.Platform, cf.Architecture, err)
		}
	}
	if !slices.Equal(platforms, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("platforms %v, want linux/amd64 and linux/arm64", platforms)
	}
	var dm []struct{ Config string }
	if err := json.Unmarshal(entries["manifest.json"], &dm); err != nil || len(dm) != 1 {
		t.Fatalf("manifest.json: %v", err)
	}
	first, _ := imgs[0].ConfigName()
	if dm[0].Config != "blobs/sha256/"+first.Hex {
		t.Errorf("manifest.json names %s, want the first image's config", dm[0].Config)
	}
	if tm.Manifests[0].Digest != digests[0] || digests[0] != digests[1] {
		t.Errorf("digests %v, want the index's, %s, twice", digests, tm.Manifests[0].Digest)
	}
	if _, err := WriteMultiArchive([]v1.Image{imgs[0], imgs[0]}, ref, filepath.Join(t.TempDir(), "x.tar")); err == nil || !strings.Contains(err.Error(), "two images for linux/amd64") {
		t.Errorf("two images of one platform: err %v", err)
	}
}
