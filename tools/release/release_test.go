package release

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tandem-profiler/tandem/test/harness"
)

// built is one release of the checked-out commit, shared by the tests
// that read it (building takes minutes).
var built struct {
	once          sync.Once
	dir, bins     string
	src           Source
	m             *Manifest
	err           error
	root, scratch string
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.root != "" {
		os.RemoveAll(built.root)
	}
	os.Exit(code)
}

// buildOnce builds the release into a directory removed when the tests
// end; -short skips.
func buildOnce(t *testing.T) (string, *Manifest, Source) {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: not building the release")
	}
	built.once.Do(func() {
		built.src, built.err = Describe(harness.ModuleRoot(t))
		if built.err != nil {
			return
		}
		if built.root, built.err = os.MkdirTemp("", "tandem-release-test-"); built.err != nil {
			return
		}
		built.dir = filepath.Join(built.root, "release")
		built.scratch = filepath.Join(built.root, "scratch")
		built.m, built.err = Build(built.src, built.dir, built.scratch)
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.dir, built.m, built.src
}

// TestReleaseOneMaintainer: the image's authors and vendor labels, the
// packaged chart's maintainers, and the .deb's Maintainer and Homepage
// (the .rpm's Packager and Vendor come from the same nfpm fields) all say
// Maintainer.
func TestReleaseOneMaintainer(t *testing.T) {
	dir, m, _ := buildOnce(t)
	idx, one, err := readArchive(filepath.Join(dir, m.Image), m.ImageDigest, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	img, err := platformImage(idx, one, runtimeArch())
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	for label, want := range map[string]string{"authors": Maintainer.Contact() + " " + Maintainer.URL, "vendor": Maintainer.Name} {
		if got := cf.Config.Labels["org.opencontainers.image."+label]; got != want {
			t.Errorf("image %s label %q, want %q", label, got, want)
		}
	}
	ch := loadPackagedChart(t, filepath.Join(dir, m.Chart))
	if ms := ch.Metadata.Maintainers; len(ms) != 1 || ms[0].Name != Maintainer.Name || ms[0].Email != Maintainer.Email || ms[0].URL != Maintainer.URL {
		t.Errorf("packaged chart maintainers %+v, want %+v", ms, Maintainer)
	}
	for _, p := range m.Packages {
		if !strings.HasSuffix(p, ".deb") {
			continue
		}
		fields, err := exec.Command("dpkg-deb", "--field", filepath.Join(dir, p), "Maintainer", "Homepage").Output()
		if err != nil {
			t.Fatalf("dpkg-deb --field: %v", err)
		}
		if want := "Maintainer: " + Maintainer.Contact() + "\nHomepage: " + Maintainer.URL + "\n"; string(fields) != want {
			t.Errorf("%s fields:\n%s\nwant:\n%s", p, fields, want)
		}
	}
}

// TestReleaseReproducible builds the release a second time from a copy of
// the repository at another path (as another checkout would be), into
// another directory with its own scratch space, and compares every file's
// bytes.
func TestReleaseReproducible(t *testing.T) {
	dir, m, src := buildOnce(t)
	other := src
	other.Root = copyRepository(t, src.Root)
	again := filepath.Join(t.TempDir(), "again")
	m2, err := Build(other, again, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if m2.ImageDigest != m.ImageDigest {
		t.Errorf("image digests %s and %s", m.ImageDigest, m2.ImageDigest)
	}
	names := filesIn(t, dir)
	if got := filesIn(t, again); strings.Join(got, " ") != strings.Join(names, " ") {
		t.Fatalf("two builds wrote %v and %v", names, got)
	}
	for _, n := range names {
		a, _ := os.ReadFile(filepath.Join(dir, n))
		b, _ := os.ReadFile(filepath.Join(again, n))
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between two builds of one commit (%d and %d bytes)", n, len(a), len(b))
		}
	}
	sums, _ := os.ReadFile(filepath.Join(dir, SumsFile))
	t.Logf("two builds, same bytes:\n%s", sums)
}

// copyRepository copies the repository's files (tracked, and new ones git
// does not ignore) and its vendor tree to a new directory; no .git: the
// build takes the version and the commit from the Source.
func copyRepository(t *testing.T, root string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "checkout")
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		st, err := os.Lstat(filepath.Join(root, name))
		if err != nil || !st.Mode().IsRegular() {
			continue // deleted in the work tree, or not a file
		}
		data, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dst, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, st.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	// vendor/ is generated (make prepare); copied with its times, so the
	// copy's make prepare only writes its own overlay.
	if out, err := exec.Command("cp", "-a", filepath.Join(root, "vendor"), filepath.Join(dst, "vendor")).CombinedOutput(); err != nil {
		t.Fatalf("copy vendor: %v\n%s", err, out)
	}
	now := time.Now()
	if err := os.Chtimes(filepath.Join(dst, "vendor", "modules.txt"), now, now); err != nil {
		t.Fatal(err)
	}
	return dst
}

func filesIn(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

// TestReleaseOneVersion: every artefact carries the one version: the
// binaries' --version, the image's name and labels, the chart's version
// and appVersion and default image, the packages; SHA256SUMS checks.
func TestReleaseOneVersion(t *testing.T) {
	dir, m, src := buildOnce(t)
	if m.Version != src.Version {
		t.Errorf("release.json version %q, want %q", m.Version, src.Version)
	}
	for _, p := range Platforms {
		if p.OS != "linux" || p.Arch != runtimeArch() {
			continue
		}
		for _, cmd := range Commands {
			out, err := exec.Command(filepath.Join(built.scratch, "bin", p.OS+"_"+p.Arch, cmd), "--version").Output()
			if err != nil {
				t.Fatalf("%s --version: %v", cmd, err)
			}
			if want := cmd + " version " + src.Version + "\n"; string(out) != want {
				t.Errorf("%s --version printed %q, want %q", cmd, out, want)
			}
		}
	}
	// The image.
	tmp := t.TempDir()
	idx, one, err := readArchive(filepath.Join(dir, m.Image), m.ImageDigest, tmp)
	if err != nil {
		t.Fatal(err)
	}
	if len(Platforms) > 1 && idx == nil {
		t.Errorf("%d platforms, and the image's digest names one image, not an image index", len(Platforms))
	}
	for _, p := range Platforms {
		if _, err := platformImage(idx, one, p.Arch); err != nil {
			t.Errorf("the image archive: %v", err)
		}
	}
	img, err := platformImage(idx, one, runtimeArch())
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got := cf.Config.Labels["org.opencontainers.image.version"]; got != src.Version {
		t.Errorf("image version label %q, want %q", got, src.Version)
	}
	if got := cf.Config.Labels["org.opencontainers.image.licenses"]; got != License {
		t.Errorf("image licences label %q, want %q", got, License)
	}
	var index struct {
		Manifests []struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"manifests"`
	}
	data, err := os.ReadFile(filepath.Join(tmp, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &index); err != nil || len(index.Manifests) != 1 {
		t.Fatalf("index.json: %v, %d manifests", err, len(index.Manifests))
	}
	archiveRef := index.Manifests[0].Annotations["org.opencontainers.image.ref.name"]
	// The chart.
	ch := loadPackagedChart(t, filepath.Join(dir, m.Chart))
	if ch.Metadata.Version != src.Version || ch.Metadata.AppVersion != src.Version {
		t.Errorf("chart version %q appVersion %q, want %s", ch.Metadata.Version, ch.Metadata.AppVersion, src.Version)
	}
	for _, image := range renderedImages(t, ch, nil) {
		if image != archiveRef || image != m.ImageRef {
			t.Errorf("the chart's default image %s; the archive names %s, release.json %s", image, archiveRef, m.ImageRef)
		}
	}
	// The packages.
	var deb string
	for _, p := range m.Packages {
		if strings.HasSuffix(p, ".deb") {
			deb = p
		}
	}
	if deb == "" {
		t.Fatalf("no .deb in %v", m.Packages)
	}
	fields, err := exec.Command("dpkg-deb", "--field", filepath.Join(dir, deb), "Version", "Package").Output()
	if err != nil {
		t.Fatalf("dpkg-deb --field: %v", err)
	}
	if want := "Version: " + DebVersion(src.Version) + "\nPackage: " + PackageName + "\n"; string(fields) != want {
		t.Errorf("the .deb's fields:\n%s\nwant:\n%s", fields, want)
	}
	cmd := exec.Command("sha256sum", "--check", "--strict", SumsFile)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("sha256sum --check: %v\n%s", err, out)
	}
	sums, _ := os.ReadFile(filepath.Join(dir, SumsFile))
	if n := strings.Count(string(sums), "\n"); n != len(filesIn(t, dir))-1 {
		t.Errorf("SHA256SUMS has %d lines for %d other files", n, len(filesIn(t, dir))-1)
	}
}
