package main

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tandem-profiler/tandem/test/harness"
)

// forbiddenSymbols are package paths whose code must not be in the
// sampler's binary: the root process's attack surface is only what it
// runs. A symbol matches when it contains one of them (methods, closures,
// type descriptors and itabs all name the package).
var forbiddenSymbols = []string{
	"google.golang.org/grpc",
	"golang.org/x/net/http2",
	"net/http.",
	"net/http/",
	"crypto/tls.",
	"go.opentelemetry.io/collector/pdata",
	"github.com/prometheus/client_golang",
	"github.com/coreos/go-systemd/v22/activation",
	"github.com/tandem-profiler/tandem/ipc/ipcserver",
}

// TestBinaryHasNoForbiddenSymbols builds tandem-sampler as `make build`
// does (vendor mode, the overlay of _overlay/manifest.txt) and reads its
// symbol table. It logs the largest packages, for docs/benchmarks/footprint.md.
func TestBinaryHasNoForbiddenSymbols(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the sampler")
	}
	bin := filepath.Join(harness.Build(t, harness.BuildConfig{Dir: t.TempDir()}, harness.Sampler), harness.Sampler.Out)
	out, err := exec.Command("go", "tool", "nm", "-size", bin).Output()
	if err != nil {
		t.Fatalf("go tool nm: %v", err)
	}
	found := map[string][]string{}
	textByPkg := map[string]int64{}
	var text, n int64
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		// address size type name
		f := strings.Fields(sc.Text())
		if len(f) < 4 {
			continue
		}
		n++
		name := strings.Join(f[3:], " ")
		for _, p := range forbiddenSymbols {
			if strings.Contains(name, p) {
				found[p] = append(found[p], name)
			}
		}
		if f[2] == "T" || f[2] == "t" {
			size, _ := strconv.ParseInt(f[1], 10, 64)
			text += size
			textByPkg[symbolPackage(name)] += size
		}
	}
	if n < 1000 {
		t.Fatalf("go tool nm listed %d symbols: not a symbol table", n)
	}
	for _, p := range forbiddenSymbols {
		if syms := found[p]; len(syms) > 0 {
			t.Errorf("%d symbols of %s in tandem-sampler, e.g. %s", len(syms), p, strings.Join(syms[:min(3, len(syms))], ", "))
		}
	}
	fi, err := os.Stat(bin)
	if err != nil {
		t.Fatal(err)
	}
	type pkgSize struct {
		pkg  string
		size int64
	}
	var top []pkgSize
	for p, s := range textByPkg {
		top = append(top, pkgSize{p, s})
	}
	slices.SortFunc(top, func(a, b pkgSize) int { return cmp.Compare(b.size, a.size) })
	var b strings.Builder
	for _, p := range top[:min(15, len(top))] {
		fmt.Fprintf(&b, "\n  %8d KiB  %s", p.size>>10, p.pkg)
	}
	t.Logf("tandem-sampler: %d bytes, %d symbols, %d KiB of text; largest packages by text:%s", fi.Size(), n, text>>10, b.String())
}

// symbolPackage returns the package path of a Go symbol name
// ("path/to/pkg.(*T).M" -> "path/to/pkg").
func symbolPackage(name string) string {
	name = strings.TrimPrefix(name, "type:")
	slash := strings.LastIndex(name, "/")
	if dot := strings.Index(name[slash+1:], "."); dot >= 0 {
		return name[:slash+1+dot]
	}
	return name
}
