package defs

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// Severity says whether a problem makes a file invalid.
type Severity string

// Severities of a problem.
const (
	SevError   Severity = "error"
	SevWarning Severity = "warning"
)

// Pos is a position in a pipeline file, 1-based.
type Pos struct {
	File string `json:"file"`
	Line int    `json:"line"`
	Col  int    `json:"col"`
}

// String formats p as file:line:col.
func (p Pos) String() string { return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Col) }

// Error is one problem found in a pipeline file. Its message says what is
// wrong and, where it can, what to write instead.
type Error struct {
	Pos
	Pipeline string   `json:"pipeline,omitempty"`
	Task     string   `json:"task,omitempty"`
	Msg      string   `json:"message"`
	Severity Severity `json:"severity"`
}

// Error formats e as `file:line:col: task "name": message`.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Pos.String())
	b.WriteString(": ")
	if e.Severity == SevWarning {
		b.WriteString("warning: ")
	}
	if e.Task != "" {
		fmt.Fprintf(&b, "task %q: ", e.Task)
	}
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is a list of problems; as an error it reports all of them, one per line.
type Errors []*Error

// Error joins every problem, one per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Sort orders the list by file, line, column and message, so that output is stable.
func (es Errors) Sort() {
	slices.SortStableFunc(es, func(a, b *Error) int {
		return cmp.Or(
			cmp.Compare(a.File, b.File),
			cmp.Compare(a.Line, b.Line),
			cmp.Compare(a.Col, b.Col),
			cmp.Compare(a.Msg, b.Msg),
		)
	})
}

// Fatal returns the problems of severity error only.
func (es Errors) Fatal() Errors {
	var out Errors
	for _, e := range es {
		if e.Severity != SevWarning {
			out = append(out, e)
		}
	}
	return out
}

// Warnings returns the problems of severity warning only.
func (es Errors) Warnings() Errors {
	var out Errors
	for _, e := range es {
		if e.Severity == SevWarning {
			out = append(out, e)
		}
	}
	return out
}

// Err returns es as an error when it holds at least one problem of severity
// error, and nil otherwise.
func (es Errors) Err() error {
	if f := es.Fatal(); len(f) > 0 {
		return f
	}
	return nil
}

// Suggest returns the candidate closest to word when it is close enough to be
// a likely typo, and "" otherwise. One that differs only in case wins.
// Of candidates equally close, the one whose length is nearest the word's
// wins (a swap of two letters keeps the length: "prinft" is "printf", not
// "print"), then the first by name.
func Suggest(word string, candidates []string) string {
	for _, c := range candidates { // a change of case alone is the likeliest slip
		if c != word && strings.EqualFold(c, word) {
			return c
		}
	}
	best, bestD := "", -1
	limit := max(1, len(word)/3)
	lenGap := func(c string) int { return abs(utf8.RuneCountInString(c) - utf8.RuneCountInString(word)) }
	for _, c := range candidates {
		if lenGap(c) > limit { // the distance is at least the gap: no need to measure it
			continue
		}
		d := editDistance(word, c)
		if d > limit {
			continue
		}
		if bestD < 0 || cmp.Or(cmp.Compare(d, bestD), cmp.Compare(lenGap(c), lenGap(best)), strings.Compare(c, best)) < 0 {
			best, bestD = c, d
		}
	}
	return best
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// didYouMean renders the suggestion for word as ` (did you mean "x"?)`, or "".
func didYouMean(word string, candidates []string) string {
	if s := Suggest(word, candidates); s != "" {
		return fmt.Sprintf(" (did you mean %q?)", s)
	}
	return ""
}

// DidYouMean is didYouMean for other packages that report unknown names.
func DidYouMean(word string, candidates []string) string { return didYouMean(word, candidates) }

// editDistance is the optimal-string-alignment distance between a and b, in
// runes: insertions, deletions, substitutions and transpositions of two
// neighbours ("snik" for "sink") each cost one.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	d := make([][]int, len(ra)+1)
	for i := range d {
		d[i] = make([]int, len(rb)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(ra); i++ {
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(ra)][len(rb)]
}
