package release

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// ManifestFile and SumsFile are written into every release directory.
const (
	ManifestFile = "release.json"
	SumsFile     = "SHA256SUMS"
)

// Manifest says what a release directory holds (release.json); file names
// are relative to the directory.
type Manifest struct {
	Version  string `json:"version"`
	Revision string `json:"revision"`
	// Image is the image archive, ImageRef its name and ImageDigest the
	// manifest's digest (what image.digest pins).
	Image       string `json:"image"`
	ImageRef    string `json:"imageRef"`
	ImageDigest string `json:"imageDigest"`
	// Chart is the packaged chart (Helm's name-version.tgz).
	Chart string `json:"chart"`
	// Packages are the .deb and .rpm files.
	Packages []string `json:"packages"`
}

// Build writes the release of src into dir: everything a user installs
// and SHA256SUMS. dir must not exist, be empty, or hold an earlier
// release (it is replaced). scratch holds the binaries and staged files.
func Build(src Source, dir, scratch string) (*Manifest, error) {
	if err := prepareDir(dir); err != nil {
		return nil, err
	}
	m := &Manifest{Version: src.Version, Revision: src.Revision}
	var bins []Binaries
	for _, p := range Platforms {
		b, err := BuildBinaries(src, p, filepath.Join(scratch, "bin", p.OS+"_"+p.Arch))
		if err != nil {
			return nil, err
		}
		bins = append(bins, b)
	}
	ch, err := LoadChart(src.Root)
	if err != nil {
		return nil, err
	}
	repo, err := ImageRepository(ch)
	if err != nil {
		return nil, err
	}
	m.ImageRef = ImageRef(repo, src.Version)
	m.Image = "tandem-image-" + ImageTag(src.Version) + ".oci.tar"
	digest, err := WriteImage(src, bins, m.ImageRef, filepath.Join(dir, m.Image))
	if err != nil {
		return nil, err
	}
	m.ImageDigest = digest.String()
	chartPath, err := PackageChart(ch, src.Version, src.Created, dir)
	if err != nil {
		return nil, err
	}
	m.Chart = filepath.Base(chartPath)
	for _, b := range bins {
		pkgs, err := WritePackages(src, b, dir, filepath.Join(scratch, "stage", b.Platform.OS+"_"+b.Platform.Arch))
		if err != nil {
			return nil, err
		}
		for _, p := range pkgs {
			m.Packages = append(m.Packages, filepath.Base(p))
		}
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := writeFile(filepath.Join(dir, ManifestFile), append(data, '\n')); err != nil {
		return nil, err
	}
	if err := WriteSums(dir); err != nil {
		return nil, err
	}
	return m, nil
}

// prepareDir makes dir an empty directory, refusing to empty one that is
// not a release directory.
func prepareDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return os.MkdirAll(dir, 0o755)
	case err != nil:
		return fmt.Errorf("release directory: %w", err)
	case len(entries) == 0:
		return nil
	}
	if _, err := os.Stat(filepath.Join(dir, ManifestFile)); err != nil {
		return fmt.Errorf("release directory %s is not empty and holds no %s: name a new or empty directory", dir, ManifestFile)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("empty release directory: %w", err)
		}
	}
	return nil
}

// ReadManifest reads dir's release.json.
func ReadManifest(dir string) (*Manifest, error) {
	data, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return nil, fmt.Errorf("read release manifest (make release writes it): %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("read %s: %w", ManifestFile, err)
	}
	return &m, nil
}

// WriteSums writes SHA256SUMS over every other file in dir, in
// sha256sum's format (sha256sum -c SHA256SUMS checks them).
func WriteSums(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && e.Name() != SumsFile && !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		fmt.Fprintf(&b, "%s  %s\n", hex.EncodeToString(sum[:]), n)
	}
	return writeFile(filepath.Join(dir, SumsFile), []byte(b.String()))
}
