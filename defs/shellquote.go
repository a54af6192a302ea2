package defs

import (
	"fmt"
	"path"
	"strings"
	"text/template"
	"text/template/parse"
)

// A value a trigger or an upstream chooses (a param, an upstream's output)
// that a template splices into the script of a shell (`sh -c SCRIPT`) is
// quoted by default, so that `--param 'region=cn; touch owned'` stays one
// word of the script. The quoting follows where the value lands: outside
// quotes it is wrapped in single quotes, inside "…" its \ " $ ` are
// escaped, inside '…' its ' is closed, escaped and reopened. `raw` opts a
// value out (`{{ .Params.flags | raw }}`); `shq` quotes a value for the
// shell wherever the author wants it.

// Template functions the author may call.
const (
	// FuncShellQuote quotes its argument as one shell word: 'it'\''s'.
	FuncShellQuote = "shq"
	// FuncRaw passes its argument as it is, unquoted even in a script.
	FuncRaw = "raw"
)

// Template functions that quoting by default adds, one per quote context.
const (
	funcQuoteWord   = "ax_quote_word"
	funcQuoteDouble = "ax_quote_double"
	funcQuoteSingle = "ax_quote_single"
)

// templateFuncMap is what every template of a pipeline may call beyond
// text/template's own functions.
var templateFuncMap = template.FuncMap{
	FuncShellQuote:  shellWord,
	FuncRaw:         func(v any) string { return fmt.Sprint(v) },
	funcQuoteWord:   shellWord,
	funcQuoteDouble: shellInDouble,
	funcQuoteSingle: shellInSingle,
}

// newTemplate parses text as a template of a pipeline, with its functions.
func newTemplate(name, text string) (*template.Template, error) {
	return template.New(name).Funcs(templateFuncMap).Option("missingkey=error").Parse(text)
}

// shellWord quotes v as one word of a shell script.
func shellWord(v any) string {
	return "'" + strings.ReplaceAll(fmt.Sprint(v), "'", `'\''`) + "'"
}

// shellInDouble escapes v for the inside of a double-quoted shell string.
func shellInDouble(v any) string {
	return strings.NewReplacer(`\`, `\\`, `"`, `\"`, "$", `\$`, "`", "\\`").Replace(fmt.Sprint(v))
}

// shellInSingle escapes v for the inside of a single-quoted shell string.
func shellInSingle(v any) string {
	return strings.ReplaceAll(fmt.Sprint(v), "'", `'\''`)
}

// shells are the programs whose `-c` argument is a script.
var shells = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "ash": true, "mksh": true}

// ScriptArg returns the index in argv of the script a shell runs, or -1
// when argv gives no shell a script. A shell is recognised wherever it
// stands in argv, whatever starts it (`env X=1 sh -c`, `timeout 5 bash -c`,
// `xargs -0 sh -c`, `busybox sh -c`): the first word named like a shell
// that is followed, after its options, by -c (alone or in a cluster such
// as -ec) has its script in the next word that is not an option.
func ScriptArg(argv []string) int {
	for j, a := range argv {
		if !shells[path.Base(a)] {
			continue
		}
		if i := shellScriptAt(argv, j+1); i >= 0 {
			return i
		}
	}
	return -1
}

// shellScriptAt reads the options of a shell from argv[i] on and returns
// the index of its script, or -1 when there is no -c.
func shellScriptAt(argv []string, i int) int {
	sawC := false
	for ; i < len(argv); i++ {
		a := argv[i]
		switch {
		case a == "--" || strings.HasPrefix(a, "--"):
			continue // end of options, or a long option (--norc, --login)
		case len(a) > 1 && (a[0] == '-' || a[0] == '+'):
			sawC = sawC || strings.Contains(a[1:], "c")
			if last := a[len(a)-1]; last == 'o' || last == 'O' {
				i++ // the operand of -o or -O: -o pipefail, -O extglob
			}
		default:
			if sawC {
				return i
			}
			return -1
		}
	}
	return -1
}

// quoteState is where a script's text stands: outside quotes, or inside
// double or single quotes.
type quoteState int

const (
	unquoted quoteState = iota
	inDouble
	inSingle
)

// scan returns the state after text, starting in s.
func (s quoteState) scan(text string) quoteState {
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch s {
		case unquoted:
			switch c {
			case '\\':
				i++
			case '"':
				s = inDouble
			case '\'':
				s = inSingle
			}
		case inDouble:
			switch c {
			case '\\':
				i++
			case '"':
				s = unquoted
			}
		case inSingle:
			if c == '\'' {
				s = unquoted
			}
		}
	}
	return s
}

// quoter adds the quoting function of its context to every action of a
// script's template that prints a chosen value.
type quoter struct {
	tree     *parse.Tree
	problems []string
}

// quoteScript makes tmpl, the template of a shell's script, quote every
// param and upstream output it prints. It returns why it cannot (an
// `{{if}}` whose branches leave the script's quotes open differently).
func quoteScript(tmpl *template.Template) []string {
	if tmpl.Tree == nil || tmpl.Tree.Root == nil {
		return nil
	}
	q := &quoter{tree: tmpl.Tree}
	q.list(tmpl.Tree.Root, unquoted, false)
	return q.problems
}

// list walks l from state s; chosen says that dot is itself a chosen
// value (inside a range or with over one). It returns the state after l.
func (q *quoter) list(l *parse.ListNode, s quoteState, chosen bool) quoteState {
	if l == nil {
		return s
	}
	for _, n := range l.Nodes {
		switch n := n.(type) {
		case *parse.TextNode:
			s = s.scan(string(n.Text))
		case *parse.ActionNode:
			if len(n.Pipe.Decl) == 0 && (chosen || choosesValue(n.Pipe)) {
				q.quote(n.Pipe, s)
			}
		case *parse.IfNode:
			s = q.branches(&n.BranchNode, s, chosen, chosen)
		case *parse.RangeNode:
			s = q.branches(&n.BranchNode, s, chosen || choosesValue(n.Pipe), chosen)
		case *parse.WithNode:
			s = q.branches(&n.BranchNode, s, chosen || choosesValue(n.Pipe), chosen)
		}
	}
	return s
}

// branches walks both lists of b from s; they must end in the same state.
func (q *quoter) branches(b *parse.BranchNode, s quoteState, inner, outer bool) quoteState {
	end := q.list(b.List, s, inner)
	if b.ElseList != nil {
		if e := q.list(b.ElseList, s, outer); e != end {
			q.problems = append(q.problems, "its {{if}}/{{else}} branches leave the script's quotes open differently: close each quote inside its branch")
		}
	}
	return end
}

// quote appends to p the function that quotes its value for state s,
// unless the author already ends p with shq or raw.
func (q *quoter) quote(p *parse.PipeNode, s quoteState) {
	if last := p.Cmds[len(p.Cmds)-1]; len(last.Args) > 0 {
		if id, ok := last.Args[0].(*parse.IdentifierNode); ok && (id.Ident == FuncRaw || id.Ident == FuncShellQuote) {
			return
		}
	}
	fn := map[quoteState]string{unquoted: funcQuoteWord, inDouble: funcQuoteDouble, inSingle: funcQuoteSingle}[s]
	id := parse.NewIdentifier(fn).SetTree(q.tree).SetPos(p.Position())
	p.Cmds = append(p.Cmds, &parse.CommandNode{NodeType: parse.NodeCommand, Pos: p.Position(), Args: []parse.Node{id}})
}

// choosesValue reports whether p reads a value chosen outside the file:
// a param (.Params…) or an upstream's output (.Upstream…).
func choosesValue(p *parse.PipeNode) bool {
	if p == nil {
		return false
	}
	for _, c := range p.Cmds {
		for _, a := range c.Args {
			if nodeChooses(a) {
				return true
			}
		}
	}
	return false
}

func nodeChooses(n parse.Node) bool {
	chosenField := func(idents []string) bool {
		return len(idents) > 0 && (idents[0] == "Params" || idents[0] == "Upstream")
	}
	switch n := n.(type) {
	case *parse.FieldNode:
		return chosenField(n.Ident)
	case *parse.VariableNode:
		return len(n.Ident) > 1 && chosenField(n.Ident[1:]) || len(n.Ident) == 1 && n.Ident[0] != "$"
	case *parse.ChainNode:
		return nodeChooses(n.Node)
	case *parse.PipeNode:
		return choosesValue(n)
	}
	return false
}
