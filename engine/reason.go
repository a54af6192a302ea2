package engine

import (
	"context"
	"slices"
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
	r := resolver{st: st, runs: newRunCache(st), sched: &inForce{&snapshot{tasks: map[string]*taskInfo{}}}, nodes: map[string]settleNode{}}
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
		r.sched.tasks[id], r.nodes[id] = ti, n
	}
	return settle(func(id string) (instView, bool) { v, ok := full[id]; return v, ok }, r.nodes, tasks, rs.since, now, defs.DefaultCrossWait,
		func(task string) ([]upstreamView, error) { return r.crossViews(ctx, r.sched.tasks[task], rs) })
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

// FailureOf is in, a failed or killed instance, as a Failure.
func FailureOf(in axtype.Instance) Failure {
	return Failure{Task: in.TaskID, State: string(in.State), Error: cmpOr(in.Error, strings.ToLower(string(in.State)))}
}

// PropagatedWords are decide's words for an instance of pipeline that
// failed only because an upstream of the same pipeline (so of the same
// run) failed, was killed or was skipped: its error starts with prefix and
// ends with one of suffixes. The store counts a run's other failures with
// them (store.RootFailures).
func PropagatedWords(pipeline string) (prefix string, suffixes []string) {
	return "upstream " + pipeline + ".", []string{" failed", " was killed", " was skipped"}
}

// propagated reports whether an instance of pipeline failed with err only
// because an upstream of its run failed (PropagatedWords).
func propagated(pipeline, err string) bool {
	prefix, suffixes := PropagatedWords(pipeline)
	if !strings.HasPrefix(err, prefix) {
		return false
	}
	for _, s := range suffixes {
		if strings.HasSuffix(err, s) {
			return true
		}
	}
	return false
}

// DefMap is a map of task definitions by id as TaskDefs that can also
// name a pipeline's manual tasks (ManualTasks).
type DefMap map[string]*defs.Task

// Task returns m[id].
func (m DefMap) Task(id string) *defs.Task { return m[id] }

// ManualTasks returns the ids of the manual tasks of pipeline in td, by
// id, when td can list a pipeline's tasks (a *dag.Graph, a DefMap), else
// nil.
func ManualTasks(td TaskDefs, pipeline string) []string {
	var ids []string
	switch d := td.(type) {
	case scheduledDefs:
		if p := d.Pipeline(pipeline); p != nil {
			for _, t := range p.Tasks {
				if t.Manual {
					ids = append(ids, t.ID())
				}
			}
		}
	case DefMap:
		for id, t := range d {
			if t != nil && t.Manual && t.Pipeline == pipeline {
				ids = append(ids, id)
			}
		}
	}
	slices.Sort(ids)
	return ids
}

// RunWaitReasons is WaitReasonsOf for the WAITING instances of tasks in
// run, reading of the run only what judging them needs: their instances,
// those of their upstreams in the run, and the run's first instance (when
// it started waiting), whatever the run's size.
func RunWaitReasons(ctx context.Context, st *store.Store, td TaskDefs, run axtype.Run, tasks []string,
	now time.Time) (map[string]string, error) {
	if len(tasks) == 0 {
		return map[string]string{}, nil
	}
	need := slices.Clone(tasks)
	for _, id := range tasks {
		if t := td.Task(id); t != nil {
			need = append(need, runUpstreams(t)...)
		}
	}
	slices.Sort(need)
	ins, err := st.RunStatesOf(ctx, run.ID, slices.Compact(need))
	if err != nil {
		return nil, err
	}
	first, err := st.Instances(ctx, store.InstanceFilter{RunID: run.ID, Ascending: true, Limit: 1})
	if err != nil {
		return nil, err
	}
	if len(first) == 1 && (len(ins) == 0 || ins[0].ID != first[0].ID) {
		ins = append(first, ins...)
	}
	return WaitReasonsOf(ctx, st, td, run.Kind, ins, tasks, now)
}
