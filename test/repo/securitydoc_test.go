package repo

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tandem-profiler/tandem/test/harness"
)

// TestSecurityDocNamesRealTests keeps docs/security.md true to its word:
// every test, subtest or fuzz target it cites as proof exists in a _test.go
// file of this repository (so a renamed or deleted test fails here, not in
// a reviewer's hands).
func TestSecurityDocNamesRealTests(t *testing.T) {
	root := harness.ModuleRoot(t)
	doc, err := os.ReadFile(filepath.Join(root, "docs", "security.md"))
	if err != nil {
		t.Fatal(err)
	}
	cited := regexp.MustCompile("`((?:Test|Fuzz)[A-Za-z0-9_]+)(?:/[a-z0-9_]+)?`").FindAllSubmatch(doc, -1)
	if len(cited) < 20 {
		t.Fatalf("docs/security.md cites %d tests; expected its claims to name their tests", len(cited))
	}
	defined := map[string]bool{}
	def := regexp.MustCompile(`(?m)^func ((?:Test|Fuzz)[A-Za-z0-9_]+)\(`)
	sub := regexp.MustCompile(`t\.Run\("([^"]+)"`)
	subtests := map[string]bool{}
	_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range def.FindAllSubmatch(src, -1) {
			defined[string(m[1])] = true
		}
		for _, m := range sub.FindAllSubmatch(src, -1) {
			subtests[strings.ReplaceAll(string(m[1]), " ", "_")] = true
		}
		return nil
	})
	for _, m := range cited {
		name := string(m[1])
		if !defined[name] {
			t.Errorf("docs/security.md cites %s, which no test file defines", name)
		}
		if _, subName, ok := strings.Cut(string(m[0]), "/"); ok {
			if s := strings.TrimSuffix(subName, "`"); !subtests[s] {
				t.Errorf("docs/security.md cites subtest %s/%s, which no t.Run names", name, s)
			}
		}
	}
}
