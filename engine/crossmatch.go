package engine

import (
	"context"
	"strconv"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/store"
)

// Cross-pipeline matching: which run of another pipeline meets a task's
// dependency on it. The rule is defs.CrossWindow; crossMatch is the
// engine's one reading of it, used by every release path and by explain.

// depOn returns t's dependency on u, a task of another pipeline.
func depOn(t, u *defs.Task) defs.Dep {
	for _, d := range t.DependsOn {
		if d.Pipeline == u.Pipeline && d.Task == u.Name {
			return d
		}
	}
	return defs.Dep{Pipeline: u.Pipeline, Task: u.Name}
}

// crossWindow is the window of d's i-th upstream in another pipeline for a
// run of d at logical time logical.
func (d *taskInfo) crossWindow(i int, logical time.Time) defs.Window {
	return defs.CrossWindow(d.crossDep[i], d.own, d.loc, logical)
}

// crossMatch returns the view of d's i-th upstream in another pipeline for
// a run at logical: the upstream's latest instance at or before the
// window's end when it lies in the window (its state), else none (state
// "": it waits for a run in the window). note names the run matched, or
// the window waited for.
func crossMatch(ctx context.Context, st resolverReader, d *taskInfo, i int, logical time.Time) (upstreamView, error) {
	u, win := d.cross[i], d.crossWindow(i, logical)
	ins, err := st.Instances(ctx, store.InstanceFilter{TaskID: u.id, LogicalTo: win.To, ByLogicalTime: true, Limit: 1})
	if err != nil {
		return upstreamView{}, err
	}
	v := upstreamView{id: u.id, cross: true, note: "no run yet: waits for " + win.String()}
	if len(ins) == 1 && win.Contains(ins[0].LogicalTime) {
		v.state, v.err = ins[0].State, ins[0].Error
		v.note = "matched " + matchedRun(ins[0])
		v.run, v.logical = ins[0].RunID, ins[0].LogicalTime
	}
	return v, nil
}

// matchedRun names an upstream instance as explain shows it.
func matchedRun(in axtype.Instance) string {
	return "run " + strconv.FormatInt(in.RunID, 10) + " of " + in.LogicalTime.UTC().Format(time.RFC3339)
}

// RunRef names a run: its pipeline, id and logical time.
type RunRef struct {
	Pipeline string
	Run      int64
	Logical  time.Time
}

// UpstreamRuns returns the runs of other pipelines that the instance of
// task (pipeline.task) in a run at logical matches, by crossMatch's rule,
// in the pipelines in force: what a trace links an instance to. Safe for
// concurrent use (it reads the graph in force and the store).
func (e *Engine) UpstreamRuns(ctx context.Context, task string, logical time.Time) ([]RunRef, error) {
	g := e.Graph()
	t := g.Task(task)
	if t == nil {
		return nil, nil
	}
	d := &taskInfo{id: task, def: t, loc: g.Pipeline(t.Pipeline).Location}
	if tr := g.TriggerOf(task); tr != nil {
		d.own = tr.Schedule
	}
	var out []RunRef
	for _, dep := range t.DependsOn {
		u := g.Task(dep.Pipeline + "." + dep.Task)
		if dep.Pipeline == "" || dep.Pipeline == t.Pipeline || u == nil {
			continue
		}
		d.cross, d.crossDep = []*taskInfo{{id: u.ID(), def: u}}, []defs.Dep{dep}
		v, err := crossMatch(ctx, e.st, d, 0, logical)
		if err != nil {
			return out, err
		}
		if v.run != 0 {
			out = append(out, RunRef{Pipeline: u.Pipeline, Run: v.run, Logical: v.logical})
		}
	}
	return out, nil
}
