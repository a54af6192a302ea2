package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/engine/backoff"
	"github.com/ax-sched/ax/engine/breaker"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// completer is the loop's record of attempts that ended: the outcomes
// gathered from executors, the inbox, timeouts, kills and give-backs that
// are not recorded yet, and what their recording left to do. The loop
// goroutine owns it, like every component of the engine.
//
// Its rules: judgeResult decides what a result does to its instance
// (SUCCESS, KILLED, RETRYING per the retry policy, FAILED, or given back
// without counting the attempt); applyResults records a batch of them with
// the downstream they settle in one transaction; checkTimeouts turns
// silence past a deadline into a result; the releases (applyReleases,
// releaseStranded) move WAITING instances on when their upstreams are done.
// It must not start attempts (the dispatcher does: the one attempt it hands
// back is an inherited one that no executor knows, to the dispatcher's
// execute, see resolved) nor decide readiness (ready.go does: the
// completer records what settle decided).
type completer struct {
	// results is where attempts send their results, from their goroutines:
	// the loop takes them in (drainResults) into unapplied.
	results   chan outcome
	unapplied []outcome
	// abandoned is closed when a shutdown stops waiting for the attempts
	// still running (Engine.abandon): their results are dropped.
	abandoned chan struct{}
	// inboxSeen are the inbox tickets handed over, until their result is
	// recorded (the entry is closed then).
	inboxSeen map[string]bool
	// stranded: a release failed after its successes were recorded, so that
	// releaseStranded looks for instances waiting on what already happened.
	stranded bool
	// watch is what the executor sweep remembers (sweep.go): refusals, which
	// bound when a refused attempt fails, inherited attempts being asked
	// about and process groups being checked, which turn into results, and
	// the alerts raised once. Kept across terms.
	watch *watch

	cfg  Config
	host completerHost
	// res is the resolver, whose rules decide what a recorded outcome
	// settles; disp the dispatcher, whose attempts in flight results end,
	// whose breakers they feed, and whose workers ask executors about
	// inherited attempts (and dispatch one again that none knows).
	res     *resolver
	disp    *dispatcher
	st      completerStore
	log     *slog.Logger
	logs    *logWriter // task output, recorded with the results
	m       *metrics
	sched   *inForce // the schedule in force (snapshot.go)
	hasHTTP bool     // some task runs on HTTP executors: read the results inbox, sweep the executors
	// recorded: results were recorded since the loop last asked
	// (takeRecorded).
	recorded bool
	// inboxPolled is when the results inbox was last due to be read;
	// inboxRead, when a read last succeeded (see goneJudged).
	inboxPolled time.Time
	inboxRead   time.Time
}

// completerHost is what the completer asks of the other components.
type completerHost interface {
	fenced
	enqueue(ctx context.Context, in axtype.Instance) // the planner's wheel, for a retry or a release
	breakerChanged(ctx context.Context, ch breaker.Change, now time.Time)
	countApplied(n int) // Stats.Applied
	emit(ev Event)
	notify(a Alert)
	Alert(ctx context.Context, a Alert)
	observeEnd(a *attempt, status string, now time.Time)
}

// completerStore is what the completer reads from the store, and the
// results it leaves in the inbox for the next primary (leaveResults:
// unfenced, as an executor's result is received).
type completerStore interface {
	Instances(ctx context.Context, f store.InstanceFilter) ([]axtype.Instance, error)
	Executors(ctx context.Context, task string) ([]store.Executor, error)
	PendingResults(ctx context.Context, limit int) ([]store.InboxEntry, error)
	ReceiveResult(ctx context.Context, e store.InboxEntry) (bool, error)
}

// reset forgets what an earlier term gathered: a new term reads the store.
func (c *completer) reset() {
	c.unapplied, c.inboxSeen = nil, map[string]bool{}
}

// forgetAsked forgets the questions asked of executors about inherited
// attempts: a previous term's are not answered in this one.
func (c *completer) forgetAsked() { clear(c.watch.asking) }

// takeRecorded reports whether results were recorded since the last call.
func (c *completer) takeRecorded() bool {
	r := c.recorded
	c.recorded = false
	return r
}

// gather takes in outcome o, to be recorded with the next batch: the one
// way in for what the other components end (a kill, a timeout, a give-back,
// a result from the inbox or an inherited attempt).
func (c *completer) gather(o outcome) {
	if o.logs == nil && len(o.res.Outputs) > 0 { // a result no goroutine here waited for: its outputs need a record
		o.logs = c.inheritedRecord(o.instance, o.res, c.cfg.Now())
	}
	c.unapplied = append(c.unapplied, o)
}

// report hands an attempt's outcome to the loop from its goroutine, or
// drops it once a shutdown has abandoned the attempts still running.
func (c *completer) report(o outcome) {
	select {
	case c.results <- o:
	case <-c.abandoned:
	}
}

// drainResults takes in every result already waiting on the channel.
func (c *completer) drainResults() {
	for {
		select {
		case o := <-c.results:
			c.gather(o)
		default:
			return
		}
	}
}

// applyAll records every result gathered so far, a batch at a time.
func (c *completer) applyAll(ctx context.Context) error {
	for len(c.unapplied) > 0 {
		n := len(c.unapplied)
		if err := c.applyResults(ctx, c.cfg.Now()); err != nil {
			return err
		}
		if len(c.unapplied) >= n {
			return nil
		}
	}
	return nil
}

// checkTimeouts fails attempts whose deadline passed without a result: the
// scheduler enforces every task's timeout itself, whatever the executor
// does; the executor's context has the same deadline.
func (c *completer) checkTimeouts(ctx context.Context, now time.Time) error {
	c.checkGroups(now)
	for _, id := range c.disp.running.ids() {
		a := c.disp.running.get(id)
		if !a.begin() || now.Before(a.deadline.Add(time.Second)) {
			continue // waiting for a slot (its timeout starts when it starts), or not due
		}
		msg := fmt.Sprintf("timeout: no result within %s", a.task.def.Timeout)
		switch {
		case a.task.removed:
			msg = fmt.Sprintf("timeout: no result within %s; its task was removed from the pipeline files while it ran, so it is not retried", a.task.def.Timeout)
		case a.orphan:
			msg = fmt.Sprintf("unknown outcome: dispatched by a previous scheduler process and no result within %s", a.task.def.Timeout)
			if a.proc != nil && a.proc.Kill() {
				msg += fmt.Sprintf("; its process group %d, still running, was killed", a.proc.Pgid)
				c.log.Warn("orphan_group_killed", "task", a.task.id, "run", a.runID, "ticket", a.ticket, "pgid", a.proc.Pgid)
			}
			a.proc = nil
		}
		c.gather(outcome{instance: id, res: runner.Result{Ticket: a.ticket, Status: runner.StatusTimeout, Error: msg}})
		a.deadline = now.Add(time.Hour) // do not queue it twice while the result waits to be recorded
	}
	return nil
}

// judged is a result judged by judgeResult: what the loop does once its
// transition is recorded.
type judged struct {
	id      int64
	a       *attempt
	to      axtype.State
	refused bool   // the attempt is not counted: given back, or refused by every executor
	status  string // for the results metric
}

// resultRule is what judging a result needs beyond the result and its attempt.
type resultRule struct {
	now   time.Time
	epoch int64
	// refusalLimit, for a result refused by every executor, is until when
	// it is offered again (refusalLimit of sweep.go); zero otherwise.
	refusalLimit time.Time
	backoffCap   time.Duration
}

// givenBack reports whether result o of attempt a gives the attempt back
// uncounted: cut off by a shutdown (or never started before it), and not a
// success.
func (a *attempt) givenBack(o outcome) bool {
	return a.interrupted && o.res.Status != runner.StatusSuccess
}

// judgeResult is the rule of what a result does to its RUNNING instance:
// given back or refused (RETRYING, the attempt not counted), SUCCESS,
// KILLED, RETRYING at its backoff time while retries are left, else FAILED.
// It is pure: the caller records the transition it returns.
func judgeResult(o outcome, a *attempt, r resultRule) (store.TransitionParams, judged) {
	now := r.now
	p := store.TransitionParams{InstanceID: o.instance, Version: a.version, From: axtype.Running, Epoch: r.epoch, Now: now, Actor: Actor,
		Set:    store.Changes{EndedAt: &now, Error: ptr(o.res.Error)},
		Action: &store.Action{Actor: Actor, Action: "result", Pipeline: a.task.def.Pipeline, TaskID: a.task.id, Ticket: o.res.Ticket, Detail: string(o.res.Status)}}
	if o.res.Executor != "" {
		p.Set.Executor = ptr(o.res.Executor) // which executor ran it: local:HOST or the executor's URL
		p.Action.Detail += " on " + o.res.Executor
	}
	switch {
	case a.givenBack(o):
		// Cut off by a shutdown, or never started before it: given back
		// to run again at once (or at its fire time, when claimed ahead),
		// under whichever scheduler holds the lease next; the attempt is
		// not counted.
		counted, next := a.uncounted(), now
		if a.due.After(now) {
			next = a.due
		}
		p.To, p.Set.NextFireAt, p.Set.Counted = axtype.Retrying, &next, &counted
		p.Set.Error = ptr(cmp.Or(o.givenBackErr, "interrupted by shutdown"))
		p.Reason = cmp.Or(o.notStarted, "interrupted by shutdown: given back after the grace period, the attempt not counted")
		p.Action.Action, p.Action.Reason = "interrupted", p.Reason
		return p, judged{id: o.instance, a: a, to: p.To, refused: true, status: "interrupted"}
	case o.res.Refused && now.Before(r.refusalLimit):
		// No executor took it (busy, full, re-entrant, unreachable): try again
		// shortly, the attempt not counted, until the deadline of the attempt
		// first refused.
		limit := r.refusalLimit
		next, counted := now.Add(RefusedRetry), a.uncounted()
		if next.After(limit) {
			next = limit
		}
		p.To, p.Set.NextFireAt, p.Set.Counted = axtype.Retrying, &next, &counted
		p.Reason = "no executor took it, trying again at " + next.Format(time.RFC3339) + " (until " + limit.Format(time.RFC3339) + "): " + o.res.Error
		p.Action.Action, p.Action.Reason = "refused", o.res.Error
		return p, judged{id: o.instance, a: a, to: p.To, refused: true, status: "refused"}
	case o.res.Refused:
		// Refused until its deadline: a failure like any other, retried per its policy.
		o.res.Status, o.res.Refused = runner.StatusFailed, false
		o.res.Error = fmt.Sprintf("no executor took it within its timeout of %s: %s", a.task.def.Timeout, o.res.Error)
		p.Set.Error = ptr(o.res.Error)
	}
	switch o.res.Status {
	case runner.StatusSuccess:
		p.To, p.Reason = axtype.Success, fmt.Sprintf("succeeded in %s", o.res.Duration.Round(time.Millisecond))
	case runner.StatusKilled:
		p.To, p.Reason = axtype.Killed, "killed"
	default:
		retries := a.task.def.Retry.Count
		if !o.res.Permanent && a.counted <= retries {
			next := now.Add(backoff.Wait(a.task.def.Retry, a.counted, r.backoffCap, o.instance))
			p.To, p.Set.NextFireAt = axtype.Retrying, &next
			p.Reason = fmt.Sprintf("%s: retry %d of %d at %s: %s", o.res.Status, a.counted, retries, next.Format(time.RFC3339), o.res.Error)
			p.Action.Action = "retry"
		} else {
			p.To = axtype.Failed
			p.Reason = fmt.Sprintf("%s after %d attempt(s): %s", o.res.Status, a.counted, o.res.Error)
			p.Action.Action = "failed"
		}
		if o.res.Status == runner.StatusTimeout {
			p.Action.Action = "timeout"
		}
		p.Action.Reason = p.Reason
	}
	return p, judged{id: o.instance, a: a, to: p.To, status: string(o.res.Status)}
}

// ends reports whether state to ends an attempt's instance for what waits
// on it: its downstream are settled then (released or failed).
func ends(to axtype.State) bool {
	return to == axtype.Success || to == axtype.Failed || to == axtype.Killed
}

// resultBatch is a batch of results judged and ready to record.
type resultBatch struct {
	params []store.TransitionParams
	meta   []judged
	closed map[string]string // inbox entries to close, by ticket
}

// applyResults records the outcomes gathered so far in one transaction:
// SUCCESS, RETRYING (back through the wheel at its backoff time), FAILED or
// KILLED; then releases the downstream instances that successes unblock.
func (c *completer) applyResults(ctx context.Context, now time.Time) error {
	if len(c.unapplied) == 0 {
		return nil
	}
	batch := c.unapplied[:min(len(c.unapplied), c.disp.batchSize())]
	// The last output and records of the attempts go in the results'
	// transaction, whether or not their results apply (a stale result's
	// attempt ran all the same).
	logs := gatherLogs(batch)
	hasLogs := len(logs.Chunks)+len(logs.Trims)+len(logs.Attempts) > 0
	rb, err := c.judgeResults(ctx, batch, now)
	if err != nil {
		return err
	}
	// The results and the downstream instances they settle in the same run
	// commit in one transaction: a success is never recorded without its
	// release, nor a failure without the failure of what waited on it.
	var same []release
	res, relRes, err := c.host.w().TransitionBatchLogs(ctx, rb.params, logs, c.settleResults(ctx, rb, now, &same))
	if hasLogs {
		c.logs.wrote(logs, err)
	}
	if err != nil {
		c.res.runs.invalidate() // the cache saw successes that were not recorded: reload on next use
		if hasLogs && !errors.Is(err, store.ErrNotLeader) {
			// A failure to store output costs the output, never the result:
			// the next turn records the results alone.
			for i := range batch {
				batch[i].logs = nil
			}
			c.log.Warn("attempt_output_lost", "attempts", len(logs.Attempts), "err", err)
		}
		return fmt.Errorf("engine: record %d result(s): %w", len(rb.params), err) // kept in unapplied for the next turn
	}
	c.unapplied = c.unapplied[len(batch):]
	if len(c.unapplied) > 0 {
		c.disp.soon() // the rest in the next turn, after the lease and the API had their turn
	}
	var cross []release
	for i, r := range res {
		rel, err := c.resultRecorded(ctx, rb, i, r, now)
		if err != nil {
			return err
		}
		cross = append(cross, rel...)
	}
	c.released(ctx, same, relRes)
	c.closeInbox(ctx, rb.closed, now)
	c.recorded = true // the loop tells the backfiller (Engine.noteRecorded)
	c.host.countApplied(len(res))
	return c.applyReleases(ctx, cross, now)
}

// gatherLogs joins the output and attempt records that came with a batch of
// results, for the results' transaction.
func gatherLogs(batch []outcome) store.LogWrite {
	var logs store.LogWrite
	for _, o := range batch {
		if o.logs != nil {
			logs.Chunks = append(logs.Chunks, o.logs.Chunks...)
			logs.Trims = append(logs.Trims, o.logs.Trims...)
			logs.Attempts = append(logs.Attempts, o.logs.Attempts...)
		}
	}
	return logs
}

// judgeResults matches each outcome of batch with its running attempt and
// judges it; a resolution of an inherited ticket is taken in, and a result
// for a ticket that is no longer current is recorded as stale and ignored.
func (c *completer) judgeResults(ctx context.Context, batch []outcome, now time.Time) (resultBatch, error) {
	rb := resultBatch{closed: map[string]string{}}
	for _, o := range batch {
		if o.resolve != "" {
			if err := c.resolved(ctx, o, now); err != nil {
				return rb, err
			}
			continue
		}
		if o.instance == 0 { // a result that came by ticket alone (the inbox: pollInbox)
			if id, ok := c.disp.running.byTicket(o.res.Ticket); ok {
				o.instance = id
			}
		}
		a := c.disp.running.get(o.instance)
		if a == nil || a.ticket != o.res.Ticket {
			if err := c.staleResult(ctx, o, rb.closed, now); err != nil {
				return rb, err
			}
			continue
		}
		a.begin() // its deadline and duration count from its real start
		rule := resultRule{now: now, epoch: c.host.termEpoch(), backoffCap: c.cfg.BackoffCap}
		if o.res.Refused && !a.givenBack(o) {
			rule.refusalLimit = c.refusalLimit(o.instance, a, o.res.Error)
		}
		p, m := c.judgeSilent(o, a, rule)
		if !m.refused {
			delete(c.watch.refused, o.instance)
		}
		rb.params = append(rb.params, p)
		rb.meta = append(rb.meta, m)
	}
	return rb, nil
}

// judgeSilent judges a result (judgeResult) and says, for an attempt on a
// lost executor, how it was resolved: by asking the executor's /status
// (same ticket), or at its deadline; the executor's alert counts each.
func (c *completer) judgeSilent(o outcome, a *attempt, rule resultRule) (store.TransitionParams, judged) {
	addr := c.watch.silent[o.res.Ticket]
	atDeadline := addr != "" && o.silentDone == "" && o.res.Status == runner.StatusTimeout
	if atDeadline {
		o.res.Error = fmt.Sprintf("its executor %s is silent (lost) and did not answer for it: judged at its deadline, when the executor stops it too: %s", addr, o.res.Error)
	}
	p, m := judgeResult(o, a, rule)
	switch {
	case o.silentDone != "":
		delete(c.watch.asking, o.instance) // answered: a later attempt of it on a silent executor is asked about again
		p.Reason = fmt.Sprintf("resolved by asking its silent executor %s for its /status (same ticket): %s", o.silentDone, p.Reason)
		p.Action.Reason = p.Reason
		c.log.Warn("silent_executor_resolved", "task", a.task.id, "run", a.runID, "ticket", a.ticket, "executor", o.silentDone, "status", string(o.res.Status))
		if k := c.watch.kept[o.silentDone]; k != nil {
			k.how[o.res.Ticket] = "status"
		}
	case atDeadline:
		if k := c.watch.kept[addr]; k != nil {
			k.how[o.res.Ticket] = "deadline"
		}
	}
	return p, m
}

// staleResult records a result for a ticket that is not its instance's
// current one (a late duplicate, or one the loop gave up on): ignored, but
// in the action log and the metrics.
func (c *completer) staleResult(ctx context.Context, o outcome, closed map[string]string, now time.Time) error {
	if c.inboxSeen[o.res.Ticket] {
		closed[o.res.Ticket] = "stale"
	}
	if err := c.host.w().AppendAction(ctx, store.Action{At: now, Actor: Actor, Action: "stale_result", InstanceID: o.instance,
		Ticket: o.res.Ticket, Reason: "result for a ticket that is not the instance's current one: ignored", Detail: string(o.res.Status)}); err != nil {
		return err
	}
	c.log.Warn("stale_result", "instance", o.instance, "ticket", o.res.Ticket, "status", string(o.res.Status))
	c.m.staleResults.Inc()
	return nil
}

// settleResults returns the then of the results' transaction: the
// downstream in the same run that the recorded outcomes settle,
// decided by settle with the run cache brought up to date. same receives
// them, for released.
func (c *completer) settleResults(ctx context.Context, rb resultBatch, now time.Time, same *[]release) func([]store.BatchResult) ([]store.TransitionParams, error) {
	return func(res []store.BatchResult) ([]store.TransitionParams, error) {
		*same = (*same)[:0]
		seen := map[int64]bool{}
		for i, r := range res {
			m := rb.meta[i]
			if r.Err != nil || !ends(m.to) {
				continue
			}
			rs, err := c.res.runs.get(ctx, m.a.runID)
			if err != nil {
				return nil, err
			}
			if err := c.res.settleRecorded(ctx, rs, m.a.task, rb.params[i], r, now, seen, same); err != nil {
				return nil, err
			}
		}
		return releaseParams(*same), nil
	}
}

// resultRecorded does what follows the commit of result i of rb (its
// outcome r): the attempt is forgotten, the metrics, alerts and breaker
// learn of it, a retry goes back into the wheel; it returns what the
// outcome settles in other pipelines, which read it from the store.
func (c *completer) resultRecorded(ctx context.Context, rb resultBatch, i int, r store.BatchResult, now time.Time) ([]release, error) {
	m, p := rb.meta[i], rb.params[i]
	if c.inboxSeen[m.a.ticket] || m.a.task.def.Executor.Kind == defs.ExecHTTP {
		rb.closed[m.a.ticket] = "applied"
		if r.Err != nil {
			rb.closed[m.a.ticket] = "stale"
		}
	}
	c.disp.untrack(m.id)
	ev := m.a.event("ended", now)
	ev.State, ev.Error, ev.Duration = m.to, *p.Set.Error, now.Sub(m.a.startedFrom())
	c.host.emit(ev)
	if r.Err != nil {
		c.log.Warn("result_not_applied", "task", m.a.task.id, "run", m.a.runID, "ticket", m.a.ticket, "err", r.Err.Error())
		c.res.runs.dropRunOf(m.id)
		return nil, nil
	}
	c.log.Info("result_applied", "task", m.a.task.id, "run", m.a.runID, "ticket", m.a.ticket, "state", string(m.to))
	c.observeResult(ctx, m, p.Reason, now)
	rs, err := c.res.runs.get(ctx, m.a.runID)
	if err != nil {
		return nil, err
	}
	rs.set(m.a.task.id, m.to, r.Version)
	if ends(m.to) {
		c.runEnded(rs, m.a.task.def.Pipeline, now)
	}
	if m.to == axtype.Retrying {
		counted := m.a.counted
		if m.refused {
			counted = m.a.uncounted()
		}
		c.host.enqueue(ctx, axtype.Instance{ID: m.id, RunID: m.a.runID, TaskID: m.a.task.id, State: axtype.Retrying, Version: r.Version,
			NextFireAt: *p.Set.NextFireAt, LogicalTime: m.a.logical, Attempt: m.a.attempt, Counted: counted})
	}
	if len(m.a.task.crossDown) == 0 || !ends(m.to) {
		return nil, nil
	}
	// Another pipeline's instances read this outcome from the store: after the commit.
	return c.res.releaseCross(ctx, m.a.task.crossDown, now)
}

// observeResult tells the metrics, the alerts and the task's breaker of a
// recorded result (reason: its transition's).
func (c *completer) observeResult(ctx context.Context, m judged, reason string, now time.Time) {
	c.m.results.WithLabelValues(m.status).Inc()
	c.host.observeEnd(m.a, m.status, now)
	if m.status == string(runner.StatusTimeout) {
		c.m.timeouts.Inc()
	}
	switch {
	case m.to == axtype.Retrying && !m.refused:
		c.m.retries.Inc()
	case m.to == axtype.Failed:
		c.host.notify(Alert{Kind: AlertTaskFailed, At: now, Pipeline: m.a.task.def.Pipeline, Task: m.a.task.id, Run: m.a.runID, Logical: m.a.logical, Instance: m.id,
			Ticket: m.a.ticket, Message: reason})
	}
	if (m.to == axtype.Success || m.to == axtype.Failed) && !m.refused {
		if ch, changed := c.disp.brk.Record(m.a.task.id, m.to == axtype.Success, now); changed {
			c.host.breakerChanged(ctx, ch, now)
		}
	}
}

// release is a WAITING instance to move on, with what the engine knows of it
// (so that enqueueing it needs no read of the store).
type release struct {
	p  store.TransitionParams
	in axtype.Instance
}

// applyReleases records the transitions of WAITING instances that
// releasable decided (→ SCHEDULED, → PAUSED, → FAILED) and puts the
// scheduled ones into the wheel.
func (c *completer) applyReleases(ctx context.Context, rel []release, now time.Time) error {
	if len(rel) == 0 {
		return nil
	}
	params := make([]store.TransitionParams, len(rel))
	for i, r := range rel {
		params[i] = r.p
	}
	res, err := c.host.w().TransitionBatch(ctx, params)
	if err != nil {
		c.res.runs.invalidate() // the cache may be ahead of the store: reload on next use
		c.stranded = true       // the successes are recorded: find what they release again
		return fmt.Errorf("engine: release %d downstream instance(s): %w", len(rel), err)
	}
	c.released(ctx, rel, res)
	// Instances failed without running fail what waits on them in other pipelines.
	var failed []*taskInfo
	for i, r := range res {
		if r.Err == nil && rel[i].p.To == axtype.Failed {
			if ti := c.sched.tasks[rel[i].in.TaskID]; ti != nil && len(ti.crossDown) > 0 {
				failed = append(failed, ti)
			}
		}
	}
	return c.crossAfter(ctx, failed, now)
}

// runEnded tells of run rs (of pipeline), cached, when every instance of
// it ended: a run_ended Event.
func (c *completer) runEnded(rs *runState, pipeline string, now time.Time) {
	if rs == nil {
		return
	}
	if over, state := rs.over(); over {
		c.host.emit(Event{Kind: "run_ended", Pipeline: pipeline, Run: rs.id, Logical: rs.logical, State: state, Started: rs.since, At: now})
	}
}

// released takes the recorded outcome of releases: the cache follows, and
// scheduled instances go into the wheel.
func (c *completer) released(ctx context.Context, rel []release, res []store.BatchResult) {
	for i, r := range res {
		if r.Err != nil {
			if errors.Is(r.Err, store.ErrConflict) {
				c.res.runs.dropRunOf(rel[i].p.InstanceID)
			}
			continue
		}
		in := rel[i].in
		in.State, in.Version = rel[i].p.To, r.Version
		c.res.runs.setState(in.RunID, in.TaskID, in.State, r.Version)
		if ti := c.sched.tasks[in.TaskID]; ti != nil && ends(in.State) {
			c.runEnded(c.res.runs.cached(in.RunID), ti.def.Pipeline, rel[i].p.Now) // its last instance failed without running
		}
		if in.State != axtype.Scheduled {
			continue // released into a pause
		}
		c.host.enqueue(ctx, in)
		c.log.Debug("released", "task", in.TaskID, "run", in.RunID, "fire_at", in.NextFireAt.Format(time.RFC3339))
	}
	c.res.runs.forgetAllDone()
}

// releaseStranded releases the WAITING instances whose upstreams in their
// run have all succeeded (a root has none). A success and the release of its downstream are
// two transactions: a process killed between them, or a store error on the
// second, leaves a downstream waiting for an event that has happened
// already. It runs at start and after a failed release.
func (c *completer) releaseStranded(ctx context.Context, now time.Time) error {
	waiting, err := c.st.Instances(ctx, store.InstanceFilter{States: []axtype.State{axtype.Waiting}, Limit: 1 << 20})
	if err != nil {
		return fmt.Errorf("engine: find stranded instances: %w", err)
	}
	byRun := map[int64][]*taskInfo{}
	for _, in := range waiting {
		// A run whose logical time is ahead has nothing succeeded yet. A
		// root waits only when a rerun brought it back (it never ran) and
		// its release failed: nothing else will release it.
		if ti := c.sched.tasks[in.TaskID]; ti != nil && (len(ti.up) == 0 || !in.LogicalTime.After(now)) {
			byRun[in.RunID] = append(byRun[in.RunID], ti)
		}
	}
	rel, err := c.res.releasableByRun(ctx, byRun, false, now)
	if err != nil {
		return err
	}
	if len(rel) > 0 {
		c.log.Warn("stranded_released", "instances", len(rel))
		c.m.strandReleased.Add(float64(len(rel)))
	}
	if err := c.applyReleases(ctx, rel, now); err != nil {
		return err
	}
	c.stranded = false
	return nil
}

// crossAfter settles, after their commit, the instances of other pipelines
// that wait on the tasks of ended instances.
func (c *completer) crossAfter(ctx context.Context, ended []*taskInfo, now time.Time) error {
	var tasks []*taskInfo
	seen := map[string]bool{}
	for _, t := range ended {
		for _, d := range t.crossDown {
			if !seen[d.id] {
				seen[d.id] = true
				tasks = append(tasks, d)
			}
		}
	}
	if len(tasks) == 0 {
		return nil
	}
	rel, err := c.res.releaseCross(ctx, tasks, now)
	if err != nil {
		return err
	}
	return c.applyReleases(ctx, rel, now)
}

// releaseCrossWaiting re-checks the waiting instances of every task with an
// upstream in another pipeline or a wait limit: that upstream may have
// succeeded (or failed) before this run existed, or the limit passed. It
// runs at every top-up and when the earliest wait deadline comes.
func (c *completer) releaseCrossWaiting(ctx context.Context, now time.Time) error {
	var tasks []*taskInfo
	for _, id := range c.res.limited {
		tasks = append(tasks, c.sched.tasks[id])
	}
	c.res.nextDeadline = time.Time{}
	rel, err := c.res.releaseCross(ctx, tasks, now)
	if err != nil {
		return err
	}
	return c.applyReleases(ctx, rel, now)
}

// deadlineDue sweeps the limited waits when the earliest deadline came.
func (c *completer) deadlineDue(ctx context.Context, now time.Time) error {
	if c.res.nextDeadline.IsZero() || now.Before(c.res.nextDeadline) {
		return nil
	}
	return c.releaseCrossWaiting(ctx, now)
}
