package repotest

import (
	"bufio"
	"debug/buildinfo"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// instruction is one line of a Containerfile (continuations joined).
type instruction struct {
	cmd  string // upper case
	args string
}

type stage struct {
	base, name string
	body       []instruction
}

func parseContainerfile(t *testing.T, path string) []stage {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var stages []stage
	var cont strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if cont.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue
		}
		if rest, ok := strings.CutSuffix(line, `\`); ok {
			cont.WriteString(rest + " ")
			continue
		}
		cont.WriteString(line)
		full := cont.String()
		cont.Reset()
		cmd, args, _ := strings.Cut(full, " ")
		in := instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)}
		switch in.cmd {
		case "FROM":
			f := strings.Fields(in.args)
			s := stage{base: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				s.name = f[2]
			}
			stages = append(stages, s)
		case "RUN", "COPY", "ADD", "WORKDIR", "ARG", "ENV", "USER", "ENTRYPOINT", "CMD", "LABEL":
			if len(stages) == 0 {
				if in.cmd == "ARG" {
					continue
				}
				t.Fatalf("%s before FROM", in.cmd)
			}
			stages[len(stages)-1].body = append(stages[len(stages)-1].body, in)
		default:
			t.Fatalf("unexpected instruction %s", in.cmd)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return stages
}

// TestContainerfile parses deploy/container/Containerfile, checks that the
// image is multi-stage with a distroless or scratch base and a non-root
// default user, then runs the build script the image runs and checks
// that both binaries are static, built without cgo and with -trimpath.
func TestContainerfile(t *testing.T) {
	root := moduleRoot(t)
	stages := parseContainerfile(t, filepath.Join(root, "deploy", "container", "Containerfile"))
	if len(stages) < 2 {
		t.Fatalf("%d stages, want a build stage and a final one", len(stages))
	}
	final := stages[len(stages)-1]
	if !strings.HasPrefix(final.base, "gcr.io/distroless/static") && final.base != "scratch" {
		t.Errorf("final stage FROM %s, want distroless/static or scratch", final.base)
	}
	var user string
	var copied []string
	for _, in := range final.body {
		switch in.cmd {
		case "USER":
			user = in.args
		case "RUN", "ADD":
			t.Errorf("final stage %s %s: it must only copy the binaries", in.cmd, in.args)
		case "COPY":
			f := strings.Fields(in.args)
			if len(f) < 3 || !strings.HasPrefix(f[0], "--from=") {
				t.Errorf("final stage COPY %s: want COPY --from=<build stage>", in.args)
				continue
			}
			copied = append(copied, f[1:len(f)-1]...)
		}
	}
	uid, _, _ := strings.Cut(user, ":")
	if n, err := strconv.Atoi(uid); err != nil || n == 0 {
		t.Errorf("final stage USER %q: want a numeric non-root uid (Kubernetes' runAsNonRoot checks it)", user)
	}
	for _, want := range []string{"tandem-sampler", "tandem-encoder"} {
		found := false
		for _, c := range copied {
			found = found || filepath.Base(c) == want
		}
		if !found {
			t.Errorf("the final stage does not copy %s", want)
		}
	}
	const script = "./deploy/container/build-static.sh"
	var runsScript bool
	for _, st := range stages[:len(stages)-1] {
		for _, in := range st.body {
			runsScript = runsScript || (in.cmd == "RUN" && strings.Contains(in.args, script))
		}
	}
	if !runsScript {
		t.Fatalf("no build stage runs %s: the test would not build what the image holds", script)
	}

	if testing.Short() {
		t.Skip("-short: not building the static binaries")
	}
	out := t.TempDir()
	cmd := exec.Command(filepath.Join(root, script), out)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "VERSION=repotest")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, b)
	}
	for _, bin := range []string{"tandem-sampler", "tandem-encoder"} {
		p := filepath.Join(out, bin)
		checkStatic(t, p)
		bi, err := buildinfo.ReadFile(p)
		if err != nil {
			t.Fatalf("%s: %v", bin, err)
		}
		settings := map[string]string{}
		for _, s := range bi.Settings {
			settings[s.Key] = s.Value
		}
		if settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" {
			t.Errorf("%s built with CGO_ENABLED=%q -trimpath=%q, want 0 and true", bin, settings["CGO_ENABLED"], settings["-trimpath"])
		}
	}
}

// checkStatic fails when p asks for a dynamic loader or shared libraries.
func checkStatic(t *testing.T, p string) {
	t.Helper()
	f, err := elf.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP || prog.Type == elf.PT_DYNAMIC {
			t.Errorf("%s is dynamically linked (%v)", filepath.Base(p), prog.Type)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("%s needs shared libraries %v", filepath.Base(p), libs)
	}
}
