package reference

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// Owned names the generated pages of one kind: the files in Dir whose names
// start with Prefix. A file there that the generator no longer writes is
// stale.
type Owned struct{ Dir, Prefix string }

// Check fails t for every page of fs that differs from the file under root
// and for every stale file of owned. With update it first writes the pages
// and removes the stale files, so that the check passes.
func Check(t testing.TB, root string, fs Files, update bool, owned ...Owned) {
	t.Helper()
	const fix = "run `make reference` and commit the pages"
	for _, p := range fs.Paths() {
		path := filepath.Join(root, filepath.FromSlash(p))
		if update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, fs[p], 0o644); err != nil {
				t.Fatal(err)
			}
		}
		have, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%s: %v: %s", p, err, fix)
			continue
		}
		if line, ok := firstDifference(have, fs[p]); !ok {
			t.Errorf("%s is stale: it differs from what the code generates from line %d on (%q): %s", p, line.n, line.want, fix)
		}
	}
	for _, o := range owned {
		stale, err := fs.Stale(root, o.Dir, o.Prefix)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range stale {
			if update {
				if err := os.Remove(filepath.Join(root, filepath.FromSlash(p))); err != nil {
					t.Fatal(err)
				}
				continue
			}
			t.Errorf("%s documents what the code no longer has: %s", p, fix)
		}
	}
}

type difference struct {
	n    int
	want string
}

// firstDifference reports the first line where have and want differ.
func firstDifference(have, want []byte) (difference, bool) {
	if bytes.Equal(have, want) {
		return difference{}, true
	}
	h, w := bytes.Split(have, []byte("\n")), bytes.Split(want, []byte("\n"))
	for i := range w {
		if i >= len(h) || !bytes.Equal(h[i], w[i]) {
			return difference{n: i + 1, want: string(w[i])}, false
		}
	}
	return difference{n: len(w) + 1, want: fmt.Sprintf("(end of file; the page has %d more lines)", len(h)-len(w))}, false
}
