package repotest

import (
	"encoding/json"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found at %s: %v", root, err)
	}
	return root
}

// TestEveryPackageHasDocComment fails when a package lacks a package doc
// comment (conventionally in doc.go).
func TestEveryPackageHasDocComment(t *testing.T) {
	root := moduleRoot(t)
	dirs := map[string]bool{}
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "vendor" || name == "testdata" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			dirs[filepath.Dir(path)] = true
		}
		return nil
	})
	for dir := range dirs {
		pkgs, err := parser.ParseDir(token.NewFileSet(), dir, func(fi fs.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, parser.ParseComments|parser.PackageClauseOnly)
		if err != nil {
			t.Errorf("parse %s: %v", dir, err)
			continue
		}
		for name, pkg := range pkgs {
			documented := false
			for _, f := range pkg.Files {
				if f.Doc != nil && strings.TrimSpace(f.Doc.Text()) != "" {
					documented = true
				}
			}
			if !documented {
				rel, _ := filepath.Rel(root, dir)
				t.Errorf("package %s (%s) has no package doc comment: add a doc.go saying what it is", name, rel)
			}
		}
	}
}

// TestEncoderDependencyBudget checks that the unprivileged encoder never links
// the eBPF tracer or eBPF loader: only the sampler may.
func TestEncoderDependencyBudget(t *testing.T) {
	root := moduleRoot(t)
	forbidden := []string{"go.opentelemetry.io/ebpf-profiler", "github.com/cilium/ebpf"}
	for _, pkg := range []string{"./cmd/encoder", "./encoder/...", "./internal/ingest"} {
		for _, dep := range listDeps(t, root, pkg) {
			for _, f := range forbidden {
				if dep == f || strings.HasPrefix(dep, f+"/") {
					t.Errorf("%s depends on %s: only the sampler may link the tracer", pkg, dep)
				}
			}
		}
	}
}

func listDeps(t *testing.T, root, pkg string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath", pkg)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	var deps []string
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct{ ImportPath string }
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		deps = append(deps, p.ImportPath)
	}
	return deps
}
