package repo

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tandem-profiler/tandem/test/harness"
)

// walkFiles calls fn with the path (relative to the module root, slashed)
// of every file of the repository's own: not vendor/, the build's
// directories (.build, bin) or hidden ones.
func walkFiles(t *testing.T, root string, fn func(rel, path string)) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "vendor" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		fn(filepath.ToSlash(rel), path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestBuildFlagsWrittenOnce fails when the build flags the Makefile sets
// (its build-env target prints them) are typed again: a script, test or
// program takes them from `make build-env` (test/harness.BuildFlags in
// Go), so that every build shares them and the build cache. Markdown is
// prose and not checked.
func TestBuildFlagsWrittenOnce(t *testing.T) {
	root := harness.ModuleRoot(t)
	// Split, so that this file does not match itself.
	patterns := []string{
		"-mod=vendor" + " -trimpath", // GOFLAGS
		"-" + "overlay=",             // the memlock overlay
		"buildinfo." + "Version=",    // the version, by -ldflags -X
	}
	walkFiles(t, root, func(rel, path string) {
		if rel == "Makefile" || strings.HasSuffix(rel, ".md") {
			return
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Error(err)
			return
		}
		for i, line := range bytes.Split(data, []byte("\n")) {
			for _, p := range patterns {
				if bytes.Contains(line, []byte(p)) {
					t.Errorf("%s:%d types the build flags again (%q): take them from `make build-env` (Go: test/harness.BuildFlags or Build)", rel, i+1, p)
				}
			}
		}
	})
}

// TestProductImportsNoTestOrTools fails when a product package (anything
// outside test/ and tools/) imports test/ or tools/ outside its _test.go
// files: the harness, the fakes and the build programs are never linked
// into the commands. Every Go file counts, whatever its build tags.
//
// A package's own test aids may sit next to it (encoder/internal/testcorpus,
// as net/http/httptest does): a package imported only by _test.go files and
// by other such aids is a test aid, not product, and may import test/.
func TestProductImportsNoTestOrTools(t *testing.T) {
	root := harness.ModuleRoot(t)
	type file struct {
		rel     string
		imports []string
	}
	var files []file // product-area files, _test.go ones included
	walkFiles(t, root, func(rel, path string) {
		if !strings.HasSuffix(rel, ".go") || strings.HasPrefix(rel, "_") || strings.Contains("/"+rel, "/testdata/") {
			return
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			t.Errorf("parse %s: %v", rel, err)
			return
		}
		fl := file{rel: rel}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			fl.imports = append(fl.imports, p)
		}
		if f.Name.Name == "main" && !strings.HasSuffix(rel, "_test.go") {
			// A command is product by being one.
			fl.imports = append(fl.imports, "main:"+path)
		}
		files = append(files, fl)
	})
	pkgOf := func(rel string) string { return harness.ModulePath + "/" + filepath.ToSlash(filepath.Dir(rel)) }
	isProductArea := func(rel string) bool {
		return !strings.HasPrefix(rel, "test/") && !strings.HasPrefix(rel, "tools/")
	}
	// aid starts as every product-area package some _test.go imports, and
	// loses each one a product package's non-test file imports, until
	// nothing changes.
	aid := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f.rel, "_test.go") {
			for _, p := range f.imports {
				aid[p] = true
			}
		}
	}
	for _, f := range files {
		if isProductArea(f.rel) && !strings.HasSuffix(f.rel, "_test.go") && slices.ContainsFunc(f.imports, func(p string) bool { return strings.HasPrefix(p, "main:") }) {
			delete(aid, pkgOf(f.rel))
		}
	}
	for changed := true; changed; {
		changed = false
		for _, f := range files {
			from := pkgOf(f.rel)
			if strings.HasSuffix(f.rel, "_test.go") || !isProductArea(f.rel) || aid[from] {
				continue
			}
			for _, p := range f.imports {
				if aid[p] {
					delete(aid, p)
					changed = true
				}
			}
		}
	}
	forbidden := []string{harness.ModulePath + "/test/", harness.ModulePath + "/tools/"}
	checked := 0
	for _, f := range files {
		if strings.HasSuffix(f.rel, "_test.go") || !isProductArea(f.rel) || aid[pkgOf(f.rel)] {
			continue
		}
		checked++
		for _, p := range f.imports {
			for _, fb := range forbidden {
				if strings.HasPrefix(p+"/", fb) {
					t.Errorf("%s imports %s: product code never imports test/ or tools/ (move what it needs into the product, or the importer into test/ or tools/)", f.rel, p)
				}
			}
		}
	}
	if checked < 50 {
		t.Fatalf("checked %d product files: the walk missed the tree", checked)
	}
	var aids []string
	for p := range aid {
		if strings.HasPrefix(p, harness.ModulePath+"/") && isProductArea(strings.TrimPrefix(p, harness.ModulePath+"/")) {
			aids = append(aids, strings.TrimPrefix(p, harness.ModulePath+"/"))
		}
	}
	slices.Sort(aids)
	t.Logf("%d product files checked; test aids beside the product (imported only by tests): %v", checked, aids)
}

// TestInternalHoldsProductHelpers fails when a package appears under
// internal/ that is not one of the product's helpers listed here, or is a
// test aid (named ...test): test aids go to test/, build and bench
// programs to tools/.
func TestInternalHoldsProductHelpers(t *testing.T) {
	root := harness.ModuleRoot(t)
	helpers := map[string]bool{"buildinfo": true, "cli": true, "counters": true, "grpcretry": true, "heldfd": true,
		"logging": true, "prom": true, "retry": true, "synth": true}
	walkFiles(t, filepath.Join(root, "internal"), func(rel, path string) {
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") || strings.Contains("/"+rel, "/testdata/") {
			return
		}
		dir := filepath.ToSlash(filepath.Dir(rel))
		top, _, _ := strings.Cut(dir, "/")
		switch {
		case !helpers[top]:
			t.Errorf("internal/%s: internal/ holds product helpers only; a test aid belongs in test/, a build or bench program in tools/ (or add a product helper to this list)", dir)
		case strings.HasSuffix(dir, "test"):
			t.Errorf("internal/%s is a test aid: move it to test/", dir)
		}
	})
}

// TestOneModuleRoot fails when a package finds the module's root itself
// (a moduleRoot function): test/harness.ModuleRoot is the one.
func TestOneModuleRoot(t *testing.T) {
	root := harness.ModuleRoot(t)
	walkFiles(t, root, func(rel, path string) {
		if !strings.HasSuffix(rel, ".go") || strings.HasPrefix(rel, "test/harness/") || strings.Contains("/"+rel, "/testdata/") {
			return
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Errorf("parse %s: %v", rel, err)
			return
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && strings.EqualFold(fd.Name.Name, "moduleRoot") {
				t.Errorf("%s declares %s: call test/harness.ModuleRoot", rel, fd.Name.Name)
			}
		}
	})
}
