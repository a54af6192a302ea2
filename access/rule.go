package access

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Target is what a request acts on, for the scope rule: nothing in
// particular (limits, prune), a pipeline (and the groups of its tasks), a
// task (its pipeline and group), or a group.
type Target struct {
	Pipeline string
	Group    string   // a task's group, or the group of a group's pause
	Groups   []string // a pipeline target: the groups of every task it runs
	// Tasks, when set, are the tasks of Pipeline the request runs (a
	// trigger with its downstream, a backfill's selection), id → group:
	// Groups are theirs, and a refusal names those out of scope.
	Tasks map[string]string
}

func (t Target) String() string {
	switch {
	case t.Pipeline != "" && t.Group != "":
		return fmt.Sprintf("pipeline %s, group %s", t.Pipeline, t.Group)
	case t.Pipeline != "":
		return "pipeline " + t.Pipeline
	case t.Group != "":
		return "group " + t.Group
	}
	return "the whole server"
}

// Refusal is why a user may not do something: a 403.
type Refusal struct{ Msg string }

func (r *Refusal) Error() string { return r.Msg }

// Allow decides whether u may do what (a verb, for the message) needing
// role need on t. A scoped user may act on a task of a group or pipeline
// in scope, on a pipeline in scope or whose tasks are all in scoped groups,
// and on a group in scope; never on the whole server.
func Allow(u *User, need Role, what string, t Target) error {
	if u.Role < need {
		return &Refusal{fmt.Sprintf("%s may not %s: that needs the %s role", u.Describe(), what, need)}
	}
	if need <= Viewer || !u.Scoped() || inScope(u, t) {
		return nil
	}
	want := "an unscoped " + need.String()
	switch {
	case t.Pipeline != "" && len(t.Tasks) > 0:
		var out, groups []string
		for _, id := range slices.Sorted(maps.Keys(t.Tasks)) {
			if g := t.Tasks[id]; !slices.Contains(u.Groups, g) {
				out = append(out, fmt.Sprintf("task %s (group %s)", id, g))
				if !slices.Contains(groups, g) {
					groups = append(groups, g)
				}
			}
		}
		return &Refusal{fmt.Sprintf("%s may not %s on %s: it runs %s: that needs a scope naming pipeline %s or group %s",
			u.Describe(), what, t, strings.Join(out, ", "), t.Pipeline, strings.Join(groups, " and group "))}
	case t.Pipeline != "" && t.Group != "":
		want = fmt.Sprintf("a scope naming pipeline %s or group %s", t.Pipeline, t.Group)
	case t.Pipeline != "":
		want = fmt.Sprintf("a scope naming pipeline %s (or every group of its tasks: %s)", t.Pipeline, strings.Join(t.Groups, ", "))
	case t.Group != "":
		want = "a scope naming group " + t.Group
	}
	return &Refusal{fmt.Sprintf("%s may not %s on %s: that needs %s", u.Describe(), what, t, want)}
}

func inScope(u *User, t Target) bool {
	if t.Pipeline == "" && t.Group == "" {
		return false
	}
	if t.Pipeline != "" && slices.Contains(u.Pipelines, t.Pipeline) {
		return true
	}
	if t.Group != "" {
		return slices.Contains(u.Groups, t.Group)
	}
	if len(t.Groups) == 0 {
		return false
	}
	for _, g := range t.Groups {
		if !slices.Contains(u.Groups, g) {
			return false
		}
	}
	return true
}
