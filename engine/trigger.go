package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/engine/queue"
	"github.com/ax-sched/ax/store"
)

// trigger is a schedule of the graph with the fire up to which its runs exist.
type trigger struct {
	tr      *dag.Trigger
	name    string
	misfire defs.Misfire
	until   time.Time // runs exist for every fire at or before this
	next    time.Time // the schedule's first fire after until (zero: never)
	// since is when the schedule as defined now came into force: the
	// start or reload that found it changed (zero: before that was kept).
	// Runs created before it are fires of an older schedule (oldPlan).
	since time.Time
	// ahead holds the fires after now whose runs this process created
	// ahead, in order (what counts against the bounds: createAhead).
	ahead []time.Time
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
// applies the misfire rule (misfireSplit) to the backlog of fires that passed
// while no scheduler ran them: both the fires that have no run yet and the
// runs created ahead (or claimed ahead and given back) that never started.
// One decision covers the whole backlog of a trigger, so fire_once runs
// exactly one fire (the latest), skip none, fire_all the latest
// MisfireLimit, after an outage of any length. Every decision goes to the
// action log; every skipped instance gets a history row naming the policy.
// A trigger that never ran has its backlog from when its schedule came to be
// (scheduledSince), so an outage before its first run misfires as any other.
// It returns the skips it decided, for the loop to record with what they
// settle (operator.transitionAll).
func (pl *planner) initTriggers(ctx context.Context, now time.Time) ([]store.TransitionParams, error) {
	late, order, err := pl.lateInstances(ctx, now)
	if err != nil {
		return nil, err
	}
	settings, err := pl.st.Settings(ctx) // the fires earlier misfire decisions judged (judgedSetting)
	if err != nil {
		return nil, fmt.Errorf("engine: read settings: %w", err)
	}
	var params []store.TransitionParams
	changed, plans := planSince(pl.trigs, settings, now)
	for _, t := range pl.trigs {
		if pl.cfg.NoSchedules {
			break
		}
		if params, err = pl.judgeTriggerBacklog(ctx, t, changed[t.name], late, settings, params, now); err != nil {
			return nil, err
		}
	}
	if len(plans) > 0 && !pl.cfg.NoSchedules {
		if err := pl.host.w().SetSettings(ctx, plans, now); err != nil {
			return nil, fmt.Errorf("engine: keep the schedules' plans: %w", err)
		}
	}
	// Runs made ahead whose schedule is gone (or not run here): each task's
	// backlog on its own.
	for _, id := range order {
		if params, err = pl.judgeTaskBacklog(ctx, id, late[id], params, now); err != nil {
			return nil, err
		}
	}
	return params, nil
}

// backlog is the fires of one trigger that passed while no scheduler ran
// them: n in all (the earliest at first, the latest at newest), of which
// nNew have no run yet (tail keeps the latest of those, as many as any
// policy can run) and the others were made ahead and never started.
type backlog struct {
	n, nNew       int
	first, newest time.Time
	tail          []time.Time
}

// judgeTriggerBacklog applies the misfire rule to trigger t's backlog:
// late holds the runs made ahead that never started, per task (the ones of
// t's tasks are taken out of it); the skipped ones are appended to params
// to be recorded; the fires to run are created.
func (pl *planner) judgeTriggerBacklog(ctx context.Context, t *trigger, changed bool, late map[string][]axtype.Instance, settings map[string]string,
	params []store.TransitionParams, now time.Time) ([]store.TransitionParams, error) {
	params, err := pl.replanChanged(ctx, t, changed, late, params, now)
	if err != nil {
		return params, err
	}
	if err := pl.resumeTrigger(ctx, t, settings, now); err != nil {
		return params, err
	}
	b := t.newFires(now, pl.triggerDelay(t), max(pl.cfg.MisfireLimit, 1))
	nOld := 0
	for _, name := range t.tr.Tasks {
		list := late[t.tr.Pipeline+"."+name]
		if len(list) == 0 {
			continue
		}
		nOld = max(nOld, len(list))
		if f := list[0].NextFireAt; b.first.IsZero() || f.Before(b.first) {
			b.first = f
		}
		if f := list[len(list)-1].NextFireAt; b.newest.IsZero() || f.After(b.newest) {
			b.newest = f
		}
	}
	b.n = b.nNew + nOld
	if b.n == 0 {
		return params, nil
	}
	skip, missed := misfireSplit(t.misfire, b.n, b.first, now, pl.cfg.MisfireAfter, pl.cfg.MisfireLimit)
	for _, name := range t.tr.Tasks {
		id := t.tr.Pipeline + "." + name
		if ti := pl.sched.tasks[id]; ti != nil {
			ti.backlog = now // what of the backlog runs is a catch-up: never overlap-skipped
		}
		list := late[id]
		delete(late, id)
		if len(list) == 0 || !missed {
			continue
		}
		ti := pl.sched.tasks[id]
		s, _ := misfireSplit(ti.def.Misfire, b.nNew+len(list), b.first, now, pl.cfg.MisfireAfter, pl.cfg.MisfireLimit)
		params = skipLate(params, ti, list[:min(s, len(list))], pl.host.termEpoch(), now)
	}
	run := b.tail[max(0, len(b.tail)-(b.n-skip)):]
	if !missed {
		run = b.tail // not a misfire (the backlog is within the threshold): every fire runs late
	} else if err := pl.logMisfire(ctx, t, b, nOld, skip, now); err != nil {
		return params, err
	} else if err := pl.host.w().SetSetting(ctx, judgedSetting+t.name, b.newest.UTC().Format(time.RFC3339Nano), now); err != nil {
		return params, err // the next start would judge these fires again (seed 7915)
	}
	for _, at := range run {
		if err := pl.createRun(ctx, t, at, now); err != nil {
			return params, err
		}
	}
	if b.nNew > 0 {
		t.setUntil(b.tail[len(b.tail)-1])
	}
	return params, nil
}

// triggerDelay is the shortest delay of trigger t's tasks: a fire is
// released, for the first of them, that long after its fire time.
func (pl *planner) triggerDelay(t *trigger) time.Duration {
	d := time.Duration(-1)
	for _, name := range t.tr.Tasks {
		if ti := pl.sched.tasks[t.tr.Pipeline+"."+name]; ti != nil && (d < 0 || ti.def.Delay < d) {
			d = ti.def.Delay
		}
	}
	return max(d, 0)
}

// planSetting, followed by a trigger's name, keeps the fingerprint of its
// schedule (triggerHash) and since when that schedule is in force: "HASH
// SINCE", SINCE empty when it was in force before this was kept.
const planSetting = "schedule_plan/"

// SchedulerSetting reports whether a stored setting is the scheduler's own
// bookkeeping (a schedule's plan, how far its backlog was judged, a
// definition sync under way), written as it runs rather than by an
// operator's request.
func SchedulerSetting(name string) bool {
	return strings.HasPrefix(name, planSetting) || strings.HasPrefix(name, judgedSetting) || name == store.SyncingSetting
}

// planSince sets since when each trigger's schedule, as defined now, is in
// force (t.since), from what the store keeps of it (settings), and returns
// the triggers whose schedule changed since the last start or reload (then
// in force from now on, as after a reload) and the settings to write. A
// schedule seen for the first time is new, in force from now on, when the
// store keeps the plans of others (it was added to the files while no
// scheduler ran); when it keeps none (the first start, or the first of a
// version of ax that keeps them), it is taken as in force before (its
// backlog counts from its runs, or from when its pipeline was first stored).
func planSince(trigs []*trigger, settings map[string]string, now time.Time) (changed map[string]bool, write map[string]string) {
	changed, write = map[string]bool{}, map[string]string{}
	kept := false
	for name := range settings {
		kept = kept || strings.HasPrefix(name, planSetting)
	}
	for _, t := range trigs {
		stored, ok := settings[planSetting+t.name]
		hash, at, _ := strings.Cut(stored, " ")
		switch {
		case ok && hash == triggerHash(t):
			t.since, _ = time.Parse(time.RFC3339Nano, at)
		case !ok && kept:
			t.since, write[planSetting+t.name] = now, planValue(t, now)
		case !ok:
			t.since, write[planSetting+t.name] = time.Time{}, planValue(t, time.Time{})
		default:
			t.since, write[planSetting+t.name], changed[t.name] = now, planValue(t, now), true
		}
	}
	return changed, write
}

// planValue is what planSetting keeps of trigger t, in force since since.
func planValue(t *trigger, since time.Time) string {
	if since.IsZero() {
		return triggerHash(t) + " "
	}
	return triggerHash(t) + " " + since.UTC().Format(time.RFC3339Nano)
}

// replanChanged applies a schedule change found at a start (planSince) to
// trigger t, as a reload does: the runs of the old schedule made ahead and
// untouched are dropped; and the instances made before the change that fell
// due while no scheduler ran are taken out of t's backlog (late) and
// skipped (oldPlan), so that the misfire rule judges the new schedule's
// fires alone, from the change on (resumeTrigger).
func (pl *planner) replanChanged(ctx context.Context, t *trigger, changed bool, late map[string][]axtype.Instance,
	params []store.TransitionParams, now time.Time) ([]store.TransitionParams, error) {
	if t.since.IsZero() {
		return params, nil
	}
	dropped := 0
	if changed {
		ids, err := pl.host.w().DropRunsAhead(ctx, store.DropAheadParams{Trigger: t.name, After: now})
		if err != nil {
			return params, fmt.Errorf("engine: drop the runs planned ahead for %s under its old schedule: %w", t.name, err)
		}
		for _, id := range ids {
			pl.cache.forget(id)
		}
		dropped = len(ids)
	}
	skipped := 0
	for _, name := range t.tr.Tasks {
		id := t.tr.Pipeline + "." + name
		var keep []axtype.Instance
		for _, in := range late[id] {
			if oldPlan(in, t.since) {
				params = append(params, skipOldPlan(in, t.since, pl.host.termEpoch(), now))
				skipped++
				continue
			}
			keep = append(keep, in)
		}
		late[id] = keep
	}
	if !changed {
		return params, nil
	}
	pl.log.Info("schedule_replanned", "trigger", t.name, "dropped_runs", dropped, "skipped", skipped)
	return params, pl.host.w().AppendAction(ctx, store.Action{At: now, Actor: Actor, Action: "replan", Pipeline: t.tr.Pipeline, TaskID: taskOf(t),
		Reason: "schedule changed while no scheduler ran", Detail: fmt.Sprintf("planned from %s on: %d run(s) of the old schedule made ahead dropped, %d of its missed fire(s) not run",
			now.UTC().Format(time.RFC3339), dropped, skipped)})
}

// since returns since when schedule tr, as defined now, is in force
// (trigger.since; zero when unknown, or for no schedule).
func (pl *planner) since(tr *dag.Trigger) time.Time {
	if tr == nil {
		return time.Time{}
	}
	for _, t := range pl.trigs {
		if t.tr == tr || t.name == tr.Name() {
			return t.since
		}
	}
	return time.Time{}
}

// oldPlan reports whether instance in, of a schedule run, is a fire of an
// older schedule than the one in force since since: its run was made
// before the change. The misfire rule never runs it.
func oldPlan(in axtype.Instance, since time.Time) bool {
	return !since.IsZero() && in.CreatedAt.Before(since)
}

// skipOldPlan is the transition of an instance of an older schedule
// (oldPlan) that never started: it fails as skipped, with the reason.
func skipOldPlan(in axtype.Instance, since time.Time, epoch int64, now time.Time) store.TransitionParams {
	why := "skipped: a fire of the schedule in force before it changed at " + since.UTC().Format(time.RFC3339)
	return store.TransitionParams{InstanceID: in.ID, Version: in.Version, From: in.State, To: axtype.Failed,
		Set: store.Changes{NextFireAt: &time.Time{}, Error: ptr(why)}, Epoch: epoch, Now: now, Actor: Actor, Reason: why}
}

// judgedSetting, followed by a trigger's name, is the setting that keeps
// the newest fire a misfire decision judged for it: the fires it skipped
// have no run, and must not be judged again as missed at the next start
// (simulator seed 7915: a 36-hour outage skipped, then a fire 1.6 s late
// after a second outage was taken for part of the same 36-hour backlog).
const judgedSetting = "misfire_judged/"

// resumeTrigger sets where trigger t's fires resume: after its last run's
// fire or the newest fire a misfire decision judged, whichever is later,
// or, for a trigger that never ran, from when its schedule came to be.
func (pl *planner) resumeTrigger(ctx context.Context, t *trigger, settings map[string]string, now time.Time) error {
	if err := pl.resumeFromRuns(ctx, t, now); err != nil {
		return err
	}
	judged, err := time.Parse(time.RFC3339Nano, settings[judgedSetting+t.name])
	if err == nil && (t.next.IsZero() || !judged.Before(t.next)) {
		t.setUntil(judged)
	}
	if t.since.After(t.until) { // a changed schedule's fires count from the change on
		t.setUntil(t.since)
	}
	return nil
}

// resumeFromRuns sets where t's fires resume from its runs alone.
func (pl *planner) resumeFromRuns(ctx context.Context, t *trigger, now time.Time) error {
	last, err := pl.st.LastRun(ctx, t.name, axtype.RunSchedule)
	switch {
	case errors.Is(err, store.ErrNotFound):
		since, err := pl.scheduledSince(ctx, t, now)
		if err != nil {
			return err
		}
		t.setUntil(since)
	case err != nil:
		return fmt.Errorf("engine: last run of %s: %w", t.name, err)
	default:
		t.setUntil(last.LogicalTime)
	}
	return nil
}

// newFires counts t's fires that have no run yet and fell due before now,
// keeping the latest keep of them. A fire falls due at its release, the
// fire time plus delay (as a run made ahead does: its NextFireAt), so a
// fire released at or after now is not missed: its run is created as any
// other and starts on time.
func (t *trigger) newFires(now time.Time, delay time.Duration, keep int) backlog {
	b := backlog{tail: make([]time.Time, 0, min(keep, 8))}
	for at := t.next; !at.IsZero() && releaseAt(at, time.Time{}, delay).Before(now); at = t.tr.Schedule.Next(at) {
		if b.nNew == 0 {
			b.first = at
		}
		b.nNew++
		b.newest = at
		if len(b.tail) == keep {
			copy(b.tail, b.tail[1:])
			b.tail = b.tail[:keep-1]
		}
		b.tail = append(b.tail, at)
	}
	return b
}

// logMisfire records one misfire decision over trigger t's backlog: the
// action log, an alert when fires are skipped, and a log line.
func (pl *planner) logMisfire(ctx context.Context, t *trigger, b backlog, nOld, skip int, now time.Time) error {
	detail := fmt.Sprintf("%d missed fire(s) from %s to %s while no scheduler ran (%d without a run, %d made ahead); policy %s runs %d (the latest), skips %d",
		b.n, b.first.Format(time.RFC3339), b.newest.Format(time.RFC3339), b.nNew, nOld, t.misfire, b.n-skip, skip)
	if err := pl.host.w().AppendAction(ctx, store.Action{At: now, Actor: Actor, Action: "misfire", Pipeline: t.tr.Pipeline,
		TaskID: taskOf(t), Reason: string(t.misfire), Detail: detail}); err != nil {
		return err
	}
	if skip > 0 {
		pl.host.notify(Alert{Kind: AlertMisfire, At: now, Pipeline: t.tr.Pipeline, Task: taskOf(t), Message: detail})
	}
	pl.log.Warn("misfire", "trigger", t.name, "policy", string(t.misfire), "missed", b.n, "first", b.first.Format(time.RFC3339),
		"last", b.newest.Format(time.RFC3339), "run", b.n-skip, "skipped", skip)
	return nil
}

// judgeTaskBacklog applies the misfire rule to the runs made ahead of task
// id (list, in fire order) whose schedule is gone or not run here.
func (pl *planner) judgeTaskBacklog(ctx context.Context, id string, list []axtype.Instance, params []store.TransitionParams,
	now time.Time) ([]store.TransitionParams, error) {
	if len(list) == 0 {
		return params, nil
	}
	ti := pl.sched.tasks[id]
	ti.backlog = now
	skip, missed := misfireSplit(ti.def.Misfire, len(list), list[0].NextFireAt, now, pl.cfg.MisfireAfter, pl.cfg.MisfireLimit)
	if !missed {
		return params, nil
	}
	params = skipLate(params, ti, list[:skip], pl.host.termEpoch(), now)
	detail := fmt.Sprintf("%d missed fire(s) from %s to %s while no scheduler ran; policy %s runs %d (the latest), skips %d",
		len(list), list[0].NextFireAt.Format(time.RFC3339), list[len(list)-1].NextFireAt.Format(time.RFC3339), ti.def.Misfire, len(list)-skip, skip)
	if err := pl.host.w().AppendAction(ctx, store.Action{At: now, Actor: Actor, Action: "misfire", Pipeline: ti.def.Pipeline, TaskID: id,
		Reason: string(ti.def.Misfire), Detail: detail}); err != nil {
		return params, err
	}
	if skip > 0 {
		pl.host.notify(Alert{Kind: AlertMisfire, At: now, Pipeline: ti.def.Pipeline, Task: id, Message: detail})
	}
	return params, nil
}

// skipLate appends to params the failure of each of list (runs made ahead
// of task ti) as skipped by its misfire policy.
func skipLate(params []store.TransitionParams, ti *taskInfo, list []axtype.Instance, epoch int64, now time.Time) []store.TransitionParams {
	for _, in := range list {
		params = append(params, store.TransitionParams{InstanceID: in.ID, Version: in.Version, From: in.State, To: axtype.Failed,
			Set:   store.Changes{NextFireAt: &time.Time{}, Error: ptr("skipped by misfire policy " + string(ti.def.Misfire))},
			Epoch: epoch, Now: now, Actor: Actor, Reason: fmt.Sprintf("skipped by misfire policy %s: due at %s while no scheduler ran",
				ti.def.Misfire, in.NextFireAt.Format(time.RFC3339))})
	}
	return params
}

// scheduledSince returns the time after which the fires of a trigger that
// has no run yet are its backlog: when its pipeline was first stored, or
// the last misfire decision logged for it, whichever is later — the fires
// before such a decision were judged already (skip creates no run). A
// schedule added or changed since is in force from then on (trigger.since,
// which resumeTrigger applies after this): a change of another schedule or
// task of the pipeline moves nothing of this one. It is now for a pipeline
// not stored yet.
func (pl *planner) scheduledSince(ctx context.Context, t *trigger, now time.Time) (time.Time, error) {
	since, err := pl.st.PipelineAddedAt(ctx, t.tr.Pipeline)
	if errors.Is(err, store.ErrNotFound) {
		return now, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("engine: when schedule %s was defined: %w", t.name, err)
	}
	acts, err := pl.st.Actions(ctx, store.LogFilter{Pipeline: t.tr.Pipeline, TaskID: taskOf(t), Action: "misfire", Newest: true, Limit: 50})
	if err != nil {
		return time.Time{}, fmt.Errorf("engine: last misfire of %s: %w", t.name, err)
	}
	for _, a := range acts {
		if a.TaskID == taskOf(t) {
			if a.At.After(since) {
				since = a.At
			}
			break
		}
	}
	if since.After(now) {
		since = now
	}
	return since, nil
}

// lateInstances returns, per task in fire-time order, the instances of
// schedule runs that fell due before now and never started: SCHEDULED ones,
// and RETRYING ones with no attempt counted (claimed ahead, given back at a stop).
func (pl *planner) lateInstances(ctx context.Context, now time.Time) (map[string][]axtype.Instance, []string, error) {
	due, err := pl.st.DueInstances(ctx, store.DueParams{Until: now})
	if err != nil {
		return nil, nil, fmt.Errorf("engine: misfires: %w", err)
	}
	late := map[string][]axtype.Instance{}
	var order []string
	for _, in := range due {
		if !in.NextFireAt.Before(now) || pl.sched.tasks[in.TaskID] == nil || (in.State == axtype.Retrying && in.Counted > 0) ||
			pl.cache.kindOf(ctx, in.RunID) != axtype.RunSchedule {
			continue
		}
		if _, ok := late[in.TaskID]; !ok {
			order = append(order, in.TaskID)
		}
		late[in.TaskID] = append(late[in.TaskID], in)
	}
	return late, order, nil
}

func taskOf(t *trigger) string {
	if t.tr.Task == "" {
		return ""
	}
	return t.tr.Pipeline + "." + t.tr.Task
}

// createWindow is a top-up: it plans the runs of every fire up to now +
// Window (the planned horizon) and creates as many of them as the bounds of
// work ahead allow (createAhead).
func (pl *planner) createWindow(ctx context.Context, now time.Time) error {
	pl.horizon = now.Add(pl.cfg.Window)
	return pl.createAhead(ctx, now)
}

// createBehind goes on, between top-ups, with the runs the last top-up
// planned but left uncreated: stopped at a turn's budget, or at a bound
// that the fires passed since have freed.
func (pl *planner) createBehind(ctx context.Context, now time.Time) error {
	if !pl.behind && (pl.refillAt.IsZero() || now.Before(pl.refillAt)) {
		return nil
	}
	return pl.createAhead(ctx, now)
}

// createAhead creates the runs of the fires up to the planned horizon,
// earliest fire first across the triggers, within the bounds of work
// ahead; it is the one place that decides how far ahead runs exist. The
// bounds: a trigger has runs for at most AheadPerSchedule fires after now
// and all of them together for at most AheadTotal, so that a schedule set
// of thousands of second-level schedules does not create a window of
// millions of runs before the first start; and one call creates runs for
// at most a turn's budget (TurnBudget), so that neither the loop nor the
// store's writer is held longer, up to aheadBatch runs a transaction. What is left is created by the next turns
// (createBehind), as the fires pass and free the bounds: every fire still
// gets its run before it is due, earliest first, and none twice (the
// store's run key).
func (pl *planner) createAhead(ctx context.Context, now time.Time) error {
	pl.behind, pl.refillAt = false, time.Time{}
	if pl.cfg.NoSchedules || len(pl.trigs) == 0 {
		return nil
	}
	total := 0
	for _, t := range pl.trigs {
		t.ahead = passed(t.ahead, now)
		total += len(t.ahead)
	}
	// The fires to create, by time; the same time in the graph's order.
	var order queue.Queue[aheadFire]
	due := func(t *trigger, at time.Time) {
		if !at.IsZero() && !at.After(pl.horizon) {
			order.Push(0, at.UnixMilli(), aheadFire{t, at})
		}
	}
	for _, t := range pl.trigs {
		due(t, t.next)
	}
	bounded := false
	left, err := withinBudget(now, pl.cfg.TurnBudget, pl.cfg.Now, func(time.Time) (bool, error) {
		var batch []aheadFire
		size, inBatch := 0, map[*trigger]int{}
		for len(batch) < aheadBatch {
			it, ok := order.Peek()
			if !ok {
				break
			}
			f := it.Value
			if total+len(batch) >= pl.cfg.AheadTotal {
				bounded = true
				order = queue.Queue[aheadFire]{} // nothing more this time
				break
			}
			if len(f.t.ahead)+inBatch[f.t] >= pl.cfg.AheadPerSchedule {
				bounded = true
				order.Pop() // this trigger is at its own bound: the others go on
				continue
			}
			if n := len(f.t.tr.Tasks); n > pl.cfg.CreateChunk || (len(batch) > 0 && size+n > pl.cfg.CreateChunk) {
				if len(batch) == 0 { // a run of more than one chunk: alone (createRun)
					order.Pop()
					if err := pl.createRun(ctx, f.t, f.at, now); err != nil {
						return false, err
					}
					total += pl.created(f, now)
					due(f.t, f.t.next)
				}
				break
			}
			order.Pop()
			batch = append(batch, f)
			size += len(f.t.tr.Tasks)
			inBatch[f.t]++
			due(f.t, f.t.tr.Schedule.Next(f.at))
		}
		if err := pl.createBatch(ctx, batch, now); err != nil {
			return false, err
		}
		for _, f := range batch {
			total += pl.created(f, now)
		}
		return order.Len() > 0, nil
	})
	if err != nil {
		pl.behind = true // the next turn the store allows goes on from here
		return err
	}
	if left {
		pl.behind = true
		pl.host.soon()
	}
	if bounded {
		pl.refillAt = pl.firstAhead()
		pl.logBounded(total)
	}
	return nil
}

// aheadBatch is the most runs one transaction creates ahead (and at
// most CreateChunk instances in all): a commit per batch instead of a
// commit per run.
const aheadBatch = 100

// aheadFire is a fire of trigger t whose run is to be created.
type aheadFire struct {
	t  *trigger
	at time.Time
}

// created records that the run of fire f exists: runs exist up to f.at,
// and it counts ahead when still to come. It returns how many runs that
// adds ahead (0 or 1).
func (pl *planner) created(f aheadFire, now time.Time) int {
	f.t.setUntil(f.at)
	if !f.at.After(now) {
		return 0
	}
	f.t.ahead = append(f.t.ahead, f.at)
	return 1
}

// createBatch creates the runs of fires in one store transaction; a run
// that exists already (this or another scheduler made it) is skipped.
func (pl *planner) createBatch(ctx context.Context, fires []aheadFire, now time.Time) error {
	if len(fires) == 0 {
		return nil
	}
	specs := make([]newRunSpec, len(fires))
	ps := make([]store.CreateRunParams, len(fires))
	for i, f := range fires {
		specs[i] = newRunSpec{pipeline: f.t.tr.Pipeline, trig: f.t.name, kind: axtype.RunSchedule, names: f.t.tr.Tasks, at: f.at}
		ps[i] = pl.runParams(specs[i], now)
	}
	size := 0
	for _, p := range ps {
		size += len(p.Instances)
	}
	if size >= longWrite {
		pl.host.renewAhead(ctx)
	}
	runs, insts, err := pl.host.w().CreateRuns(ctx, ps)
	if err != nil {
		return err
	}
	for i, run := range runs {
		if run.ID != 0 {
			pl.keepCreated(ctx, specs[i], run, insts[i])
		}
	}
	return nil
}

// passed drops from fires (in order) the ones at or before now.
func passed(fires []time.Time, now time.Time) []time.Time {
	n := 0
	for n < len(fires) && !fires[n].After(now) {
		n++
	}
	if n == 0 {
		return fires
	}
	return append(fires[:0], fires[n:]...)
}

// firstAhead returns the earliest fire whose run was created ahead: when it
// passes, the bounds have room again.
func (pl *planner) firstAhead() time.Time {
	var first time.Time
	for _, t := range pl.trigs {
		if len(t.ahead) > 0 && (first.IsZero() || t.ahead[0].Before(first)) {
			first = t.ahead[0]
		}
	}
	return first
}

// logBounded says once per schedule set that its window holds more fires
// than runs are created ahead for: the rest are created as fires pass.
func (pl *planner) logBounded(total int) {
	if pl.boundLogged {
		return
	}
	pl.boundLogged = true
	pl.log.Warn("window_bounded", "schedules", len(pl.trigs), "ahead", total, "ahead_per_schedule", pl.cfg.AheadPerSchedule,
		"ahead_total", pl.cfg.AheadTotal, "window", pl.cfg.Window.String(),
		"why", "the schedules fire more often within the window than runs are created ahead for (Config.AheadPerSchedule, AheadTotal); "+
			"the rest are created as their fires pass, earliest first, and every fire still runs once")
}

// createRun creates the run of trigger t for logical time at: roots are
// SCHEDULED for at plus their delay, the others WAITING. A run that exists
// already (this or another scheduler made it) is not an error.
func (pl *planner) createRun(ctx context.Context, t *trigger, at, now time.Time) error {
	_, err := pl.newRun(ctx, t.tr.Pipeline, t.name, axtype.RunSchedule, t.tr.Tasks, at, now)
	if errors.Is(err, store.ErrDuplicate) {
		return nil
	}
	return err
}

// newRun creates a run of the named tasks of pipeline for logical time at.
func (pl *planner) newRun(ctx context.Context, pipeline, trig string, kind axtype.RunKind, names []string, at, now time.Time) (*runState, error) {
	return pl.newRunWith(ctx, newRunSpec{pipeline: pipeline, trig: trig, kind: kind, names: names, at: at}, now)
}

// newRunKeyed is newRun with a dedup key and the backfill it belongs to.
// In a backfill run, upstreams in other pipelines count as satisfied, like
// every task outside the selection.
func (pl *planner) newRunKeyed(ctx context.Context, pipeline, trig string, kind axtype.RunKind, names []string, at, now time.Time, key string, backfill int64) (*runState, error) {
	return pl.newRunWith(ctx, newRunSpec{pipeline: pipeline, trig: trig, kind: kind, names: names, at: at, key: key, backfill: backfill}, now)
}

// newRunSpec describes a run to create.
type newRunSpec struct {
	pipeline, trig string
	kind           axtype.RunKind
	names          []string
	at             time.Time
	key            string
	backfill       int64
	// approvedBy approves, at creation, the manual gates named in approve
	// (a trigger of a manual task is its approval).
	approvedBy string
	approve    map[string]bool
	actor      string
	params     string // the trigger's --param values, JSON
	waitCross  bool   // a backfill's runs wait for other pipelines (--wait-cross)
}

// newRunWith creates the run of spec. Each instance starts as the readiness
// rule (ready.go) says for a run nothing of which ran yet: SCHEDULED for its
// release time (releaseAt: the run's fire time plus its delay) when nothing
// holds it, WAITING with the reason otherwise.
func (pl *planner) newRunWith(ctx context.Context, spec newRunSpec, now time.Time) (*runState, error) {
	p := pl.runParams(spec, now)
	if len(p.Instances) >= longWrite {
		pl.host.renewAhead(ctx)
	}
	run, insts, err := pl.host.w().CreateRun(ctx, p)
	if err != nil {
		pl.unfinished = pl.unfinished || len(p.Instances) > pl.cfg.CreateChunk
		return nil, err
	}
	return pl.keepCreated(ctx, spec, run, insts), nil
}

// runParams is what the store is asked to write for the run of spec.
func (pl *planner) runParams(spec newRunSpec, now time.Time) store.CreateRunParams {
	in := make(map[string]bool, len(spec.names))
	for _, n := range spec.names {
		in[n] = true
	}
	news := make([]store.NewInstance, 0, len(spec.names))
	for _, n := range spec.names {
		ti := pl.sched.tasks[spec.pipeline+"."+n]
		ni := store.NewInstance{TaskID: ti.id, Group: ti.def.Group, Priority: ti.def.Priority, State: axtype.Waiting}
		g := gateView{manual: ti.def.Manual, logical: spec.at, limit: ti.def.WaitTimeout, crossLimit: defs.DefaultCrossWait}
		if now.After(g.logical) {
			g.logical = now
		}
		if ti.def.Manual && spec.approve[n] {
			g.approved, ni.ApprovedBy = true, spec.approvedBy
		}
		for _, u := range ti.up {
			if in[u.def.Name] {
				g.ups = append(g.ups, upstreamView{id: u.id, state: axtype.Waiting})
			}
		}
		if spec.kind != axtype.RunBackfill || spec.waitCross {
			for i, u := range ti.cross {
				// Read when its run is settled; at creation it is pending, never late.
				g.ups = append(g.ups, upstreamView{id: u.id, cross: true, note: "waits for " + ti.crossWindow(i, spec.at).String()})
			}
		}
		switch d := decide(g, g.logical); d.verdict {
		case verdictReady:
			// An operator's run fires now, whatever its logical time (--at).
			ni.State, ni.NextFireAt = axtype.Scheduled, releaseAt(runFire(spec.kind, spec.at, now), time.Time{}, ti.def.Delay)
		default:
			ni.Reason = d.reason
		}
		news = append(news, ni)
	}
	return store.CreateRunParams{Pipeline: spec.pipeline, Trigger: spec.trig, Kind: spec.kind, LogicalTime: spec.at,
		Actor: cmp.Or(spec.actor, Actor), Instances: news, Epoch: pl.host.termEpoch(), Now: now, DedupKey: spec.key, BackfillID: spec.backfill, Params: spec.params, Chunk: pl.cfg.CreateChunk}
}

// keepCreated takes in a run the store created for spec: the run cache
// knows it, and its SCHEDULED instances go to the wheel.
func (pl *planner) keepCreated(ctx context.Context, spec newRunSpec, run axtype.Run, insts []axtype.Instance) *runState {
	rs := newRunState(run.ID, run.LogicalTime, insts)
	pl.cache.created(rs, spec.kind, spec.params)
	for _, inst := range insts {
		if inst.State == axtype.Scheduled {
			pl.enqueue(ctx, inst)
		}
	}
	pl.log.Debug("run_created", "pipeline", spec.pipeline, "trigger", spec.trig, "run", run.ID, "logical_time", spec.at.Format(time.RFC3339), "instances", len(insts))
	return rs
}
