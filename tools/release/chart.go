package release

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
)

// ChartDir is the chart's directory relative to the repository's root.
const ChartDir = "deploy/helm/tandem"

// LoadChart loads the chart at root/ChartDir as Helm does (.helmignore
// applied).
func LoadChart(root string) (*chart.Chart, error) {
	ch, err := loader.LoadDir(filepath.Join(root, ChartDir))
	if err != nil {
		return nil, fmt.Errorf("load chart %s: %w", ChartDir, err)
	}
	return ch, nil
}

// ImageRepository is the chart's default image.repository: where make
// image and make release name the image, so the chart's default image is
// what they build.
func ImageRepository(ch *chart.Chart) (string, error) {
	img, _ := ch.Values["image"].(map[string]any)
	repo, _ := img["repository"].(string)
	if repo == "" {
		return "", fmt.Errorf("chart %s: values.yaml has no image.repository", ch.Name())
	}
	return repo, nil
}

// PackageChart writes the chart, its version and appVersion set to
// version, as Helm's package (chartutil.Save, what `helm package` runs)
// into dir, and returns the file's path: name-version.tgz. Helm stamps
// every entry with the time of packaging; they are rewritten to mtime
// (the commit's time), so that one commit gives one archive.
func PackageChart(ch *chart.Chart, version string, mtime time.Time, dir string) (string, error) {
	ch.Metadata.Version = version
	ch.Metadata.AppVersion = version
	tmp, err := os.MkdirTemp(dir, ".chart-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	saved, err := chartutil.Save(ch, tmp)
	if err != nil {
		return "", fmt.Errorf("package chart %s: %w", ch.Name(), err)
	}
	data, err := os.ReadFile(saved)
	if err != nil {
		return "", err
	}
	fixed, err := fixArchiveTimes(data, mtime)
	if err != nil {
		return "", fmt.Errorf("package chart %s: %w", ch.Name(), err)
	}
	out := filepath.Join(dir, filepath.Base(saved))
	if err := writeFile(out, fixed); err != nil {
		return "", err
	}
	// What Helm would load from it, to fail here rather than at install.
	if _, err := loader.LoadArchive(bytes.NewReader(fixed)); err != nil {
		return "", fmt.Errorf("load packaged chart %s: %w", out, err)
	}
	return out, nil
}

// fixArchiveTimes rewrites a gzipped tar with every entry's time set to
// mtime and no time in the gzip header, keeping everything else
// (order, names, modes, contents, Helm's gzip header fields).
func fixArchiveTimes(tgz []byte, mtime time.Time) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(tgz))
	if err != nil {
		return nil, fmt.Errorf("read gzip: %w", err)
	}
	var out bytes.Buffer
	zw, err := gzip.NewWriterLevel(&out, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	zw.Header = gzip.Header{Comment: zr.Header.Comment, Extra: zr.Header.Extra, OS: 255}
	tr := tar.NewReader(zr)
	tw := tar.NewWriter(zw)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("read tar: %w", err)
		}
		nh := &tar.Header{Typeflag: h.Typeflag, Name: h.Name, Linkname: h.Linkname, Mode: h.Mode, Size: h.Size, ModTime: mtime.UTC()}
		if err := tw.WriteHeader(nh); err != nil {
			return nil, fmt.Errorf("write tar %s: %w", h.Name, err)
		}
		if _, err := io.Copy(tw, tr); err != nil {
			return nil, fmt.Errorf("write tar %s: %w", h.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// writeFile writes data to path through a temporary file, so a reader
// never sees half a file.
func writeFile(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
