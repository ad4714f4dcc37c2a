package sampler

import (
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/tandem-profiler/tandem/test/harness"
)

// The sampler is minimal by construction: the root process must not link
// gRPC, HTTP, TLS, pdata, a metrics client, Arrow, the IPC server or
// socket activation. The test checks the full transitive closure of the
// sampler's packages, upstream ones included, as the build sees it: with
// the overlay of _overlay/manifest.txt, which leaves the upstream
// reporter's OTLP exporter files out (they share a package with the
// interfaces the tracer needs). cmd/sampler's symbol-table test checks the
// binary itself.
//
// Compression packages are tolerated only where the code the sampler runs
// needs them: debug/elf (compressed ELF sections), cilium/ebpf
// (/proc/config.gz), the protobuf runtime (the tracer's process-context
// reader) and the Cap'n Proto runtime (schemas); the sampler compresses
// nothing itself.

var forbiddenPrefixes = []string{
	"google.golang.org/grpc",
	"net/http",
	"golang.org/x/net/http",
	"vendor/golang.org/x/net/http",
	"crypto/tls",
	"go.opentelemetry.io/collector",
	"go.opentelemetry.io/ebpf-profiler/reporter/internal/pdata",
	"github.com/prometheus",
	"github.com/coreos/go-systemd/v22/activation",
	"github.com/apache/arrow",
	"github.com/klauspost/compress",
	"github.com/tandem-profiler/tandem/ipc/ipcserver",
	"github.com/tandem-profiler/tandem/encoder/aggregate",
	"github.com/tandem-profiler/tandem/debuginfo",
	"expvar",
}

// toleratedImporters lists, for packages that are forbidden unless a
// given importer needs them, the importers allowed to bring them in.
var toleratedImporters = map[string][]string{
	"compress/": {"debug/", "compress/", "github.com/cilium/ebpf", "google.golang.org/protobuf/internal/impl", "capnproto.org/go/capnp/v3/schemas"},
}

const modulePath = "github.com/tandem-profiler/tandem"

func hasPrefix(pkg, prefix string) bool {
	p := strings.TrimSuffix(prefix, "/")
	return pkg == p || strings.HasPrefix(pkg, p+"/") || !strings.HasSuffix(prefix, "/") && strings.HasPrefix(pkg, prefix)
}

func isForbidden(pkg string) bool {
	for _, p := range forbiddenPrefixes {
		if hasPrefix(pkg, p) {
			return true
		}
	}
	return false
}

type listedPackage struct {
	ImportPath string
	Imports    []string
	Standard   bool
}

func TestDependencyBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	root := harness.ModuleRoot(t)
	roots := []string{modulePath + "/sampler", modulePath + "/cmd/sampler"}
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Imports,Standard", "./sampler/...", "./cmd/sampler")
	cmd.Dir = root
	// As the build sees it: the Makefile's flags, the overlay too.
	cmd.Env = harness.BuildFlags(t, "").Env()
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
	importers := map[string][]string{}
	for pkg, imps := range graph {
		for _, imp := range imps {
			importers[imp] = append(importers[imp], pkg)
		}
	}

	all := closure(graph, roots)
	var pkgs []string
	for pkg := range all {
		pkgs = append(pkgs, pkg)
	}
	slices.Sort(pkgs)
	for _, pkg := range pkgs {
		if isForbidden(pkg) {
			t.Errorf("the sampler links %s: %s", pkg, strings.Join(chain(graph, roots, pkg), " -> "))
			continue
		}
		for prefix, allowed := range toleratedImporters {
			if !hasPrefix(pkg, prefix) {
				continue
			}
			for _, imp := range importers[pkg] {
				if !all[imp] || slices.ContainsFunc(allowed, func(a string) bool { return hasPrefix(imp, a) }) {
					continue
				}
				t.Errorf("the sampler links %s through %s, which is not one of the importers that need it (%v): %s",
					pkg, imp, allowed, strings.Join(chain(graph, roots, imp), " -> "))
			}
		}
	}
	t.Logf("%d packages in the sampler's closure", len(all))
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

// chain returns a shortest import chain from one of roots to target.
func chain(graph map[string][]string, roots []string, target string) []string {
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
			if _, ok := prev[imp]; ok {
				continue
			}
			prev[imp] = p
			queue = append(queue, imp)
		}
	}
	return nil
}
