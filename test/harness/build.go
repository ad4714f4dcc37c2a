package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// Target is one program to build.
type Target struct {
	// Out is the executable's file name in the build's directory.
	Out string
	// Package is what `go build` builds, relative to the module root: a
	// package ("./cmd/sampler") or one file of package main.
	Package string
}

// The two commands.
var (
	Sampler = Target{Out: "tandem-sampler", Package: "./cmd/sampler"}
	Encoder = Target{Out: "tandem-encoder", Package: "./cmd/encoder"}
)

// BuildConfig says how Build builds. Every build uses the Makefile's flags
// (BuildFlags): vendor mode with the overlay, trimmed paths, no cgo, so
// every binary is static.
type BuildConfig struct {
	_ struct{}
	// GOARCH is the architecture to build for ("": this machine's).
	GOARCH string
	// Image builds as the image's binaries (deploy/container/build-static.sh):
	// no symbol table, DWARF or VCS stamp, and the encoder (Encoder's
	// package) with the image's tags (no view).
	Image bool
	// Version is the binaries' version ("": the Makefile's).
	Version string
	// Dir receives the executables. "" builds into a directory shared
	// by the test binary's tests, readable and executable by every uid
	// (an unprivileged encoder, a guest sharing the path), each target
	// built once per configuration; Main removes it.
	Dir string
}

var (
	buildMu    sync.Mutex
	sharedBase string                // the shared builds' parent, removed by Main
	built      = map[string]string{} // shared executable path -> its package
	mainCalled bool
)

// Build builds targets with cfg and returns the directory holding them,
// each under its Out name. It fails t if a build fails.
func Build(t testing.TB, cfg BuildConfig, targets ...Target) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	root := ModuleRoot(t)
	flags := BuildFlags(t, cfg.Version)
	dir, shared := cfg.Dir, cfg.Dir == ""
	if shared {
		dir = sharedDirFor(t, cfg)
	}
	for _, tg := range targets {
		out := filepath.Join(dir, tg.Out)
		if shared {
			if pkg, ok := built[out]; ok {
				if pkg != tg.Package {
					t.Fatalf("build %s from %s: this test binary already built %s from %s; give the target another Out name", tg.Out, tg.Package, tg.Out, pkg)
				}
				continue
			}
		}
		cmd := buildCommand(root, flags, cfg, tg, out)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build %s (GOARCH=%s): %v\n%s", tg.Package, goarch(cfg), err, b)
		}
		if shared {
			built[out] = tg.Package
		}
	}
	return dir
}

// buildCommand is the `go build` of one target.
func buildCommand(root string, flags Flags, cfg BuildConfig, tg Target, out string) *exec.Cmd {
	ldflags, goflags := flags.LDFlags, flags.GOFLAGS
	args := []string{"build"}
	if cfg.Image {
		ldflags, goflags = flags.ImageLDFlags+" "+ldflags, goflags+" "+flags.ImageGOFLAGS
		if tg.Package == Encoder.Package {
			args = append(args, "-tags="+flags.ImageEncoderTags)
		}
	}
	cmd := exec.Command("go", append(args, "-ldflags", ldflags, "-o", out, tg.Package)...)
	cmd.Dir, cmd.Env = root, append(flags.Env(), "GOFLAGS="+goflags)
	if cfg.GOARCH != "" {
		cmd.Env = append(cmd.Env, "GOARCH="+cfg.GOARCH)
	}
	return cmd
}

func goarch(cfg BuildConfig) string {
	if cfg.GOARCH != "" {
		return cfg.GOARCH
	}
	return runtime.GOARCH
}

// sharedDirFor returns the shared directory of cfg's builds, making it
// (and their parent) on first use. The caller holds buildMu.
func sharedDirFor(t testing.TB, cfg BuildConfig) string {
	t.Helper()
	if !mainCalled {
		t.Fatal("harness.Build into the shared directory needs harness.Main: add `func TestMain(m *testing.M) { harness.Main(m) }` so the builds are removed after the tests")
	}
	if sharedBase == "" {
		dir, err := os.MkdirTemp("", "tandem-harness-bin-")
		if err != nil {
			t.Fatalf("make the builds' directory: %v", err)
		}
		sharedBase = dir
	}
	version := cfg.Version
	if version == "" {
		version = "make"
	}
	name := goarch(cfg) + "-" + version
	if cfg.Image {
		name += "-image"
	}
	dir := filepath.Join(sharedBase, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("make the builds' directory: %v", err)
	}
	// Every uid may read and run what is built (MkdirTemp makes 0700).
	for _, d := range []string{sharedBase, dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatalf("open the builds' directory to every uid: %v", err)
		}
	}
	return dir
}

// Main runs the tests of a test binary that uses Build's shared directory,
// removes that directory, and exits with the tests' status. Call it from
// TestMain.
func Main(m *testing.M) {
	buildMu.Lock()
	mainCalled = true
	buildMu.Unlock()
	code := m.Run()
	buildMu.Lock()
	if sharedBase != "" {
		if err := os.RemoveAll(sharedBase); err != nil {
			fmt.Fprintf(os.Stderr, "harness: remove the shared builds: %v\n", err)
		}
	}
	buildMu.Unlock()
	os.Exit(code)
}
