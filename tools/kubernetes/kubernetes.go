package kubernetes

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"golang.org/x/sys/unix"
)

//go:embed version.txt
var versionFile string

// Version is the Kubernetes release the cluster runs (version.txt).
var Version = strings.TrimSpace(versionFile)

// DefaultCacheRoot holds one directory per version.
const DefaultCacheRoot = "/var/cache/tandem/kubernetes"

// Commands are the Kubernetes commands built, by binary name.
var Commands = []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "kubectl"}

// Pause is the sandbox binary's name in the bin directory.
const Pause = "pause"

// PauseVersion is the tag Kubernetes gives the pause image of this
// release (kubeadm's PauseVersion constant).
const PauseVersion = "3.10.2"

// completeMarker is written last, holding the version and recipe: a
// directory without it, or with another content, is built again (a
// relink when the Go build cache is warm).
const completeMarker = "complete"

// recipe changes whenever the way the binaries are built does.
const recipe = "2" // 2: version stamped with -ldflags, as hack/lib/version.sh does

func marker(version string) string { return version + " recipe " + recipe + "\n" }

// Config says where the cache is and how to report progress.
type Config struct {
	// CacheRoot holds <version>/bin (DefaultCacheRoot when empty).
	CacheRoot string
	// Version overrides Version (tests).
	Version string
	// Log receives the build's progress and the go command's output.
	Log io.Writer

	_ struct{}
}

func (c Config) withDefaults() Config {
	if c.CacheRoot == "" {
		c.CacheRoot = DefaultCacheRoot
	}
	if c.Version == "" {
		c.Version = Version
	}
	if c.Log == nil {
		c.Log = io.Discard
	}
	return c
}

// Dir is the version's cache directory.
func (c Config) Dir() string {
	c = c.withDefaults()
	return filepath.Join(c.CacheRoot, c.Version)
}

// BinDir is where the binaries are.
func (c Config) BinDir() string { return filepath.Join(c.Dir(), "bin") }

// Lookup returns the bin directory of a complete build, or an error
// saying how to make one.
func Lookup(cfg Config) (string, error) {
	cfg = cfg.withDefaults()
	if b, err := os.ReadFile(filepath.Join(cfg.Dir(), completeMarker)); err != nil || string(b) != marker(cfg.Version) {
		return "", fmt.Errorf("no Kubernetes %s build in %s: run `make tools` (the first build takes about 20 minutes)", cfg.Version, cfg.Dir())
	}
	return cfg.BinDir(), nil
}

// stagingVersion maps v1.X.Y to v0.X.Y, the version of the staging
// modules (k8s.io/api, k8s.io/client-go, ...) released with it.
func stagingVersion(v string) (string, error) {
	m := regexp.MustCompile(`^v1\.(\d+\.\d+)$`).FindStringSubmatch(v)
	if m == nil {
		return "", fmt.Errorf("kubernetes version %q: want v1.MINOR.PATCH", v)
	}
	return "v0." + m[1], nil
}

// stagingModules returns the modules kubernetes' go.mod replaces with
// its ./staging/src copies: the module proxy serves them as their own
// modules, so a build from the proxy replaces each with its release.
func stagingModules(gomod []byte) []string {
	var mods []string
	re := regexp.MustCompile(`^\s*(?:replace\s+)?(\S+)\s+=>\s+\./staging/src/`)
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		if m := re.FindStringSubmatch(sc.Text()); m != nil {
			mods = append(mods, m[1])
		}
	}
	return mods
}

// scratchGoMod is the go.mod of the module the binaries are built in.
func scratchGoMod(version, staging string, mods []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "module tandemkube\n\ngo 1.26.0\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n", version)
	for _, m := range mods {
		fmt.Fprintf(&b, "\t%s => %s %s\n", m, m, staging)
	}
	b.WriteString(")\n")
	return b.String()
}

func toolsGo() string {
	var b strings.Builder
	b.WriteString("//go:build tools\n\npackage tools\n\nimport (\n")
	for _, c := range Commands {
		fmt.Fprintf(&b, "\t_ \"k8s.io/kubernetes/cmd/%s\"\n", c)
	}
	b.WriteString(")\n")
	return b.String()
}

// versionLDFlags stamps the release's version into the binaries as
// Kubernetes' own build does (hack/lib/version.sh): unstamped, the API
// server calls itself v0.0.0-master and Helm refuses charts that ask for
// a kubeVersion.
func versionLDFlags(version string) string {
	major, minor, _ := strings.Cut(strings.TrimPrefix(version, "v"), ".")
	minor, _, _ = strings.Cut(minor, ".")
	var flags []string
	for _, kv := range [][2]string{{"gitVersion", version}, {"gitMajor", major}, {"gitMinor", minor}, {"gitTreeState", "clean"}} {
		for _, pkg := range []string{"k8s.io/client-go/pkg/version", "k8s.io/component-base/version"} {
			flags = append(flags, fmt.Sprintf("-X %s.%s=%s", pkg, kv[0], kv[1]))
		}
	}
	return strings.Join(flags, " ")
}

// goEnv is the environment of the go commands: module mode against the
// proxy (not the repository's vendor mode and overlay), and cgo as the
// go command defaults it, so that builds of the same version share the
// Go build cache whoever runs them.
func goEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "GOFLAGS", "CGO_ENABLED", "GOWORK", "GOOS", "GOARCH":
			continue
		}
		env = append(env, kv)
	}
	return append(env, "GOFLAGS=-mod=mod", "GOWORK=off")
}

func run(ctx context.Context, log io.Writer, dir string, name string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = goEnv()
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = log
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("%s %s (in %s): %w", name, strings.Join(args, " "), dir, err)
	}
	return out.Bytes(), nil
}

// Build makes a complete build in the cache unless there is one, and
// returns its bin directory.
func Build(ctx context.Context, cfg Config) (string, error) {
	cfg = cfg.withDefaults()
	if bin, err := Lookup(cfg); err == nil {
		return bin, nil
	}
	staging, err := stagingVersion(cfg.Version)
	if err != nil {
		return "", err
	}
	dir := cfg.Dir()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create the Kubernetes cache: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("lock the Kubernetes cache: %w", err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	if bin, err := Lookup(cfg); err == nil { // built while we waited
		return bin, nil
	}

	// The module's own go.mod lists the staging modules.
	out, err := run(ctx, cfg.Log, dir, "go", "mod", "download", "-json", "k8s.io/kubernetes@"+cfg.Version)
	if err != nil {
		return "", fmt.Errorf("download k8s.io/kubernetes %s from the module proxy: %w", cfg.Version, err)
	}
	var mod struct{ Dir, GoMod, Error string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Error != "" {
		return "", fmt.Errorf("download k8s.io/kubernetes %s: %v%s", cfg.Version, err, mod.Error)
	}
	gomod, err := os.ReadFile(mod.GoMod)
	if err != nil {
		return "", fmt.Errorf("read kubernetes' go.mod: %w", err)
	}
	mods := stagingModules(gomod)
	if len(mods) == 0 {
		return "", fmt.Errorf("kubernetes %s's go.mod (%s) replaces no staging module: the build recipe no longer fits this release", cfg.Version, mod.GoMod)
	}

	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	for name, content := range map[string]string{"go.mod": scratchGoMod(cfg.Version, staging, mods), "tools.go": toolsGo()} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(content), 0o644); err != nil {
			return "", err
		}
	}
	fmt.Fprintf(cfg.Log, "kubernetes %s: resolving modules in %s\n", cfg.Version, src)
	if _, err := run(ctx, cfg.Log, src, "go", "mod", "tidy"); err != nil {
		return "", err
	}
	bin := cfg.BinDir()
	if err := os.MkdirAll(bin, 0o755); err != nil {
		return "", err
	}
	ldflags := versionLDFlags(cfg.Version)
	for _, c := range Commands {
		fmt.Fprintf(cfg.Log, "kubernetes %s: building %s\n", cfg.Version, c)
		if _, err := run(ctx, cfg.Log, src, "go", "build", "-ldflags", ldflags, "-o", filepath.Join(bin, c), "k8s.io/kubernetes/cmd/"+c); err != nil {
			return "", err
		}
	}
	// The sandbox binary, as build/pause/Makefile compiles it.
	fmt.Fprintf(cfg.Log, "kubernetes %s: compiling pause %s\n", cfg.Version, PauseVersion)
	pauseC := filepath.Join(mod.Dir, "build", "pause", "linux", "pause.c")
	if _, err := run(ctx, cfg.Log, src, "gcc", "-Os", "-Wall", "-Werror", "-static", "-DVERSION=v"+PauseVersion+"-tandem", "-o", filepath.Join(bin, Pause), pauseC); err != nil {
		return "", fmt.Errorf("compile pause (make tools installs gcc): %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, completeMarker), []byte(marker(cfg.Version)), 0o644); err != nil {
		return "", err
	}
	return bin, nil
}
