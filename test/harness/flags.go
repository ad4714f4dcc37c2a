package harness

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Flags are the Makefile's build flags, as `make build-env` prints them:
// the Makefile is their one source.
type Flags struct {
	GOFLAGS    string // -mod=vendor, -trimpath, the overlay (absolute path), tags
	CGOEnabled string // "0": every binary is static
	LDFlags    string // the version, into internal/buildinfo
	// The image's binaries add these: -ldflags without symbol table and
	// DWARF, GOFLAGS without VCS stamp, and the encoder's build tags.
	ImageLDFlags, ImageGOFLAGS, ImageEncoderTags string
}

// Env returns the environment of a build with f: this process's, with
// GOFLAGS and CGO_ENABLED set.
func (f Flags) Env() []string {
	return append(os.Environ(), "GOFLAGS="+f.GOFLAGS, "CGO_ENABLED="+f.CGOEnabled)
}

var (
	flagsMu sync.Mutex
	flagsBy = map[string]Flags{} // by version
)

// BuildFlags runs `make prepare` (the vendor tree and the overlay) and
// returns the Makefile's build flags, with version as the binaries'
// version ("": the Makefile's, from git describe). It runs make once per
// version and test binary.
func BuildFlags(t testing.TB, version string) Flags {
	t.Helper()
	flagsMu.Lock()
	defer flagsMu.Unlock()
	if f, ok := flagsBy[version]; ok {
		return f
	}
	root := ModuleRoot(t)
	if len(flagsBy) == 0 {
		if out, err := makeCmd(root, "prepare").CombinedOutput(); err != nil {
			t.Fatalf("make prepare: %v\n%s", err, out)
		}
	}
	args := []string{"build-env"}
	if version != "" {
		args = append(args, "VERSION="+version)
	}
	out, err := makeCmd(root, args...).Output()
	if err != nil {
		t.Fatalf("make build-env: %v%s", err, stderrOf(err))
	}
	f, err := parseBuildEnv(string(out))
	if err != nil {
		t.Fatal(err)
	}
	flagsBy[version] = f
	return f
}

func makeCmd(root string, args ...string) *exec.Cmd {
	cmd := exec.Command("make", append([]string{"-s", "--no-print-directory"}, args...)...)
	cmd.Dir = root
	return cmd
}

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok && len(ee.Stderr) > 0 {
		return "\n" + string(ee.Stderr)
	}
	return ""
}

// parseBuildEnv reads make build-env's KEY='value' lines; every key must
// be there, and no other.
func parseBuildEnv(out string) (Flags, error) {
	var f Flags
	fields := map[string]*string{
		"GOFLAGS": &f.GOFLAGS, "CGO_ENABLED": &f.CGOEnabled, "LDFLAGS": &f.LDFlags,
		"IMAGE_LDFLAGS": &f.ImageLDFlags, "IMAGE_GOFLAGS": &f.ImageGOFLAGS, "IMAGE_ENCODER_TAGS": &f.ImageEncoderTags,
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		key, quoted, ok := strings.Cut(line, "=")
		v, unquoted := strings.CutPrefix(quoted, "'")
		v, closed := strings.CutSuffix(v, "'")
		dst := fields[key]
		if !ok || !unquoted || !closed || strings.Contains(v, "'") || dst == nil {
			return Flags{}, fmt.Errorf("make build-env printed %q: want one KEY='value' a line for %v (does the Makefile's build-env target match test/harness?)", line, keys(fields))
		}
		*dst, seen[key] = v, true
	}
	if len(seen) != len(fields) {
		return Flags{}, fmt.Errorf("make build-env printed %v, want %v (does the Makefile's build-env target match test/harness?)", keys(seen), keys(fields))
	}
	return f, nil
}

func keys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
