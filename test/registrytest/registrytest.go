package registrytest

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/tandem-profiler/tandem/tools/release"

	"github.com/tandem-profiler/tandem/test/harness"
)

// Start serves an empty registry on 127.0.0.1 until the test ends and
// returns its host:port.
func Start(t testing.TB) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// BuildRelease builds the release of the checked-out commit, as make
// release does, into a directory of the test and returns it. It builds
// the static binaries: skipped in -short mode.
func BuildRelease(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: not building the release")
	}
	src, err := release.Describe(harness.ModuleRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := release.Build(src, filepath.Join(dir, "release"), t.TempDir()); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "release")
}

// Push publishes the release in dir to the registry at host.
func Push(t testing.TB, dir, host string) *release.Pushed {
	t.Helper()
	p, err := release.Push(context.Background(), dir, host)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// ServeRelease builds the release, starts a registry and publishes the
// release to it. The chart is p.Chart (oci://127.0.0.1:PORT/...) at
// p.ChartVersion; install it with image.repository=p.ImageRepository and
// image.digest=p.ImageDigest (or image.tag=p.ImageTag, the chart's
// default).
func ServeRelease(t testing.TB) *release.Pushed {
	t.Helper()
	dir := BuildRelease(t)
	return Push(t, dir, Start(t))
}
