package release

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tandem-profiler/tandem/tools/helmchart"

	"github.com/tandem-profiler/tandem/test/harness"
)

func readVersionFile(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(harness.ModuleRoot(t), "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	v := strings.TrimSpace(string(data))
	if !regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$`).MatchString(v) {
		t.Fatalf("VERSION holds %q: want MAJOR.MINOR.PATCH", v)
	}
	return v
}

// TestVersionScript runs version.sh in a scratch repository: a release
// only on a clean commit tagged v<VERSION>, a dev build otherwise.
func TestVersionScript(t *testing.T) {
	dir := t.TempDir()
	script, err := os.ReadFile(filepath.Join(harness.ModuleRoot(t), VersionScript))
	if err != nil {
		t.Fatal(err)
	}
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.invalid",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.invalid", "GIT_CONFIG_GLOBAL=/dev/null")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	write := func(name, content string, mode os.FileMode) {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	version := func() string {
		t.Helper()
		out, err := exec.Command(filepath.Join(dir, VersionScript)).Output()
		if err != nil {
			t.Fatalf("version.sh: %v", err)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q")
	write(VersionScript, string(script), 0o755)
	write("VERSION", "1.2.3\n", 0o644)
	git("add", ".")
	git("commit", "-qm", "one")
	first := git("rev-parse", "--short=12", "HEAD")

	steps := []struct {
		name string
		do   func()
		want string
	}{
		{"untagged", func() {}, "1.2.3-dev+" + first},
		{"tagged release", func() { git("tag", "v1.2.3") }, "1.2.3"},
		{"tagged but changed", func() { write("VERSION", "1.2.3\n\n", 0o644) }, "1.2.3-dev+" + first + ".dirty"},
		{"untracked files do not count", func() { git("checkout", "-q", "VERSION"); write("new", "x", 0o644) }, "1.2.3"},
		{"a commit after the release", func() { write("VERSION", "1.3.0\n", 0o644); git("commit", "-qam", "two") }, ""},
		{"another release's tag", func() { git("tag", "v1.2.4") }, ""},
	}
	for _, s := range steps {
		s.do()
		want := s.want
		if want == "" {
			want = "1.3.0-dev+" + git("rev-parse", "--short=12", "HEAD")
		}
		if got := version(); got != want {
			t.Errorf("%s: version.sh printed %q, want %q", s.name, got, want)
		}
	}
	write("VERSION", "v1.3\n", 0o644)
	if out, err := exec.Command(filepath.Join(dir, VersionScript)).CombinedOutput(); err == nil || !strings.Contains(string(out), "MAJOR.MINOR.PATCH") {
		t.Errorf("VERSION v1.3: version.sh %v %q, want a failure naming MAJOR.MINOR.PATCH", err, out)
	}
}

// TestVersionInOnePlace: the chart's version and appVersion in the
// repository are VERSION, and Describe's version extends it.
func TestVersionInOnePlace(t *testing.T) {
	v := readVersionFile(t)
	ch, err := LoadChart(harness.ModuleRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	if ch.Metadata.Version != v || ch.Metadata.AppVersion != v {
		t.Errorf("%s/Chart.yaml: version %q, appVersion %q; VERSION says %s: set both to it", ChartDir, ch.Metadata.Version, ch.Metadata.AppVersion, v)
	}
	src, err := Describe(harness.ModuleRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	if src.Version != v && !strings.HasPrefix(src.Version, v+"-dev+") {
		t.Errorf("Describe's version %q does not extend VERSION %s", src.Version, v)
	}
}

// TestChartDefaultImage: the packaged chart's default image is the image
// make image and make release write, for a release and a dev version.
func TestChartDefaultImage(t *testing.T) {
	for _, version := range []string{"0.1.0", "0.1.0-dev+0123456789ab", "0.1.0-dev+0123456789ab.dirty"} {
		t.Run(version, func(t *testing.T) {
			ch, err := LoadChart(harness.ModuleRoot(t))
			if err != nil {
				t.Fatal(err)
			}
			repo, err := ImageRepository(ch)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			if _, err := PackageChart(ch, version, src0.Created, dir); err != nil {
				t.Fatal(err)
			}
			packaged := loadPackagedChart(t, filepath.Join(dir, PackageName+"-"+version+".tgz"))
			if packaged.Metadata.Version != version || packaged.Metadata.AppVersion != version {
				t.Errorf("packaged chart: version %q appVersion %q, want %s", packaged.Metadata.Version, packaged.Metadata.AppVersion, version)
			}
			images := renderedImages(t, packaged, nil)
			want := ImageRef(repo, version)
			for _, img := range images {
				if img != want {
					t.Errorf("the chart's default image is %s; make image tags %s", img, want)
				}
			}
		})
	}
}

// TestLicense: LICENSE is the Apache License 2.0, the licence the image
// and the packages declare.
func TestLicense(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(harness.ModuleRoot(t), "LICENSE"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	for _, want := range []string{"Apache License", "Version 2.0, January 2004", "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION", "END OF TERMS AND CONDITIONS", "APPENDIX: How to apply the Apache License"} {
		if !strings.Contains(text, want) {
			t.Errorf("LICENSE lacks %q: not the full Apache-2.0 text", want)
		}
	}
	if License != "Apache-2.0" {
		t.Errorf("License = %q, LICENSE is Apache-2.0", License)
	}
}

func TestVersionNames(t *testing.T) {
	for _, tc := range []struct{ version, tag, deb string }{
		{"0.1.0", "0.1.0", "0.1.0"},
		{"0.1.0-dev+0123456789ab", "0.1.0-dev_0123456789ab", "0.1.0~dev+0123456789ab"},
		{"0.1.0-dev+0123456789ab.dirty", "0.1.0-dev_0123456789ab.dirty", "0.1.0~dev+0123456789ab.dirty"},
	} {
		if got := ImageTag(tc.version); got != tc.tag {
			t.Errorf("ImageTag(%q) = %q, want %q", tc.version, got, tc.tag)
		}
		if got := DebVersion(tc.version); got != tc.deb {
			t.Errorf("DebVersion(%q) = %q, want %q", tc.version, got, tc.deb)
		}
	}
}

// renderedImages renders ch for a release with values and returns the
// image of every container.
func renderedImages(t *testing.T, ch *chartT, values map[string]any) []string {
	t.Helper()
	r, err := helmchart.RenderChart(ch, helmchart.DefaultRelease, values)
	if err != nil {
		t.Fatal(err)
	}
	var images []string
	for _, m := range r.Manifests {
		for _, line := range strings.Split(m.YAML, "\n") {
			if s := strings.TrimSpace(line); strings.HasPrefix(s, "image:") {
				images = append(images, strings.Trim(strings.TrimSpace(strings.TrimPrefix(s, "image:")), `"'`))
			}
		}
	}
	if len(images) == 0 {
		t.Fatal("the chart renders no container image")
	}
	return images
}

// TestMaintainerInOnePlace: the chart's maintainers entry (Chart.yaml,
// what `helm show chart` prints) is Maintainer, the identity the packages
// and the image carry (TestReleaseOneMaintainer).
func TestMaintainerInOnePlace(t *testing.T) {
	ch, err := LoadChart(harness.ModuleRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	ms := ch.Metadata.Maintainers
	if len(ms) != 1 || ms[0].Name != Maintainer.Name || ms[0].Email != Maintainer.Email || ms[0].URL != Maintainer.URL {
		t.Errorf("%s/Chart.yaml maintainers %+v, want the one entry %+v (tools/release Maintainer)", ChartDir, ms, Maintainer)
	}
	for _, v := range []string{Maintainer.Name, Maintainer.Email, Maintainer.URL} {
		if v == "" || strings.Contains(strings.ToLower(v), "unset") || strings.Contains(v, "example") {
			t.Errorf("Maintainer %+v: %q is a placeholder", Maintainer, v)
		}
	}
}
