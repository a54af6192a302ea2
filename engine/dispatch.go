package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/engine/backoff"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// RefusedRetry is how long after a refusal by every executor (busy, full,
// re-entrant, unreachable) an instance is offered again.
const RefusedRetry = 5 * time.Second

// reconcile takes over instances a previous process left RUNNING: their
// tickets stay valid, and when no result comes by their deadline they time
// out through the normal path (R27) — never re-dispatched blindly. Those
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
// started, or "" when it may have (the rules of R27 and R43 then apply):
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
// An attempt of a task removed from the files keeps the rule of R27.
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

func ptr[T any](v T) *T { return &v }

// executorOf names, at dispatch, what will run an attempt of t: this
// process (local:HOST) for functions and commands; for HTTP tasks the
// task's URL, or "http" until the result names the executor that took it.
func executorOf(t *defs.Task) string {
	switch {
	case t.Executor.Kind == defs.ExecHTTP && t.Executor.URL != "":
		return t.Executor.URL
	case t.Executor.Kind == defs.ExecHTTP:
		return string(defs.ExecHTTP)
	}
	return runner.Local()
}

// dueDetail is the detail of a dispatch action: the instance's fire time,
// so that "scheduled versus actual dispatch time" can be read back (R31a).
func dueDetail(atMS int64) string {
	return "due " + time.UnixMilli(atMS).UTC().Format(time.RFC3339Nano)
}

// parseDue reads dueDetail back; ok is false for actions written before it.
func parseDue(detail string) (time.Time, bool) {
	s, found := strings.CutPrefix(detail, "due ")
	if !found {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	return t, err == nil
}

// startHeld hands the attempts claimed ahead whose fire time has come to
// their executors — only while the lease is safely held: a process that
// stalled past its lease starts nothing (the next primary sees RUNNING
// instances it did not start and lets them time out, never running them
// twice). Before any of them starts, one fenced write records that they
// were handed out (recordHandOut): a primary that takes over finds the
// claim of an attempt that never started still held, and gives it back
// (neverStarted) rather than leaving it to the unknown-outcome rule.
func (d *dispatcher) startHeld(ctx context.Context, now time.Time) {
	if len(d.gates) == 0 || now.Before(d.handOutRetry) || !d.host.leader(now) {
		return
	}
	opened := map[int64]chan struct{}{}
	for due, g := range d.gates {
		if due <= now.UnixMilli() {
			opened[due] = g // every attempt held for this fire time starts at once
			delete(d.gates, due)
		}
	}
	if len(opened) == 0 {
		return
	}
	var starting []*attempt
	var ids []int64
	for _, id := range sortedIDs(d.held) {
		if a := d.held[id]; !a.due.After(now) {
			delete(d.held, id)
			a.held = false
			starting, ids = append(starting, a), append(ids, id)
		}
	}
	if !d.recordHandOut(ctx, starting, ids, opened, now) {
		return
	}
	// Into the start queue in dispatch order (priority, fire time), before
	// their goroutines are let go.
	order := make([]int, len(starting))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(i, j int) int {
		return cmp.Or(cmp.Compare(starting[i].task.def.Priority, starting[j].task.def.Priority), starting[i].due.Compare(starting[j].due))
	})
	for _, i := range order {
		a := starting[i]
		if isLocal(a.task.def) {
			a.slot = d.pool.enqueue(a.task.def.Priority, a.due.UnixMilli(), ids[i])
		} else {
			d.started(a, now) // a local one starts in its goroutine, when it has a slot
		}
	}
	for _, g := range opened {
		close(g)
	}
	d.armHeld(d.cfg.Now())
}

// handOutRetry is how long after a hand-out that could not be recorded
// startHeld tries again.
const handOutRetry = 250 * time.Millisecond

// recordHandOut writes, in one fenced transaction of one small statement,
// that the held attempts starting (instances ids) were handed out: for each
// epoch that claimed them, up to the latest of their fire times
// (store.Fence.HandOut). It reports whether they may start. When the write
// fails (the store is down, the lease was taken) none of them starts: they
// are held again behind their gates (opened), tried again after
// handOutRetry, and, if this process never records it, the next primary
// finds them claimed and not handed out and gives them back.
func (d *dispatcher) recordHandOut(ctx context.Context, starting []*attempt, ids []int64, opened map[int64]chan struct{}, now time.Time) bool {
	var epochs []int64
	var upto time.Time
	for _, a := range starting {
		if !slices.Contains(epochs, a.claimEpoch) {
			epochs = append(epochs, a.claimEpoch)
		}
		if a.due.After(upto) {
			upto = a.due
		}
	}
	err := d.host.w().HandOut(ctx, epochs, upto, now)
	d.handOutErr = err
	if err == nil {
		return true
	}
	for i, a := range starting {
		a.held = true
		d.held[ids[i]] = a
	}
	maps.Copy(d.gates, opened)
	d.handOutRetry = now.Add(handOutRetry)
	d.heldWake.Reset(handOutRetry)
	d.log.Warn("hand_out_not_recorded", "attempts", len(starting), "err", err, "retry_in", handOutRetry.String())
	return false
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

// started records that an attempt went to its executor. Local attempts
// start in their own goroutines (see execute), so it is safe for
// concurrent use.
func (d *dispatcher) started(a *attempt, now time.Time) {
	d.host.observeStart(a, now)
	d.log.Info("dispatched", "task", a.task.id, "run", a.runID, "ticket", a.ticket, "attempt", a.attempt)
	d.host.emit(Event{Kind: "started", Task: a.task.id, Run: a.runID, Logical: a.logical, Ticket: a.ticket})
}

// errWithdrawn is why an attempt in the start queue did not start: the
// loop withdrew it (its task was removed) and recorded its end itself.
var errWithdrawn = errors.New("engine: withdrawn from the start queue")

// withdraw takes back an attempt waiting in the start queue before its
// goroutine starts it, and reports whether it did: after it, the attempt
// never starts (slot gives errWithdrawn).
func (a *attempt) withdraw() bool {
	return a.queued && a.begun.CompareAndSwap(0, -1)
}

// errLeaseNotHeld is why an attempt in the start queue did not start: the
// lease stopped being safely held while it waited.
var errLeaseNotHeld = errors.New("engine: the lease is not safely held")

// slot waits, in an attempt's goroutine, until local attempt a may start:
// a slot under the global cap (the start queue, in priority order) and the
// lease safely held — a process that stalled past its lease starts nothing
// (the next primary sees a RUNNING instance it did not start and lets it
// time out, never running it twice). It returns when it started. The loop
// put a in the start queue (pool.enqueue) when it handed it out.
func (d *dispatcher) slot(ctx context.Context, a *attempt) (time.Time, error) {
	if err := d.pool.wait(ctx, a.slot); err != nil {
		if a.begun.Load() < 0 {
			return time.Time{}, errWithdrawn // cancelled by withdraw: recorded by the loop
		}
		return time.Time{}, err
	}
	for {
		// Held under whichever epoch is current: a lease the keeper took
		// again keeps what this process recorded (see reconcile).
		if d.host.Primary() {
			now := d.cfg.Now()
			if !a.begun.CompareAndSwap(0, now.UnixNano()) {
				d.pool.release()
				return time.Time{}, errWithdrawn // the loop took it back first (withdraw)
			}
			return now, nil
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			d.pool.release()
			return time.Time{}, context.Cause(ctx)
		case <-t.C:
		}
	}
}

// notStarted is the result of an attempt whose context ended before it
// started (killed, or given back at shutdown).
func notStarted(ctx context.Context, a *attempt, err error) runner.Result {
	if errors.Is(context.Cause(ctx), runner.ErrKilled) {
		return runner.Result{Ticket: a.ticket, Status: runner.StatusKilled, Error: runner.ErrKilled.Error()}
	}
	return runner.Result{Ticket: a.ticket, Status: runner.StatusFailed, Error: "not started: " + err.Error()}
}

// execute runs an attempt on its executor in a goroutine of its own: at
// once, or, for an attempt claimed ahead, when gate closes at its fire time.
// A held attempt whose context ends first (killed before its time, given
// back at shutdown, the lease lost) returns without running anything.
//
// A local attempt (function or command) then waits in the start queue for
// a slot under --max-running (pool.acquire): dispatch records local
// attempts a batch at a time, beyond the cap, so that each starts the
// moment a slot frees, with no store round trip between one attempt's end
// and the next one's start. Its deadline counts from that start.
func (d *dispatcher) execute(id int64, a *attempt, gate <-chan struct{}) {
	t := a.task.def
	local := isLocal(t)
	a.queueWait = d.host.queueWaitOf(a.task)
	if gate == nil && !local {
		d.started(a, d.cfg.Now())
	}
	a.queued, a.begun = local, new(atomic.Int64)
	if local && gate == nil {
		a.slot = d.pool.enqueue(t.Priority, a.due.UnixMilli(), id)
	}
	at := runner.Attempt{Pipeline: t.Pipeline, Task: t.Name, InstanceID: id, Ticket: a.ticket,
		LogicalTime: a.logical.In(d.g.Pipeline(t.Pipeline).Location), Deadline: a.deadline, Params: d.res.runs.paramsOf(a.runID, t.Params),
		TicketTTL: backoff.Span(t.Retry.Count, t.Retry.Interval, t.Timeout, d.cfg.BackoffCap) + 5*time.Minute}
	ctx, cancel := context.WithCancelCause(d.execCtx)
	a.cancel = cancel
	fence, runID := d.host.w(), a.runID
	d.execWG.Add(1)
	go func() {
		defer d.execWG.Done()
		defer cancel(nil)
		if gate != nil {
			select {
			case <-gate: // startHeld put a local one in the start queue
			case <-ctx.Done():
				if a.slot != nil {
					d.pool.cancel(a.slot)
				}
				return
			}
		}
		if local {
			begun, err := d.slot(ctx, a)
			if errors.Is(err, errStartQueueShut) || errors.Is(err, errWithdrawn) {
				return // given back (giveBack) or withdrawn (withdraw) by the loop
			}
			if err != nil {
				d.host.report(outcome{instance: id, res: notStarted(ctx, a, err)})
				return
			}
			at.Deadline = deadlineAfter(begun, t)
			d.started(a, begun)
		}
		out := d.logs.start(id, a.attempt, fence)
		started := d.cfg.Now()
		xctx := runner.WithOutput(ctx, out.out)
		if t.Executor.Kind == defs.ExecCommand { // where its process group runs, for a primary that may inherit it
			xctx = runner.WithStarted(xctx, func(p runner.Process) {
				out.setProc(store.ProcRecord{Ticket: a.ticket, InstanceID: id, RunID: runID, Host: p.Host, Boot: p.Boot, PidNS: p.PidNS,
					Pgid: p.Pgid, Start: p.Start, At: d.cfg.Now()})
			})
		}
		res, err := d.execs[t.Executor.Kind].Execute(xctx, at)
		// The slot is free for the next attempt in the start queue at once,
		// and for the next turn's dispatch (its result, coming next, wakes
		// the loop): a turn in between must still see this attempt running,
		// for the overlap rule, which it does until the result is applied.
		if local {
			d.pool.release()
		}
		d.free(a)
		if err != nil {
			res = runner.Result{Ticket: a.ticket, Status: runner.StatusFailed, Error: err.Error(), Permanent: true}
		}
		res.Ticket = a.ticket
		res = safeResult(res)
		logs := d.logs.end(out, res, store.AttemptRecord{InstanceID: id, Attempt: a.attempt, RunID: runID, TaskID: t.ID(), Ticket: a.ticket,
			Executor: res.Executor, Argv: res.Argv, Status: string(res.Status), ExitCode: res.ExitCode, Error: res.Error, StartedAt: started, EndedAt: d.cfg.Now()})
		d.host.report(outcome{instance: id, res: res, logs: logs})
	}()
}
