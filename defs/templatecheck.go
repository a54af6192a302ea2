package defs

import (
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"text/template"
	"text/template/parse"
)

// What a template may name, read from the types themselves so that a field
// or helper added to TemplateData or Moment is known here at once.
var (
	dataFields    = exportedFields(reflect.TypeFor[TemplateData]())
	momentHelpers = exportedMethods(reflect.TypeFor[Moment]())
	// templateFuncs are text/template's predefined functions.
	templateFuncs = []string{"and", "call", "html", "index", "js", "len", "not", "or", "print", "printf", "println", "slice", "urlquery", "eq", "ge", "gt", "le", "lt", "ne"}
)

func exportedFields(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		if f.IsExported() {
			out = append(out, f.Name)
		}
	}
	slices.Sort(out)
	return out
}

func exportedMethods(t reflect.Type) []string {
	var out []string
	for m := range t.Methods() {
		out = append(out, m.Name)
	}
	slices.Sort(out)
	return out
}

// valueKind is what a template expression yields, as far as the static
// check follows it.
type valueKind int

const (
	kindOther    valueKind = iota // anything the check does not look into
	kindData                      // the TemplateData (dot at the top level)
	kindMoment                    // a Moment
	kindParams                    // the task's params
	kindUpstream                  // .Upstream: the upstreams' outputs by task
	kindUpTask                    // .Upstream.TASK: one upstream's outputs
)

var momentType = reflect.TypeFor[Moment]()

// templateChecker names every field, helper and param of a template that
// the data cannot resolve, each with a suggestion, before the template is
// run on sample values (which stops at the first problem).
type templateChecker struct {
	params   []string // the names the task declares under params
	problems []string
	refs     []UpstreamRef // what it reads of the upstreams' outputs
}

// staticProblems returns a reason for each unresolvable name in tmpl.
func staticProblems(tmpl *template.Template, params map[string]any) ([]string, []UpstreamRef) {
	c := &templateChecker{}
	for k := range params {
		c.params = append(c.params, k)
	}
	slices.Sort(c.params)
	if tmpl.Tree != nil && tmpl.Tree.Root != nil {
		c.list(tmpl.Tree.Root, true)
	}
	return c.problems, c.refs
}

// list checks the nodes of l; atTop says whether dot is still the
// TemplateData (inside range and with it is something else).
func (c *templateChecker) list(l *parse.ListNode, atTop bool) {
	if l == nil {
		return
	}
	for _, n := range l.Nodes {
		switch n := n.(type) {
		case *parse.ActionNode:
			c.pipe(n.Pipe, atTop)
		case *parse.IfNode:
			c.pipe(n.Pipe, atTop)
			c.list(n.List, atTop)
			c.list(n.ElseList, atTop)
		case *parse.RangeNode:
			c.pipe(n.Pipe, atTop)
			c.list(n.List, false)
			c.list(n.ElseList, atTop)
		case *parse.WithNode:
			c.pipe(n.Pipe, atTop)
			c.list(n.List, false)
			c.list(n.ElseList, atTop)
		}
	}
}

// pipe checks a pipeline and returns what it yields: what the first
// argument of its last command yields (a helper's result; a function such
// as printf yields kindOther).
func (c *templateChecker) pipe(p *parse.PipeNode, atTop bool) valueKind {
	if p == nil {
		return kindOther
	}
	k := kindOther
	for _, cmd := range p.Cmds {
		k = kindOther
		for i, arg := range cmd.Args {
			ak := c.arg(arg, atTop)
			if i == 0 {
				k = ak
			}
		}
	}
	return k
}

func (c *templateChecker) arg(n parse.Node, atTop bool) valueKind {
	switch n := n.(type) {
	case *parse.FieldNode:
		if !atTop {
			return kindOther
		}
		return c.idents(kindData, n.Ident)
	case *parse.VariableNode:
		if len(n.Ident) > 0 && n.Ident[0] == "$" {
			return c.idents(kindData, n.Ident[1:])
		}
	case *parse.ChainNode:
		return c.idents(c.arg(n.Node, atTop), n.Field)
	case *parse.PipeNode:
		return c.pipe(n, atTop)
	case *parse.DotNode:
		if atTop {
			return kindData
		}
	}
	return kindOther
}

// idents follows the names of a field chain from a value of kind k and
// records the first it cannot resolve.
func (c *templateChecker) idents(k valueKind, names []string) valueKind {
	var upTask string
	defer func() {
		switch k {
		case kindUpTask: // the whole map of one upstream
			c.refs = append(c.refs, UpstreamRef{Task: upTask})
		case kindUpstream: // every upstream's, which validation cannot follow
			c.problems = append(c.problems, "reads .Upstream as a whole: read one output as {{ .Upstream.TASK.KEY }}, so that ax validate can check it and the scheduler gives it (a task read so is named with letters, digits and _)")
		}
	}()
	for _, name := range names {
		switch k {
		case kindData:
			if !slices.Contains(dataFields, name) {
				c.problems = append(c.problems, fmt.Sprintf("there is no field %q%s", name, didYouMean(name, dataFields)))
				return kindOther
			}
			switch name {
			case "LogicalTime":
				k = kindMoment
			case "Params":
				k = kindParams
			case "Upstream":
				k = kindUpstream
			default:
				k = kindOther
			}
		case kindMoment:
			m, ok := momentType.MethodByName(name)
			if !ok {
				c.problems = append(c.problems, fmt.Sprintf(".LogicalTime has no helper %q%s", name, didYouMean(name, momentHelpers)))
				return kindOther
			}
			k = kindOther
			if m.Type.NumOut() > 0 && m.Type.Out(0) == momentType {
				k = kindMoment
			}
		case kindUpstream:
			upTask, k = name, kindUpTask
		case kindUpTask:
			c.refs = append(c.refs, UpstreamRef{Task: upTask, Key: name})
			k = kindOther
		case kindParams:
			if !slices.Contains(c.params, name) {
				c.problems = append(c.problems, undeclaredParam(name, c.params))
				return kindOther
			}
			k = kindOther
		default:
			return kindOther
		}
	}
	return k
}

// undeclaredParam is the reason for a param the task does not declare.
func undeclaredParam(name string, params []string) string {
	return fmt.Sprintf("uses the param %q, which the task does not declare%s: add it under params (a trigger's --param %s=... overrides it)",
		name, didYouMean(name, params), name)
}

var undefinedFuncRe = regexp.MustCompile(`function "([^"]+)" not defined`)

// parseErrorHint is a suggestion for a template that does not parse
// because it calls an unknown function, or "".
func parseErrorHint(err error) string {
	m := undefinedFuncRe.FindStringSubmatch(err.Error())
	if m == nil {
		return ""
	}
	cands := append(slices.Clone(templateFuncs), momentHelpers...)
	if s := Suggest(m[1], cands); s != "" {
		if slices.Contains(momentHelpers, s) {
			return fmt.Sprintf(" (did you mean .LogicalTime.%s?)", s)
		}
		return fmt.Sprintf(" (did you mean %q?)", s)
	}
	return ""
}
