package httplimit_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOneRefusalWriter: Retry-After, the header every refusal carries, is
// spelt in one place of the admission layers and the gateway, the
// refusal writer (refusal.go); a layer that wrote its own would go around
// the writer, its observer and its Opaque rule. Other servers' answers
// (the RLS's headers) are rlheader's.
func TestOneRefusalWriter(t *testing.T) {
	fset := token.NewFileSet()
	for _, dir := range []string{".", "action", "../gateway", "../adaptive"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") || filepath.Base(f) == "refusal.go" && dir == "." {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			file, err := parser.ParseFile(fset, f, src, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(file, func(n ast.Node) bool {
				if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING && strings.EqualFold(strings.Trim(lit.Value, "`\""), "Retry-After") {
					t.Errorf("%s: Retry-After written outside the refusal writer (httplimit.Refusals)", fset.Position(lit.Pos()))
				}
				return true
			})
		}
	}
}
