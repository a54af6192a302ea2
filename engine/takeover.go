package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// reconcile takes over instances a previous process left RUNNING: their
// tickets stay valid, and when no result comes by their deadline they time
// out through the normal path — never re-dispatched blindly. Those
// that certainly never started (neverStarted) are given back, to run again
// once, the attempt not counted.
func (e *Engine) reconcile(ctx context.Context, now time.Time) error {
	insts, err := e.st.Instances(ctx, store.InstanceFilter{States: []axtype.State{axtype.Running}, Limit: 1 << 20})
	if err != nil {
		return fmt.Errorf("engine: reconcile running instances: %w", err)
	}
	clear(e.completer.watch.asking) // a previous term's questions are not answered in this one
	tickets := make([]string, 0, len(insts))
	for _, in := range insts {
		tickets = append(tickets, in.Ticket)
	}
	procs, err := e.st.Procs(ctx, tickets)
	if err != nil {
		return fmt.Errorf("engine: read where inherited attempts run: %w", err)
	}
	ids := make([]int64, 0, len(insts))
	for _, in := range insts {
		ids = append(ids, in.ID)
	}
	resent, err := e.st.Redispatched(ctx, ids)
	if err != nil {
		return fmt.Errorf("engine: read which inherited attempts were dispatched again: %w", err)
	}
	var handOuts map[int64]time.Time
	for _, r := range procs {
		if r.Kind == store.ProcHeld && handOuts == nil {
			if handOuts, err = e.st.HandOuts(ctx); err != nil {
				return fmt.Errorf("engine: read the hand-outs of attempts claimed ahead: %w", err)
			}
		}
	}
	for _, in := range insts {
		ti := e.tasks[in.TaskID]
		if ti == nil {
			// Its task was removed from the files while it ran: still
			// tracked, under its stored definition, so that it times out, can
			// be killed and ends (FAILED, no retry: the task is gone).
			if ti, err = e.removedTask(ctx, in.TaskID); err != nil {
				return err
			}
		}
		if a := e.dispatcher.running.get(in.ID); a != nil && a.ticket == in.Ticket {
			a.version = in.Version // running here already (the lease was retaken)
			continue
		}
		a := &attempt{ticket: in.Ticket, version: in.Version, task: ti, runID: in.RunID, logical: in.LogicalTime, attempt: in.Attempt, counted: in.Counted,
			deadline: e.inheritedDeadline(in, ti.def, resent), orphan: true, live: e.resolver.runs.kindOf(ctx, in.RunID) == axtype.RunSchedule, started: in.StartedAt}
		rec, found := procs[in.Ticket]
		if why := e.neverStarted(in, ti, rec, found, handOuts); why != "" {
			// Given back as at a shutdown (giveBack): RETRYING at its fire
			// time, or now when that has passed, the attempt not counted,
			// the reason in its history; it runs again under a fresh ticket.
			a.orphan, a.interrupted, a.due, a.deadline = false, true, in.StartedAt, now.Add(time.Hour)
			e.dispatcher.track(in.ID, a)
			e.completer.unapplied = append(e.completer.unapplied, outcome{instance: in.ID, notStarted: why, givenBackErr: "not started: " + why,
				res: runner.Result{Ticket: in.Ticket, Status: runner.StatusFailed, Error: why}})
			e.log.Warn("claimed_ahead_given_back", "task", in.TaskID, "run", in.RunID, "ticket", in.Ticket, "fire_at", in.StartedAt.Format(time.RFC3339Nano), "reason", why)
			continue
		}
		e.dispatcher.track(in.ID, a)
		e.log.Warn("running_instance_reconciled", "task", in.TaskID, "run", in.RunID, "ticket", in.Ticket, "deadline", a.deadline.Format(time.RFC3339))
	}
	e.completer.inheritProcs(procs, now)
	return nil
}

// inheritedDeadline is when an attempt inherited in RUNNING times out
// here; until then it holds its slots under the caps. Its timeout counts
// from the latest of: its recorded start; the last recorded redispatch of
// its ticket (resent: ticket → when), since the executor runs it under
// that later deadline; and, for a local attempt, the end of the previous
// lease, since it may have waited in its process's start queue after it
// was recorded (its real start is not stored) and that process started
// nothing after its lease ended. An earlier deadline would judge it while
// it may still run, and let a retry or another attempt under its caps run
// beside it.
func (e *Engine) inheritedDeadline(in axtype.Instance, t *defs.Task, resent map[string]time.Time) time.Time {
	from := in.StartedAt
	if at, ok := resent[in.Ticket]; ok && at.After(from) {
		from = at
	}
	if isLocal(t) && e.leadership.prevLeaseEnd.After(from) {
		from = e.leadership.prevLeaseEnd
	}
	return deadlineAfter(from, t)
}

// neverStarted says why an attempt inherited in RUNNING certainly never
// started, or "" when it may have (it is then asked about, and with no
// answer fails at its deadline as an unknown outcome, see orphan.go):
//   - it was claimed ahead (its procs row held, under an epoch) and its
//     fire time is past the hand-out recorded for that epoch (handOuts),
//     which is written before any held attempt starts (startHeld);
//   - it was claimed ahead for a fire time after the end of the previous
//     term's lease: that process started nothing so late (it starts held
//     attempts only while its lease is safely held). Strictly after: a
//     lease released at once by a stopping primary ends at the very
//     millisecond it may have started an attempt (a run-now, a held one
//     opening), and that one did start.
//
// An attempt of a task removed from the files is never judged unstarted:
// its outcome is unknown, and it fails at its deadline.
func (e *Engine) neverStarted(in axtype.Instance, ti *taskInfo, rec store.ProcRecord, found bool, handOuts map[int64]time.Time) string {
	fire := in.StartedAt.UTC().Format(time.RFC3339Nano)
	switch {
	case ti.removed:
		return ""
	case found && rec.Kind == store.ProcHeld && in.StartedAt.After(handOuts[rec.Epoch]):
		return "claimed ahead to start at " + fire + " by a previous primary that stopped before handing it out: it never started; given back, the attempt not counted"
	case !e.leadership.prevLeaseEnd.IsZero() && in.StartedAt.After(e.leadership.prevLeaseEnd):
		return "claimed ahead to start at " + fire + ", after the previous primary's lease ended at " + e.leadership.prevLeaseEnd.UTC().Format(time.RFC3339Nano) +
			": it never started; given back, the attempt not counted"
	}
	return ""
}

// errNotStartedByShutdown is why an attempt claimed ahead did not start:
// the scheduler stopped before its fire time.
var errNotStartedByShutdown = errors.New("engine: stopped before its fire time")

// giveBack hands back, at shutdown and before the lease is released, the
// attempts recorded RUNNING that never started: claimed ahead of a fire
// time still to come, or waiting in the start queue for a slot. They go
// through the result path like every other attempt given back (applyResults,
// interrupted): RETRYING at their fire time or now, the attempt not
// counted, so that the next scheduler runs them once.
func (e *Engine) giveBack(ctx context.Context, now time.Time) {
	why := map[int64]string{}
	for _, id := range e.dispatcher.pool.shut() {
		why[id] = "interrupted by shutdown: it waited in the start queue for a slot (--max-running) and never started; given back, the attempt not counted"
	}
	for id, a := range e.dispatcher.held {
		a.cancel(errNotStartedByShutdown) // its goroutine returns without running
		why[id] = "interrupted by shutdown: claimed ahead, but the scheduler stopped before its fire time; not started, given back due at " + a.due.UTC().Format(time.RFC3339)
	}
	clear(e.dispatcher.held)
	for _, id := range sortedIDs(why) {
		a := e.dispatcher.running.get(id)
		if a == nil {
			continue
		}
		a.interrupted = true
		e.completer.gather(outcome{instance: id, notStarted: why[id],
			res: runner.Result{Ticket: a.ticket, Status: runner.StatusFailed, Error: why[id]}})
	}
	if len(why) == 0 {
		return
	}
	if err := e.completer.applyAll(ctx); err != nil {
		// They stay RUNNING: the next primary times them out (unknown outcome) and retries per policy.
		e.log.Error("give_back_failed", "instances", len(why), "err", err)
		return
	}
	e.log.Info("given_back_unstarted", "instances", len(why))
}
