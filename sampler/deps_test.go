package sampler

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The sampler is minimal by construction: it must not bring gRPC, HTTP,
// pdata, Arrow or compression into the privileged process.
//
// Finding (go.opentelemetry.io/ebpf-profiler v0.0.202623): the tracer
// itself links several of them, so a literal "no forbidden package in the
// transitive closure" check cannot pass with the upstream library:
//
//   - tracer imports reporter (tracer.Config holds reporter.TraceReporter),
//     and package reporter also holds the OTLP and collector reporters:
//     google.golang.org/grpc (and through it net/http, golang.org/x/net/http2,
//     compress/gzip via grpc/encoding/gzip) and
//     go.opentelemetry.io/collector/pdata/pprofile;
//   - reporter/samples (TraceEventMeta, in the TraceReporter signature)
//     imports pdata/pcommon and pdata/pprofile for its attribute manager;
//   - debug/elf (ELF parsing, standard library) imports compress/zlib, and
//     cilium/ebpf imports compress/gzip (/proc/config.gz).
//
// Our own code adds nothing new on top: the Prometheus client reaches
// net/http (expfmt, expvar) and compress/gzip (protobuf), and the Cap'n
// Proto runtime reaches compress/zlib, but the tracer links all of those
// already. Dead-code elimination keeps most of it out of the binary; the
// packages' init functions still run.
//
// So the test checks what we control:
//  1. the direct imports of sampler and cmd/sampler contain no forbidden
//     package;
//  2. every forbidden package in the closure is also in the closure of the
//     profiler's packages (what the tracer itself needs); anything else is
//     a failure, reported with its import chain.
//
// It logs, for the record, the chain through which each tolerated package
// arrives.

var forbiddenPrefixes = []string{
	"google.golang.org/grpc",
	"net/http",
	"go.opentelemetry.io/collector/pdata",
	"github.com/apache/arrow",
	"compress/",
	"github.com/klauspost/compress",
}

const (
	modulePath   = "github.com/tandem-profiler/tandem"
	profilerPath = "go.opentelemetry.io/ebpf-profiler"
)

func isForbidden(pkg string) bool {
	for _, p := range forbiddenPrefixes {
		if pkg == strings.TrimSuffix(p, "/") || strings.HasPrefix(pkg, strings.TrimSuffix(p, "/")+"/") {
			return true
		}
	}
	return false
}

func isProfiler(pkg string) bool {
	return pkg == profilerPath || strings.HasPrefix(pkg, profilerPath+"/")
}

type listedPackage struct {
	ImportPath string
	Imports    []string
}

func TestDependencyBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	roots := []string{modulePath + "/sampler", modulePath + "/cmd/sampler"}
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Imports", "./sampler/...", "./cmd/sampler")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list: %v\n%s", err, stderr)
	}
	graph := map[string][]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p listedPackage
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		graph[p.ImportPath] = p.Imports
	}
	for _, r := range roots {
		if _, ok := graph[r]; !ok {
			t.Fatalf("go list did not list %s", r)
		}
	}

	// 1. Direct imports of our packages.
	for _, r := range roots {
		for _, imp := range graph[r] {
			if isForbidden(imp) {
				t.Errorf("%s imports %s directly", r, imp)
			}
		}
	}

	// 2. Closure of the profiler's packages: what the tracer itself needs.
	var profilerPkgs []string
	for pkg := range graph {
		if isProfiler(pkg) {
			profilerPkgs = append(profilerPkgs, pkg)
		}
	}
	upstream := closure(graph, profilerPkgs)
	all := closure(graph, roots)
	var tolerated []string
	for pkg := range all {
		if !isForbidden(pkg) {
			continue
		}
		if !upstream[pkg] {
			t.Errorf("%s is linked by our code, not by the tracer: %s", pkg, strings.Join(chain(graph, roots, pkg, nil), " -> "))
			continue
		}
		tolerated = append(tolerated, pkg)
	}
	slices.Sort(tolerated)
	skipProfiler := map[string]bool{}
	for _, p := range profilerPkgs {
		skipProfiler[p] = true
	}
	// Log only the entry points: forbidden packages imported by a package
	// that is not forbidden itself.
	entry := map[string]bool{}
	for pkg := range all {
		if isForbidden(pkg) {
			continue
		}
		for _, imp := range graph[pkg] {
			if isForbidden(imp) {
				entry[imp] = true
			}
		}
	}
	for _, pkg := range tolerated {
		if !entry[pkg] {
			continue
		}
		msg := "tolerated (the tracer links it): " + pkg + " via " + strings.Join(chain(graph, roots, pkg, nil), " -> ")
		if c := chain(graph, roots, pkg, skipProfiler); c != nil {
			msg += "; also without the tracer via " + strings.Join(c, " -> ")
		}
		t.Log(msg)
	}
}

// closure returns every package reachable from roots, roots included.
func closure(graph map[string][]string, roots []string) map[string]bool {
	seen := map[string]bool{}
	stack := slices.Clone(roots)
	for len(stack) > 0 {
		p := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[p] {
			continue
		}
		seen[p] = true
		stack = append(stack, graph[p]...)
	}
	return seen
}

// chain returns a shortest import chain from one of roots to target,
// avoiding the packages in skip.
func chain(graph map[string][]string, roots []string, target string, skip map[string]bool) []string {
	prev := map[string]string{}
	queue := slices.Clone(roots)
	for _, r := range roots {
		prev[r] = ""
	}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == target {
			var c []string
			for ; p != ""; p = prev[p] {
				c = append(c, p)
			}
			slices.Reverse(c)
			return c
		}
		for _, imp := range graph[p] {
			if _, ok := prev[imp]; ok || skip[imp] {
				continue
			}
			prev[imp] = p
			queue = append(queue, imp)
		}
	}
	return nil
}
