package axtype_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ax-sched/ax/axtype"
)

// allowed is the state table of docs/states.md, with the moves that let every run end,
// written out again here so that a change to axtype/state.go has to be made
// twice, on purpose.
var allowed = map[[2]axtype.State]bool{
	{axtype.Waiting, axtype.Scheduled}: true, {axtype.Waiting, axtype.Paused}: true,
	{axtype.Scheduled, axtype.Running}: true, {axtype.Scheduled, axtype.Failed}: true, {axtype.Scheduled, axtype.Paused}: true,
	{axtype.Running, axtype.Success}: true, {axtype.Running, axtype.Failed}: true, {axtype.Running, axtype.Retrying}: true, {axtype.Running, axtype.Killed}: true,
	{axtype.Retrying, axtype.Running}: true, {axtype.Retrying, axtype.Failed}: true, {axtype.Retrying, axtype.Paused}: true,
	{axtype.Success, axtype.Scheduled}: true, {axtype.Success, axtype.Waiting}: true,
	{axtype.Failed, axtype.Running}: true,
	{axtype.Paused, axtype.Waiting}: true, {axtype.Paused, axtype.Running}: true,
	{axtype.Killed, axtype.Waiting}: true,
	// Runs always end; operators settle any instance.
	{axtype.Waiting, axtype.Failed}: true, {axtype.Waiting, axtype.Success}: true,
	{axtype.Failed, axtype.Waiting}: true, {axtype.Failed, axtype.Success}: true,
	{axtype.Paused, axtype.Failed}:  true,
	{axtype.Killed, axtype.Success}: true, {axtype.Killed, axtype.Failed}: true,
}

// TestCanTransition checks all 64 (from, to) pairs, and that Next lists
// exactly the allowed targets of each state.
func TestCanTransition(t *testing.T) {
	t.Parallel()
	if len(axtype.States) != 8 {
		t.Fatalf("States has %d states, want 8", len(axtype.States))
	}
	n := 0
	for _, from := range axtype.States {
		var want []axtype.State
		for _, to := range axtype.States {
			ok := allowed[[2]axtype.State{from, to}]
			if got := axtype.CanTransition(from, to); got != ok {
				t.Errorf("CanTransition(%s, %s) = %v, want %v", from, to, got, ok)
			}
			if ok {
				want = append(want, to)
				n++
			}
		}
		got := axtype.Next(from)
		if !sameSet(got, want) {
			t.Errorf("Next(%s) = %v, want %v", from, got, want)
		}
	}
	if n != 25 {
		t.Errorf("%d allowed pairs in the test's table, want 25 (18 of the eight-state machine, 7 that let every run end)", n)
	}
	for _, s := range []axtype.State{"", "waiting", "DONE"} {
		if axtype.CanTransition(s, axtype.Running) || axtype.CanTransition(axtype.Waiting, s) || len(axtype.Next(s)) != 0 {
			t.Errorf("state %q is not one of the eight but takes part in a transition", s)
		}
	}
}

// TestNextIsACopy: a caller that changes what Next returned must not change
// the table.
func TestNextIsACopy(t *testing.T) {
	t.Parallel()
	got := axtype.Next(axtype.Running)
	got[0] = axtype.Waiting
	if axtype.CanTransition(axtype.Running, axtype.Waiting) {
		t.Fatal("writing into Next's result changed the table: RUNNING → WAITING became allowed")
	}
}

func TestStateValidAndTerminal(t *testing.T) {
	t.Parallel()
	tests := []struct {
		state           axtype.State
		valid, terminal bool
	}{
		{axtype.Waiting, true, false},
		{axtype.Scheduled, true, false},
		{axtype.Running, true, false},
		{axtype.Retrying, true, false},
		{axtype.Success, true, true},
		{axtype.Failed, true, true},
		{axtype.Paused, true, false},
		{axtype.Killed, true, true},
		{"", false, false},
		{"running", false, false},
		{"SKIPPED", false, false},
	}
	for _, tt := range tests {
		t.Run(string(tt.state), func(t *testing.T) {
			t.Parallel()
			if got := tt.state.Valid(); got != tt.valid {
				t.Errorf("%q.Valid() = %v, want %v", tt.state, got, tt.valid)
			}
			if got := tt.state.Terminal(); got != tt.terminal {
				t.Errorf("%q.Terminal() = %v, want %v", tt.state, got, tt.terminal)
			}
		})
	}
}

// TestTableMatchesDocs reads the "may move to" column of docs/states.md, the
// user's view of the state machine, and checks it lists the same moves as
// the table.
func TestTableMatchesDocs(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../docs/states.md")
	if err != nil {
		t.Fatalf("read the state machine's documentation: %v", err)
	}
	row := regexp.MustCompile("^\\| `([A-Z]+)` \\|.*\\| (.*) \\|$")
	quoted := regexp.MustCompile("`([A-Z]+)`")
	seen := map[axtype.State]bool{}
	for line := range strings.SplitSeq(string(b), "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		from := axtype.State(m[1])
		seen[from] = true
		var docs []axtype.State
		for _, q := range quoted.FindAllStringSubmatch(m[2], -1) {
			docs = append(docs, axtype.State(q[1]))
		}
		if got := axtype.Next(from); !sameSet(got, docs) {
			t.Errorf("docs/states.md: %s may move to %v; the table says %v", from, docs, got)
		}
	}
	for _, s := range axtype.States {
		if !seen[s] {
			t.Errorf("docs/states.md has no row for %s", s)
		}
	}
}

func sameSet(a, b []axtype.State) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
