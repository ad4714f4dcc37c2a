package harness

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// ModulePath is the module's import path.
const ModulePath = "github.com/tandem-profiler/tandem"

var (
	rootOnce sync.Once
	root     string
	rootErr  error
)

// ModuleRoot returns the module's root directory: the nearest directory
// above the test's working directory (its package's) whose go.mod
// declares ModulePath.
func ModuleRoot(t testing.TB) string {
	t.Helper()
	rootOnce.Do(func() { root, rootErr = findRoot() })
	if rootErr != nil {
		t.Fatal(rootErr)
	}
	return root
}

func findRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find the module root: %w", err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if modulePath(filepath.Join(dir, "go.mod")) == ModulePath {
			return dir, nil
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("find the module root: no go.mod of %s in %s or above it", ModulePath, wd)
		}
	}
}

// modulePath reads the module line of a go.mod ("" if there is none).
func modulePath(gomod string) string {
	f, err := os.Open(gomod)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}
