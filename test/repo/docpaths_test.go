package repo

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tandem-profiler/tandem/test/harness"
)

// TestDocsCiteExistingPaths fails when documentation (a Markdown file or a
// Go comment) cites a path in this repository that does not exist, such as
// a renamed file or a document kept outside the repository. A path is
// cited when it starts with one of the repository's top-level directories
// and stands alone (not inside a longer path, an import path or a URL); it
// may be relative to the citing file's directory or one above it, and may
// name a package's identifier (internal/logging.Tee). Another project's
// file is cited after its owner: "protobuf's internal/impl", "otlptracegrpc,
// whose internal/otlpconfig/options.go".
func TestDocsCiteExistingPaths(t *testing.T) {
	root := harness.ModuleRoot(t)
	top, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range top {
		if e.IsDir() && !skipDir(e.Name()) {
			dirs = append(dirs, regexp.QuoteMeta(e.Name()))
		}
	}
	cite := regexp.MustCompile(`(?:^|[^A-Za-z0-9_./@:-])((?:` + strings.Join(dirs, "|") + `)/[A-Za-z0-9_./-]*[A-Za-z0-9_])`)
	check := func(file string, line int, text string) {
		if outside.MatchString(text) {
			rel, _ := filepath.Rel(root, file)
			t.Errorf("%s:%d cites the session's shared documents, which are not in the repository", rel, line)
		}
		for _, m := range cite.FindAllStringSubmatchIndex(text, -1) {
			p := text[m[2]:m[3]]
			if owned.MatchString(text[:m[2]]) || cited(root, filepath.Dir(file), p) {
				continue
			}
			rel, _ := filepath.Rel(root, file)
			t.Errorf("%s:%d cites %s, which is not in the repository: fix the path, or drop the citation (documents outside the repository cannot be cited)", rel, line, p)
		}
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (skipDir(d.Name()) || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case strings.HasSuffix(path, ".md"):
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for i, l := range strings.Split(string(b), "\n") {
				check(path, i+1, l)
			}
		case strings.HasSuffix(path, ".go"):
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
			if err != nil {
				return err
			}
			for _, g := range f.Comments {
				for _, c := range g.List {
					check(path, fset.Position(c.Pos()).Line, c.Text)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// outside matches a path to the documents kept beside the repository.
var outside = regexp.MustCompile(`(?:/work/shared|\.\./shared)/`)

// owned matches the text before another project's path: its owner.
var owned = regexp.MustCompile("(?:'s|whose)[ `]*$")

// ident is a Go identifier after a package path (encoder/labels.New).
var ident = regexp.MustCompile(`\.[A-Za-z_][A-Za-z0-9_]*$`)

// cited reports whether p names a file or directory of the repository,
// from its root or from dir or one of its parents, with or without a
// trailing identifier.
func cited(root, dir, p string) bool {
	for _, q := range []string{p, ident.ReplaceAllString(p, "")} {
		for d := dir; ; d = filepath.Dir(d) {
			if _, err := os.Stat(filepath.Join(d, filepath.FromSlash(q))); err == nil {
				return true
			}
			if d == root || len(d) < len(root) {
				break
			}
		}
	}
	return false
}

// skipDir: directories that are not the repository's own sources (vendored
// modules, build output, hidden and underscore directories).
func skipDir(name string) bool {
	return name == "vendor" || name == "bin" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")
}
