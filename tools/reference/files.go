package reference

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Files maps a page's path, relative to the repository's root and with
// forward slashes, to its contents.
type Files map[string][]byte

// Paths returns the pages' paths, sorted.
func (fs Files) Paths() []string {
	paths := make([]string, 0, len(fs))
	for p := range fs {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	return paths
}

// Stale lists the files in dir (relative to root) whose names start with
// prefix and that fs does not generate: pages of a command or value that
// no longer exists.
func (fs Files) Stale(root, dir, prefix string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(root, filepath.FromSlash(dir)))
	if err != nil {
		return nil, err
	}
	var stale []string
	for _, e := range entries {
		p := dir + "/" + e.Name()
		if !e.IsDir() && strings.HasPrefix(e.Name(), prefix) && fs[p] == nil {
			stale = append(stale, p)
		}
	}
	return stale, nil
}
