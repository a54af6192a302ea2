// Command structfig prints figures of the engine's internal structure:
// how many methods and fields *Engine reaches, how many selectors in the
// engine reach a component through an embedded field, which components
// use which others (directly or through the Engine as their host), who
// writes each mutable map, and where a task's timeout becomes a deadline.
//
// Run it from the module root: go run ./engine/internal/structfig
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

func main() {
	dir := flag.String("dir", "engine", "the package directory to measure")
	verbose := flag.Bool("v", false, "list every item behind each figure")
	flag.Parse()
	if err := run(*dir, *verbose, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "structfig:", err)
		os.Exit(1)
	}
}

// components are the engine's parts whose mutual use is measured; any
// other type of the package counts as itself.
var components = []string{"planner", "resolver", "leadership", "dispatcher", "completer", "operator", "backfiller",
	"takeover", "retention"}

type pkg struct {
	fset  *token.FileSet
	files []*ast.File
	info  *types.Info
	tpkg  *types.Package
}

func load(dir string) (*pkg, error) {
	out, err := exec.Command("go", "list", "-export", "-deps", "-json=ImportPath,Export", "./"+dir).Output()
	if err != nil {
		return nil, fmt.Errorf("go list ./%s: %w", dir, err)
	}
	exports := map[string]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p struct{ ImportPath, Export string }
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return nil, err
		}
		exports[p.ImportPath] = p.Export
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok || f == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
	names, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	p := &pkg{fset: fset, info: &types.Info{Selections: map[*ast.SelectorExpr]*types.Selection{},
		Uses: map[*ast.Ident]types.Object{}, Defs: map[*ast.Ident]types.Object{}, Types: map[ast.Expr]types.TypeAndValue{}}}
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		p.files = append(p.files, f)
	}
	conf := types.Config{Importer: imp}
	p.tpkg, err = conf.Check("github.com/ax-sched/ax/"+dir, fset, p.files, p.info)
	return p, err
}

func run(dir string, verbose bool, w io.Writer) error {
	p, err := load(dir)
	if err != nil {
		return err
	}
	eng := p.tpkg.Scope().Lookup("Engine").Type()
	ms := types.NewMethodSet(types.NewPointer(eng))
	own := 0
	for i := range ms.Len() {
		if len(ms.At(i).Index()) == 1 {
			own++
		}
	}
	fmt.Fprintf(w, "methods reachable from *Engine: %d (%d declared on Engine, %d promoted)\n", ms.Len(), own, ms.Len()-own)
	fmt.Fprintf(w, "fields reachable from Engine: %d\n", countFields(eng))
	promoted(p, w, verbose)
	edges(p, w, verbose)
	mapWriters(p, w, verbose)
	deadlines(p, w, verbose)
	graphCopies(p, w, verbose)
	return nil
}

// countFields counts the fields reachable by name from t, promoted ones included.
func countFields(t types.Type) int {
	seen := map[string]bool{}
	var walk func(t types.Type, depth int)
	walk = func(t types.Type, depth int) {
		if pt, ok := t.(*types.Pointer); ok {
			t = pt.Elem()
		}
		st, ok := t.Underlying().(*types.Struct)
		if !ok || depth > 4 {
			return
		}
		for f := range st.Fields() {
			seen[f.Name()] = true
			if f.Embedded() {
				walk(f.Type(), depth+1)
			}
		}
	}
	walk(t, 0)
	return len(seen)
}

// owner names the function a node is in: its receiver's type, or the function.
func owner(fd *ast.FuncDecl, info *types.Info) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return "func " + fd.Name.Name
	}
	return typeName(info.Types[fd.Recv.List[0].Type].Type)
}

func typeName(t types.Type) string {
	if pt, ok := t.(*types.Pointer); ok {
		t = pt.Elem()
	}
	if n, ok := t.(*types.Named); ok {
		return n.Obj().Name()
	}
	return t.String()
}

func eachFunc(p *pkg, f func(fd *ast.FuncDecl)) {
	for _, file := range p.files {
		for _, d := range file.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Body != nil {
				f(fd)
			}
		}
	}
}

// promoted counts selectors that reach a field or method through an
// embedded field without naming it.
func promoted(p *pkg, w io.Writer, verbose bool) {
	fields, methods := 0, 0
	var list []string
	for sel, s := range p.info.Selections {
		if s.Kind() == types.MethodExpr || len(s.Index()) < 2 || typeName(s.Recv()) != "Engine" {
			continue
		}
		if s.Kind() == types.FieldVal {
			fields++
		} else {
			methods++
		}
		list = append(list, p.fset.Position(sel.Pos()).String()+" "+sel.Sel.Name)
	}
	fmt.Fprintf(w, "promoted accesses on Engine: %d (%d fields, %d methods)\n", fields+methods, fields, methods)
	if verbose {
		sort.Strings(list)
		for _, l := range list {
			fmt.Fprintln(w, "  ", l)
		}
	}
}

// declaredOn names the type whose field or method obj is.
func declaredOn(p *pkg, s *types.Selection) string {
	t := s.Recv()
	idx := s.Index()
	for _, i := range idx[:len(idx)-1] {
		t = fieldAt(t, i).Type()
	}
	if s.Kind() == types.FieldVal {
		return typeName(t)
	}
	if f, ok := s.Obj().(*types.Func); ok {
		if r := f.Signature().Recv(); r != nil {
			if _, isIface := r.Type().Underlying().(*types.Interface); !isIface {
				return typeName(r.Type())
			}
		}
	}
	return typeName(t)
}

func fieldAt(t types.Type, i int) *types.Var {
	if pt, ok := t.(*types.Pointer); ok {
		t = pt.Elem()
	}
	return t.Underlying().(*types.Struct).Field(i)
}

// edges lists, for each component, the other components whose fields or
// methods its code uses: directly (a pointer to a sibling), or through a
// host interface that the Engine answers with a sibling's method.
func edges(p *pkg, w io.Writer, verbose bool) {
	isComp := map[string]bool{}
	for _, c := range components {
		isComp[c] = true
	}
	eng := p.tpkg.Scope().Lookup("Engine").Type()
	forwards := engineForwards(p, isComp)
	type edge struct{ from, to, via string }
	seen := map[edge]bool{}
	eachFunc(p, func(fd *ast.FuncDecl) {
		from := owner(fd, p.info)
		if !isComp[from] {
			return
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			s := p.info.Selections[sel]
			if s == nil {
				return true
			}
			to, via := declaredOn(p, s), "direct"
			if _, iface := s.Recv().Underlying().(*types.Interface); iface && strings.HasSuffix(typeName(s.Recv()), "Host") {
				obj, idx, _ := types.LookupFieldOrMethod(types.NewPointer(eng), true, p.tpkg, sel.Sel.Name)
				if obj == nil {
					return true
				}
				to, via = "Engine", "host"
				if len(idx) > 1 {
					to = typeName(fieldAt(eng, idx[0]).Type())
				} else if fwd := forwards[sel.Sel.Name]; len(fwd) > 0 {
					for _, c := range fwd {
						if c != from {
							seen[edge{from, c, "host"}] = true
						}
					}
					return true
				}
			}
			if to != from && (isComp[to] || to == "Engine") {
				seen[edge{from, to, via}] = true
			}
			return true
		})
	})
	pairs := map[[2]string]bool{}
	var list []string
	toEngine := 0
	for e := range seen {
		if e.to == "Engine" {
			toEngine++
		} else {
			pairs[[2]string{e.from, e.to}] = true
		}
		list = append(list, fmt.Sprintf("%s -> %s (%s)", e.from, e.to, e.via))
	}
	both := 0
	for pr := range pairs {
		if pairs[[2]string{pr[1], pr[0]}] && pr[0] < pr[1] {
			both++
		}
	}
	fmt.Fprintf(w, "edges between components: %d (%d pairs both ways); components calling back into Engine: %d\n", len(pairs), both, toEngine)
	if verbose {
		sort.Strings(list)
		for _, l := range list {
			fmt.Fprintln(w, "  ", l)
		}
	}
}

// mapWriters lists, for every struct field of map type, the types whose
// methods write it (an element set or deleted, the map cleared or replaced).
func mapWriters(p *pkg, w io.Writer, verbose bool) {
	writers := map[*types.Var]map[string]bool{}
	note := func(e ast.Expr, who string) {
		e = ast.Unparen(e)
		if ix, ok := e.(*ast.IndexExpr); ok {
			e = ast.Unparen(ix.X)
		}
		sel, ok := e.(*ast.SelectorExpr)
		if !ok {
			return
		}
		s := p.info.Selections[sel]
		if s == nil || s.Kind() != types.FieldVal {
			return
		}
		v := s.Obj().(*types.Var)
		if _, isMap := v.Type().Underlying().(*types.Map); !isMap {
			return
		}
		if writers[v] == nil {
			writers[v] = map[string]bool{}
		}
		writers[v][who] = true
	}
	eachFunc(p, func(fd *ast.FuncDecl) {
		who := owner(fd, p.info)
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.AssignStmt:
				for _, l := range n.Lhs {
					note(l, who)
				}
			case *ast.IncDecStmt:
				note(n.X, who)
			case *ast.CallExpr:
				if id, ok := n.Fun.(*ast.Ident); ok && (id.Name == "delete" || id.Name == "clear") && len(n.Args) > 0 {
					note(n.Args[0], who)
				}
			}
			return true
		})
	})
	var list []string
	many := 0
	for v, ws := range writers {
		names := make([]string, 0, len(ws))
		for n := range ws {
			names = append(names, n)
		}
		slices.Sort(names)
		if len(names) > 1 {
			many++
		}
		list = append(list, fmt.Sprintf("%s.%s: %s", fieldOwner(p, v), v.Name(), strings.Join(names, ", ")))
	}
	fmt.Fprintf(w, "mutable map fields: %d, written by more than one type: %d\n", len(writers), many)
	if verbose {
		sort.Strings(list)
		for _, l := range list {
			fmt.Fprintln(w, "  ", l)
		}
	}
}

// fieldOwner names the struct type that declares field v.
func fieldOwner(p *pkg, v *types.Var) string {
	for _, name := range p.tpkg.Scope().Names() {
		tn, ok := p.tpkg.Scope().Lookup(name).(*types.TypeName)
		if !ok {
			continue
		}
		if st, ok := tn.Type().Underlying().(*types.Struct); ok {
			for f := range st.Fields() {
				if f == v {
					return name
				}
			}
		}
	}
	return "?"
}

// deadlines lists the places that add a task's timeout to a time (a
// deadline) or take it away from one (a start worked back from a deadline).
func deadlines(p *pkg, w io.Writer, verbose bool) {
	var adds, subs []string
	for _, file := range p.files {
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 1 {
				return true
			}
			fn, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || fn.Sel.Name != "Add" || typeName(p.info.Types[fn.X].Type) != "Time" {
				return true
			}
			arg := ast.Unparen(call.Args[0])
			neg := false
			if u, ok := arg.(*ast.UnaryExpr); ok && u.Op == token.SUB {
				arg, neg = ast.Unparen(u.X), true
			}
			sel, ok := arg.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Timeout" {
				return true
			}
			pos := p.fset.Position(call.Pos())
			at := fmt.Sprintf("%s:%d", filepath.Base(pos.Filename), pos.Line)
			if neg {
				subs = append(subs, at)
			} else {
				adds = append(adds, at)
			}
			return true
		})
	}
	fmt.Fprintf(w, "places a deadline is computed from a timeout: %d; a start worked back from a deadline: %d\n", len(adds), len(subs))
	if verbose {
		fmt.Fprintln(w, "   deadline:", strings.Join(adds, " "))
		fmt.Fprintln(w, "   start back:", strings.Join(subs, " "))
	}
}

// engineForwards lists, for each method of Engine, the components its body
// uses: an ask a component makes of its host reaches them.
func engineForwards(p *pkg, isComp map[string]bool) map[string][]string {
	out := map[string][]string{}
	eachFunc(p, func(fd *ast.FuncDecl) {
		if owner(fd, p.info) != "Engine" {
			return
		}
		seen := map[string]bool{}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			// A selector on the Engine that goes through a component field,
			// named or embedded, reaches that component.
			if s := p.info.Selections[sel]; s != nil && typeName(s.Recv()) == "Engine" && (len(s.Index()) > 1 || s.Kind() == types.FieldVal) {
				if c := typeName(fieldAt(s.Recv(), s.Index()[0]).Type()); isComp[c] && !seen[c] {
					seen[c] = true
					out[fd.Name.Name] = append(out[fd.Name.Name], c)
				}
			}
			return true
		})
	})
	return out
}

// graphCopies lists the fields of the Engine and its components that hold
// the task map or the graph of their own.
func graphCopies(p *pkg, w io.Writer, verbose bool) {
	var list []string
	for _, name := range append([]string{"Engine"}, components...) {
		obj := p.tpkg.Scope().Lookup(name)
		if obj == nil {
			continue
		}
		st, ok := obj.Type().Underlying().(*types.Struct)
		if !ok {
			continue
		}
		for f := range st.Fields() {
			if t := f.Type().String(); t == "*github.com/ax-sched/ax/dag.Graph" || strings.HasSuffix(t, "map[string]*github.com/ax-sched/ax/"+p.tpkg.Name()+".taskInfo") {
				list = append(list, name+"."+f.Name())
			}
		}
	}
	fmt.Fprintf(w, "fields holding the task map or the graph: %d\n", len(list))
	if verbose {
		fmt.Fprintln(w, "  ", strings.Join(list, " "))
	}
}
