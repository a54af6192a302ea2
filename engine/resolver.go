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

// The engine's side of the readiness and propagation rules of ready.go: it
// reads what decide needs (the run cache, other pipelines' instances),
// turns decisions into transitions, and records them with what caused them.

// resolver is the loop's side of the readiness and propagation rules: the
// graph as settle sees it, the tasks whose waits can fail by time, and the
// earliest wait deadline, when those waits are swept. The rules themselves
// are pure (decide, settle in ready.go); the resolver feeds them the states
// it reads (the run cache, other pipelines' instances) and turns their
// verdicts into transitions (releasable). It must not record anything: the
// completer, the dispatcher and the operator requests record what it
// returns, in their own transactions.
type resolver struct {
	// epoch is the term's, which the transitions it returns carry: the
	// loop sets it at the start of every term (setEpoch).
	epoch  int64
	st     resolverReader
	paused pauseCover            // the pauses in force (the operator requests')
	sched  *inForce              // the schedule in force (snapshot.go)
	runs   runCache              // the runs read from the store (runcache.go)
	nodes  map[string]settleNode // the graph as the readiness rule sees it
	// limited are the tasks whose waits can fail by time: an upstream in
	// another pipeline, or a wait_timeout.
	limited      []string
	nextDeadline time.Time    // the earliest wait deadline seen: the limited waits are swept then
	order        []*defs.Task // every task, upstreams first
}

// resolverReader is what the resolver reads from the store, beyond the run
// cache: other pipelines' instances, and instances by id.
type resolverReader interface {
	Instances(ctx context.Context, f store.InstanceFilter) ([]axtype.Instance, error)
	Instance(ctx context.Context, id int64) (axtype.Instance, error)
}

// pauseCover says whether a pause covers a task, and which (pauses.by).
type pauseCover interface {
	by(t *taskInfo) (why string, paused bool)
}

func newResolver(st *store.Store, paused pauseCover) resolver {
	return resolver{st: st, paused: paused, runs: newRunCache(st)}
}

// setEpoch gives the resolver the epoch of the term that begins.
func (r *resolver) setEpoch(epoch int64) { r.epoch = epoch }

// setGraph gives settle the shape of every pipeline of g (its tasks
// resolved), and finds the tasks whose waits can fail by time.
func (r *resolver) setGraph(g *dag.Graph, tasks map[string]*taskInfo) {
	r.nodes = make(map[string]settleNode, len(tasks))
	for id, ti := range tasks {
		n := settleNode{manual: ti.def.Manual, limit: ti.def.WaitTimeout, hasCross: len(ti.cross) > 0}
		for _, u := range ti.up {
			n.ups = append(n.ups, u.id)
		}
		for _, d := range ti.down {
			n.downs = append(n.downs, d.id)
		}
		r.nodes[id] = n
	}
	r.limited, r.order = nil, g.Order()
	for _, t := range r.order {
		if ti := tasks[t.ID()]; len(ti.cross) > 0 || t.WaitTimeout > 0 {
			r.limited = append(r.limited, ti.id)
		}
	}
}

// isManual reports whether a task is a manual gate.
func (r *resolver) isManual(task string) bool { return r.nodes[task].manual }

// runFinished reports whether a run is over (every instance ended:
// StatusOf's rule) and names the tasks that failed or were killed when they
// ran, upstreams first. A run stopped at a manual gate nobody approved is
// not over: it is not done.
func (r *resolver) runFinished(ctx context.Context, runID int64) (bool, []string, error) {
	if rs := r.runs.cached(runID); rs != nil { // the cache knows when something is still in flight
		for _, ref := range rs.inst {
			switch ref.state {
			case axtype.Scheduled, axtype.Running, axtype.Retrying, axtype.Paused:
				return false, nil, nil
			}
		}
	}
	ins, err := r.st.Instances(ctx, store.InstanceFilter{RunID: runID, Limit: 1 << 20})
	if err != nil {
		return false, nil, err
	}
	if !StatusOf(ins, r.isManual).Over {
		return false, nil, nil
	}
	ended := map[string]bool{}
	for _, in := range ins {
		if (in.State == axtype.Failed || in.State == axtype.Killed) && !neverRan(in) {
			ended[in.TaskID] = true
		}
	}
	var failed []string
	for _, t := range r.order {
		if ended[t.ID()] {
			failed = append(failed, t.Name)
		}
	}
	return true, failed, nil
}

// crossViews returns the upstreams in other pipelines of task d for run rs,
// each as crossMatch finds it. A backfill run not told to wait for them
// (--wait-cross) counts them as done: it returns none.
func (r *resolver) crossViews(ctx context.Context, d *taskInfo, rs *runState) ([]upstreamView, error) {
	if len(d.cross) == 0 || !r.runs.waitsCross(ctx, rs.id) {
		return nil, nil
	}
	out := make([]upstreamView, 0, len(d.cross))
	for i := range d.cross {
		v, err := crossMatch(ctx, r.st, d, i, rs.logical)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// verdicts applies settle to the candidates of run rs, and remembers the
// earliest wait deadline so that the loop wakes for it.
func (r *resolver) verdicts(ctx context.Context, rs *runState, candidates []*taskInfo, now time.Time) ([]settled, error) {
	if len(candidates) == 0 {
		return nil, nil
	}
	run := func(id string) (instView, bool) {
		ref := rs.inst[id]
		if ref == nil {
			return instView{}, false
		}
		return instView{state: ref.state, err: ref.err, approved: ref.approved}, true
	}
	ids := make([]string, len(candidates))
	for i, c := range candidates {
		ids[i] = c.id
	}
	out, err := settle(run, r.nodes, ids, rs.since, now, defs.DefaultCrossWait, func(task string) ([]upstreamView, error) {
		return r.crossViews(ctx, r.sched.tasks[task], rs)
	})
	if err != nil {
		return nil, err
	}
	for _, s := range out {
		if s.verdict == verdictWait && !s.deadline.IsZero() && (r.nextDeadline.IsZero() || s.deadline.Before(r.nextDeadline)) {
			r.nextDeadline = s.deadline
		}
	}
	return out, nil
}

// releasable returns the transitions that the candidates of run rs take
// now: WAITING → SCHEDULED (or PAUSED, under a pause) for those that are
// ready, WAITING → FAILED for those that can no longer run, and transitively
// for the downstream of those.
func (r *resolver) releasable(ctx context.Context, rs *runState, candidates []*taskInfo, now time.Time) ([]release, error) {
	vs, err := r.verdicts(ctx, rs, candidates, now)
	if err != nil {
		return nil, err
	}
	var out []release
	for _, v := range vs {
		ref, d := rs.inst[v.task], r.sched.tasks[v.task]
		// Its last attempt's number: a released instance that ran before (a
		// rerun brought it back) numbers its next attempt past it.
		in := axtype.Instance{ID: ref.id, RunID: rs.id, TaskID: d.id, LogicalTime: rs.logical, Attempt: ref.attempt}
		switch v.verdict {
		case verdictFail:
			out = append(out, release{failWaiting(ref, d, v.reason, r.epoch, now, Actor), in})
		case verdictReady:
			at := releaseAt(r.runs.fireOf(ctx, rs), now, d.def.Delay)
			in.NextFireAt = at
			if why, paused := r.paused.by(d); paused { // the pause rule: whatever run it belongs to
				out = append(out, release{store.TransitionParams{InstanceID: ref.id, Version: ref.version, From: axtype.Waiting, To: axtype.Paused,
					Set: store.Changes{NextFireAt: &at}, Epoch: r.epoch, Now: now, Actor: Actor, Reason: "upstreams succeeded while " + why}, in})
				continue
			}
			why := "upstreams succeeded"
			if d.def.Manual {
				why = "upstreams succeeded; gate approved"
			}
			if v.reason != "" {
				why += "; " + v.reason // the runs matched in other pipelines
			}
			out = append(out, release{store.TransitionParams{InstanceID: ref.id, Version: ref.version, From: axtype.Waiting, To: axtype.Scheduled,
				Set: store.Changes{NextFireAt: &at, Reason: ptr("")}, Epoch: r.epoch, Now: now, Actor: Actor, Reason: why}, in})
		}
	}
	return out, nil
}

// releasableByRun is releasable for the candidates of several runs, in
// run order; reread drops each run's cached copy first (instances brought
// back behind the cache's back).
func (r *resolver) releasableByRun(ctx context.Context, byRun map[int64][]*taskInfo, reread bool, now time.Time) ([]release, error) {
	var out []release
	for _, id := range sortedIDs(byRun) {
		if reread {
			r.runs.drop(id)
		}
		rs, err := r.runs.get(ctx, id)
		if err != nil {
			return nil, err
		}
		rel, err := r.releasable(ctx, rs, byRun[id], now)
		if err != nil {
			return nil, err
		}
		out = append(out, rel...)
	}
	return out, nil
}

// failWaiting is the transition of a WAITING instance that fails without
// running: an upstream failed, its wait limit passed, or an operator
// cancelled its run or marked it failed. Its count of attempts stays 0.
func failWaiting(ref *instRef, d *taskInfo, reason string, epoch int64, now time.Time, actor string) store.TransitionParams {
	return store.TransitionParams{InstanceID: ref.id, Version: ref.version, From: axtype.Waiting, To: axtype.Failed,
		Set:   store.Changes{Error: ptr(reason), EndedAt: &now, NextFireAt: &time.Time{}, Reason: ptr("")},
		Epoch: epoch, Now: now, Actor: actor, Reason: reason,
		Action: &store.Action{Actor: actor, Action: "not_run", Pipeline: d.def.Pipeline, TaskID: d.id, Reason: reason}}
}

// releaseCross checks the waiting instances of tasks that wait on another
// pipeline (or have a wait limit): released, failed, or still waiting.
func (r *resolver) releaseCross(ctx context.Context, tasks []*taskInfo, now time.Time) ([]release, error) {
	var out []release
	for _, d := range tasks {
		waiting, err := r.st.Instances(ctx, store.InstanceFilter{TaskID: d.id, States: []axtype.State{axtype.Waiting}, Limit: 1000})
		if err != nil {
			return nil, err
		}
		for _, w := range waiting {
			rs, err := r.runs.get(ctx, w.RunID)
			if err != nil {
				return nil, err
			}
			rel, err := r.releasable(ctx, rs, []*taskInfo{d}, now)
			if err != nil {
				return nil, err
			}
			out = append(out, rel...)
		}
	}
	return out, nil
}

// settleAfter returns a then for store.TransitionBatchThen: in the same
// transaction as params, the downstream that their outcomes settle
// (released by a success, failed by a failure, kill or skip). out receives
// what then returned, for released.
func (r *resolver) settleAfter(ctx context.Context, params []store.TransitionParams, now time.Time, out *[]release) func([]store.BatchResult) ([]store.TransitionParams, error) {
	return func(res []store.BatchResult) ([]store.TransitionParams, error) {
		*out = (*out)[:0]
		seen := map[int64]bool{}
		for i, br := range res {
			p := params[i]
			if br.Err != nil || !ends(p.To) {
				continue
			}
			in, err := r.st.Instance(ctx, p.InstanceID)
			if err != nil {
				return nil, err
			}
			ti := r.sched.tasks[in.TaskID]
			if ti == nil || len(ti.down) == 0 {
				continue
			}
			rs, err := r.runs.get(ctx, in.RunID)
			if err != nil {
				return nil, err
			}
			if err := r.settleRecorded(ctx, rs, ti, p, br, now, seen, out); err != nil {
				return nil, err
			}
		}
		return releaseParams(*out), nil
	}
}

// settleRecorded brings the run cache's copy of ti's instance up to date
// with the transition p just recorded (r), and adds to out, once each (seen),
// the downstream in the same run that its outcome settles. The one home of
// that step for results (settleResults) and operator verbs (settleAfter).
func (r *resolver) settleRecorded(ctx context.Context, rs *runState, ti *taskInfo, p store.TransitionParams, br store.BatchResult, now time.Time, seen map[int64]bool, out *[]release) error {
	if ref := rs.set(ti.id, p.To, br.Version); ref != nil && p.Set.Error != nil {
		ref.err = *p.Set.Error
	}
	rel, err := r.releasable(ctx, rs, ti.down, now)
	if err != nil {
		return err
	}
	for _, x := range rel {
		if !seen[x.p.InstanceID] {
			seen[x.p.InstanceID] = true
			*out = append(*out, x)
		}
	}
	return nil
}

// releaseParams returns the transitions of rel, for a then to return.
func releaseParams(rel []release) []store.TransitionParams {
	ps := make([]store.TransitionParams, len(rel))
	for i, x := range rel {
		ps[i] = x.p
	}
	return ps
}

// neverRan reports whether a FAILED instance failed without running because
// of its upstreams: a rerun brings it back to WAITING instead of
// running it.
func neverRan(in axtype.Instance) bool {
	return in.State == axtype.Failed && in.Counted == 0 && strings.HasPrefix(in.Error, "upstream ")
}
