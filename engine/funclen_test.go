package engine

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines is the longest a function may be in the packages covered
// below: a longer one holds more than one rule, which then has no name of
// its own.
const maxFuncLines = 80

// funcLenRoots are the trees, relative to engine/, whose functions are held
// to maxFuncLines: the whole repository. Tests are left aside, and so are
// the packages that exist only to serve tests (storetest, apitest).
var funcLenRoots = []string{".."}

// testSupport reports whether dir holds code that only tests use, or test data.
func testSupport(dir string) bool {
	base := filepath.Base(dir)
	return base == "testdata" || strings.HasSuffix(base, "test") || strings.HasPrefix(base, ".")
}

// TestNoFunctionOverEightyLines keeps every function under funcLenRoots,
// tests aside, within maxFuncLines.
func TestNoFunctionOverEightyLines(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	for _, root := range funcLenRoots {
		files := 0
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && path != root && testSupport(path) {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			files++
			for _, decl := range f.Decls {
				fd, ok := decl.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > maxFuncLines {
					t.Errorf("%s: %s is %d lines, over %d: cut it into functions named for the rules they apply", path, fd.Name.Name, n, maxFuncLines)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if files < 3 {
			t.Fatalf("read %d source files under %s: the walk missed them", files, root)
		}
	}
}
