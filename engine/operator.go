package engine

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

type request struct {
	req     Request
	by      By
	gaveUp  context.Context     // the caller's: done when it stopped waiting for the reply
	inspect func(now time.Time) // when set: read the loop's state (Explain) instead of applying op
	reply   chan opReply
}

type opReply struct {
	msg string
	err error
}

// Do applies an operator request in the engine's loop and returns what it
// did. Bad requests (an unknown task, an instance in the wrong state) fail
// with an error that says why and change nothing. When ctx ends before the
// loop took the request, nothing was applied (ctx's error); when it ends
// after, the request is applied or refused all the same and Do returns an
// *AcceptedError (ErrAccepted) naming the request's id, which the action
// log's row of the request carries once applied.
func (e *Engine) Do(ctx context.Context, r Request, by By) (string, error) {
	if r == nil {
		return "", fmt.Errorf("%w: no request", ErrBadOp)
	}
	if !e.Primary() {
		return "", fmt.Errorf("%w: the lease is not safely held here", errNotPrimary)
	}
	by.Request = e.reqSeq.Add(1)
	req := request{req: r, by: by, gaveUp: ctx, reply: make(chan opReply, 1)}
	select {
	case e.reqs <- req:
	case <-ctx.Done():
		return "", fmt.Errorf("engine: %s: %w (is the scheduler running as primary?)", r.Verb(), ctx.Err())
	}
	select {
	case r := <-req.reply:
		return r.msg, r.err
	case <-ctx.Done():
		return "", &AcceptedError{Request: by.Request, Verb: r.Verb(), Cause: ctx.Err()}
	}
}

// ErrAccepted is what Do returns (as an *AcceptedError) when its caller
// stopped waiting after the loop took the request: it is being applied.
var ErrAccepted = errors.New("accepted: still being applied")

// AcceptedError says that request Request (of verb Verb) was taken by the
// loop and is still being applied when the caller stopped waiting (Cause).
// Once applied, the action log has it, its detail ending "(request N)";
// a refusal is in the server's log (request_refused).
type AcceptedError struct {
	Request int64
	Verb    string
	Cause   error
}

func (e *AcceptedError) Error() string {
	return fmt.Sprintf("%s: request %d %v (%v)", e.Verb, e.Request, ErrAccepted, e.Cause)
}

func (e *AcceptedError) Is(target error) bool { return target == ErrAccepted }

// operator applies operator requests on the loop: the sealed set of
// request.go, from Do or queued in the store (pollOps, each once), and the
// pauses in force (pauses), whose coverage rule is store.PauseSet.Covering.
// A verb acts across the other components — it pauses what the planner
// queued, kills what the dispatcher runs, approves what the resolver
// releases, records through the completer — so it holds them, and asks
// the host only for the fence and the alerts. A refused request changes
// nothing and writes nothing. The loop goroutine owns it.
type operator struct {
	pauses pauses
	// opsApplied are queued requests applied whose outcome is not
	// recorded yet (the store failed as it was written): recorded on the
	// next polls, never applied again.
	opsApplied map[int64]opOutcome
	opsPolled  time.Time

	cfg   Config
	host  operatorHost
	pl    *planner
	res   *resolver
	disp  *dispatcher
	done  *completer
	bf    *backfiller
	st    *store.Store
	log   *slog.Logger
	sched *inForce // the schedule in force (snapshot.go)
}

// operatorHost is what the operator asks of the engine beyond the
// components it holds: the leadership's fence and epoch, and the alerts.
type operatorHost interface {
	fenced
	notify(a Alert)
}

// pollOps applies the requests the CLI queued in the store, each once. It
// claims a request (fenced) before applying it: one its author withdrew
// first is not applied, and one claimed is never applied again, not when
// its outcome fails to be recorded (recordOps retries that).
func (op *operator) pollOps(ctx context.Context, now time.Time) error {
	if err := op.recordOps(ctx, now); err != nil {
		return err
	}
	ops, err := op.st.PendingOps(ctx, 50)
	if err != nil {
		return err
	}
	for _, o := range ops {
		if err := op.host.w().ClaimOp(ctx, o.ID); errors.Is(err, store.ErrConflict) {
			continue // withdrawn by its author meanwhile
		} else if err != nil {
			return err
		}
		req, opErr := DecodeRequest(o.Kind, []byte(o.Args))
		msg := ""
		if opErr == nil {
			msg, opErr = op.apply(ctx, req, By{Actor: cmp.Or(o.Actor, "operator"), Reason: o.Reason}, now)
		} else {
			opErr = fmt.Errorf("request %d: %w", o.ID, opErr)
		}
		if op.opsApplied == nil {
			op.opsApplied = map[int64]opOutcome{}
		}
		op.opsApplied[o.ID] = opOutcome{msg: msg, err: opErr}
		if err := op.recordOps(ctx, now); err != nil {
			return err
		}
	}
	return nil
}

// opOutcome is what applying a queued request came to.
type opOutcome struct {
	msg string
	err error
}

// recordOps writes the outcomes of the requests applied that are not
// recorded yet.
func (op *operator) recordOps(ctx context.Context, now time.Time) error {
	for id, out := range op.opsApplied {
		if err := op.host.w().FinishOp(ctx, id, out.msg, out.err, now); err != nil && !errors.Is(err, store.ErrConflict) {
			return err
		}
		delete(op.opsApplied, id)
	}
	return nil
}

// apply does one request: a refused one changes nothing and writes
// nothing (not even an action row); an applied one is in the action log.
func (op *operator) apply(ctx context.Context, req Request, by By, now time.Time) (string, error) {
	// Text from outside is bounded and escaped once, here, as task output
	// is: every request (API, queued by the CLI, in process) enters
	// through apply.
	if err := CheckRequest(req, by); err != nil {
		return "", err
	}
	by.Actor, by.Reason = runner.SafeError(cmp.Or(by.Actor, "operator")), runner.SafeError(by.Reason)
	msg, err := req.apply(ctx, op, by, now)
	if err != nil {
		return "", err
	}
	// The request's fields (params, targets) are data, kept as given; the
	// action log's copy of them is text shown to readers, so it is escaped
	// (JSON leaves C1 controls such as U+009B, a CSI, as they are).
	_, detail, _ := EncodeRequest(req, by)
	detail = []byte(runner.SafeError(string(detail)))
	if by.Request != 0 {
		detail = fmt.Appendf(detail, " (request %d)", by.Request)
	}
	task, instance := req.subject()
	if err := op.host.w().AppendAction(ctx, store.Action{At: now, Actor: by.Actor, Action: req.Verb(), Pipeline: op.pipelineOf(req, task), TaskID: task,
		InstanceID: instance, Reason: by.Reason, Detail: msg + " " + string(detail)}); err != nil {
		return "", err
	}
	return msg, nil
}

// pipelineOf names the pipeline an applied request concerns, for the
// action log's pipeline filter: its task's, or the pipeline it paused,
// resumed or triggered ("" for what spans pipelines: a group, limits).
func (op *operator) pipelineOf(req Request, task string) string {
	if task != "" {
		if ti := op.sched.tasks[task]; ti != nil {
			return ti.def.Pipeline
		}
		p, _, _ := strings.Cut(task, ".")
		return p
	}
	switch r := req.(type) {
	case Pause:
		if r.Scope == store.ScopePipeline {
			return r.Target
		}
	case Resume:
		if r.Scope == store.ScopePipeline {
			return r.Target
		}
	case Trigger:
		return r.Target // a pipeline: a task's is named above
	}
	return ""
}

// resolveTask returns the task with the given id, or an error with a suggestion.
func (op *operator) resolveTask(id string) (*taskInfo, error) {
	if t := op.sched.tasks[id]; t != nil {
		return t, nil
	}
	ids := make([]string, 0, len(op.sched.tasks))
	for k := range op.sched.tasks {
		ids = append(ids, k)
	}
	return nil, fmt.Errorf("no task %q%s; write pipeline.task", id, defs.DidYouMean(id, ids))
}

// inScope returns the tasks a pause scope covers, or an error naming an unknown target.
func (op *operator) inScope(scope store.PauseScope, name string) ([]*taskInfo, error) {
	var out, all []*taskInfo
	var names []string
	for _, t := range op.sched.tasks {
		all = append(all, t)
		switch scope {
		case store.ScopeTask:
			names = append(names, t.id)
			if t.id == name {
				out = append(out, t)
			}
		case store.ScopeGroup:
			names = append(names, t.def.Group)
			if t.def.Group == name {
				out = append(out, t)
			}
		case store.ScopePipeline:
			names = append(names, t.def.Pipeline)
			if t.def.Pipeline == name {
				out = append(out, t)
			}
		default:
			return nil, fmt.Errorf("unknown scope %q: use task, group or pipeline", scope)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no %s %q%s", scope, name, defs.DidYouMean(name, names))
	}
	slices.SortFunc(out, func(a, b *taskInfo) int { return strings.Compare(a.id, b.id) })
	return out, nil
}

// pauses are the pauses in force: loaded from the store at the start of a
// term, changed by the pause and resume requests, read by the dispatcher
// (a due instance under a pause goes to PAUSED) and the resolver (one
// released under a pause too). Which pause covers a task is one rule,
// store.PauseSet.Covering, which the API's views use as well. The loop
// goroutine owns it.
type pauses struct{ store.PauseSet }

// of returns the pause that covers task t, if any.
func (p *pauses) of(t *taskInfo) (store.Pause, bool) {
	return p.Covering(t.id, t.def.Group, t.def.Pipeline)
}

// by says whether a pause covers task t, and which.
func (p *pauses) by(t *taskInfo) (string, bool) {
	ps, ok := p.of(t)
	if !ok {
		return "", false
	}
	return pauseText(ps, func(at time.Time) string { return at.UTC().Format(time.RFC3339) }), true
}

// PausedError refuses an operator request that would create or release
// work a pause covers (a trigger, an approval, a rerun, a backfill):
// nothing was created or changed. Asked again with Hold, the request
// creates that work held PAUSED until the resume.
type PausedError struct {
	Task  string      // the first task of the request that a pause covers
	Pause store.Pause // the pause that covers it
}

func (e *PausedError) Error() string {
	return fmt.Sprintf("%s is under a pause (%s); nothing was created or released: resume it first (%s), or ask again with --hold (API: \"hold\": true) to create it held PAUSED until the resume",
		e.Task, pauseText(e.Pause, func(at time.Time) string { return at.UTC().Format(time.RFC3339) }), resumeCommand(e.Pause))
}

// resumeCommand is the command that lifts pause p.
func resumeCommand(p store.Pause) string {
	if p.Scope == store.ScopeGroup {
		return "ax resume --group " + p.Name
	}
	return "ax resume " + p.Name
}

// underPause is the pause rule for the work an operator creates or
// releases: none of it starts while a pause covers its task. It returns
// the PausedError that refuses the request when a pause covers one of
// tasks, or nil when none does or the request holds (Hold: what a pause
// covers is created and waits PAUSED until the resume, as the scheduler's
// own fires, releases and retries do: dispatcher.plan, resolver.releasable).
// Coverage is store.PauseSet.Covering, the rule the API's views use too.
func underPause(set *store.PauseSet, hold bool, tasks ...*defs.Task) error {
	if hold {
		return nil
	}
	for _, t := range tasks {
		if p, ok := set.Covering(t.ID(), t.Group, t.Pipeline); ok {
			return &PausedError{Task: t.ID(), Pause: p}
		}
	}
	return nil
}

// pauseText says who paused what, when (formatted by stamp) and why.
func pauseText(p store.Pause, stamp func(time.Time) string) string {
	why := fmt.Sprintf("%s %s paused by %s at %s", p.Scope, p.Name, p.Actor, stamp(p.At))
	if p.Reason != "" {
		why += ": " + p.Reason
	}
	return why
}

func (op *operator) loadPauses(ctx context.Context) error {
	ps, err := op.st.Pauses(ctx)
	if err != nil {
		return err
	}
	op.pauses = pauses{store.NewPauseSet(ps)}
	return nil
}

// pause records the pause (it survives restarts) and moves the scope's
// SCHEDULED and RETRYING instances to PAUSED; running ones finish.
func (op *operator) pause(ctx context.Context, r Pause, by By, now time.Time) (string, error) {
	tasks, err := op.inScope(r.Scope, r.Target)
	if err != nil {
		return "", err
	}
	if p, ok := op.pauses.Get(r.Scope, r.Target); ok {
		return "", fmt.Errorf("%s %s is paused already (by %s at %s)", r.Scope, r.Target, p.Actor, p.At.Format(time.RFC3339))
	}
	p := store.Pause{Scope: r.Scope, Name: r.Target, Actor: by.Actor, Reason: by.Reason, At: now}
	if err := op.host.w().SetPause(ctx, p); err != nil {
		return "", err
	}
	op.pauses.Add(p)
	var params []store.TransitionParams
	running := 0
	for _, t := range tasks {
		insts, err := op.st.Instances(ctx, store.InstanceFilter{TaskID: t.id, States: []axtype.State{axtype.Scheduled, axtype.Retrying}, Limit: 1 << 20})
		if err != nil {
			return "", err
		}
		for _, in := range insts {
			params = append(params, store.TransitionParams{InstanceID: in.ID, Version: in.Version, From: in.State, To: axtype.Paused,
				Epoch: op.host.termEpoch(), Now: now, Actor: by.Actor, Reason: "paused: " + cmp.Or(by.Reason, "operator")})
		}
		running += op.disp.running.live(t.id)
	}
	n, err := op.transitionAll(ctx, params)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("paused %s %s: %d instance(s) moved to PAUSED, %d running instance(s) will finish", r.Scope, r.Target, n, running), nil
}

// transitionAll applies params in one batch, keeps the run cache in step and
// returns how many succeeded.
func (op *operator) transitionAll(ctx context.Context, params []store.TransitionParams) (int, error) {
	if len(params) == 0 {
		return 0, nil
	}
	// What the outcomes settle downstream (a skip fails what waited on it)
	// commits with them.
	var settled []release
	res, relRes, err := op.host.w().TransitionBatchThen(ctx, params, op.res.settleAfter(ctx, params, op.cfg.Now(), &settled))
	if err != nil {
		op.res.runs.invalidate()
		return 0, err
	}
	n := 0
	var ended []*taskInfo
	for i, r := range res {
		if r.Err != nil {
			continue
		}
		n++
		id := params[i].InstanceID
		op.disp.forget(id) // a stale wheel or queue entry would fail its CAS anyway
		op.res.runs.dropRunOf(id)
		if to := params[i].To; to == axtype.Failed || to == axtype.Killed || to == axtype.Success {
			if in, err := op.st.Instance(ctx, id); err == nil && op.sched.tasks[in.TaskID] != nil {
				ended = append(ended, op.sched.tasks[in.TaskID])
			}
		}
	}
	if len(settled) > 0 {
		op.done.released(ctx, settled, relRes)
	}
	return n, op.done.crossAfter(ctx, ended, op.cfg.Now())
}

// resume lifts a pause. Instances of the scope that no other pause covers go
// PAUSED → WAITING, then to SCHEDULED when their upstreams are done; those
// whose fire time passed meanwhile follow the task's misfire policy.
func (op *operator) resume(ctx context.Context, r Resume, by By, now time.Time) (string, error) {
	tasks, err := op.inScope(r.Scope, r.Target)
	if err != nil {
		return "", err
	}
	if _, ok := op.pauses.Get(r.Scope, r.Target); !ok {
		return "", fmt.Errorf("%s %s is not paused", r.Scope, r.Target)
	}
	if err := op.host.w().ClearPause(ctx, r.Scope, r.Target); err != nil {
		return "", err
	}
	op.pauses.Remove(r.Scope, r.Target)
	var woken []axtype.Instance
	for _, t := range tasks {
		if _, still := op.pauses.of(t); still {
			continue
		}
		insts, err := op.st.Instances(ctx, store.InstanceFilter{TaskID: t.id, States: []axtype.State{axtype.Paused}, Limit: 1 << 20, ByLogicalTime: true, Ascending: true})
		if err != nil {
			return "", err
		}
		var params []store.TransitionParams
		for _, in := range insts {
			params = append(params, store.TransitionParams{InstanceID: in.ID, Version: in.Version, From: axtype.Paused, To: axtype.Waiting,
				Epoch: op.host.termEpoch(), Now: now, Actor: by.Actor, Reason: "resumed"})
		}
		res, err := op.host.w().TransitionBatch(ctx, params)
		if err != nil {
			return "", err
		}
		for i, r := range res {
			if r.Err == nil {
				in := insts[i]
				in.State, in.Version = axtype.Waiting, r.Version
				woken = append(woken, in)
				op.res.runs.dropRunOf(in.ID)
			}
		}
	}
	scheduled, skipped, err := op.scheduleWoken(ctx, woken, now, "resume")
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("resumed %s %s: %d instance(s) scheduled, %d skipped by misfire policy, %d waiting for upstreams",
		r.Scope, r.Target, scheduled, skipped, len(woken)-scheduled-skipped), nil
}

// scheduleWoken schedules WAITING instances whose upstreams are done, at their fire
// time (the one they had, or now plus delay). Those whose fire time passed
// are a backlog that misfireSplit judges per task: a misfire when the
// earliest is more than MisfireAfter late (fire_once keeps the latest, skip
// none, fire_all up to MisfireLimit; the others fail with the reason
// "skipped by misfire policy"), otherwise each runs late.
func (op *operator) scheduleWoken(ctx context.Context, insts []axtype.Instance, now time.Time, why string) (scheduled, skipped int, err error) {
	byTask, order, params, err := op.wokenReady(ctx, insts, now)
	if err != nil {
		return 0, 0, err
	}
	for _, id := range order {
		var sc, sk int
		if params, sc, sk, err = op.scheduleTaskWoken(ctx, op.sched.tasks[id], byTask[id], params, now, why); err != nil {
			return 0, 0, err
		}
		scheduled, skipped = scheduled+sc, skipped+sk
	}
	var settled []release
	res, relRes, err := op.host.w().TransitionBatchThen(ctx, params, op.res.settleAfter(ctx, params, now, &settled))
	if err != nil {
		op.res.runs.invalidate()
		return 0, 0, err
	}
	op.done.released(ctx, settled, relRes)
	for i, r := range res {
		if r.Err == nil && params[i].To == axtype.Scheduled {
			in, err := op.st.Instance(ctx, params[i].InstanceID)
			if err != nil {
				return 0, 0, err
			}
			if in.State == axtype.Scheduled {
				op.res.runs.dropRunOf(in.ID)
				op.pl.enqueue(ctx, in)
			}
		}
	}
	return scheduled, skipped, nil
}

// wokenReady sorts woken WAITING instances by the readiness rule: those
// that may run, per task (order: the tasks in first-seen order), and the
// failures of those woken into a run whose upstream failed meanwhile; the
// ones still waiting are left out.
func (op *operator) wokenReady(ctx context.Context, insts []axtype.Instance, now time.Time) (byTask map[string][]axtype.Instance, order []string,
	failing []store.TransitionParams, err error) {
	byTask = map[string][]axtype.Instance{}
	for _, in := range insts {
		ti := op.sched.tasks[in.TaskID]
		if ti == nil {
			continue
		}
		rs, err := op.res.runs.get(ctx, in.RunID)
		if err != nil {
			return nil, nil, nil, err
		}
		rs.set(ti.id, axtype.Waiting, in.Version)
		vs, err := op.res.verdicts(ctx, rs, []*taskInfo{ti}, now)
		if err != nil {
			return nil, nil, nil, err
		}
		if len(vs) == 0 || vs[0].verdict == verdictWait {
			continue
		}
		if vs[0].verdict == verdictFail {
			failing = append(failing, failWaiting(rs.inst[ti.id], ti, vs[0].reason, op.host.termEpoch(), now, Actor))
			continue
		}
		if _, ok := byTask[in.TaskID]; !ok {
			order = append(order, in.TaskID)
		}
		byTask[in.TaskID] = append(byTask[in.TaskID], in)
	}
	return byTask, order, failing, nil
}

// scheduleTaskWoken appends to params the scheduling of task ti's woken
// instances (list): the ones whose fire time passed are its backlog, judged
// by misfireSplit (kept ones run now, the others fail as skipped, in the
// action log); the others wait for their fire time.
func (op *operator) scheduleTaskWoken(ctx context.Context, ti *taskInfo, list []axtype.Instance, params []store.TransitionParams, now time.Time,
	why string) (_ []store.TransitionParams, scheduled, skipped int, err error) {
	var late, onTime []axtype.Instance
	since := op.pl.since(op.sched.g.TriggerOf(ti.id))
	for _, in := range list {
		if oldPlan(in, since) && op.res.runs.kindOf(ctx, in.RunID) == axtype.RunSchedule {
			params = append(params, skipOldPlan(in, since, op.host.termEpoch(), now)) // its schedule changed meanwhile
			skipped++
			continue
		}
		if in.NextFireAt.IsZero() { // never released: due at its release time
			in.NextFireAt = releaseAt(runFire(op.res.runs.kindOf(ctx, in.RunID), in.LogicalTime, in.CreatedAt), time.Time{}, ti.def.Delay)
		}
		if in.NextFireAt.Before(now) {
			late = append(late, in)
		} else {
			onTime = append(onTime, in)
		}
	}
	slices.SortStableFunc(late, func(a, b axtype.Instance) int { return a.NextFireAt.Compare(b.NextFireAt) })
	keep := len(late)
	if len(late) > 0 {
		ti.backlog = now // what of the backlog runs is a catch-up: never overlap-skipped
		skip, missed := misfireSplit(ti.def.Misfire, len(late), late[0].NextFireAt, now, op.cfg.MisfireAfter, op.cfg.MisfireLimit)
		if !missed { // a short backlog: each runs late, at its fire time
			onTime, late = append(late, onTime...), nil
		}
		keep = len(late) - skip
	}
	for i, in := range late {
		if i >= len(late)-keep {
			params = append(params, schedule(in, now, op.host.termEpoch(), now, fmt.Sprintf("%s: misfire %s runs it late", why, ti.def.Misfire)))
			scheduled++
			continue
		}
		params = append(params, schedule(in, now, op.host.termEpoch(), now, why), store.TransitionParams{InstanceID: in.ID, Version: in.Version + 1,
			From: axtype.Scheduled, To: axtype.Failed,
			Set:   store.Changes{Error: ptr(fmt.Sprintf("skipped by misfire policy %s", ti.def.Misfire)), NextFireAt: &time.Time{}},
			Epoch: op.host.termEpoch(), Now: now, Actor: Actor, Reason: fmt.Sprintf("skipped by misfire policy %s: fire time %s passed during %s",
				ti.def.Misfire, in.NextFireAt.Format(time.RFC3339), why)})
		skipped++
	}
	if len(late) > 0 {
		detail := fmt.Sprintf("%d fire(s) missed during %s; %d run late, %d skipped", len(late), why, keep, len(late)-keep)
		if err := op.host.w().AppendAction(ctx, store.Action{At: now, Actor: Actor, Action: "misfire", TaskID: ti.id, Reason: string(ti.def.Misfire),
			Detail: detail}); err != nil {
			return params, 0, 0, err
		}
		if keep < len(late) {
			op.host.notify(Alert{Kind: AlertMisfire, At: now, Pipeline: ti.def.Pipeline, Task: ti.id, Message: detail})
		}
	}
	for _, in := range onTime {
		params = append(params, schedule(in, in.NextFireAt, op.host.termEpoch(), now, why))
		scheduled++
	}
	return params, scheduled, skipped, nil
}

func schedule(in axtype.Instance, at time.Time, epoch int64, now time.Time, why string) store.TransitionParams {
	return store.TransitionParams{InstanceID: in.ID, Version: in.Version, From: axtype.Waiting, To: axtype.Scheduled,
		Set: store.Changes{NextFireAt: &at, Reason: ptr("")}, Epoch: epoch, Now: now, Actor: Actor, Reason: why}
}

// trigger runs a task now: a manual run of its own with its own
// instance and ticket, beside any periodic instance, even a RUNNING one;
// with Downstream, everything downstream of it too. A pipeline as target
// runs the whole pipeline (every root). At sets the logical time (default
// now) and Params the run's --param values.
//
// For a manual task (manual: true) the trigger is the approval: it
// approves the gate's oldest instance awaiting approval (the one at At,
// when given), which then runs once its upstreams have succeeded; with none
// waiting, the new run's gate starts approved and runs at once.
func (op *operator) trigger(ctx context.Context, r Trigger, by By, now time.Time) (string, error) {
	at := now
	if !r.At.IsZero() {
		at = r.At
	}
	if r.In > 0 {
		at = now.Add(r.In)
	}
	params, err := encodeParams(r.Params)
	if err != nil {
		return "", err
	}
	if !strings.Contains(r.Target, ".") {
		p := op.sched.g.Pipeline(r.Target)
		if p == nil {
			var names []string
			for _, q := range op.sched.g.Pipelines() {
				names = append(names, q.Name)
			}
			return "", fmt.Errorf("no pipeline %q%s; give PIPELINE or PIPELINE.TASK", r.Target, defs.DidYouMean(r.Target, names))
		}
		if r.Downstream {
			return "", fmt.Errorf("--downstream applies to a task; a pipeline trigger runs every task of %s", p.Name)
		}
		if err := refuseTrigger(p, nil, p.Tasks, r.Params); err != nil {
			return "", err
		}
		if err := underPause(&op.pauses.PauseSet, r.Hold, p.Tasks...); err != nil {
			return "", err
		}
		rs, err := op.pl.newRunWith(ctx, newRunSpec{pipeline: p.Name, trig: p.Name, kind: axtype.RunManual, names: p.TaskNames(), at: at,
			actor: by.Actor, params: params}, now)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("run %d started for pipeline %s (%d task(s)) at logical time %s", rs.id, p.Name, len(p.Tasks),
			at.In(p.Location).Format(time.RFC3339)) + op.heldNote(p.Tasks...), nil
	}
	t, err := op.resolveTask(r.Target)
	if err != nil {
		return "", err
	}
	loc := op.sched.g.Pipeline(t.def.Pipeline).Location
	if why := defs.DisabledReason(op.sched.g.Pipeline(t.def.Pipeline), t.def); why != "" {
		return "", errors.New(why)
	}
	if err := underPause(&op.pauses.PauseSet, r.Hold, t.def); err != nil {
		return "", err
	}
	if t.def.Manual && !r.Downstream && len(r.Params) == 0 {
		msg, ok, err := op.approve(ctx, t, r, by, now)
		if ok || err != nil {
			return msg, err
		}
	}
	names, tasks := []string{t.def.Name}, []*defs.Task{t.def}
	if r.Downstream {
		sel, err := op.sched.g.Select(t.def.Pipeline, t.def.Name+"+")
		if err != nil {
			return "", err
		}
		names, tasks = names[:0], sel
		for _, s := range sel {
			names = append(names, s.Name)
		}
		if err := underPause(&op.pauses.PauseSet, r.Hold, sel...); err != nil {
			return "", err
		}
	}
	if err := refuseTrigger(op.sched.g.Pipeline(t.def.Pipeline), t.def, tasks, r.Params); err != nil {
		return "", err
	}
	rs, err := op.pl.newRunWith(ctx, newRunSpec{pipeline: t.def.Pipeline, trig: t.id, kind: axtype.RunManual, names: names, at: at,
		approvedBy: by.Actor, approve: map[string]bool{t.def.Name: true}, actor: by.Actor, params: params}, now)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("run %d started for %s (%d task(s)) at logical time %s", rs.id, t.id, len(names), at.In(loc).Format(time.RFC3339)) + op.heldNote(tasks...), nil
}

// heldNote tells, for the answer to a request made with Hold, which of
// tasks a pause covers: they wait PAUSED until the resume.
func (op *operator) heldNote(tasks ...*defs.Task) string {
	var held []string
	for _, t := range tasks {
		if p, ok := op.pauses.Covering(t.ID(), t.Group, t.Pipeline); ok {
			held = append(held, fmt.Sprintf("%s (%s %s)", t.ID(), p.Scope, p.Name))
		}
	}
	if len(held) == 0 {
		return ""
	}
	return "; held PAUSED until the resume: " + strings.Join(held, ", ")
}

// approve releases the gate of manual task t's oldest instance awaiting
// approval (or the one at op.At); ok is false when none waits.
func (op *operator) approve(ctx context.Context, t *taskInfo, r Trigger, by By, now time.Time) (string, bool, error) {
	f := store.InstanceFilter{TaskID: t.id, States: []axtype.State{axtype.Waiting}, ByLogicalTime: true, Ascending: true, Limit: 1000}
	if !r.At.IsZero() {
		f.LogicalFrom, f.LogicalTo = r.At, r.At
	}
	waiting, err := op.st.Instances(ctx, f)
	if err != nil {
		return "", false, err
	}
	var in, approved *axtype.Instance
	for i := range waiting {
		if waiting[i].ApprovedBy == "" {
			in = &waiting[i]
			break
		}
		if approved == nil {
			approved = &waiting[i]
		}
	}
	if in == nil && approved != nil {
		// Approved already, waiting for its upstreams: a second approval
		// changes nothing (it must not start a run of the gate alone, which
		// would run at once, ahead of the upstreams).
		return op.alreadyApproved(ctx, t, approved, now)
	}
	if in == nil {
		return "", false, nil
	}
	msg, err := op.approveOne(ctx, t, in, by, now)
	return msg, err == nil, err
}

// approveOne approves the gate of manual task t's waiting instance in and
// releases it when its upstreams allow; it says what became of it.
func (op *operator) approveOne(ctx context.Context, t *taskInfo, in *axtype.Instance, by By, now time.Time) (string, error) {
	v, err := op.host.w().Approve(ctx, store.ApproveParams{InstanceID: in.ID, Version: in.Version, Actor: by.Actor, Reason: by.Reason, Epoch: op.host.termEpoch(), Now: now})
	if err != nil {
		return "", err
	}
	op.res.runs.dropRunOf(in.ID)
	rs, err := op.res.runs.get(ctx, in.RunID)
	if err != nil {
		return "", err
	}
	if ref := rs.inst[t.id]; ref != nil {
		ref.version, ref.approved = v, true
	}
	rel, err := op.res.releasable(ctx, rs, []*taskInfo{t}, now)
	if err != nil {
		return "", err
	}
	if err := op.done.applyReleases(ctx, rel, now); err != nil {
		return "", err
	}
	loc := op.sched.g.Pipeline(t.def.Pipeline).Location
	what := fmt.Sprintf("approved %s for %s (run %d, instance %d)", t.id, in.LogicalTime.In(loc).Format(time.RFC3339), in.RunID, in.ID)
	if len(rel) == 1 && rel[0].p.To == axtype.Scheduled {
		if at := *rel[0].p.Set.NextFireAt; at.After(now) {
			return what + ": it runs at " + at.In(loc).Format(time.RFC3339), nil
		}
		return what + ": it runs now", nil
	}
	if len(rel) == 1 && rel[0].p.To == axtype.Paused {
		return what + op.heldNote(t.def), nil
	}
	if len(rel) == 1 && rel[0].p.To == axtype.Failed {
		return what + ": it cannot run: " + rel[0].p.Reason, nil
	}
	return what + op.waitsFor(ctx, rs, t, now), nil
}

// alreadyApproved answers an approval of manual task t whose instance in
// is approved already and waits for its upstreams.
func (op *operator) alreadyApproved(ctx context.Context, t *taskInfo, in *axtype.Instance, now time.Time) (string, bool, error) {
	rs, err := op.res.runs.get(ctx, in.RunID)
	if err != nil {
		return "", false, err
	}
	loc := op.sched.g.Pipeline(t.def.Pipeline).Location
	what := fmt.Sprintf("%s for %s (run %d, instance %d) is already approved by %s", t.id, in.LogicalTime.In(loc).Format(time.RFC3339), in.RunID, in.ID, in.ApprovedBy)
	return what + op.waitsFor(ctx, rs, t, now) + "; nothing changed", true, nil
}

// waitsFor says what the approved gate t of run rs waits for, by the
// readiness rule: ": it runs when its upstreams have succeeded (…)".
func (op *operator) waitsFor(ctx context.Context, rs *runState, t *taskInfo, now time.Time) string {
	vs, _ := op.res.verdicts(ctx, rs, []*taskInfo{t}, now)
	if len(vs) == 1 {
		return ": it runs when its upstreams have succeeded (" + vs[0].reason + ")"
	}
	return ""
}

// encodeParams checks and encodes a trigger's --param values.
func encodeParams(p map[string]string) (string, error) {
	if len(p) == 0 {
		return "", nil
	}
	if err := CheckParams(p); err != nil {
		return "", err
	}
	b, err := json.Marshal(p)
	return string(b), err
}

// kill cancels running instances on their executors: the task's, or
// the one given. The instance ends KILLED when its executor has stopped.
func (op *operator) kill(ctx context.Context, r Kill, by By, now time.Time) (string, error) {
	var ids []int64
	if r.Instance != 0 {
		in, err := op.st.Instance(ctx, r.Instance)
		if err != nil {
			return "", err
		}
		if in.State != axtype.Running {
			return "", fmt.Errorf("instance %d of %s is %s, not RUNNING: nothing to kill", in.ID, in.TaskID, in.State)
		}
		ids = []int64{in.ID}
	} else {
		t, err := op.resolveTask(r.Target)
		if err != nil {
			return "", err
		}
		for _, id := range op.disp.running.ids() {
			if op.disp.running.get(id).task == t {
				ids = append(ids, id)
			}
		}
		if len(ids) == 0 {
			return "", fmt.Errorf("task %s has no RUNNING instance: nothing to kill", t.id)
		}
	}
	for _, id := range ids {
		if !op.disp.inFlight(id) {
			return "", fmt.Errorf("instance %d is RUNNING but not known to this scheduler: wait for its timeout", id)
		}
	}
	for _, id := range ids {
		op.killAttempt(id, "killed by "+by.Actor)
	}
	return fmt.Sprintf("kill sent to %d instance(s): %v", len(ids), ids), nil
}

// rerun runs again a task's latest FAILED or KILLED instance, one instance
// (FAILED, KILLED or SUCCESS), or every FAILED and KILLED instance of a run:
// FAILED → RUNNING at once, KILLED → WAITING → SCHEDULED, SUCCESS → SCHEDULED.
// Its downstream instances follow when it succeeds.
func (op *operator) rerun(ctx context.Context, r Rerun, by By, now time.Time) (string, error) {
	insts, err := op.rerunTargets(ctx, r)
	if err != nil {
		return "", err
	}
	if err := op.checkUpstreamsRerun(ctx, insts); err != nil {
		return "", err
	}
	var targets []*defs.Task
	for _, in := range insts {
		if t := op.sched.tasks[in.TaskID]; t != nil {
			targets = append(targets, t.def)
		}
	}
	if err := underPause(&op.pauses.PauseSet, r.Hold, targets...); err != nil {
		return "", err
	}
	var (
		rerun, back []string
		again       []axtype.Instance // rerun or brought back: their downstream come back too
	)
	for _, in := range insts {
		if op.sched.tasks[in.TaskID] == nil {
			return "", fmt.Errorf("task %s of instance %d is no longer defined", in.TaskID, in.ID)
		}
		op.res.runs.dropRunOf(in.ID)
		again = append(again, in)
		if in.Counted == 0 {
			// Ended without running (its upstream failed, its wait limit
			// passed, or an operator marked it or cancelled its run): it comes
			// back to WAITING, and the readiness rule (bringBack settles it)
			// runs it when its upstreams succeed, never before them.
			if err := op.bringBackOne(ctx, in, by.Actor, now); err != nil {
				return "", err
			}
			back = append(back, strconv.FormatInt(in.ID, 10))
			continue
		}
		if err := op.rerunOne(ctx, in, by, now); err != nil {
			return "", err
		}
		rerun = append(rerun, strconv.FormatInt(in.ID, 10))
	}
	n, err := op.bringBack(ctx, again, by.Actor, now)
	if err != nil {
		return "", err
	}
	msg := fmt.Sprintf("rerunning %d instance(s): %s", len(rerun), strings.Join(rerun, ", "))
	if len(rerun) == 0 {
		msg = "rerunning no instance"
	}
	if len(back) > 0 {
		msg += fmt.Sprintf("; %d that never ran wait for their upstreams again: %s", len(back), strings.Join(back, ", "))
	}
	if n > 0 {
		msg += fmt.Sprintf("; %d downstream instance(s) that never ran wait again", n)
	}
	return msg + op.heldNote(targets...), nil
}

// checkUpstreamsRerun refuses a rerun that would bring back an instance
// that never ran while an upstream of it in its run is still FAILED or
// KILLED and not rerun with it: the readiness rule would fail it again at
// once. The refusal names the upstream to rerun first.
func (op *operator) checkUpstreamsRerun(ctx context.Context, insts []axtype.Instance) error {
	rerun := map[int64]bool{}
	for _, in := range insts {
		rerun[in.ID] = true
	}
	for _, in := range insts {
		t := op.sched.tasks[in.TaskID]
		if in.Counted != 0 || t == nil || len(t.up) == 0 {
			continue
		}
		up := map[string]bool{}
		for _, u := range t.up {
			up[u.id] = true
		}
		run, err := op.st.Instances(ctx, store.InstanceFilter{RunID: in.RunID, Limit: 1 << 20, Ascending: true})
		if err != nil {
			return err
		}
		for _, u := range run {
			if up[u.TaskID] && !rerun[u.ID] && (u.State == axtype.Failed || u.State == axtype.Killed) {
				return fmt.Errorf("instance %d of %s never ran: its upstream %s is %s, so it would fail again at once; rerun the upstream (ax rerun %d --instance, or the run: ax rerun %d --failed) and it follows",
					in.ID, in.TaskID, u.TaskID, u.State, u.ID, in.RunID)
			}
		}
	}
	return nil
}

// rerunTargets returns the instances a rerun names, each FAILED, KILLED
// or SUCCESS: the one instance, a run's FAILED and KILLED ones, or a task's
// latest FAILED or KILLED one.
func (op *operator) rerunTargets(ctx context.Context, r Rerun) ([]axtype.Instance, error) {
	switch {
	case r.Instance != 0:
		in, err := op.st.Instance(ctx, r.Instance)
		if err != nil {
			return nil, err
		}
		if in.State != axtype.Failed && in.State != axtype.Killed && in.State != axtype.Success {
			return nil, fmt.Errorf("instance %d of %s is %s: only FAILED, KILLED or SUCCESS instances can be rerun", in.ID, in.TaskID, in.State)
		}
		return []axtype.Instance{in}, nil
	case r.Run != 0:
		if _, err := op.st.Run(ctx, r.Run); err != nil {
			return nil, err
		}
		all, err := op.st.Instances(ctx, store.InstanceFilter{RunID: r.Run, States: []axtype.State{axtype.Failed, axtype.Killed}, Limit: 1 << 20, Ascending: true})
		if err != nil {
			return nil, err
		}
		if len(all) == 0 {
			return nil, fmt.Errorf("run %d has no FAILED or KILLED instance to rerun", r.Run)
		}
		return all, nil
	}
	t, err := op.resolveTask(r.Target)
	if err != nil {
		return nil, err
	}
	last, err := op.st.Instances(ctx, store.InstanceFilter{TaskID: t.id, States: []axtype.State{axtype.Failed, axtype.Killed}, Limit: 1})
	if err != nil {
		return nil, err
	}
	if len(last) == 0 {
		latest, _ := op.st.Instances(ctx, store.InstanceFilter{TaskID: t.id, Limit: 1})
		state := "none"
		if len(latest) == 1 {
			state = string(latest[0].State)
		}
		return nil, fmt.Errorf("task %s has no FAILED or KILLED instance to rerun (its latest is %s)", t.id, state)
	}
	return last, nil
}

// rerunOne runs again an instance that ran, at its release time
// (releaseAt: now plus its delay, never before its run's fire time plus
// its delay): FAILED → RUNNING at once when that is now and its task's caps
// leave room (the pool's rule), else, as KILLED always, WAITING →
// SCHEDULED into the queue, where it waits for its time and a slot;
// SUCCESS → SCHEDULED.
func (op *operator) rerunOne(ctx context.Context, in axtype.Instance, by By, now time.Time) error {
	reason := "rerun"
	at := now
	if t := op.sched.tasks[in.TaskID]; t != nil {
		at = releaseAt(runFire(op.res.runs.kindOf(ctx, in.RunID), in.LogicalTime, in.CreatedAt), now, t.def.Delay)
	}
	if t := op.sched.tasks[in.TaskID]; in.State == axtype.Failed && t != nil && !at.After(now) {
		// Through the queue, where the pause rule, the caps and the
		// breaker's cut apply, unless none holds it now.
		why := "waits for a slot: " + op.disp.pool.full(t)
		if _, paused := op.pauses.of(t); paused {
			why = "held under a pause" // Rerun.Hold
		} else if ok, _ := op.disp.brk.Allow(t.id, now); !ok {
			why = "waits for its breaker's cut"
		} else if op.disp.pool.full(t) == "" {
			p := &pend{at: now.UnixMilli(), version: in.Version, state: axtype.Failed, task: t, runID: in.RunID, logical: in.LogicalTime, manual: true,
				attempt: in.Attempt, counted: rerunCounted}
			return op.startNow(ctx, in.ID, p, now, "rerun by "+by.Actor)
		}
		reason = "rerun: " + why
	}
	from, v, counted := in.State, in.Version, rerunCounted
	if from == axtype.Killed || from == axtype.Failed {
		nv, err := op.host.w().Transition(ctx, store.TransitionParams{InstanceID: in.ID, Version: v, From: from, To: axtype.Waiting,
			Set: store.Changes{Counted: &counted}, Epoch: op.host.termEpoch(), Now: now, Actor: by.Actor, Reason: reason})
		if err != nil {
			return err
		}
		from, v = axtype.Waiting, nv
	}
	nv, err := op.host.w().Transition(ctx, store.TransitionParams{InstanceID: in.ID, Version: v, From: from, To: axtype.Scheduled,
		Set: store.Changes{NextFireAt: &at, Error: ptr(""), Counted: &counted}, Epoch: op.host.termEpoch(), Now: now, Actor: by.Actor, Reason: reason})
	if err != nil {
		return err
	}
	in.State, in.Version, in.NextFireAt = axtype.Scheduled, nv, at
	op.pl.enqueue(ctx, in)
	return nil
}

// startNow dispatches one instance at once, outside the queue: the manual
// rerun of a FAILED instance, which the table moves straight to RUNNING.
func (op *operator) startNow(ctx context.Context, id int64, p *pend, now time.Time, why string) error {
	ticket := newTicket()
	att, counted := nextAttempt(p.attempt, p.counted)
	v, err := op.host.w().Transition(ctx, store.TransitionParams{InstanceID: id, Version: p.version, From: p.state, To: axtype.Running,
		Set:   store.Changes{Ticket: &ticket, Attempt: &att, Counted: &counted, StartedAt: &now, EndedAt: &time.Time{}, Error: ptr(""), Executor: ptr(executorOf(p.task.def))},
		Epoch: op.host.termEpoch(), Now: now, Actor: Actor, Reason: why,
		Action: &store.Action{Actor: Actor, Action: "dispatch", TaskID: p.task.id, Ticket: ticket, Reason: why}})
	if err != nil {
		return err
	}
	op.disp.brk.Dispatched(p.task.id, now)
	op.res.runs.dispatched(p.runID, p.task.id, v, att)
	a := &attempt{ticket: ticket, version: v, task: p.task, runID: p.runID, logical: p.logical, attempt: att, counted: counted, deadline: deadlineAfter(now, p.task.def), due: now, started: now}
	op.disp.track(id, a)
	op.disp.execute(id, a, nil)
	return nil
}

var errNotPrimary = errors.New("engine: not the primary scheduler")
