package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/store"
)

// trigger is a schedule of the graph with the fire up to which its runs exist.
type trigger struct {
	tr      *dag.Trigger
	name    string
	misfire defs.Misfire
	until   time.Time // runs exist for every fire at or before this
	next    time.Time // the schedule's first fire after until (zero: never)
}

// setUntil records that runs exist up to until and computes the next fire
// once, so that a top-up of many triggers whose next fire is beyond the
// window compares times instead of evaluating every cron expression.
func (t *trigger) setUntil(until time.Time) {
	t.until, t.next = until, t.tr.Schedule.Next(until)
}

func newTrigger(tr *dag.Trigger, g *dag.Graph) *trigger {
	t := &trigger{tr: tr, name: tr.Name(), misfire: g.Pipeline(tr.Pipeline).Misfire}
	if tr.Task != "" {
		t.misfire = g.Pipeline(tr.Pipeline).Task(tr.Task).Misfire
	}
	return t
}

// initTriggers finds, for each trigger, the last fire whose run exists, and
// applies the trigger's misfire policy (R20) to fires that passed while no
// scheduler created their runs: fire_once runs the latest of them, skip runs
// none, fire_all runs them all up to MisfireLimit (the latest ones). Every
// decision goes to the action log. A trigger that never ran starts now.
func (e *Engine) initTriggers(ctx context.Context, now time.Time) error {
	if e.cfg.NoSchedules {
		return nil
	}
	for _, t := range e.trigs {
		if err := e.initTrigger(ctx, t, now); err != nil {
			return err
		}
	}
	return nil
}

// initTrigger plans one trigger at start (or when a reload adds it).
func (e *Engine) initTrigger(ctx context.Context, t *trigger, now time.Time) error {
	last, err := e.st.LastRun(ctx, t.name, store.RunSchedule)
	if errors.Is(err, store.ErrNotFound) {
		t.setUntil(now)
		return nil
	}
	if err != nil {
		return fmt.Errorf("engine: last run of %s: %w", t.name, err)
	}
	t.setUntil(last.LogicalTime)
	var missed []time.Time
	for at := t.tr.Schedule.Next(t.until); !at.IsZero() && at.Before(now); at = t.tr.Schedule.Next(at) {
		missed = append(missed, at)
		if len(missed) > 100_000 { // @every 1s over a day of downtime: keep the latest
			missed = missed[len(missed)-e.cfg.MisfireLimit:]
		}
	}
	if len(missed) == 0 {
		return nil
	}
	latest := missed[len(missed)-1]
	var run []time.Time
	switch t.misfire {
	case defs.MisfireSkip:
	case defs.MisfireFireAll:
		run = missed[max(0, len(missed)-e.cfg.MisfireLimit):]
	default:
		run = missed[len(missed)-1:]
	}
	detail := fmt.Sprintf("%d missed fire(s) from %s to %s; policy %s runs %d", len(missed),
		missed[0].Format(time.RFC3339), latest.Format(time.RFC3339), t.misfire, len(run))
	if err := e.w().AppendAction(ctx, store.Action{At: now, Actor: Actor, Action: "misfire", Pipeline: t.tr.Pipeline,
		TaskID: taskOf(t), Reason: string(t.misfire), Detail: detail}); err != nil {
		return err
	}
	e.log.Warn("misfire", "trigger", t.name, "policy", string(t.misfire), "missed", len(missed), "run", len(run))
	for _, at := range run {
		if err := e.createRun(ctx, t, at, now); err != nil {
			return err
		}
	}
	t.setUntil(latest)
	return nil
}

func taskOf(t *trigger) string {
	if t.tr.Task == "" {
		return ""
	}
	return t.tr.Pipeline + "." + t.tr.Task
}

// createWindow creates the runs of every fire up to now + Window.
func (e *Engine) createWindow(ctx context.Context, now time.Time) error {
	if e.cfg.NoSchedules {
		return nil
	}
	horizon := now.Add(e.cfg.Window)
	for _, t := range e.trigs {
		for at := t.next; !at.IsZero() && !at.After(horizon); at = t.next {
			if err := e.createRun(ctx, t, at, now); err != nil {
				return err
			}
			t.setUntil(at)
		}
	}
	return nil
}

// createRun creates the run of trigger t for logical time at: roots are
// SCHEDULED for at plus their delay, the others WAITING. A run that exists
// already (this or another scheduler made it) is not an error.
func (e *Engine) createRun(ctx context.Context, t *trigger, at, now time.Time) error {
	_, err := e.newRun(ctx, t.tr.Pipeline, t.name, store.RunSchedule, t.tr.Tasks, at, now)
	if errors.Is(err, store.ErrDuplicate) {
		return nil
	}
	return err
}

// newRun creates a run of the named tasks of pipeline for logical time at.
func (e *Engine) newRun(ctx context.Context, pipeline, trig string, kind store.RunKind, names []string, at, now time.Time) (*runState, error) {
	return e.newRunKeyed(ctx, pipeline, trig, kind, names, at, now, "", 0)
}

// newRunKeyed is newRun with a dedup key and the backfill it belongs to.
// In a backfill run, upstreams in other pipelines count as satisfied, like
// every task outside the selection.
func (e *Engine) newRunKeyed(ctx context.Context, pipeline, trig string, kind store.RunKind, names []string, at, now time.Time, key string, backfill int64) (*runState, error) {
	in := make(map[string]bool, len(names))
	for _, n := range names {
		in[n] = true
	}
	news := make([]store.NewInstance, 0, len(names))
	for _, n := range names {
		ti := e.tasks[pipeline+"."+n]
		ni := store.NewInstance{TaskID: ti.id, Group: ti.def.Group, Priority: ti.def.Priority, State: store.Waiting}
		var waits []string
		for _, u := range ti.up {
			if in[u.def.Name] {
				waits = append(waits, u.def.Name)
			}
		}
		if kind != store.RunBackfill {
			for _, u := range ti.cross {
				waits = append(waits, u.id)
			}
		}
		switch {
		case len(waits) > 0:
			ni.Reason = "waiting for upstream " + strings.Join(waits, ", ")
		case ti.def.Manual:
			ni.Reason = "waiting for an operator (manual task)"
		default:
			ni.State, ni.NextFireAt = store.Scheduled, at.Add(ti.def.Delay)
		}
		news = append(news, ni)
	}
	run, insts, err := e.w().CreateRun(ctx, store.CreateRunParams{Pipeline: pipeline, Trigger: trig, Kind: kind, LogicalTime: at,
		Actor: Actor, Instances: news, Epoch: e.epoch, Now: now, DedupKey: key, BackfillID: backfill})
	if err != nil {
		return nil, err
	}
	rs := newRunState(run.ID, run.LogicalTime, insts)
	e.runs[run.ID] = rs
	e.runKind[run.ID] = kind
	for _, inst := range insts {
		if inst.State == store.Scheduled {
			e.enqueue(ctx, inst)
		}
	}
	e.log.Debug("run_created", "pipeline", pipeline, "trigger", trig, "run", run.ID, "logical_time", at.Format(time.RFC3339), "instances", len(insts))
	return rs, nil
}

// runState caches the instances of an active run: enough to decide which
// downstream instances an upstream's success releases. Compare-and-set keeps
// it honest: a stale entry makes a transition fail, and the run is reloaded.
type runState struct {
	id      int64
	logical time.Time
	inst    map[string]*instRef // by task id
}

type instRef struct {
	id      int64
	version int64
	state   store.State
}

func newRunState(id int64, logical time.Time, insts []store.Instance) *runState {
	rs := &runState{id: id, logical: logical, inst: make(map[string]*instRef, len(insts))}
	for _, in := range insts {
		rs.inst[in.TaskID] = &instRef{id: in.ID, version: in.Version, state: in.State}
	}
	return rs
}

// run returns the cached state of a run, loading it from the store if needed.
func (e *Engine) run(ctx context.Context, id int64) (*runState, error) {
	if rs := e.runs[id]; rs != nil {
		return rs, nil
	}
	insts, err := e.st.Instances(ctx, store.InstanceFilter{RunID: id, Limit: 1 << 20})
	if err != nil {
		return nil, err
	}
	if len(insts) == 0 {
		return nil, fmt.Errorf("engine: run %d has no instances", id)
	}
	rs := newRunState(id, insts[0].LogicalTime, insts)
	e.runs[id] = rs
	return rs, nil
}

// forgetDone drops a run from the cache once nothing of it is in flight
// (scheduled, running or retrying); it is reloaded if an operator moves it.
func (e *Engine) forgetDone(rs *runState) {
	for _, r := range rs.inst {
		if r.state == store.Scheduled || r.state == store.Running || r.state == store.Retrying {
			return
		}
	}
	delete(e.runs, rs.id)
}
