package repotest

import (
	"encoding/json"
	"go/ast"
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
	// Non-test Go files by directory (one package per directory here).
	dirs := map[string][]string{}
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if d.IsDir() {
			name := d.Name()
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "vendor" || name == "testdata" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			dirs[filepath.Dir(path)] = append(dirs[filepath.Dir(path)], path)
		}
		return nil
	})
	for dir, files := range dirs {
		rel, _ := filepath.Rel(root, dir)
		var documented []string
		for _, path := range files {
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments|parser.PackageClauseOnly)
			if err != nil {
				t.Errorf("parse %s: %v", path, err)
				continue
			}
			// Generated files may carry their generator's package comment.
			if f.Doc != nil && strings.TrimSpace(f.Doc.Text()) != "" && !ast.IsGenerated(f) {
				documented = append(documented, filepath.Base(path))
			}
		}
		switch {
		case len(documented) == 0:
			t.Errorf("package %s has no package doc comment: add a doc.go saying what it is", rel)
		case len(documented) > 1:
			t.Errorf("package %s has its doc comment split over %v: keep it in one file (doc.go); go doc would join them in an arbitrary order", rel, documented)
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
