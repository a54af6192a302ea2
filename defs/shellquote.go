package defs

import (
	"fmt"
	"path"
	"strconv"
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
	funcQuoteInt    = "ax_quote_int"
)

// templateFuncMap is what every template of a pipeline may call beyond
// text/template's own functions.
var templateFuncMap = template.FuncMap{
	FuncShellQuote:  shellWord,
	FuncRaw:         func(v any) string { return fmt.Sprint(v) },
	funcQuoteWord:   shellWord,
	funcQuoteDouble: shellInDouble,
	funcQuoteSingle: shellInSingle,
	funcQuoteInt:    shellInt,
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

// shellInt prints v, which must be an integer, for $(( … )) arithmetic.
func shellInt(v any) (string, error) {
	s := fmt.Sprint(v)
	if _, err := strconv.ParseInt(s, 10, 64); err != nil {
		return "", fmt.Errorf("%q is not an integer, and only an integer may be spliced into $(( … ))", s)
	}
	return s, nil
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

// scanState is what a script's text so far says about the place a value
// lands. Besides the quotes it follows what no quoting can make safe: a
// heredoc's body, a comment, $(( … )) arithmetic, the words of an eval,
// and the script of a shell the script itself starts (sh -c '…').
type scanState struct {
	q       quoteState
	comment bool   // after an unquoted # that starts a word, up to the newline
	heredoc string // the delimiter of the heredoc whose body this is
	pending string // delimiters of heredocs whose bodies start at the next newline, "\n"-separated
	line    string // the heredoc body's current line
	arith   int    // parentheses open in a $(( … )); 0 outside
	word    string // the unquoted word being read
	eval    bool   // the current command has an eval
	nested  int    // 1: the current command names a shell; 2: and gave it -c
	// outer holds, innermost last, what each open $( ( or backtick returns
	// to: u after $( outside quotes, d after $( inside "…", p after (,
	// B and D after a backtick outside and inside "…".
	outer string
}

// key is what two branches of an {{if}} must agree on.
func (s scanState) key() scanState {
	return scanState{q: s.q, comment: s.comment, heredoc: s.heredoc, pending: s.pending, arith: s.arith, eval: s.eval, nested: s.nested, outer: s.outer}
}

// scan returns the state after text.
func (s scanState) scan(text string) scanState {
	for i := 0; i < len(text); i++ {
		c := text[i]
		switch {
		case s.heredoc != "":
			s = s.heredocByte(c)
		case s.comment:
			if c == '\n' {
				s.comment = false
				s = s.newline()
			}
		case s.arith > 0:
			switch c {
			case '(':
				s.arith++
			case ')':
				s.arith--
			}
		case s.q == inSingle:
			if c == '\'' {
				s.q = unquoted
			}
		case s.q == inDouble:
			switch {
			case c == '\\':
				i++
			case c == '"':
				s.q = unquoted
			case strings.HasPrefix(text[i:], "$(("):
				s.arith, i = 2, i+2
			case strings.HasPrefix(text[i:], "$("):
				s.q, s.outer, i = unquoted, s.outer+"d", i+1
			case c == '`':
				s.q, s.outer = unquoted, s.outer+"D"
			}
		default:
			i = s.unquotedByte(text, i)
		}
	}
	return s
}

// unquotedByte reads text[i], outside quotes, into s; it returns the
// index of the last byte it read.
func (s *scanState) unquotedByte(text string, i int) int {
	c := text[i]
	switch {
	case c == '\\':
		s.word += "\\"
		return i + 1
	case c == '"':
		s.q, s.word = inDouble, s.word+`"`
	case c == '\'':
		s.q, s.word = inSingle, s.word+"'"
	case c == '#' && s.word == "":
		s.comment = true
	case strings.HasPrefix(text[i:], "$(("), strings.HasPrefix(text[i:], "((") && s.word == "":
		s.arith = 2
		return i + strings.Index(text[i:], "((") + 1
	case strings.HasPrefix(text[i:], "<<") && !strings.HasPrefix(text[i:], "<<<"):
		return s.heredocStart(text, i+2)
	case c == '(' || c == ')' || c == '`' || strings.HasPrefix(text[i:], "$("):
		s.endWord()
		s.eval, s.nested = false, 0
		return s.substitution(text, i)
	case c == ' ' || c == '\t':
		s.endWord()
	case c == '\n' || c == ';' || c == '&' || c == '|':
		s.endWord()
		s.eval, s.nested = false, 0
		if c == '\n' {
			*s = s.newline()
		}
	default:
		s.word += string(c)
	}
	return i
}

// substitution reads, outside quotes, what opens or closes a command
// substitution or a subshell: $( ( ) or a backtick. It returns the index
// of the last byte it read.
func (s *scanState) substitution(text string, i int) int {
	top := byte(0)
	if n := len(s.outer); n > 0 {
		top = s.outer[n-1]
	}
	switch c := text[i]; {
	case c == '$':
		s.outer += "u"
		return i + 1
	case c == '(':
		s.outer += "p"
	case c == '`' && (top == 'B' || top == 'D'), c == ')' && top != 0:
		s.outer = s.outer[:len(s.outer)-1]
		if top == 'd' || top == 'D' {
			s.q = inDouble
		}
	case c == '`':
		s.outer += "B"
	}
	return i
}

// endWord ends the unquoted word being read, noting eval and shells.
func (s *scanState) endWord() {
	w := s.word
	s.word = ""
	switch {
	case w == "eval":
		s.eval = true
	case shells[path.Base(w)]:
		s.nested = max(s.nested, 1)
	case s.nested == 1 && len(w) > 1 && w[0] == '-' && strings.Contains(w[1:], "c"):
		s.nested = 2
	}
}

// heredocStart reads the delimiter of a heredoc (<<EOF, <<-'EOF') from
// text[i] on; its body starts at the next newline.
func (s *scanState) heredocStart(text string, i int) int {
	i += len(text[i:]) - len(strings.TrimPrefix(text[i:], "-"))
	for i < len(text) && (text[i] == ' ' || text[i] == '\t') {
		i++
	}
	j := i
	for j < len(text) && !strings.ContainsRune(" \t\n;&|<>()", rune(text[j])) {
		j++
	}
	delim := strings.NewReplacer(`'`, "", `"`, "", `\`, "").Replace(text[i:j])
	if delim == "" {
		delim = "\x00" // the delimiter is a template's value: the body never ends here
	}
	s.pending = strings.TrimPrefix(s.pending+"\n"+delim, "\n")
	return j - 1
}

// newline starts the body of the next pending heredoc, if any.
func (s scanState) newline() scanState {
	if s.pending != "" {
		s.heredoc, s.pending, _ = strings.Cut(s.pending, "\n")
		s.line = ""
	}
	return s
}

// heredocByte reads one byte of a heredoc's body.
func (s scanState) heredocByte(c byte) scanState {
	if c != '\n' {
		s.line += string(c)
		return s
	}
	if strings.TrimLeft(s.line, "\t") == s.heredoc {
		s.heredoc = ""
		s = s.newline()
	}
	s.line = ""
	return s
}

// quoter adds the quoting function of its context to every action of a
// script's template that prints a chosen value.
type quoter struct {
	tree     *parse.Tree
	problems []string
	ints     []string // params printed in $(( … )): each must be declared int
}

// quoteScript makes tmpl, the template of a shell's script, quote every
// param and upstream output it prints. It returns why it cannot, and the
// params it prints inside arithmetic (printed as integers, unquoted).
func quoteScript(tmpl *template.Template) (problems, ints []string) {
	if tmpl.Tree == nil || tmpl.Tree.Root == nil {
		return nil, nil
	}
	q := &quoter{tree: tmpl.Tree}
	q.list(tmpl.Tree.Root, scanState{}, false)
	return q.problems, q.ints
}

// list walks l from state s; chosen says that dot is itself a chosen
// value (inside a range or with over one). It returns the state after l.
func (q *quoter) list(l *parse.ListNode, s scanState, chosen bool) scanState {
	if l == nil {
		return s
	}
	for _, n := range l.Nodes {
		switch n := n.(type) {
		case *parse.TextNode:
			s = s.scan(string(n.Text))
		case *parse.ActionNode:
			if len(n.Pipe.Decl) == 0 && (chosen || choosesValue(n.Pipe)) {
				q.quote(n, s)
			}
			if len(n.Pipe.Decl) == 0 {
				s = s.printed()
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

// printed is s after an action prints something: part of a word, or of
// a heredoc's line.
func (s scanState) printed() scanState {
	switch {
	case s.heredoc != "":
		s.line += "\x00"
	case s.q == unquoted && !s.comment && s.arith == 0:
		s.word += "\x00"
	}
	return s
}

// branches walks both lists of b from s; they must end in the same state.
func (q *quoter) branches(b *parse.BranchNode, s scanState, inner, outer bool) scanState {
	end := q.list(b.List, s, inner)
	if b.ElseList != nil {
		if e := q.list(b.ElseList, s, outer); e.key() != end.key() {
			q.problems = append(q.problems, "its {{if}}/{{else}} branches leave the script's quotes open differently: close each quote inside its branch")
		}
	}
	return end
}

// unquotable says why no quoting holds where s stands, or "".
func (s scanState) unquotable() string {
	switch {
	case s.heredoc != "":
		return "inside a heredoc, where a newline and the delimiter end it early and $(…) runs"
	case s.comment:
		return "inside a comment, which a newline in it ends"
	case s.eval:
		return "among the words of eval, which runs them again as a script"
	case s.nested == 2:
		return "inside the script of a shell this script starts (sh -c …), which runs it again"
	case strings.ContainsAny(s.outer, "BD"):
		return "inside `…`, where a backtick in it ends the command early (write $(…) instead)"
	}
	return ""
}

// quote appends to the action n the function that quotes its value where
// s stands, unless the author already ends it with shq or raw; where no
// quoting holds it notes why instead.
func (q *quoter) quote(n *parse.ActionNode, s scanState) {
	p := n.Pipe
	last := ""
	if args := p.Cmds[len(p.Cmds)-1].Args; len(args) > 0 {
		if id, ok := args[0].(*parse.IdentifierNode); ok {
			last = id.Ident
		}
	}
	if last == FuncRaw {
		return
	}
	how := `pass it through env: (env: {NAME: "{{ … }}"}) and use "$NAME" in the script, or end the action with | raw to splice it as it is on purpose`
	if why := s.unquotable(); why != "" {
		q.problems = append(q.problems, fmt.Sprintf("%s is %s: %s", n, why, how))
		return
	}
	if s.arith > 0 {
		name, ok := paramName(p)
		if !ok || last == FuncShellQuote {
			q.problems = append(q.problems, fmt.Sprintf("%s is inside $(( … )) arithmetic, where a quoted value breaks the script: print an int param there ({{ .Params.N }}), or %s", n, how))
			return
		}
		q.ints = append(q.ints, name)
		q.append(p, funcQuoteInt)
		return
	}
	if last == FuncShellQuote {
		return
	}
	q.append(p, map[quoteState]string{unquoted: funcQuoteWord, inDouble: funcQuoteDouble, inSingle: funcQuoteSingle}[s.q])
}

// append adds the function fn as the last command of p.
func (q *quoter) append(p *parse.PipeNode, fn string) {
	id := parse.NewIdentifier(fn).SetTree(q.tree).SetPos(p.Position())
	p.Cmds = append(p.Cmds, &parse.CommandNode{NodeType: parse.NodeCommand, Pos: p.Position(), Args: []parse.Node{id}})
}

// paramName returns N when p is just {{ .Params.N }}.
func paramName(p *parse.PipeNode) (string, bool) {
	if len(p.Cmds) != 1 || len(p.Cmds[0].Args) != 1 {
		return "", false
	}
	f, ok := p.Cmds[0].Args[0].(*parse.FieldNode)
	if !ok || len(f.Ident) != 2 || f.Ident[0] != "Params" {
		return "", false
	}
	return f.Ident[1], true
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
