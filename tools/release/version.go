package release

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Source names the commit a release is built from.
type Source struct {
	// Root is the repository's top directory.
	Root string
	// Version is what version.sh prints: VERSION on a release commit,
	// VERSION-dev+<commit> between releases.
	Version string
	// Revision is the full commit hash.
	Revision string
	// Created is the commit's time: every time written into the release.
	Created time.Time
}

// VersionScript prints the version; relative to the repository's root.
const VersionScript = "tools/release/version.sh"

// Describe reads the version, the commit and its time from the repository
// at root.
func Describe(root string) (Source, error) {
	src := Source{Root: root}
	run := func(name string, args ...string) (string, error) {
		cmd := exec.Command(name, args...)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, ee.Stderr)
			}
			return "", fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
		}
		return strings.TrimSpace(string(out)), nil
	}
	var err error
	if src.Version, err = run(filepath.Join(root, VersionScript)); err != nil {
		return src, fmt.Errorf("read the version: %w", err)
	}
	if src.Revision, err = run("git", "rev-parse", "HEAD"); err != nil {
		return src, fmt.Errorf("read the commit (a release is built from a git checkout): %w", err)
	}
	ct, err := run("git", "log", "-1", "--format=%ct")
	if err != nil {
		return src, fmt.Errorf("read the commit's time: %w", err)
	}
	secs, err := strconv.ParseInt(ct, 10, 64)
	if err != nil {
		return src, fmt.Errorf("read the commit's time: %q: %w", ct, err)
	}
	src.Created = time.Unix(secs, 0).UTC()
	return src, nil
}

// ImageTag is the image tag of a version: the version with SemVer's "+"
// (build metadata), which a tag may not hold, as "_", the rule Helm
// applies to chart tags in OCI registries. The chart's default image tag
// (templates/_helpers.tpl, tandem.image) applies the same rule to its
// appVersion.
func ImageTag(version string) string { return strings.ReplaceAll(version, "+", "_") }

// Platform is one operating system and architecture the release is built
// for, in Go's names (GOOS, GOARCH), which are also OCI's.
type Platform struct{ OS, Arch string }

func (p Platform) String() string { return p.OS + "/" + p.Arch }

// Platforms are the platforms of every release artefact: one image per
// platform in the image archive, one package per platform. Add a platform
// here and nowhere else.
var Platforms = []Platform{{OS: "linux", Arch: "amd64"}, {OS: "linux", Arch: "arm64"}}
