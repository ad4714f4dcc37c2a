package schema_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tandem-profiler/tandem/schema"
)

func TestKeyOf(t *testing.T) {
	id := schema.FileID{Hi: 0x0123456789abcdef, Lo: 0xfedcba9876543210}
	for _, tc := range []struct {
		name   string
		gnu    string
		fileID schema.FileID
		want   string
		kind   schema.KeyKind
	}{
		{"gnu", "abcdef01", id, "abcdef01", schema.KeyGNUBuildID},
		{"gnu lower-cased", "ABCDEF01", id, "abcdef01", schema.KeyGNUBuildID},
		{"file id without gnu", "", id, "0123456789abcdeffedcba9876543210", schema.KeyFileID},
		{"neither", "", schema.FileID{}, "", schema.KeyNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := schema.KeyOf(tc.gnu, tc.fileID)
			if k.String() != tc.want || k.Kind != tc.kind {
				t.Errorf("KeyOf(%q, %v) = %q kind %d, want %q kind %d", tc.gnu, tc.fileID, k.String(), k.Kind, tc.want, tc.kind)
			}
		})
	}
}

// TestNoOtherExecutableKey fails when a product function outside KeyOf
// chooses between an executable's GNU build id and its file id itself:
// one that reads the first and renders or tests the second. Parca names
// frames only when every format and the symbol upload agree on the key.
func TestNoOtherExecutableKey(t *testing.T) {
	root := filepath.Join("..")
	skip := map[string]bool{"vendor": true, "test": true, "tools": true, ".build": true, ".git": true}
	fset := token.NewFileSet()
	var checked int
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if rel, _ := filepath.Rel(root, p); skip[rel] || (rel != "." && strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			checked++
			if gnu, fileID := keyFieldReads(fn.Body); gnu != token.NoPos && fileID != token.NoPos {
				t.Errorf("%s: %s reads an executable's GNU build id and file id: name it with schema.KeyOf (or aggregate.Flush.ExecutableKey) instead",
					fset.Position(gnu), fn.Name.Name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked only %d functions: the walk missed the module", checked)
	}
}

// keyFieldReads returns where body first reads a GNUBuildID field and
// first renders or tests a FileID field (x.FileID.Hex(), x.FileID.IsZero()),
// not counting KeyOf's arguments: the makings of a key. Copying or
// comparing the fields is not.
func keyFieldReads(body *ast.BlockStmt) (gnu, fileID token.Pos) {
	written := map[ast.Expr]bool{}
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			sel, ok := n.Fun.(*ast.SelectorExpr)
			if !ok {
				break
			}
			if sel.Sel.Name == "KeyOf" {
				return false
			}
			if inner, ok := sel.X.(*ast.SelectorExpr); ok && inner.Sel.Name == "FileID" &&
				(sel.Sel.Name == "Hex" || sel.Sel.Name == "IsZero") && fileID == token.NoPos {
				fileID = n.Pos()
			}
		case *ast.AssignStmt:
			for _, l := range n.Lhs {
				written[l] = true
			}
		case *ast.SelectorExpr:
			if !written[n] && n.Sel.Name == "GNUBuildID" && gnu == token.NoPos {
				gnu = n.Pos()
			}
		}
		return true
	})
	return gnu, fileID
}
