package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/engine/breaker"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// ExecutorLiveness is how recent a heartbeat keeps an executor in routing
// (three heartbeats of 10 s).
const ExecutorLiveness = runner.Silence

// loopView is what the loop knows of one instance and the dispatch path.
type loopView struct {
	pending     bool
	due         time.Time
	held        bool
	capped      string // the concurrency cap holding it back, if any
	unrouted    string // why no executor can take it now, if so
	starting    string // recorded RUNNING, waiting in the start queue: the global cap's state
	queue       int
	global      float64
	group       float64
	brkOpen     bool
	brkSince    time.Time
	brkRate     float64
	brkTotal    int
	brkCut      breaker.Cut
	loadedUntil time.Time
	pause       store.Pause
	isPaused    bool
}

// view reads the loop's state for instance id of task t; nil when this
// process is not the primary (its loop does not answer).
func (e *Engine) view(ctx context.Context, t *taskInfo, id int64) *loopView {
	if !e.Stats().Leader {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var v *loopView
	req := request{inspect: func(now time.Time) {
		v = &loopView{queue: e.dispatcher.queue.Len(), loadedUntil: e.planner.loadedUntil}
		if p := e.dispatcher.pending[id]; p != nil {
			v.pending, v.due, v.held, v.capped, v.unrouted = true, time.UnixMilli(p.at), p.throttled, p.capped, p.unrouted
		}
		if a := e.dispatcher.running.get(id); a != nil && a.queued && a.begun.Load() == 0 {
			v.starting = e.dispatcher.pool.state()
		}
		l := e.dispatcher.bucket.Limits()
		v.global, v.group = l.Global, l.Groups[t.def.Group]
		v.brkOpen, v.brkSince, v.brkRate, v.brkTotal = e.dispatcher.brk.State(t.id, now)
		v.brkCut, _ = e.dispatcher.brk.CutOf(t.id, now)
		v.pause, v.isPaused = e.operator.pauses.of(t)
	}, reply: make(chan opReply, 1)}
	select {
	case e.reqs <- req:
	case <-ctx.Done():
		return nil
	}
	select {
	case <-req.reply:
		return v
	case <-ctx.Done():
		return nil
	}
}

// stampIn formats times of task t as every time the console and the CLI
// show them: in its pipeline's zone, with the offset (UTC when utc, as
// with --utc, and for a task no pipeline in force has).
func (e *Engine) stampIn(t *taskInfo, utc bool) func(time.Time) string {
	loc := time.UTC
	if p := e.Graph().Pipeline(t.def.Pipeline); p != nil && p.Location != nil && !utc {
		loc = p.Location
	}
	return func(at time.Time) string { return at.In(loc).Format(time.RFC3339) }
}

// Explain explains task id (`pipeline.task`). On the primary it reads the
// loop's queue, bucket and breaker; on a standby, the store alone. An
// unknown task is an error with a suggestion. The findings give times in
// the pipeline's zone.
func (e *Engine) Explain(ctx context.Context, id string) (Explanation, error) {
	return e.explain(ctx, id, false)
}

// ExplainUTC is Explain with the findings' times in UTC (ax explain --utc).
func (e *Engine) ExplainUTC(ctx context.Context, id string) (Explanation, error) {
	return e.explain(ctx, id, true)
}

func (e *Engine) explain(ctx context.Context, id string, utc bool) (Explanation, error) {
	t, err := e.operator.resolveTask(id)
	if err != nil {
		if x, ok, rerr := e.explainRemoved(ctx, id); rerr != nil || ok {
			return x, rerr
		}
		return Explanation{}, err
	}
	now := e.cfg.Now()
	stamp := e.stampIn(t, utc)
	x := Explanation{Task: id, Now: now, NextFires: []time.Time{}, LastFires: []Fire{}, Findings: []Finding{}}
	add := func(check string, blocks bool, format string, args ...any) {
		x.Findings = append(x.Findings, Finding{Check: check, Blocks: blocks, Detail: fmt.Sprintf(format, args...)})
	}
	in, err := e.instanceToExplain(ctx, id, now)
	if err != nil {
		return x, err
	}
	x.Latest = in
	var v *loopView
	if in != nil {
		v = e.view(ctx, t, in.ID)
	} else {
		v = e.view(ctx, t, 0)
	}
	x.Live = v != nil
	e.explainPaused(ctx, t, v, stamp, add)
	if err := e.explainState(ctx, t, in, v, now, stamp, add); err != nil {
		return x, err
	}
	if in != nil && in.State != axtype.Waiting && len(t.cross) > 0 { // a WAITING one's are named with its wait
		if err := e.explainReleased(ctx, in, add); err != nil {
			return x, err
		}
	}
	if v != nil && v.brkOpen {
		c := v.brkCut
		next := fmt.Sprintf("%d left now", c.Allowed-c.Made)
		if !c.Next.IsZero() {
			next = "the next at " + stamp(c.Next) + "; fires before it wait or are skipped per the overlap policy"
		}
		add("breaker", !c.Next.IsZero(), "breaker open: %s (since %s: %.0f%% of %d outcomes failed in the window); %d made in the last %s, %s",
			c, stamp(v.brkSince), v.brkRate*100, v.brkTotal, c.Made, c.Window, next)
	}
	if err := e.explainExecutors(ctx, t, now, add); err != nil {
		return x, err
	}
	if !x.Live {
		add("live", false, "this process is not the primary scheduler: queue, token bucket and breaker state are the primary's (ask it)")
	}
	if x.NextFires, err = e.nextFires(ctx, t, now, 10); err != nil {
		return x, err
	}
	if x.LastFires, err = e.lastFires(ctx, id, 10); err != nil {
		return x, err
	}
	x.Verdict = verdictOf(x)
	return x, nil
}

// instanceToExplain picks the instance of task id whose state answers "why
// is it not running": the oldest one due and not started (SCHEDULED or
// RETRYING, its fire time passed), which is what a queue, a bucket or a cap
// holds back; else the newest. Runs are created ahead, so the newest is
// often one waiting for a fire still to come while older ones wait late.
func (e *Engine) instanceToExplain(ctx context.Context, id string, now time.Time) (*axtype.Instance, error) {
	due, err := e.st.Instances(ctx, store.InstanceFilter{TaskID: id, States: []axtype.State{axtype.Scheduled, axtype.Retrying}, Ascending: true, Limit: 1})
	if err != nil {
		return nil, err
	}
	if len(due) == 1 && !due[0].NextFireAt.After(now) {
		return &due[0], nil
	}
	latest, err := e.st.Instances(ctx, store.InstanceFilter{TaskID: id, Limit: 1})
	if err != nil || len(latest) == 0 {
		return nil, err
	}
	return &latest[0], nil
}

// explainPaused finds the pause (whose, since when) that covers t: the
// loop's view when this is the primary, the stored pauses otherwise.
func (e *Engine) explainPaused(ctx context.Context, t *taskInfo, v *loopView, stamp func(time.Time) string, add func(string, bool, string, ...any)) {
	if v != nil {
		if v.isPaused {
			add("paused", true, "%s", pauseText(v.pause, stamp))
		}
		return
	}
	ps, err := e.st.Pauses(ctx)
	if err != nil {
		return
	}
	for _, p := range ps {
		if (p.Scope == store.ScopeTask && p.Name == t.id) || (p.Scope == store.ScopeGroup && p.Name == t.def.Group) ||
			(p.Scope == store.ScopePipeline && p.Name == t.def.Pipeline) {
			p.Reason = cmp.Or(p.Reason, "no reason given")
			add("paused", true, "%s", pauseText(p, stamp))
		}
	}
}

// explainState explains the state of t's latest instance in (nil: none).
func (e *Engine) explainState(ctx context.Context, t *taskInfo, in *axtype.Instance, v *loopView, now time.Time, stamp func(time.Time) string,
	add func(string, bool, string, ...any)) error {
	id := t.id
	switch {
	case in == nil:
		if e.sched.g.TriggerOf(id) == nil {
			add("state", true, "no instance yet, and no schedule starts it: it runs only when an operator runs it (ax trigger %s)", id)
		} else {
			add("state", true, "no instance yet: its first run is created when its fire time comes within the %s window and the runs made ahead are under their bounds (%d per schedule, %d in all)",
				e.cfg.Window, e.cfg.AheadPerSchedule, e.cfg.AheadTotal)
		}
	case in.State == axtype.Waiting:
		return e.explainWaiting(ctx, t, in, stamp, add)
	case in.State == axtype.Scheduled || in.State == axtype.Retrying:
		e.explainDue(t, in, v, now, stamp, add)
	case in.State == axtype.Running && v != nil && v.starting != "":
		add("pool", true, "dispatched at %s (attempt %d, ticket %s) and waiting in the start queue for a slot: %s; it starts in priority order as attempts end, and its timeout starts when it starts (ax limits changes the cap)",
			stamp(in.StartedAt), in.Attempt, in.Ticket, v.starting)
	case in.State == axtype.Running:
		add("state", false, "running since %s (attempt %d, ticket %s, executor %s); the scheduler fails it at %s if no result comes",
			stamp(in.StartedAt), in.Attempt, in.Ticket, cmp.Or(in.Executor, "?"), stamp(deadlineAfter(in.StartedAt, t.def)))
	case in.State == axtype.Failed:
		switch {
		case t.def.Retry.Count == 0:
			add("retries", true, "failed with no retry: retry.count is 0 (set retry: {count: N} to retry): %s", in.Error)
		case strings.HasPrefix(in.Error, "skipped"):
			add("retries", true, "%s", in.Error)
		default:
			add("retries", true, "retries exhausted after %d attempt(s) (retry.count %d): %s", in.Counted, t.def.Retry.Count, in.Error)
		}
	case in.State == axtype.Killed:
		add("state", true, "killed by an operator at %s; ax rerun %s runs it again", stamp(in.EndedAt), id)
	case in.State == axtype.Paused:
		add("state", true, "the latest instance is PAUSED; ax resume runs it per the misfire policy (%s)", t.def.Misfire)
	case in.State == axtype.Success:
		add("state", false, "the latest instance succeeded at %s", stamp(in.EndedAt))
	}
	return nil
}

// explainExecutors says, for an HTTP task, which executors are live and
// which were excluded and why.
func (e *Engine) explainExecutors(ctx context.Context, t *taskInfo, now time.Time, add func(string, bool, string, ...any)) error {
	if t.def.Executor.Kind != defs.ExecHTTP {
		return nil
	}
	exs, err := e.st.Executors(ctx, t.id)
	if err != nil {
		return err
	}
	var live, excluded []string
	for _, ex := range exs {
		if silent := now.Sub(e.dispatcher.lastHeard(ex)); !runner.Alive(e.dispatcher.lastHeard(ex), now) {
			excluded = append(excluded, fmt.Sprintf("%s (no heartbeat for %s)", ex.Address, silent.Round(time.Second)))
		} else {
			live = append(live, ex.Address)
		}
	}
	if len(exs) == 0 {
		all, err := e.st.Executors(ctx, "")
		if err != nil {
			return err
		}
		for _, ex := range all {
			if runner.ServedBy(t.def.Executor.URL, ex.Address) && !runner.Alive(e.dispatcher.lastHeard(ex), now) {
				add("executor", true, "no executor registered for it, and %s: nothing is sent there until it is heard from", runner.URLExcluded(t.def.Executor.URL, ex.Address))
				return nil
			}
		}
	}
	switch {
	case len(exs) == 0:
		add("executor", false, "no executor registered for it: dispatched to its own URL %s", t.def.Executor.URL)
	case len(live) == 0:
		add("executor", true, "no live executor: excluded %s", strings.Join(excluded, ", "))
	case len(excluded) > 0:
		add("executor", false, "live: %s; excluded: %s", strings.Join(live, ", "), strings.Join(excluded, ", "))
	default:
		add("executor", false, "live: %s", strings.Join(live, ", "))
	}
	return nil
}

// lastFires returns task id's last n dispatches, newest first: when each
// was due and dispatched, and the executor that took it.
func (e *Engine) lastFires(ctx context.Context, id string, n int) ([]Fire, error) {
	out := []Fire{}
	acts, err := e.st.Actions(ctx, store.LogFilter{TaskID: id, Action: "dispatch", Newest: true, Limit: n})
	if err != nil {
		return out, err
	}
	for _, a := range acts {
		f := Fire{Instance: a.InstanceID, Ticket: a.Ticket, Dispatched: a.At}
		if due, ok := parseDue(a.Detail); ok {
			f.Due, f.Late = due, max(a.At.Sub(due), 0)
		}
		if recs, err := e.st.Attempts(ctx, a.InstanceID); err == nil {
			for _, r := range recs {
				if r.Ticket == a.Ticket {
					f.Executor = r.Executor
				}
			}
		}
		out = append(out, f)
	}
	return out, nil
}

// verdictOf is an explanation's one-line answer: the first finding that
// blocks, else a late last dispatch, else nothing.
func verdictOf(x Explanation) string {
	for _, f := range x.Findings {
		if f.Blocks {
			return f.Detail
		}
	}
	if len(x.LastFires) > 0 && x.LastFires[0].Late > 5*time.Second {
		return fmt.Sprintf("its last dispatch was %s late: see the token bucket and queue findings", x.LastFires[0].Late.Round(time.Millisecond))
	}
	return "nothing holds it back"
}

// nextFires returns the next n fire times of t: those of the runs created
// ahead (an @every schedule counts from them, not from now), then the
// schedule's after the last of them.
func (e *Engine) nextFires(ctx context.Context, t *taskInfo, now time.Time, n int) ([]time.Time, error) {
	return nextFires(ctx, e.st, e.sched.g, t.def, now, n)
}

// nextFires is that rule, on graph g: the fire times of t's instances
// created ahead (waiting or scheduled from now on), then its schedule's
// after the last of them.
func nextFires(ctx context.Context, st *store.Store, g *dag.Graph, t *defs.Task, now time.Time, n int) ([]time.Time, error) {
	out := []time.Time{}
	tr := g.TriggerOf(t.ID())
	if tr == nil {
		return out, nil
	}
	ahead, err := st.Instances(ctx, store.InstanceFilter{TaskID: t.ID(), States: []axtype.State{axtype.Waiting, axtype.Scheduled},
		LogicalFrom: now, ByLogicalTime: true, Ascending: true, Limit: n})
	if err != nil {
		return nil, err
	}
	from := now
	for _, in := range ahead {
		out = append(out, in.LogicalTime.Add(t.Delay))
		from = in.LogicalTime
	}
	return append(out, scheduleFires(tr, t, from, n-len(out))...), nil
}

// scheduleFires returns the next n fires of t by its trigger's schedule
// strictly after from, each plus the task's delay.
func scheduleFires(tr *dag.Trigger, t *defs.Task, from time.Time, n int) []time.Time {
	var out []time.Time
	for _, at := range tr.Schedule.NextN(from, n) {
		out = append(out, at.Add(t.Delay))
	}
	return out
}

// NextScheduled returns the next fire of task id (`pipeline.task`) by its
// schedule alone, from now, in the pipelines in force: for a task with no
// instance created ahead yet. Zero when no schedule starts it or the task
// is unknown. Safe for concurrent use.
func (e *Engine) NextScheduled(id string) time.Time {
	g := e.Graph()
	t, tr := g.Task(id), g.TriggerOf(id)
	if t == nil || tr == nil {
		return time.Time{}
	}
	if fs := scheduleFires(tr, t, e.cfg.Now(), 1); len(fs) == 1 {
		return fs[0]
	}
	return time.Time{}
}

// explainWaiting names what a WAITING instance waits for, by the
// readiness rule itself (ready.go), with the deadline of its wait limit.
func (e *Engine) explainWaiting(ctx context.Context, t *taskInfo, in *axtype.Instance, stamp func(time.Time) string, add func(string, bool, string, ...any)) error {
	// What the judgement reads of the run: the instances of the task and of
	// its upstreams in the run, after the run's newest instance, first as
	// the scheduler's run cache holds them (when the run began waiting).
	newest, err := e.st.Instances(ctx, store.InstanceFilter{RunID: in.RunID, Limit: 1})
	if err != nil {
		return err
	}
	run, err := e.st.RunStatesOf(ctx, in.RunID, append([]string{t.id}, runUpstreams(t.def)...))
	if err != nil {
		return err
	}
	run = append(newest, run...)
	r, err := e.st.Run(ctx, in.RunID)
	if err != nil {
		return err
	}
	x, err := judgeWaiting(ctx, e.st, e.Graph(), r.Kind, run, []string{t.id}, e.cfg.Now())
	if err != nil {
		return err
	}
	if len(x) == 0 {
		return nil
	}
	if err := e.explainCross(ctx, t, newRunState(in.RunID, in.LogicalTime, run), true, add); err != nil {
		return err
	}
	d := x[0]
	switch {
	case d.verdict == verdictFail:
		add("upstream", true, "it can no longer run (%s): it fails at the scheduler's next check", d.reason)
	case d.verdict == verdictReady:
		add("upstream", true, "WAITING with every upstream succeeded: it is released at the next start or failed release check")
	case d.reason == "awaiting approval":
		add("upstream", true, "awaiting approval: a manual task waits for an operator (ax trigger %s)", t.id)
	default:
		add("upstream", true, "%s", d.reason)
		if t.def.Manual && in.ApprovedBy == "" {
			add("approval", true, "awaiting approval too: a manual task waits for an operator (ax trigger %s)", t.id)
		} else if t.def.Manual {
			add("approval", false, "approved by %s; it runs when its upstreams have succeeded", in.ApprovedBy)
		}
		if !d.deadline.IsZero() {
			add("deadline", false, "fails at %s if its upstreams are not done by then", stamp(d.deadline))
		} else {
			add("deadline", false, "no wait limit: set wait_timeout to fail it after a while")
		}
	}
	return nil
}

// explainReleased names the runs of other pipelines that released in, as
// its release recorded them (the latest WAITING → SCHEDULED or PAUSED row).
func (e *Engine) explainReleased(ctx context.Context, in *axtype.Instance, add func(string, bool, string, ...any)) error {
	rows, err := e.st.History(ctx, store.LogFilter{InstanceID: in.ID, Newest: true, Limit: 1000})
	for _, h := range rows {
		if h.From == axtype.Waiting && (h.To == axtype.Scheduled || h.To == axtype.Paused) {
			if _, matched, ok := strings.Cut(h.Reason, "succeeded; "); ok && strings.Contains(matched, ": matched run ") {
				add("cross", false, "released on %s", strings.TrimPrefix(matched, "gate approved; "))
			}
			break
		}
	}
	return err
}

// explainCross names, for each upstream of t in another pipeline, the run
// it matches for run rs or the window it waits for (crossMatch); waiting:
// one not yet succeeded holds the instance.
func (e *Engine) explainCross(ctx context.Context, t *taskInfo, rs *runState, waiting bool, add func(string, bool, string, ...any)) error {
	xs, err := e.resolver.crossViews(ctx, t, rs)
	for _, v := range xs {
		detail := v.id + ": " + v.note
		if v.state != "" {
			detail += " (" + string(v.state) + ")"
		}
		add("cross", waiting && v.state != axtype.Success, "%s", detail)
	}
	return err
}

// explainDelay names the task's delay when it is what holds a SCHEDULED
// instance back: its fire time has come and the delay has not yet passed
// (an instance released by its upstreams waits for it too). It reports
// whether it did.
func explainDelay(t *taskInfo, in *axtype.Instance, now time.Time, stamp func(time.Time) string, add func(string, bool, string, ...any)) bool {
	d := t.def.Delay
	if d <= 0 || in.State != axtype.Scheduled || in.NextFireAt.Add(-d).After(now) {
		return false
	}
	add("delay", true, "delay %s: releases at %s", shortDuration(d), stamp(in.NextFireAt))
	return true
}

// explainDue explains a SCHEDULED or RETRYING instance: in the window or
// not, due in the queue, held by the token bucket.
func (e *Engine) explainDue(t *taskInfo, in *axtype.Instance, v *loopView, now time.Time, stamp func(time.Time) string, add func(string, bool, string, ...any)) {
	what := "scheduled"
	if in.State == axtype.Retrying {
		what = fmt.Sprintf("retrying (attempt %d of %d failed)", in.Counted, t.def.Retry.Count+1)
	}
	if in.NextFireAt.After(now) {
		if explainDelay(t, in, now, stamp, add) {
			return
		}
		// Its fire time is still to come: that is what holds it now.
		if in.NextFireAt.After(now.Add(e.cfg.Window)) {
			add("window", true, "%s for %s, beyond the %s wheel window: it is loaded by the top-up before then", what, stamp(in.NextFireAt), e.cfg.Window)
		} else {
			add("window", true, "%s for %s, in the wheel", what, stamp(in.NextFireAt))
		}
		return
	}
	late := now.Sub(in.NextFireAt).Round(time.Millisecond)
	switch {
	case v == nil:
		add("queue", true, "%s, due %s ago; this process is a standby, ask the primary", what, late)
	case !v.pending:
		add("window", true, "%s, due %s ago but not in the wheel: the window failed to load (loaded until %s); see the store_error lines of the log",
			what, late, stamp(v.loadedUntil))
	case v.unrouted != "":
		add("executor", true, "held: %s; due %s ago, it waits in the queue, sent nowhere, until an executor of it is heard from again (a heartbeat); its timeout starts when it starts", v.unrouted, late)
	case v.capped != "":
		add("pool", true, "held: %s; due %s ago, it waits in the queue in priority order and its timeout starts when it starts (ax limits changes the caps)", v.capped, late)
	case v.held:
		rate := "unlimited"
		if v.global > 0 {
			rate = fmt.Sprintf("%g/s", v.global)
		}
		if v.group > 0 {
			rate += fmt.Sprintf(", group %s %g/s", t.def.Group, v.group)
		}
		add("bucket", true, "held back by the token bucket for %s (rate %s); %d due instance(s) in the queue", late, rate, v.queue)
	default:
		add("queue", true, "%s, due %s ago, in the dispatch queue with %d other due instance(s)", what, late, v.queue-1)
	}
}

// explainRemoved explains a task that is no longer in the pipeline files
// but whose definition the store keeps (ok false when it has none): what
// became of its latest instance, in particular one that was running when
// its task was removed — still tracked under its stored definition, it
// times out, can be killed, and is never retried.
func (e *Engine) explainRemoved(ctx context.Context, id string) (Explanation, bool, error) {
	rows, err := e.st.Tasks(ctx, store.TaskFilter{ID: id, IncludeRemoved: true})
	if err != nil || len(rows) != 1 || !rows[0].Removed {
		return Explanation{}, false, err
	}
	now := e.cfg.Now()
	x := Explanation{Task: id, Now: now, Live: e.Stats().Leader, NextFires: []time.Time{}, LastFires: []Fire{}, Findings: []Finding{}}
	add := func(check string, blocks bool, format string, args ...any) {
		x.Findings = append(x.Findings, Finding{Check: check, Blocks: blocks, Detail: fmt.Sprintf(format, args...)})
	}
	def := defs.Task{Timeout: defs.DefaultTimeout}
	_ = json.Unmarshal(rows[0].Definition, &def) // an unreadable definition keeps the default timeout, as the engine does
	if def.Timeout <= 0 {
		def.Timeout = defs.DefaultTimeout
	}
	add("removed", true, "task %s was removed from the pipeline files (the store noted it at %s): it is not scheduled any more; its definition and history are kept",
		id, rows[0].UpdatedAt.Format(time.RFC3339))
	// A running instance first (the one that matters), else the latest to
	// have ended, else the latest at all.
	var latest []axtype.Instance
	for _, states := range [][]axtype.State{{axtype.Running}, {axtype.Success, axtype.Failed, axtype.Killed}, nil} {
		if latest, err = e.st.Instances(ctx, store.InstanceFilter{TaskID: id, States: states, Limit: 1}); err != nil {
			return x, true, err
		}
		if len(latest) == 1 {
			break
		}
	}
	if len(latest) == 1 {
		in := &latest[0]
		x.Latest = in
		switch in.State {
		case axtype.Running:
			add("state", false, "its instance %d was running when the task was removed (since %s, attempt %d, ticket %s): the scheduler still tracks it under the stored definition; it fails at %s if no result comes and is not retried (the task is gone); ax kill %d stops it, and cancelling its run ends it",
				in.ID, in.StartedAt.Format(time.RFC3339), in.Attempt, in.Ticket, deadlineAfter(in.StartedAt, &def).Format(time.RFC3339), in.ID)
		case axtype.Success, axtype.Failed, axtype.Killed:
			why := ""
			if in.Error != "" {
				why = ": " + in.Error
			}
			add("state", false, "its latest instance %d ended %s at %s%s", in.ID, in.State, in.EndedAt.Format(time.RFC3339), why)
		default:
			add("state", false, "its latest instance %d is %s; it runs no more (its task is gone)", in.ID, in.State)
		}
	}
	x.Verdict = x.Findings[0].Detail
	return x, true, nil
}
