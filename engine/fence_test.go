package engine

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/ax-sched/ax/store"
)

// TestEngineWritesOnlyThroughTheFence reads the engine's source: a call of a
// store write (any method that store.Fence has) on the store itself, rather
// than through e.w(), is a write a stale primary could still make (R44).
func TestEngineWritesOnlyThroughTheFence(t *testing.T) {
	t.Parallel()
	writes := map[string]bool{}
	ft := reflect.TypeFor[*store.Fence]()
	for i := range ft.NumMethod() {
		if m := ft.Method(i).Name; m != "Epoch" {
			writes[m] = true
		}
	}
	files, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, f := range files {
		name := f.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || !writes[sel.Sel.Name] {
				return true
			}
			// e.st.Transition(…) or st.Transition(…): a *store.Store receiver.
			var recv string
			switch x := sel.X.(type) {
			case *ast.SelectorExpr:
				recv = x.Sel.Name
			case *ast.Ident:
				recv = x.Name
			}
			if recv == "st" {
				t.Errorf("%s: %s.%s writes to the store unfenced: write through e.w() (store.Fence)", fset.Position(call.Pos()), recv, sel.Sel.Name)
			}
			return true
		})
	}
	if checked == 0 {
		t.Fatal("no engine source read")
	}
}
