package sampler

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// manifestEntry is one line of _overlay/manifest.txt.
type manifestEntry struct {
	line        int
	action      string // replace, exclude, keep
	sha256      string
	path        string // relative to vendor/
	replacement string // replace: file under _overlay/
}

func readManifest(t *testing.T, root string) (module, version string, entries []manifestEntry) {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "_overlay", "manifest.txt"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		switch {
		case fields[0] == "module" && len(fields) == 3:
			module, version = fields[1], fields[2]
		case fields[0] == "replace" && len(fields) == 4,
			(fields[0] == "exclude" || fields[0] == "keep") && len(fields) == 3:
			e := manifestEntry{line: n, action: fields[0], sha256: fields[1], path: fields[2]}
			if len(fields) == 4 {
				e.replacement = fields[3]
			}
			entries = append(entries, e)
		default:
			t.Fatalf("_overlay/manifest.txt:%d: cannot parse %q", n, sc.Text())
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if module == "" || len(entries) == 0 {
		t.Fatal("_overlay/manifest.txt names no module or no file")
	}
	return module, version, entries
}

// TestOverlayManifest fails loudly when an upstream bump changes a file the
// build replaces, excludes or keeps beside them, or adds a file to one of
// their directories: what was checked safe to replace or leave out must be
// checked again. It also checks that the overlay the build uses
// (.build/overlay.json, written by make prepare) says what the manifest
// says.
func TestOverlayManifest(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	module, version, entries := readManifest(t, root)
	const fix = "read the upstream change, check that the file is still safe to replace or leave out of the sampler, and update _overlay/manifest.txt (hash, files)"

	modules, err := os.ReadFile(filepath.Join(root, "vendor", "modules.txt"))
	if err != nil {
		t.Fatalf("read vendor/modules.txt (run make prepare): %v", err)
	}
	if m := regexp.MustCompile(`(?m)^# ` + regexp.QuoteMeta(module) + ` (\S+)`).FindSubmatch(modules); m == nil {
		t.Errorf("vendor/modules.txt has no module %s", module)
	} else if string(m[1]) != version {
		t.Errorf("%s is %s in vendor/modules.txt, but _overlay/manifest.txt was checked against %s: %s", module, m[1], version, fix)
	}

	listed := map[string]bool{}
	dirs := map[string]bool{}
	for _, e := range entries {
		listed[e.path] = true
		dirs[filepath.Dir(e.path)] = true
		b, err := os.ReadFile(filepath.Join(root, "vendor", e.path))
		if err != nil {
			t.Errorf("_overlay/manifest.txt:%d: %s vendor/%s: %v: %s", e.line, e.action, e.path, err, fix)
			continue
		}
		sum := sha256.Sum256(b)
		if got := hex.EncodeToString(sum[:]); got != e.sha256 {
			t.Errorf("_overlay/manifest.txt:%d: vendor/%s changed upstream (sha256 %s, manifest %s): %s", e.line, e.path, got, e.sha256, fix)
		}
		if e.action == "replace" {
			if _, err := os.Stat(filepath.Join(root, "_overlay", e.replacement)); err != nil {
				t.Errorf("_overlay/manifest.txt:%d: replacement: %v", e.line, err)
			}
		}
	}
	for dir := range dirs {
		ents, err := os.ReadDir(filepath.Join(root, "vendor", dir))
		if err != nil {
			t.Error(err)
			continue
		}
		for _, de := range ents {
			p := dir + "/" + de.Name()
			if strings.HasSuffix(de.Name(), ".go") && !listed[p] {
				t.Errorf("vendor/%s is new upstream and not in _overlay/manifest.txt (keep, replace or exclude it): %s", p, fix)
			}
		}
	}

	// The overlay the build uses.
	b, err := os.ReadFile(filepath.Join(root, ".build", "overlay.json"))
	if err != nil {
		t.Fatalf("read the build's overlay (run make prepare): %v", err)
	}
	var ov struct{ Replace map[string]string }
	if err := json.Unmarshal(b, &ov); err != nil {
		t.Fatalf(".build/overlay.json: %v", err)
	}
	want := map[string]string{}
	for _, e := range entries {
		switch e.action {
		case "replace":
			want[filepath.Join(root, "vendor", e.path)] = filepath.Join(root, "_overlay", e.replacement)
		case "exclude":
			want[filepath.Join(root, "vendor", e.path)] = ""
		}
	}
	var diffs []string
	for k, v := range want {
		if got, ok := ov.Replace[k]; !ok || got != v {
			diffs = append(diffs, fmt.Sprintf("%s: overlay %q (present %v), manifest %q", k, got, ok, v))
		}
	}
	for k := range ov.Replace {
		if _, ok := want[k]; !ok {
			diffs = append(diffs, k+": in the overlay, not in the manifest")
		}
	}
	slices.Sort(diffs)
	for _, d := range diffs {
		t.Errorf(".build/overlay.json disagrees with _overlay/manifest.txt (run make prepare): %s", d)
	}
}
