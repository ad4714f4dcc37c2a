package repo

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tandem-profiler/tandem/test/harness"
)

// moduleRoot is harness.ModuleRoot, under the name this package's tests
// have always called.
var moduleRoot = harness.ModuleRoot

// TestEveryPackageHasDocComment fails when a package lacks a package doc
// comment (conventionally in doc.go).
func TestEveryPackageHasDocComment(t *testing.T) {
	root := harness.ModuleRoot(t)
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
// the eBPF tracer or eBPF loader (only the sampler may), nor client-go's
// Clientset, its scheme of every API group or its generic typed clients
// (which carry the fakes and client-go's testing machinery): linked, their
// package initialisation alone doubled an idle encoder's resident memory
// (docs/benchmarks/footprint.md); nor k8s.io/api's types: encoder/kube reads
// its three kinds through client-go's dynamic client (unstructured).
func TestEncoderDependencyBudget(t *testing.T) {
	root := harness.ModuleRoot(t)
	forbidden := map[string]string{
		"go.opentelemetry.io/ebpf-profiler": "only the sampler may link the tracer",
		"github.com/cilium/ebpf":            "only the sampler may link the tracer",
		"k8s.io/client-go/kubernetes":       "use client-go's dynamic client, not its Clientset (every API group)",
		"k8s.io/client-go/gentype":          "use client-go's dynamic client (gentype links client-go's fakes and testing)",
		"k8s.io/client-go/testing":          "test code only",
		"k8s.io/api":                        "read pods, ReplicaSets and Jobs unstructured (client-go's dynamic client): k8s.io/api's package initialisation keeps about 1 MB of the binary resident",
	}
	for _, pkg := range []string{"./cmd/encoder", "./encoder/...", "./encoder/ingest"} {
		found := map[string][]string{}
		for _, dep := range listDeps(t, root, pkg) {
			for f := range forbidden {
				if dep == f || strings.HasPrefix(dep, f+"/") {
					found[f] = append(found[f], dep)
				}
			}
		}
		for f, deps := range found {
			t.Errorf("%s depends on %d packages of %s (%s): %s", pkg, len(deps), f, strings.Join(deps[:min(len(deps), 3)], ", "), forbidden[f])
		}
	}
}

// TestImageEncoderMethodDeadCode checks that the encoder the image ships
// (deploy/container/build-static.sh: -tags grpcnotrace,noview) links no
// package that executes templates: text/template's method calls make the
// linker keep every exported method of every reachable type, which cost
// 12 MB of binary and 3.7 MB of an idle encoder's resident memory
// (docs/benchmarks/footprint.md). cobra imports text/template but runs
// it only for custom usage templates, which the linker sees unreachable.
func TestImageEncoderMethodDeadCode(t *testing.T) {
	root := harness.ModuleRoot(t)
	forbidden := map[string]string{
		"html/template":                  "pprof's web UI (view) belongs in the make build encoder only: keep view.go behind !noview",
		"golang.org/x/net/trace":         "gRPC's tracing: build with -tags grpcnotrace",
		"github.com/google/pprof/driver": "view: keep it behind !noview",
	}
	tags := harness.BuildFlags(t, "").ImageEncoderTags // the Makefile's IMAGE_ENCODER_TAGS
	for _, dep := range listDeps(t, root, "-tags="+tags, "./cmd/encoder") {
		if why, ok := forbidden[dep]; ok {
			t.Errorf("the image's encoder (-tags %s) links %s: %s", tags, dep, why)
		}
	}
}

func listDeps(t *testing.T, root string, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-deps", "-json=ImportPath"}, args...)...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", args, err)
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
