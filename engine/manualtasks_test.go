package engine

import (
	"fmt"
	"testing"

	"github.com/ax-sched/ax/defs"
)

// TestManualTasksOfDefMap: the stored definitions name a pipeline's manual
// tasks, by id, and only that pipeline's; definitions that cannot list a
// pipeline's tasks name none.
func TestManualTasksOfDefMap(t *testing.T) {
	t.Parallel()
	m := DefMap{
		"p.b": {Name: "b", Pipeline: "p", Manual: true},
		"p.a": {Name: "a", Pipeline: "p", Manual: true},
		"p.c": {Name: "c", Pipeline: "p"},
		"q.a": {Name: "a", Pipeline: "q", Manual: true},
		"p.d": nil,
	}
	if got := fmt.Sprint(ManualTasks(m, "p")); got != "[p.a p.b]" {
		t.Errorf("ManualTasks(p) = %s, want [p.a p.b]", got)
	}
	if got := ManualTasks(DefFunc(func(string) *defs.Task { return nil }), "p"); got != nil {
		t.Errorf("ManualTasks of a DefFunc = %v, want none", got)
	}
}
