package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// Fingerprints is what a reload compares between two sets of pipelines: a
// hash of each task's definition and of each schedule (trigger) with what
// it runs. Positions in the files are not part of them, so moving a task
// in its file or adding a comment changes nothing.
type Fingerprints struct {
	Tasks    map[string]string `json:"tasks"`    // task id → hash of its definition
	Triggers map[string]string `json:"triggers"` // trigger name → hash of its schedule, zone, misfire policy and run set
	// Pipelines are the settings of each pipeline that belong to none of
	// its tasks and schedules (whether it is disabled, which decides
	// whether it may be triggered at all), by pipeline name.
	Pipelines map[string]string `json:"pipelines,omitempty"`
}

// pipelineSettings is the fingerprint of pl's own settings.
func pipelineSettings(pl *defs.Pipeline) string {
	return fmt.Sprintf("disabled: %t", pl.Disabled)
}

// Fingerprint computes the fingerprints of g.
func Fingerprint(g *dag.Graph) Fingerprints {
	fp := Fingerprints{Tasks: map[string]string{}, Triggers: map[string]string{}}
	for _, t := range g.Order() {
		_, fp.Tasks[t.ID()] = hashJSON(t)
	}
	for _, tr := range g.Triggers() {
		t := newTrigger(tr, g)
		fp.Triggers[t.name] = triggerHash(t)
	}
	fp.Pipelines = map[string]string{}
	for _, pl := range g.Pipelines() {
		fp.Pipelines[pl.Name] = pipelineSettings(pl)
	}
	return fp
}

// triggerHash is the fingerprint of a schedule: its expression, zone,
// misfire policy (scheduleDefOf) and the tasks it runs. A change of any of
// them re-plans its fires from the change on (a reload, or a start:
// planSince).
func triggerHash(t *trigger) string {
	d := scheduleDefOf(t)
	_, h := hashJSON(struct {
		Spec, Zone, Misfire string
		Tasks               []string
		Disabled            bool `json:",omitempty"`
	}{d.Schedule, d.Timezone, d.Misfire, t.tr.Tasks, t.tr.Disabled})
	return h
}

// ScheduleDef is what a schedule's fingerprint covers besides the tasks it
// runs: its expression, zone and misfire policy, which ax diff compares
// field by field.
type ScheduleDef struct {
	Schedule string `json:"schedule"`
	Timezone string `json:"timezone"`
	Misfire  string `json:"misfire"`
}

func scheduleDefOf(t *trigger) ScheduleDef {
	return ScheduleDef{Schedule: t.tr.Schedule.Spec(), Timezone: t.tr.Schedule.Location().String(), Misfire: string(t.misfire)}
}

// Schedules returns the ScheduleDef of every schedule of g, by trigger name
// (the pipeline's name, or `pipeline.task` for a task's own cron).
func Schedules(g *dag.Graph) map[string]ScheduleDef {
	out := map[string]ScheduleDef{}
	for _, tr := range g.Triggers() {
		t := newTrigger(tr, g)
		out[t.name] = scheduleDefOf(t)
	}
	return out
}

// Diff is what a reload changes: tasks added, removed and changed (by id),
// and schedules (by trigger name) whose fires are planned again from the
// moment of the reload, because they are new, changed or gone.
type Diff struct {
	Added     []string `json:"added,omitempty"`
	Removed   []string `json:"removed,omitempty"`
	Changed   []string `json:"changed,omitempty"`
	Replanned []string `json:"replanned,omitempty"`
	// Settings are the pipelines, in both sets, whose own settings
	// (Fingerprints.Pipelines) changed.
	Settings []string `json:"settings,omitempty"`
	// Changes are the fields that changed, of the tasks of Changed and the
	// schedules of Replanned, when their old definitions are known.
	Changes []Change `json:"changes,omitempty"`
}

// DiffOf compares two sets of fingerprints.
func DiffOf(old, cur Fingerprints) Diff {
	var d Diff
	for _, id := range slices.Sorted(maps.Keys(cur.Tasks)) {
		h, ok := old.Tasks[id]
		switch {
		case !ok:
			d.Added = append(d.Added, id)
		case h != cur.Tasks[id]:
			d.Changed = append(d.Changed, id)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(old.Tasks)) {
		if _, ok := cur.Tasks[id]; !ok {
			d.Removed = append(d.Removed, id)
		}
	}
	names := slices.Sorted(maps.Keys(cur.Triggers))
	for _, n := range slices.Sorted(maps.Keys(old.Triggers)) {
		if _, ok := cur.Triggers[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		if old.Triggers[n] != cur.Triggers[n] {
			d.Replanned = append(d.Replanned, n)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(cur.Pipelines)) {
		// A set without them (from a server before they were kept) compares none.
		if h, ok := old.Pipelines[p]; ok && h != cur.Pipelines[p] {
			d.Settings = append(d.Settings, p)
			d.Changes = append(d.Changes, Change{ID: p, Field: "settings", Old: h, New: cur.Pipelines[p]})
		}
	}
	return d
}

// Empty reports whether the diff changes nothing.
func (d Diff) Empty() bool {
	return len(d.Added)+len(d.Removed)+len(d.Changed)+len(d.Replanned)+len(d.Settings) == 0
}

// String is the diff for a log line and the action log:
// `added a.x; removed b.y; changed c.z; schedules re-planned: a`.
func (d Diff) String() string {
	if d.Empty() {
		return "no change"
	}
	var parts []string
	for _, p := range []struct {
		what string
		ids  []string
	}{{"added", d.Added}, {"removed", d.Removed}, {"changed", d.Changed}, {"schedules re-planned", d.Replanned}, {"pipeline settings changed", d.Settings}} {
		if len(p.ids) > 0 {
			parts = append(parts, p.what+" "+strings.Join(p.ids, ", "))
		}
	}
	return strings.Join(parts, "; ")
}

// Graph returns the pipelines in force: the last graph applied (or, on a
// standby, taken). Safe for concurrent use.
func (e *Engine) Graph() *dag.Graph { return e.cur.Load() }

// Reload replaces the pipelines the engine schedules with g, a graph that
// compiled without errors. It checks that every task of g can run here
// (an executor, a registered function) and returns what changes, without
// waiting: the loop applies the set as a whole between two of its turns,
// as primary, writing the definitions and the diff to the store (a standby
// only takes the set, to use when it becomes primary). A later Reload
// before that replaces the waiting set. On refusal nothing changes.
//
// Applying it: new tasks and schedules fire; tasks removed stop firing
// (their instances not yet started are no longer loaded, running ones stay
// tracked until they end); a schedule that changed or went away loses the
// runs it created ahead in which nothing started, and a changed or new
// schedule is planned from the moment of the reload.
func (e *Engine) Reload(g *dag.Graph) (Diff, error) {
	e.reloadMu.Lock()
	defer e.reloadMu.Unlock()
	if g == nil {
		return Diff{}, fmt.Errorf("engine: reload: no pipelines given")
	}
	if err := checkExecutors(g, e.execs); err != nil {
		return Diff{}, fmt.Errorf("reload refused, the running pipelines stay: %w", err)
	}
	base := e.cur.Load()
	if n := e.next.Load(); n != nil {
		base = n
	}
	d := DiffOf(Fingerprint(base), Fingerprint(g))
	if d.Empty() && base == e.cur.Load() {
		return d, nil
	}
	e.next.Store(g)
	select {
	case e.reloadSig <- struct{}{}:
	default: // the loop is woken already
	}
	return d, nil
}

// takeNext swaps in the waiting graph without writing anything: on a
// standby, and before a term as primary starts (whose start syncs the
// definitions and plans every trigger from the store anyway).
func (e *Engine) takeNext() {
	g := e.next.Swap(nil)
	if g == nil {
		return
	}
	d := DiffOf(Fingerprint(e.sched.g), Fingerprint(g))
	tasks, trigs := buildTasks(g)
	e.setGraph(g, tasks, trigs)
	e.log.Info("pipelines_reloaded", "applied", false, "diff", d.String(), "reason", "not primary: taken for the next term")
}

// applyReload applies a waiting graph as primary (applyGraph), then plans
// the window again. A store that is unavailable, or a lost race, leaves the
// waiting graph in place for the next turn. A write the store refuses for
// good (a name longer than its column, say) drops it: the running set
// stays (its definitions written back to the store), the failure is kept
// for ReloadFailure, and the turn goes on, so that the other pipelines are
// not held up by a set that can never apply.
func (e *Engine) applyReload(ctx context.Context, now time.Time) error {
	g := e.next.Load()
	if g == nil {
		return nil
	}
	err := e.applyGraph(ctx, g, now)
	switch {
	case err == nil:
		return e.planner.createWindow(ctx, now)
	case ctx.Err() != nil, errors.Is(err, store.ErrNotLeader), store.Classify(err) != store.Permanent:
		return err
	}
	e.next.CompareAndSwap(g, nil)
	e.reloadFailed.Store(&reloadFailure{g: g, err: err})
	e.log.Error("reload_failed", "err", err, "kept", "the running pipelines")
	// The sync writes in chunks: what it wrote of the refused set before
	// the refusal is written back to the running one, so that the stored
	// definitions are those in force (else the next sync does it).
	if _, err := e.syncGraph(ctx, e.sched.g, now); err != nil {
		e.log.Error("reload_failed", "err", err, "kept", "the refused set's definitions written before the refusal, until the next sync")
	}
	return nil
}

// reloadFailure is a reloaded set the store refused for good.
type reloadFailure struct {
	g   *dag.Graph
	err error
}

// ReloadFailure returns why the store refused the set g handed to Reload,
// which was then dropped (the running set stayed); nil while g waits, once
// it applied, or when it was not the last set refused. Safe for concurrent
// use.
func (e *Engine) ReloadFailure(g *dag.Graph) error {
	if f := e.reloadFailed.Load(); f != nil && f.g == g {
		return f.err
	}
	return nil
}

// applyGraph applies g as primary: definitions synced, schedules that
// changed or went away lose their untouched runs ahead, then the set is
// swapped in memory. On error nothing is swapped.
func (e *Engine) applyGraph(ctx context.Context, g *dag.Graph, now time.Time) error {
	d := DiffOf(Fingerprint(e.sched.g), Fingerprint(g))
	tasks, trigs := buildTasks(g)
	if _, err := e.syncGraph(ctx, g, now); err != nil {
		return fmt.Errorf("engine: reload: %w", err)
	}
	oldTrigs := map[string]*trigger{}
	for _, t := range e.planner.trigs {
		oldTrigs[t.name] = t
	}
	replan := map[string]bool{}
	for _, n := range d.Replanned {
		replan[n] = true
	}
	dropped, err := e.replan(ctx, d, oldTrigs, trigs, now)
	if err != nil {
		return err
	}
	detail, _ := json.Marshal(d)
	if err := e.w().AppendAction(ctx, store.Action{At: now, Actor: Actor, Action: "reload", Reason: d.String(), Detail: string(detail)}); err != nil {
		return fmt.Errorf("engine: reload: %w", err)
	}
	// From here on nothing fails: the new set is in force.
	e.next.CompareAndSwap(g, nil)
	droppedRun := map[int64]bool{}
	for _, id := range dropped {
		droppedRun[id] = true
		e.resolver.runs.forget(id)
	}
	e.dispatcher.rebind(tasks, droppedRun)
	for _, a := range e.dispatcher.running.all() {
		if nt := tasks[a.task.id]; nt != nil {
			a.task = nt
		} else if !a.task.removed {
			a.task = standIn(a.task.id, *a.task.def) // its attempt ends under its old definition, never retried
		}
	}
	e.dropHeldOfRemoved(ctx, tasks, now)
	e.endUnstartedOfRemoved(ctx, d.Removed, "by a reload", now)
	e.setGraph(g, tasks, trigs)
	for _, t := range trigs {
		old := oldTrigs[t.name]
		switch {
		case old != nil && !replan[t.name]:
			t.until, t.next, t.since, t.ahead = old.until, old.next, old.since, old.ahead
		default: // changed or new: planned from the reload on
			t.setUntil(now)
			t.since = now
		}
	}
	for _, id := range d.Removed {
		if p, t, ok := strings.Cut(id, "."); ok {
			e.tm.forget(p, t, g.Pipeline(p) == nil)
		}
		e.m.breakerOpen.DeleteLabelValues(id) // an open breaker of a task gone would alert for ever
	}
	e.log.Info("pipelines_reloaded", "applied", true, "diff", d.String(), "runs_dropped", len(dropped))
	return nil
}

// replan drops the runs made ahead (untouched) of the schedules a reload
// changes or removes, so that fires of the old plan never run, and keeps
// that each changed or new schedule is in force from now on (planSince).
// It returns the runs dropped.
func (e *Engine) replan(ctx context.Context, d Diff, oldTrigs map[string]*trigger, trigs []*trigger, now time.Time) ([]int64, error) {
	if e.cfg.NoSchedules {
		return nil, nil
	}
	var dropped []int64
	for _, n := range d.Replanned {
		if oldTrigs[n] != nil {
			ids, err := e.w().DropRunsAhead(ctx, store.DropAheadParams{Trigger: n, After: now})
			if err != nil {
				return nil, fmt.Errorf("engine: reload: drop the runs planned ahead for %s: %w", n, err)
			}
			dropped = append(dropped, ids...)
		}
	}
	plans := map[string]string{}
	for _, t := range trigs {
		if slices.Contains(d.Replanned, t.name) {
			plans[planSetting+t.name] = planValue(t, now)
		}
	}
	if len(plans) > 0 {
		if err := e.w().SetSettings(ctx, plans, now); err != nil {
			return nil, fmt.Errorf("engine: reload: keep the schedules' plans: %w", err)
		}
	}
	return dropped, nil
}

// syncGraph writes the definitions of g to the store and returns what
// changed there.
func (e *Engine) syncGraph(ctx context.Context, g *dag.Graph, now time.Time) (store.SyncResult, error) {
	var pds []store.PipelineDef
	for _, p := range g.Pipelines() {
		pd := store.PipelineDef{Name: p.Name, File: p.File}
		pd.Definition, pd.Hash = hashJSON(p)
		for _, t := range p.Tasks {
			td := store.TaskDef{ID: t.ID(), Pipeline: p.Name, Name: t.Name, Group: t.Group, Priority: t.Priority}
			td.Definition, td.Hash = hashJSON(t)
			pd.Tasks = append(pd.Tasks, td)
		}
		pds = append(pds, pd)
	}
	if len(g.Order()) >= longWrite {
		e.leadership.renewAhead(ctx)
	}
	res, err := e.w().SyncDefinitions(ctx, store.SyncParams{Pipelines: pds, Epoch: e.leadership.epoch, Now: now, Chunk: e.cfg.CreateChunk})
	if err != nil {
		return res, fmt.Errorf("engine: sync definitions: %w", err)
	}
	if len(res.Added)+len(res.Changed)+len(res.Removed) > 0 {
		e.log.Info("definitions_synced", "added", res.Added, "changed", res.Changed, "removed", res.Removed)
	}
	return res, nil
}

// dropHeldOfRemoved ends the attempts of removed tasks that were claimed
// ahead but have not started (their fire time is still to come): they never
// start; RUNNING → FAILED with the reason. A store error leaves them to
// start at their fire time, as claimed.
// The same holds for the local attempts of removed tasks waiting in the
// start queue for a slot: withdrawn before their goroutine starts them
// (attempt.withdraw), they never start; RUNNING → FAILED with the reason,
// the attempt not counted. If that cannot be recorded, they end through
// the results path instead (failed, not started).
func (e *Engine) dropHeldOfRemoved(ctx context.Context, tasks map[string]*taskInfo, now time.Time) {
	var params []store.TransitionParams
	for _, id := range sortedIDs(e.dispatcher.held) {
		a := e.dispatcher.held[id]
		if tasks[a.task.id] != nil {
			continue
		}
		msg := "not started: its task was removed from the pipeline files by a reload before its fire time"
		params = append(params, store.TransitionParams{InstanceID: id, Version: a.version, From: axtype.Running, To: axtype.Failed,
			Set: store.Changes{EndedAt: &now, Error: &msg}, Epoch: e.leadership.epoch, Now: now, Actor: Actor, Reason: msg})
	}
	var withdrawn []int64
	for _, id := range e.dispatcher.running.ids() {
		a := e.dispatcher.running.get(id)
		if e.dispatcher.held[id] != nil || tasks[a.task.id] != nil || !a.withdraw() {
			continue
		}
		msg, counted := "not started: its task was removed from the pipeline files by a reload while it waited for a slot", a.uncounted()
		params = append(params, store.TransitionParams{InstanceID: id, Version: a.version, From: axtype.Running, To: axtype.Failed,
			Set: store.Changes{EndedAt: &now, Error: &msg, Counted: &counted}, Epoch: e.leadership.epoch, Now: now, Actor: Actor, Reason: msg})
		withdrawn = append(withdrawn, id)
	}
	if len(params) == 0 {
		return
	}
	// Withdrawn already, so they never start: if their end cannot be
	// recorded here, they end as results instead.
	endAsResult := func(id int64) {
		if slices.Contains(withdrawn, id) {
			e.completer.gather(outcome{instance: id, res: runner.Result{Ticket: e.dispatcher.running.get(id).ticket, Status: runner.StatusFailed,
				Error: "not started: its task was removed while it waited for a slot"}})
		}
	}
	res, err := e.w().TransitionBatch(ctx, params)
	if err != nil {
		e.log.Warn("reload_unclaim_failed", "instances", len(params), "err", err)
		for _, id := range withdrawn {
			endAsResult(id)
		}
		return
	}
	for i, r := range res {
		id := params[i].InstanceID
		if r.Err != nil {
			endAsResult(id)
			continue
		}
		if a := e.dispatcher.held[id]; a != nil {
			a.cancel(errors.New("engine: task removed before its fire time")) // its goroutine returns without running
			e.dispatcher.unhold(id)
		} else {
			e.dispatcher.running.get(id).cancel(errors.New("engine: task removed while it waited for a slot"))
		}
		e.dispatcher.untrack(id)
		e.resolver.runs.dropRunOf(id)
	}
}
