package reference

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

func TestCommands(t *testing.T) {
	host, err := os.Hostname()
	if err != nil || host == "" {
		t.Skip("no host name to replace")
	}
	root := &cobra.Command{Use: "tool", Short: "a tool"}
	sub := &cobra.Command{Use: "sub", Short: "a subcommand", Run: func(*cobra.Command, []string) {}}
	sub.Flags().String("node", host, "node name")
	root.PersistentFlags().String("dir", "", "files go in <dir>/x")
	root.AddCommand(sub)
	fs, err := Commands(root, "Manual")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"docs/man/tool-sub.1", "docs/man/tool.1", "docs/reference/tool.md", "docs/reference/tool_sub.md"}
	if got := fs.Paths(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("pages %v, want %v", got, want)
	}
	for _, p := range []string{"docs/reference/tool_sub.md", "docs/man/tool-sub.1"} {
		page := string(fs[p])
		if strings.Contains(page, host) || !strings.Contains(page, hostPlaceholder) {
			t.Errorf("%s shows the host name as the default instead of %q:\n%s", p, hostPlaceholder, page)
		}
	}
	for _, p := range []string{"docs/man/tool.1", "docs/man/tool-sub.1", "docs/reference/tool_sub.md"} {
		if !strings.Contains(string(fs[p]), "<dir>/x") {
			t.Errorf("%s lost the <dir> of a flag's help:\n%s", p, fs[p])
		}
	}
	for p, page := range fs {
		if strings.Contains(string(page), "Auto generated") || strings.Contains(string(page), "1970") {
			t.Errorf("%s carries a date or generation tag, so it would change from day to day:\n%s", p, page)
		}
	}
}

func TestValues(t *testing.T) {
	values := []byte("# file comment\n\n# The image.\nimage:\n  # Where from.\n  repository: r\n  tag: \"\"\nlist: [a, b]\n")
	schema := []byte(`{"properties": {"image": {"type": "object", "properties": {
		"repository": {"type": "string", "minLength": 1},
		"tag": {"type": "string", "description": "a tag", "pattern": "^$|^v"}}},
		"list": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}}}}`)
	fs, err := Values("chart", values, schema)
	if err != nil {
		t.Fatal(err)
	}
	page := string(fs[ValuesPage])
	for _, row := range []string{
		"| `image` | | object | The image. |",
		"| `image.repository` | `r` | string, not empty | Where from. |",
		"| `image.tag` | \"\" | string, matching `^$\\|^v` | a tag |",
		"| `list` | `[\"a\",\"b\"]` | array, items: string, one of `a`, `b` |  |",
	} {
		if !strings.Contains(page, row+"\n") {
			t.Errorf("no row %s in\n%s", row, page)
		}
	}
	if _, err := Values("chart", []byte("other: 1\n"), schema); err == nil {
		t.Error("a value the schema does not describe: no error")
	}
}

// recorder is a testing.TB that keeps its failures instead of failing.
type recorder struct {
	testing.TB
	errs []string
}

func (r *recorder) Helper()                   {}
func (r *recorder) Errorf(f string, a ...any) { r.errs = append(r.errs, f) }
func (r *recorder) Fatal(a ...any)            { r.errs = append(r.errs, "fatal") }

func TestCheck(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "docs", "reference")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string]string{"tool.md": "old\n", "tool_gone.md": "x\n", "other.md": "kept\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fs := Files{"docs/reference/tool.md": []byte("new\n")}
	owned := Owned{Dir: "docs/reference", Prefix: "tool"}

	r := &recorder{TB: t}
	Check(r, root, fs, false, owned)
	if len(r.errs) != 2 {
		t.Errorf("check of a stale page and a stale file: %d failures, want 2", len(r.errs))
	}
	r = &recorder{TB: t}
	Check(r, root, fs, true, owned)
	if len(r.errs) != 0 {
		t.Errorf("update: %d failures", len(r.errs))
	}
	if _, err := os.Stat(filepath.Join(dir, "tool_gone.md")); !os.IsNotExist(err) {
		t.Errorf("update left the stale page: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "other.md")); err != nil {
		t.Errorf("update removed a page it does not own: %v", err)
	}
	r = &recorder{TB: t}
	Check(r, root, fs, false, owned)
	if len(r.errs) != 0 {
		t.Errorf("check after update: %d failures", len(r.errs))
	}
}

func TestTable(t *testing.T) {
	page := string(Table("p.md", "T", "intro", []string{"A", "B"}, [][]string{{"`x`", "a|b"}})["p.md"])
	want := "# T\n\nintro\n\n| A | B |\n|---|---|\n| `x` | a\\|b |\n"
	if page != want {
		t.Errorf("page\n%s\nwant\n%s", page, want)
	}
}
