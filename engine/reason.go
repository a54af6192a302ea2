package engine

import (
	"context"
	"strings"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/store"
)

// TaskDefs is where a run's waiting reasons read the task definitions in
// force (nil for a task no longer defined). A *dag.Graph also gives each
// task's zone and the schedule whose runs hold it, which the window of a
// dependency on another pipeline is measured in; definitions without them
// (DefFunc, the stored definitions) read as UTC with no schedule.
type TaskDefs interface {
	Task(id string) *defs.Task
}

// DefFunc is a function of task id as TaskDefs.
type DefFunc func(id string) *defs.Task

// Task returns f(id).
func (f DefFunc) Task(id string) *defs.Task { return f(id) }

// scheduledDefs is what a *dag.Graph adds to TaskDefs.
type scheduledDefs interface {
	Pipeline(name string) *defs.Pipeline
	TriggerOf(id string) *dag.Trigger
}

// What a WAITING instance waits on is judged when asked, from live state,
// by the readiness rule (decide), never read back from what was written
// when the instance was created: ax status, the runs API, the console and
// ax explain all ask judgeWaiting.

// judgeWaiting applies the readiness rule now to the WAITING instances of
// tasks in a run whose instances are ins (all of them), with the task
// definitions td returns (nil for a task no longer defined). Cross-pipeline
// upstreams are read from st as the scheduler reads them.
func judgeWaiting(ctx context.Context, st *store.Store, td TaskDefs, kind axtype.RunKind, ins []axtype.Instance,
	tasks []string, now time.Time) ([]settled, error) {
	if len(ins) == 0 || len(tasks) == 0 {
		return nil, nil
	}
	rs := newRunState(ins[0].RunID, ins[0].LogicalTime, ins)
	full := make(map[string]instView, len(ins))
	for _, in := range ins {
		full[in.TaskID] = instView{state: in.State, err: in.Error, approved: in.ApprovedBy != ""}
	}
	r := resolver{st: st, runs: newRunCache(st), tasks: map[string]*taskInfo{}, nodes: map[string]settleNode{}}
	r.runs.kinds[rs.id] = kind
	for _, id := range tasks {
		t := td.Task(id)
		if t == nil {
			continue
		}
		ti := &taskInfo{def: t, id: id}
		if sd, ok := td.(scheduledDefs); ok {
			if p := sd.Pipeline(t.Pipeline); p != nil {
				ti.loc = p.Location
			}
			if tr := sd.TriggerOf(id); tr != nil {
				ti.own = tr.Schedule
			}
		}
		n := settleNode{manual: t.Manual, limit: t.WaitTimeout, ups: runUpstreams(t)}
		for _, d := range t.DependsOn {
			if d.Pipeline == "" || d.Pipeline == t.Pipeline {
				continue
			}
			up := d.Pipeline + "." + d.Task
			ti.cross = append(ti.cross, &taskInfo{def: td.Task(up), id: up})
			ti.crossDep = append(ti.crossDep, d)
		}
		n.hasCross = len(ti.cross) > 0
		r.tasks[id], r.nodes[id] = ti, n
	}
	return settle(func(id string) (instView, bool) { v, ok := full[id]; return v, ok }, r.nodes, tasks, rs.since, now, defs.DefaultCrossWait,
		func(task string) ([]upstreamView, error) { return r.crossViews(ctx, r.tasks[task], rs) })
}

// runUpstreams are the upstreams of t in its own pipeline, so in the same
// run: what judging an instance of t reads of its run beside it.
func runUpstreams(t *defs.Task) []string {
	var ups []string
	for _, d := range t.DependsOn {
		if d.Pipeline == "" || d.Pipeline == t.Pipeline {
			ups = append(ups, t.Pipeline+"."+d.Task)
		}
	}
	return ups
}

// waitText is what a judged WAITING instance waits on, in words.
func waitText(d decision) string {
	switch d.verdict {
	case verdictFail:
		return "can no longer run (" + d.reason + "): it fails at the scheduler's next check"
	case verdictReady:
		return "every upstream succeeded: it is released at the scheduler's next check"
	}
	return d.reason
}

// WaitReasons says what each WAITING instance of a run (ins: all its
// instances; kind: the run's kind) waits on now, by task id, judged from
// live state. td returns the definition of a task in force (nil when it
// is no longer defined: such an instance is left out).
func WaitReasons(ctx context.Context, st *store.Store, td TaskDefs, kind axtype.RunKind, ins []axtype.Instance,
	now time.Time) (map[string]string, error) {
	return FirstWaitReasons(ctx, st, td, kind, ins, len(ins), now)
}

// FirstWaitReasons is WaitReasons for the first most WAITING instances of
// ins, in their order. A run's instances are created upstreams first, so
// in id order the first few waiting ones hold every waiting upstream of
// the run they depend on: their verdicts are those of the whole run's,
// in time that does not grow with the run.
func FirstWaitReasons(ctx context.Context, st *store.Store, td TaskDefs, kind axtype.RunKind, ins []axtype.Instance,
	most int, now time.Time) (map[string]string, error) {
	var waiting []string
	for _, in := range ins {
		if in.State == axtype.Waiting && len(waiting) < most {
			waiting = append(waiting, in.TaskID)
		}
	}
	return WaitReasonsOf(ctx, st, td, kind, ins, waiting, now)
}

// WaitReasonsOf is WaitReasons for the WAITING instances of tasks only (a
// page of a run's instances); ins are all the run's instances.
func WaitReasonsOf(ctx context.Context, st *store.Store, td TaskDefs, kind axtype.RunKind, ins []axtype.Instance,
	tasks []string, now time.Time) (map[string]string, error) {
	judged, err := judgeWaiting(ctx, st, td, kind, ins, tasks, now)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(judged))
	for _, s := range judged {
		out[s.task] = waitText(s.decision)
	}
	return out, nil
}

// Failure is a task whose failure ended a run: it failed, was killed or
// timed out waiting, not because an upstream failed.
type Failure struct {
	Task  string `json:"task"`
	State string `json:"state"`
	Error string `json:"error"`
}

// propagated reports whether an instance of pipeline failed only because
// an upstream of the same pipeline (so of the same run) failed, was killed
// or was skipped: decide's words for it.
func propagated(pipeline, err string) bool {
	if !strings.HasPrefix(err, "upstream "+pipeline+".") {
		return false
	}
	for _, s := range []string{" failed", " was killed", " was skipped"} {
		if strings.HasSuffix(err, s) {
			return true
		}
	}
	return false
}
