package harness

import (
	"debug/buildinfo"
	"debug/elf"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestMain(m *testing.M) { Main(m) }

func TestModuleRoot(t *testing.T) {
	root := ModuleRoot(t)
	for _, p := range []string{"go.mod", "Makefile", "test/harness/doc.go"} {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Errorf("module root %s: %v", root, err)
		}
	}
}

func TestParseBuildEnv(t *testing.T) {
	const good = "GOFLAGS='-mod=vendor -x'\nCGO_ENABLED='0'\nLDFLAGS='-X a.b=c'\nIMAGE_LDFLAGS='-s -w'\nIMAGE_GOFLAGS='-y'\nIMAGE_ENCODER_TAGS='a,b'\n"
	tests := []struct {
		name, out string
		want      Flags
		err       string
	}{
		{name: "all", out: good, want: Flags{GOFLAGS: "-mod=vendor -x", CGOEnabled: "0", LDFlags: "-X a.b=c", ImageLDFlags: "-s -w", ImageGOFLAGS: "-y", ImageEncoderTags: "a,b"}},
		{name: "missing", out: "GOFLAGS='x'\nCGO_ENABLED='0'\n", err: "printed [CGO_ENABLED GOFLAGS], want [CGO_ENABLED GOFLAGS IMAGE_ENCODER_TAGS IMAGE_GOFLAGS IMAGE_LDFLAGS LDFLAGS]"},
		{name: "unknown key", out: good + "GOARCH='arm64'\n", err: `printed "GOARCH='arm64'"`},
		{name: "unquoted", out: "GOFLAGS=-mod=vendor\n", err: `printed "GOFLAGS=-mod=vendor"`},
		{name: "a quote inside", out: "GOFLAGS='a'b'\n", err: `printed "GOFLAGS='a'b'"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseBuildEnv(tt.out)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
}

// TestBuildFlagsAreTheMakefiles reads the real Makefile's flags.
func TestBuildFlagsAreTheMakefiles(t *testing.T) {
	f := BuildFlags(t, "v0.0.0-harness")
	overlay := filepath.Join(ModuleRoot(t), ".build", "overlay.json")
	for _, want := range []string{"-mod=vendor", "-trimpath", overlay} {
		if !strings.Contains(f.GOFLAGS, want) {
			t.Errorf("GOFLAGS %q lacks %q", f.GOFLAGS, want)
		}
	}
	if _, err := os.Stat(overlay); err != nil {
		t.Errorf("BuildFlags ran make prepare, yet: %v", err)
	}
	if f.CGOEnabled != "0" {
		t.Errorf("CGO_ENABLED %q, want 0", f.CGOEnabled)
	}
	if !strings.HasSuffix(f.LDFlags, "Version=v0.0.0-harness") {
		t.Errorf("LDFLAGS %q does not set the version", f.LDFlags)
	}
}

// TestBuild builds a program that prints its version with the Makefile's
// flags, into the shared directory and stripped into the test's, runs
// it, and reads back how it was built.
func TestBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: not building")
	}
	version := Target{Out: "version", Package: "./test/harness/testdata/version"}
	tests := []struct {
		name    string
		cfg     BuildConfig
		symbols bool
	}{
		{name: "shared", cfg: BuildConfig{Version: "v1"}, symbols: true},
		{name: "image", cfg: BuildConfig{Image: true, Version: "v2", Dir: t.TempDir()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := Build(t, tt.cfg, version)
			if tt.cfg.Dir != "" && dir != tt.cfg.Dir {
				t.Errorf("built into %s, want %s", dir, tt.cfg.Dir)
			}
			bin := filepath.Join(dir, version.Out)
			out, err := exec.Command(bin).Output()
			if err != nil || strings.TrimSpace(string(out)) != tt.cfg.Version {
				t.Errorf("the build printed version %q (%v), want %q", out, err, tt.cfg.Version)
			}
			info, err := buildinfo.ReadFile(bin)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]string{}
			for _, s := range info.Settings {
				got[s.Key] = s.Value
			}
			if got["CGO_ENABLED"] != "0" || got["-trimpath"] != "true" {
				t.Errorf("built with CGO_ENABLED=%q -trimpath=%q, want 0 and true", got["CGO_ENABLED"], got["-trimpath"])
			}
			f, err := elf.Open(bin)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if has := f.Section(".symtab") != nil; has != tt.symbols {
				t.Errorf("symbol table present: %v, want %v", has, tt.symbols)
			}
			if tt.cfg.Dir == "" {
				fi, err := os.Stat(dir)
				if err != nil || fi.Mode().Perm() != 0o755 {
					t.Errorf("shared directory %s: %v, %v: want mode 0755, for every uid", dir, err, fi.Mode())
				}
				if again := Build(t, tt.cfg, version); again != dir {
					t.Errorf("the second build went to %s, want the first's %s", again, dir)
				}
			}
		})
	}
}

// TestBuildCommandCrossCompiles checks the command of a build for another
// architecture (test/vm runs the arm64 builds; their standard library
// alone takes minutes to compile on a cold cache).
func TestBuildCommandCrossCompiles(t *testing.T) {
	f := Flags{GOFLAGS: "-mod=vendor", CGOEnabled: "0", LDFlags: "-X v=1", ImageLDFlags: "-s -w", ImageGOFLAGS: "-y", ImageEncoderTags: "a,b"}
	tests := []struct {
		target Target
		args   []string
	}{
		{Sampler, []string{"go", "build", "-ldflags", "-s -w -X v=1", "-o", "/out/x", "./cmd/sampler"}},
		{Encoder, []string{"go", "build", "-tags=a,b", "-ldflags", "-s -w -X v=1", "-o", "/out/x", "./cmd/encoder"}},
	}
	for _, tt := range tests {
		cmd := buildCommand("/root", f, BuildConfig{GOARCH: "arm64", Image: true}, tt.target, "/out/x")
		if !slices.Equal(cmd.Args, tt.args) {
			t.Errorf("args %q, want %q", cmd.Args, tt.args)
		}
		env := strings.Join(cmd.Env, "\n")
		for _, want := range []string{"GOARCH=arm64", "GOFLAGS=-mod=vendor -y", "CGO_ENABLED=0"} {
			if !strings.Contains(env, "\n"+want+"\n") && !strings.HasSuffix(env, "\n"+want) {
				t.Errorf("%s: environment lacks %s", tt.target.Out, want)
			}
		}
		if cmd.Dir != "/root" {
			t.Errorf("runs in %s, want the module root", cmd.Dir)
		}
	}
}

func TestProcGoneReportsTheExit(t *testing.T) {
	p := Start(t, ProcConfig{Name: "failing child", Path: "sh", Args: []string{"-c", "echo its last words; exit 3"}})
	if why, gone := p.Gone(); gone && !p.Exited() {
		t.Fatalf("Gone %q before the child exited", why)
	}
	<-p.Done()
	why, gone := p.Gone()
	for _, want := range []string{"failing child exited (exit status 3)"} {
		if !gone || !strings.Contains(why, want) {
			t.Errorf("Gone() = %q, %v; want it to say %q", why, gone, want)
		}
	}
}

func TestProcStopAndKill(t *testing.T) {
	// Stop: SIGTERM, then a clean exit.
	p := Start(t, ProcConfig{Name: "trapping child", Path: "sh", Args: []string{"-c", `trap 'exit 0' TERM; echo up; while :; do sleep 0.05; done`}})
	WaitFor(t, "the child's trap", 10*time.Second, func() bool { return strings.Contains(p.Out.String(), "up") }, p)
	p.Stop(t, 10*time.Second)

	// Kill: the whole process group, grandchildren included.
	k, err := Launch(ProcConfig{Name: "parent", Path: "sh", Args: []string{"-c", "sleep 100 & wait"}, Env: []string{"HARNESS_TEST=1"}})
	if err != nil {
		t.Fatal(err)
	}
	pgid := k.Pid()
	k.Kill()
	if k.Err() == nil {
		t.Errorf("killed child's exit: %v, want a signal", k.Err())
	}
	WaitFor(t, "the group's grandchild gone", 10*time.Second, func() bool {
		return errors.Is(syscall.Kill(-pgid, 0), syscall.ESRCH)
	})
}

func TestLaunchFailsWithTheReason(t *testing.T) {
	p, err := Launch(ProcConfig{Name: "missing", Path: "/nonexistent/tandem-harness"})
	if err == nil || !strings.Contains(err.Error(), "start missing") {
		t.Fatalf("Launch of a missing executable: %v", err)
	}
	if !p.Exited() {
		t.Error("a child that never started is not Exited")
	}
}
