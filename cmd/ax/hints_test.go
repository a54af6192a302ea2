package main

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/cli"
	"github.com/ax-sched/ax/store"
)

// hintDirs are the packages whose messages reach the user of ax: what they
// suggest to run ("… with: ax backfill resume 7") must be a command of this
// binary with flags it has.
var hintDirs = []string{"../../cli", "../../cmd/ax", "../../api", "../../engine", "../../store", "../../dag", "../../defs", "../../runner"}

// proseAfterAx are words that follow "ax " in a message without naming a
// command ("this ax binary", "give ax a file of its own").
var proseAfterAx = map[string]bool{"binary": true, "store": true, "knows": true, "may": true, "keeps": true, "and": true, "a": true, "console": true, "schedules": true}

var hintStart = regexp.MustCompile(`(?:^|[^A-Za-z0-9_./'-])ax ([a-z][a-z-]*)('s)?`)

// hint is a command suggested in a string literal of ax's source.
type hint struct {
	where, text string
}

// collectHints finds every "ax WORD…" in the string literals of the
// non-test sources of hintDirs.
func collectHints(t *testing.T) []hint {
	t.Helper()
	var hints []hint
	fset := token.NewFileSet()
	for _, dir := range hintDirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no Go files in %s: %v", dir, err)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				lit, ok := n.(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					return true
				}
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					return true
				}
				for _, m := range hintStart.FindAllStringSubmatchIndex(s, -1) {
					word := s[m[2]:m[3]]
					if m[4] >= 0 || proseAfterAx[word] { // "ax server's API", prose
						continue
					}
					at := m[2] - len("ax ")
					hints = append(hints, hint{where: fset.Position(lit.Pos()).String(), text: s[at:]})
				}
				return true
			})
		}
	}
	return hints
}

// checkHint resolves hint (text from "ax ") against root: the command path
// must name a command, every flag must be one of that command's, a flag's
// value must parse, and the arguments, when the hint gives any, must be as
// many as the command takes. The hint ends at the first plain word that is
// no subcommand ("ax status %s shows its state") or at punctuation.
func checkHint(root *cobra.Command, text string) string {
	fields := strings.Fields(strings.TrimPrefix(text, "ax "))
	cmd := root
	var flags, args []string
	open := strings.HasSuffix(text, " ") // the literal goes on with a value joined to it
	for i := 0; i < len(fields); i++ {
		tok := fields[i]
		last := false
		if trimmed := strings.TrimRight(tok, "),;?:`"); trimmed != tok {
			tok, last = trimmed, true
		}
		if i == len(fields)-1 && strings.HasSuffix(tok, ".") && !strings.Contains(strings.TrimSuffix(tok, "."), ".") {
			tok, last = strings.TrimSuffix(tok, "."), true
		}
		switch {
		case tok == "":
		case strings.HasPrefix(tok, "-"):
			name, _, hasValue := strings.Cut(strings.TrimLeft(tok, "-"), "=")
			var fl = cmd.Flags().Lookup(name)
			if len(name) == 1 && !strings.HasPrefix(tok, "--") {
				fl = cmd.Flags().ShorthandLookup(name)
			}
			if fl == nil {
				fl = cmd.InheritedFlags().Lookup(name)
			}
			if fl == nil {
				return "ax " + cmd.CommandPath()[len("ax"):] + " has no flag " + tok
			}
			flags = append(flags, "--"+fl.Name)
			if !hasValue && fl.NoOptDefVal == "" {
				if i+1 < len(fields) {
					i++
					flags[len(flags)-1] += "=" + sample(strings.TrimRight(fields[i], "),;?:`"))
				} else if !open {
					return "flag " + tok + " of ax" + cmd.CommandPath()[len("ax"):] + " is given no value"
				} else {
					flags[len(flags)-1] += "=" + sample("%s")
				}
			}
		case isArg(tok):
			args = append(args, sample(tok))
		default:
			sub := subcommand(cmd, tok)
			if sub == nil || len(args) > 0 {
				if cmd == root {
					return "ax has no command " + strconv.Quote(tok)
				}
				last = true // prose after the hint
				break
			}
			cmd = sub
		}
		if last {
			break
		}
	}
	if cmd == root {
		return "no command"
	}
	// A fresh tree per hint: parsing flags sets them.
	fresh, _, err := newRoot(io.Discard, io.Discard).Find(strings.Fields(cmd.CommandPath())[1:])
	if err != nil {
		return err.Error()
	}
	if err := fresh.ParseFlags(flags); err != nil {
		return err.Error()
	}
	if len(args) > 0 && fresh.Args != nil {
		if open {
			args = args[:0] // the literal goes on: the arguments are not all here
		}
		if err := fresh.Args(fresh, args); err != nil && !open {
			return err.Error()
		}
	}
	return ""
}

func subcommand(cmd *cobra.Command, name string) *cobra.Command {
	for _, c := range cmd.Commands() {
		if c.Name() == name || c.HasAlias(name) {
			return c
		}
	}
	return nil
}

// isArg: a format verb, a placeholder in capitals (PIPELINE.TASK, ID), or
// a value (a number, a dotted name, a path).
func isArg(tok string) bool {
	return strings.HasPrefix(tok, "%") || tok == strings.ToUpper(tok) || strings.ContainsAny(tok, "0123456789./")
}

// sample is a value that stands for tok when flags and arguments are parsed.
func sample(tok string) string {
	if strings.HasPrefix(tok, "%d") {
		return "1"
	}
	if strings.HasPrefix(tok, "%") {
		return "p.t"
	}
	return tok
}

// Every command ax suggests in a message names a command it has, with
// flags that command has; the checker itself refuses made-up ones.
func TestHintsNameRealCommandsAndFlags(t *testing.T) {
	t.Parallel()
	root := newRoot(io.Discard, io.Discard)
	for _, c := range []struct {
		hint string
		ok   bool
	}{
		{"ax status %s shows its state", true},
		{"ax backfill resume %d --standalone", true},
		{"ax rerun %d --instance", true},
		{"ax resume --group ", true},
		{"ax nosuch %s", false},
		{"ax status --nosuch", false},
		{"ax backfill resume %d --nosuch", false},
		{"ax logs %s --run", false},
		{"ax logs %s %s --run 1", false},
	} {
		if got := checkHint(root, c.hint); (got == "") != c.ok {
			t.Errorf("checkHint(%q) = %q, want ok %v", c.hint, got, c.ok)
		}
	}
	hints := collectHints(t)
	seen := map[string]bool{}
	for _, h := range hints {
		seen[h.text] = true
		if why := checkHint(root, h.text); why != "" {
			t.Errorf("%s: the hint %q does not work: %s", h.where, h.text, why)
		}
	}
	// The scan finds the hints it is meant to (a regexp gone wrong would
	// find none and pass).
	for _, want := range []string{
		"ax status %s shows its state)",
		"ax backfill resume %d --standalone",
		"ax kill %d) or let it end",
		"ax backfill approve ID once it started, or start it with --approve-manual\n",
		"ax trigger PIPELINE.TASK --at TIME)",
	} {
		if !seen[want] {
			t.Errorf("the scan did not find the hint %q", want)
		}
	}
	if len(hints) < 30 {
		t.Errorf("found %d hints, want the 30 and more ax has", len(hints))
	}
	if testing.Verbose() {
		for _, h := range hints {
			t.Logf("%s: %s", h.where, h.text)
		}
	}
}

// The refusal of ax mark for an instance that may still run suggests a
// command that works on it: for a SCHEDULED one it said "kill it first (ax
// kill ID)", and ax kill refuses what is not RUNNING ("nothing to kill").
func TestMarkRefusalHintRuns(t *testing.T) {
	t.Parallel()
	e, _ := setupLogs(t)
	at := time.Now().Add(24 * time.Hour) // outside the wheel's window: it stays SCHEDULED
	run, ins, err := e.St.CreateRun(context.Background(), store.CreateRunParams{Pipeline: "shop", Trigger: "shop.binary", Kind: axtype.RunManual, LogicalTime: at, Now: time.Now(),
		Instances: []store.NewInstance{{TaskID: "shop.binary", Group: "etl", State: axtype.Scheduled, NextFireAt: at}}})
	if err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprint(ins[0].ID)
	code, out, errOut := runAx(t, "mark", id, "success", "--server", e.Srv.URL)
	m := regexp.MustCompile(`\((ax [^)]*)\)`).FindStringSubmatch(errOut)
	if code != cli.ExitFailed || m == nil {
		t.Fatalf("ax mark %s success: exit %d, want %d with a hint\n%s%s", id, code, cli.ExitFailed, out, errOut)
	}
	code, out, errOut = runAx(t, append(strings.Fields(m[1])[1:], "--server", e.Srv.URL)...)
	if code != cli.ExitOK {
		t.Fatalf("the hint %q of ax mark: exit %d\n%s%s", m[1], code, out, errOut)
	}
	if got, err := e.St.Instance(context.Background(), ins[0].ID); err != nil || got.State != axtype.Failed {
		t.Errorf("instance %d of run %d after %q: %+v %v, want it FAILED (cancelled)", ins[0].ID, run.ID, m[1], got.State, err)
	}
}
