package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/engine/backoff"
	"github.com/ax-sched/ax/engine/wheel"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// RefusedRetry is how long after a refusal by every executor (busy, full,
// re-entrant, unreachable) an instance is offered again.
const RefusedRetry = 5 * time.Second

// pend is an instance waiting in the wheel or the queue.
type pend struct {
	at        int64 // fire time, Unix ms: keeps the queue order when put back
	version   int64
	state     axtype.State // SCHEDULED or RETRYING
	task      *taskInfo
	runID     int64
	logical   time.Time
	attempt   int
	manual    bool           // a run-now or rerun: pause and overlap do not hold it back
	kind      axtype.RunKind // overlap is judged among schedule runs only
	throttled bool           // held back by the token bucket at least once
	capped    string         // the concurrency cap that held it back at the last dispatch, if any
}

// attempt is a dispatched instance awaiting its result.
type attempt struct {
	ticket   string
	version  int64
	task     *taskInfo
	runID    int64
	logical  time.Time
	attempt  int
	deadline time.Time
	orphan   bool                    // left RUNNING by a previous process: nothing here runs it
	cancel   context.CancelCauseFunc // stops the attempt on its executor (kill)
	live     bool                    // of a schedule run: counts for the overlap policy
	kind     axtype.RunKind          // of its run: what its start counts as in the latency metrics
	due      time.Time               // its fire time
	started  time.Time               // when it started (claimed ahead: its fire time); the overlap rule compares fire times with it
	held     bool                    // claimed ahead: not handed to its executor yet
	// queued: a local attempt not known to the loop to have started (it
	// waits for a slot in the start queue, see execute); its deadline counts
	// from begun, the UnixNano its goroutine started it at (see begin).
	queued bool
	begun  *atomic.Int64
	slot   *slotWait    // its place in the start queue (local attempts), set by the loop as it hands it out
	freed  *atomic.Bool // its pool slot was given back (see Engine.free); set by track
	// interrupted: still running when the shutdown grace ended and cancelled
	// with errInterrupted; unless it succeeded it is given back, not failed.
	interrupted bool
}

// outcome is a result from an executor, for an instance.
type outcome struct {
	instance int64
	res      runner.Result
	resolve  string // when set: what executors answered about an inherited ticket (orphan.go), not a result
	// notStarted, for an attempt given back at shutdown before it started
	// (giveBack), is why: the reason of its RUNNING → RETRYING.
	notStarted string
	// The attempt's last output and its record, written in the transaction
	// that records the result (nil for results that did not come from an
	// attempt of this process).
	logs *store.LogWrite
}

// enqueue puts a SCHEDULED or RETRYING instance into the wheel when its fire
// time is inside the window; later ones are loaded by a top-up.
func (e *Engine) enqueue(ctx context.Context, in axtype.Instance) {
	ti := e.tasks[in.TaskID]
	if ti == nil {
		return // a task removed from the files: its instances stay as they are
	}
	if p := e.pending[in.ID]; p != nil && p.version == in.Version {
		return // loaded already
	}
	at := in.NextFireAt.UnixMilli()
	if !in.NextFireAt.After(e.cfg.Now()) {
		e.queue.Push(ti.def.Priority, at, in.ID) // due: no need to wait for a tick
	} else if !e.wheel.Add(wheel.Entry{ID: in.ID, Version: in.Version, At: at}) {
		return
	}
	e.pending[in.ID] = &pend{at: in.NextFireAt.UnixMilli(), version: in.Version, state: in.State, task: ti, runID: in.RunID,
		logical: in.LogicalTime, attempt: in.Attempt, kind: e.kindOf(ctx, in.RunID)}
	e.pending[in.ID].manual = e.pending[in.ID].kind == axtype.RunManual
}

// load puts every instance due up to now + Window into the wheel (R11).
func (e *Engine) load(ctx context.Context, now time.Time) error {
	until := now.Add(e.cfg.Window)
	due, err := e.st.DueInstances(ctx, store.DueParams{Until: until})
	if err != nil {
		return fmt.Errorf("engine: load the window: %w", err)
	}
	for _, in := range due {
		if _, running := e.running[in.ID]; !running {
			e.enqueue(ctx, in)
		}
	}
	e.loadedUntil = until
	e.log.Debug("window_loaded", "until", until.Format(time.RFC3339), "due", len(due), "wheel", e.wheel.Len())
	return nil
}

// reconcile takes over instances a previous process left RUNNING: their
// tickets stay valid, and when no result comes by their deadline they time
// out through the normal path (R27) — never re-dispatched blindly.
func (e *Engine) reconcile(ctx context.Context, now time.Time) error {
	insts, err := e.st.Instances(ctx, store.InstanceFilter{States: []axtype.State{axtype.Running}, Limit: 1 << 20})
	if err != nil {
		return fmt.Errorf("engine: reconcile running instances: %w", err)
	}
	clear(e.watch.asking) // a previous term's questions are not answered in this one
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
		if a := e.running[in.ID]; a != nil && a.ticket == in.Ticket {
			a.version = in.Version // running here already (the lease was retaken)
			continue
		}
		deadline := in.StartedAt.Add(ti.def.Timeout)
		live := e.kindOf(ctx, in.RunID) == axtype.RunSchedule
		if !ti.removed && !e.prevLeaseEnd.IsZero() && in.StartedAt.After(e.prevLeaseEnd) {
			// Claimed ahead for a fire time after the end of the previous
			// term's lease: that process started nothing so late (it starts held
			// attempts only while its lease is safely held), so this one never
			// started. Strictly after: a lease released at once by a stopping
			// primary ends at the very millisecond it may have started an
			// attempt (a run-now, a held one opening), and that one did start. It starts here at its fire time, with the same ticket.
			a := &attempt{ticket: in.Ticket, version: in.Version, task: ti, runID: in.RunID, logical: in.LogicalTime,
				attempt: in.Attempt, deadline: deadline, live: live, due: in.StartedAt, started: in.StartedAt, held: true}
			e.track(in.ID, a)
			e.held[in.ID] = a
			e.execute(in.ID, a, e.gate(a.due))
			e.log.Warn("claimed_ahead_reclaimed", "task", in.TaskID, "run", in.RunID, "ticket", in.Ticket, "fire_at", in.StartedAt.Format(time.RFC3339Nano),
				"previous_lease_end", e.prevLeaseEnd.Format(time.RFC3339Nano))
			continue
		}
		e.track(in.ID, &attempt{ticket: in.Ticket, version: in.Version, task: ti, runID: in.RunID, logical: in.LogicalTime,
			attempt: in.Attempt, deadline: deadline, orphan: true, live: live, started: in.StartedAt})
		e.log.Warn("running_instance_reconciled", "task", in.TaskID, "run", in.RunID, "ticket", in.Ticket, "deadline", deadline.Format(time.RFC3339))
	}
	return nil
}

// dispatch moves queued instances to RUNNING, as many as the token bucket
// allows, in transactions of up to batchSize, handing each recorded one to its
// executor as soon as its batch is committed.
//
// A turn's dispatch stops after TurnBudget (the rest, still in priority
// order in the queue, goes out in the next turn), so that operator
// requests, results and timers are served between batches of a burst.
func (e *Engine) dispatch(ctx context.Context, now time.Time) error {
	began := now
	for {
		more, err := e.dispatchBatch(ctx, now)
		if err != nil || !more {
			return err
		}
		now = e.cfg.Now()
		if now.Sub(began) >= e.cfg.TurnBudget {
			e.soon()
			return nil
		}
	}
}

// batchSize is the most instances one dispatch or result transaction
// records: 1,000 on SQLite; 250 on MySQL, where every fenced transaction
// holds a shared lock on the lease row until it commits and a renewal of
// the lease waits for it. A 1,000-instance batch held it 100-300 ms on a
// loaded MariaDB, a renewal waited as long, and the lease renewal must
// never be late by a third of its TTL (1 s at --lease-ttl 3s) whatever the
// load; a quarter of that keeps its wait to tens of milliseconds.
func (e *Engine) batchSize() int {
	if e.st.Dialect() == "mysql" {
		return 250
	}
	return 1000
}

// soon asks for another turn as soon as the loop has served what else waits.
func (e *Engine) soon() {
	select {
	case e.again <- struct{}{}:
	default:
	}
}

// dispatchBatch records and starts one batch; more reports whether the queue
// still holds instances that have tokens.
func (e *Engine) dispatchBatch(ctx context.Context, now time.Time) (more bool, err error) {
	var (
		params   []store.TransitionParams
		picked   []int64
		deferred []int64
		waiting  []int64
		claimed  = map[string]int{}      // dispatches of this batch, per task, for the overlap check
		live     map[string]liveAttempts // per task, for the overlap check (built when needed)
		later    time.Time               // the earliest fire time left to judge at that time
		capped   []int64                 // held back by a concurrency cap
		reserved []*taskInfo             // pool slots taken by this batch until it is recorded
		wait     time.Duration
	)
	size := e.batchSize()
	for e.queue.Len() > 0 && len(params) < size {
		it, _ := e.queue.Pop()
		p := e.pending[it.Value]
		if p == nil {
			continue
		}
		if !p.manual {
			if why, paused := e.pausedBy(p.task); paused {
				params = append(params, store.TransitionParams{InstanceID: it.Value, Version: p.version, From: p.state, To: axtype.Paused,
					Epoch: e.epoch, Now: now, Actor: Actor, Reason: "due while " + why})
				picked = append(picked, it.Value)
				continue
			}
			if p.kind == axtype.RunSchedule { // backfill: overlap is a policy of the live schedule; neither held back nor counted
				due := time.UnixMilli(p.at)
				running, held := 0, 0
				if e.runningByTask[p.task.id] > 0 {
					if live == nil {
						live = e.liveByTask()
					}
					running, held = live[p.task.id].at(due)
				}
				switch overlapDecide(p.task.def.Overlap, due, now, p.task.backlog, running, held, claimed[p.task.id]) {
				case overlapLater:
					waiting = append(waiting, it.Value)
					if later.IsZero() || due.Before(later) {
						later = due
					}
					continue
				case overlapWait:
					waiting = append(waiting, it.Value)
					continue
				case overlapSkip:
					params = append(params, store.TransitionParams{InstanceID: it.Value, Version: p.version, From: p.state, To: axtype.Failed,
						Set:   store.Changes{NextFireAt: &time.Time{}, Error: ptr("skipped: the previous instance was still running (overlap: skip)")},
						Epoch: e.epoch, Now: now, Actor: Actor, Reason: "skipped by overlap policy skip: previous instance still running",
						Action: &store.Action{Actor: Actor, Action: "overlap_skip", TaskID: p.task.id, Reason: "previous instance still running"}})
					picked = append(picked, it.Value)
					continue
				}
			}
		}
		if why := e.pool.full(p.task); why != "" {
			// Over a concurrency cap: it waits in the queue, in priority order,
			// until an attempt ends; its deadline starts when it starts.
			p.capped = why
			capped = append(capped, it.Value)
			if len(capped) > 1000 {
				break
			}
			continue
		}
		ok, w := true, time.Duration(0)
		if e.brk.Factor(p.task.id) < 1 { // breaker open: the task's own, reduced rate first
			ok, w = e.tripped.Take(p.task.id, now)
		}
		if ok {
			ok, w = e.bucket.Take(p.task.def.Group, now)
		}
		if !ok {
			p.throttled = true
			deferred = append(deferred, it.Value)
			if wait == 0 || w < wait {
				wait = w
			}
			if len(deferred) > 1000 {
				break
			}
			continue
		}
		ticket, att, zero := newTicket(), p.attempt+1, time.Time{}
		why := fmt.Sprintf("dispatch attempt %d", att)
		started := now
		if due := time.UnixMilli(p.at); due.After(now) {
			started = due // claimed ahead: it starts at its fire time
			why = fmt.Sprintf("dispatch attempt %d, claimed ahead to start at %s", att, due.UTC().Format("15:04:05.000"))
		}
		p.capped = ""
		e.pool.add(p.task) // reserved while the batch is recorded, so the caps hold within it
		reserved = append(reserved, p.task)
		params = append(params, store.TransitionParams{InstanceID: it.Value, Version: p.version, From: p.state, To: axtype.Running,
			Set:   store.Changes{Ticket: &ticket, Attempt: &att, StartedAt: &started, NextFireAt: &zero, Executor: ptr(executorOf(p.task.def)), Error: ptr("")},
			Epoch: e.epoch, Now: now, Actor: Actor, Reason: why,
			Action: &store.Action{Actor: Actor, Action: "dispatch", Pipeline: p.task.def.Pipeline, TaskID: p.task.id, Ticket: ticket, Reason: why,
				Detail: dueDetail(p.at)},
		})
		picked = append(picked, it.Value)
		if p.kind == axtype.RunSchedule {
			claimed[p.task.id]++
		}
	}
	for _, id := range waiting { // overlap: wait — behind the running instance
		p := e.pending[id]
		e.queue.Push(p.task.def.Priority, p.at, id)
	}
	for _, id := range deferred {
		p := e.pending[id]
		e.queue.Push(p.task.def.Priority, p.at, id)
	}
	e.m.bufferDepth.Set(float64(len(deferred)))
	if wait > 0 {
		// Wake for a handful of tokens rather than each one, so that a rate
		// limit still dispatches in batches (100/s: ten per transaction).
		wait = max(wait, 100*time.Millisecond)
		e.wake.Reset(wait)
		e.logBuffer(now)
	}
	if !later.IsZero() && (wait == 0 || later.Sub(now) < wait) {
		e.wake.Reset(later.Sub(now)) // judge the overlap at the fire time
	}
	for _, id := range capped {
		p := e.pending[id]
		e.queue.Push(p.task.def.Priority, p.at, id)
	}
	e.m.poolWaiting.Set(float64(len(capped)))
	if len(params) == 0 {
		return false, nil
	}
	// A skip (overlap) fails what waited on it in its run, in the same transaction.
	var settled []release
	res, relRes, err := e.w().TransitionBatchThen(ctx, params, e.settleAfter(ctx, params, now, &settled))
	for _, t := range reserved {
		e.pool.remove(t) // the recorded ones are counted by track below
	}
	if err != nil {
		clear(e.runs)
		// Nothing was recorded, so nothing runs: put them back for the next try.
		for _, id := range picked {
			p := e.pending[id]
			e.queue.Push(p.task.def.Priority, p.at, id)
		}
		return false, fmt.Errorf("engine: record dispatch of %d instance(s): %w", len(params), err)
	}
	dispatched := 0
	for i, r := range res {
		id := picked[i]
		p := e.pending[id]
		delete(e.pending, id)
		if r.Err != nil {
			// Paused, changed or taken by another caller since it was loaded: drop the trigger (R9).
			e.log.Info("dispatch_dropped", "task", p.task.id, "run", p.runID, "instance", id, "reason", r.Err.Error())
			e.dropCachedRunOf(id) // its cached state is stale: read the run again when needed
			continue
		}
		if to := params[i].To; to != axtype.Running {
			e.log.Info("not_dispatched", "task", p.task.id, "run", p.runID, "instance", id, "state", string(to), "reason", params[i].Reason)
			e.dropCachedRunOf(id)
			continue
		}
		started := *params[i].Set.StartedAt
		a := &attempt{ticket: *params[i].Set.Ticket, version: r.Version, task: p.task, runID: p.runID, logical: p.logical,
			attempt: p.attempt + 1, deadline: started.Add(p.task.def.Timeout), live: p.kind == axtype.RunSchedule, kind: p.kind, due: time.UnixMilli(p.at),
			started: started}
		e.track(id, a)
		if rs := e.runs[p.runID]; rs != nil {
			if ref := rs.inst[p.task.id]; ref != nil {
				ref.state, ref.version = axtype.Running, r.Version
			}
		}
		if p.throttled {
			e.m.bufferWait.Observe(max(now.Sub(a.due).Seconds(), 0))
		}
		dispatched++
		if started.After(now) {
			a.held = true
			e.held[id] = a
			e.execute(id, a, e.gate(a.due))
			continue
		}
		e.execute(id, a, nil)
	}
	if len(settled) > 0 {
		e.released(ctx, settled, relRes)
	}
	e.statsMu.Lock()
	e.stats.Dispatched += int64(dispatched)
	e.statsMu.Unlock()
	e.m.dispatches.Add(float64(dispatched))
	e.armHeld()
	return len(params) == size && wait == 0 && len(waiting) == 0 && len(capped) == 0, nil
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

// logBuffer reports, at most every 5 s, how many due instances wait for
// tokens and how long the oldest has waited (R13: visible, never dropped).
func (e *Engine) logBuffer(now time.Time) {
	if now.Before(e.bufferLogged.Add(5 * time.Second)) {
		return
	}
	e.bufferLogged = now
	oldest := now
	for _, p := range e.pending {
		if t := time.UnixMilli(p.at); t.Before(oldest) {
			oldest = t
		}
	}
	e.log.Info("rate_limited", "buffer_depth", e.queue.Len(), "oldest_wait", now.Sub(oldest).Round(time.Millisecond).String(),
		"global_rate", e.bucket.Limits().Global)
}

// startHeld hands the attempts claimed ahead whose fire time has come to
// their executors — only while the lease is safely held: a process that
// stalled past its lease starts nothing (the next primary sees RUNNING
// instances it did not start and lets them time out, never running them
// twice).
func (e *Engine) startHeld(now time.Time) {
	if len(e.gates) == 0 || !e.leader(now) {
		return
	}
	var opened []chan struct{}
	for due, g := range e.gates {
		if due <= now.UnixMilli() {
			opened = append(opened, g) // every attempt held for this fire time starts at once
			delete(e.gates, due)
		}
	}
	if len(opened) == 0 {
		return
	}
	var starting []*attempt
	var ids []int64
	for _, id := range sortedIDs(e.held) {
		if a := e.held[id]; !a.due.After(now) {
			delete(e.held, id)
			a.held = false
			starting, ids = append(starting, a), append(ids, id)
		}
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
			a.slot = e.pool.enqueue(a.task.def.Priority, a.due.UnixMilli(), ids[i])
		} else {
			e.started(a, now) // a local one starts in its goroutine, when it has a slot
		}
	}
	for _, g := range opened {
		close(g)
	}
	e.armHeld()
}

// gate returns the channel that opens the attempts held for fire time due.
func (e *Engine) gate(due time.Time) <-chan struct{} {
	g := e.gates[due.UnixMilli()]
	if g == nil {
		g = make(chan struct{})
		e.gates[due.UnixMilli()] = g
	}
	return g
}

// armHeld wakes the loop at the earliest fire time of the held attempts.
func (e *Engine) armHeld() {
	first := int64(0)
	for due := range e.gates {
		if first == 0 || due < first {
			first = due
		}
	}
	if first != 0 {
		e.heldWake.Reset(max(time.UnixMilli(first).Sub(e.cfg.Now()), 0))
	}
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
	for _, id := range e.pool.shut() {
		why[id] = "interrupted by shutdown: it waited in the start queue for a slot (--max-running) and never started; given back, the attempt not counted"
	}
	for id, a := range e.held {
		a.cancel(errNotStartedByShutdown) // its goroutine returns without running
		why[id] = "interrupted by shutdown: claimed ahead, but the scheduler stopped before its fire time; not started, given back due at " + a.due.UTC().Format(time.RFC3339)
	}
	clear(e.held)
	for _, id := range sortedIDs(why) {
		a := e.running[id]
		if a == nil {
			continue
		}
		a.interrupted = true
		e.unapplied = append(e.unapplied, outcome{instance: id, notStarted: why[id],
			res: runner.Result{Ticket: a.ticket, Status: runner.StatusFailed, Error: why[id]}})
	}
	if len(why) == 0 {
		return
	}
	if err := e.applyAll(ctx); err != nil {
		// They stay RUNNING: the next primary times them out (unknown outcome) and retries per policy.
		e.log.Error("give_back_failed", "instances", len(why), "err", err)
		return
	}
	e.log.Info("given_back_unstarted", "instances", len(why))
}

// started records that an attempt went to its executor. Local attempts
// start in their own goroutines (see execute), so it is safe for
// concurrent use.
func (e *Engine) started(a *attempt, now time.Time) {
	e.observeStart(a, now)
	e.log.Info("dispatched", "task", a.task.id, "run", a.runID, "ticket", a.ticket, "attempt", a.attempt)
	e.emit(Event{Kind: "started", Task: a.task.id, Run: a.runID, Logical: a.logical, Ticket: a.ticket})
}

// begin takes in, on the loop, the start of a local attempt: from then on
// its deadline counts from when it really started, not from its dispatch.
// It reports false while the attempt still waits in the start queue.
func (a *attempt) begin() bool {
	if !a.queued {
		return true
	}
	at := a.begun.Load()
	if at == 0 {
		return false
	}
	a.queued, a.deadline = false, time.Unix(0, at).Add(a.task.def.Timeout)
	return true
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
func (e *Engine) slot(ctx context.Context, a *attempt) (time.Time, error) {
	if err := e.pool.wait(ctx, a.slot); err != nil {
		return time.Time{}, err
	}
	for {
		// Held under whichever epoch is current: a lease the keeper took
		// again keeps what this process recorded (see reconcile).
		if e.Primary() {
			now := e.cfg.Now()
			a.begun.Store(now.UnixNano())
			return now, nil
		}
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			e.pool.release()
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
func (e *Engine) execute(id int64, a *attempt, gate <-chan struct{}) {
	t := a.task.def
	local := isLocal(t)
	if gate == nil && !local {
		e.started(a, e.cfg.Now())
	}
	a.queued, a.begun = local, new(atomic.Int64)
	if local && gate == nil {
		a.slot = e.pool.enqueue(t.Priority, a.due.UnixMilli(), id)
	}
	at := runner.Attempt{Pipeline: t.Pipeline, Task: t.Name, InstanceID: id, Ticket: a.ticket,
		LogicalTime: a.logical.In(e.g.Pipeline(t.Pipeline).Location), Deadline: a.deadline, Params: e.paramsOf(a.runID, t.Params),
		TicketTTL: backoff.Span(t.Retry.Count, t.Retry.Interval, t.Timeout, e.cfg.BackoffCap) + 5*time.Minute}
	ctx, cancel := context.WithCancelCause(e.execCtx)
	a.cancel = cancel
	fence, runID := e.w(), a.runID
	e.execWG.Add(1)
	go func() {
		defer e.execWG.Done()
		defer cancel(nil)
		if gate != nil {
			select {
			case <-gate: // startHeld put a local one in the start queue
			case <-ctx.Done():
				if a.slot != nil {
					e.pool.cancel(a.slot)
				}
				return
			}
		}
		if local {
			begun, err := e.slot(ctx, a)
			if errors.Is(err, errStartQueueShut) {
				return // given back by the loop (giveBack)
			}
			if err != nil {
				e.results <- outcome{instance: id, res: notStarted(ctx, a, err)}
				return
			}
			at.Deadline = begun.Add(t.Timeout)
			e.started(a, begun)
		}
		out := e.logs.start(id, a.attempt, fence)
		started := e.cfg.Now()
		res, err := e.execs[t.Executor.Kind].Execute(runner.WithOutput(ctx, out.out), at)
		// The slot is free for the next attempt in the start queue at once,
		// and for the next turn's dispatch (its result, coming next, wakes
		// the loop): a turn in between must still see this attempt running,
		// for the overlap rule, which it does until the result is applied.
		if local {
			e.pool.release()
		}
		e.free(a)
		if err != nil {
			res = runner.Result{Ticket: a.ticket, Status: runner.StatusFailed, Error: err.Error(), Permanent: true}
		}
		res.Ticket = a.ticket
		res = safeResult(res)
		logs := e.logs.end(out, res, store.AttemptRecord{InstanceID: id, Attempt: a.attempt, RunID: runID, TaskID: t.ID(), Ticket: a.ticket,
			Executor: res.Executor, Status: string(res.Status), ExitCode: res.ExitCode, Error: res.Error, StartedAt: started, EndedAt: e.cfg.Now()})
		e.results <- outcome{instance: id, res: res, logs: logs}
	}()
}

// checkTimeouts fails attempts whose deadline passed without a result (the
// scheduler's layer of R16); the executor's context has the same deadline.
func (e *Engine) checkTimeouts(ctx context.Context, now time.Time) error {
	for _, id := range sortedIDs(e.running) {
		a := e.running[id]
		if !a.begin() || now.Before(a.deadline.Add(time.Second)) {
			continue // waiting for a slot (its timeout starts when it starts), or not due
		}
		msg := fmt.Sprintf("timeout: no result within %s", a.task.def.Timeout)
		switch {
		case a.task.removed:
			msg = fmt.Sprintf("timeout: no result within %s; its task was removed from the pipeline files while it ran, so it is not retried", a.task.def.Timeout)
		case a.orphan:
			msg = fmt.Sprintf("unknown outcome: dispatched by a previous scheduler process and no result within %s", a.task.def.Timeout)
		}
		e.unapplied = append(e.unapplied, outcome{instance: id, res: runner.Result{Ticket: a.ticket, Status: runner.StatusTimeout, Error: msg}})
		a.deadline = now.Add(time.Hour) // do not queue it twice while the result waits to be recorded
	}
	return nil
}

// applyResults records the outcomes gathered so far in one transaction:
// SUCCESS, RETRYING (back through the wheel at its backoff time), FAILED or
// KILLED; then releases the downstream instances that successes unblock.
func (e *Engine) applyResults(ctx context.Context, now time.Time) error {
	if len(e.unapplied) == 0 {
		return nil
	}
	type applied struct {
		id      int64
		a       *attempt
		to      axtype.State
		refused bool
		status  string // for the results metric
	}
	var (
		params []store.TransitionParams
		meta   []applied
		closed = map[string]string{} // inbox entries to close, by ticket
	)
	batch := e.unapplied[:min(len(e.unapplied), e.batchSize())]
	// The last output and records of the attempts go in the results'
	// transaction, whether or not their results apply (a stale result's
	// attempt ran all the same).
	var logs store.LogWrite
	for _, o := range batch {
		if o.logs != nil {
			logs.Chunks = append(logs.Chunks, o.logs.Chunks...)
			logs.Trims = append(logs.Trims, o.logs.Trims...)
			logs.Attempts = append(logs.Attempts, o.logs.Attempts...)
		}
	}
	hasLogs := len(logs.Chunks)+len(logs.Trims)+len(logs.Attempts) > 0
	for _, o := range batch {
		if o.resolve != "" {
			if err := e.resolved(ctx, o, now); err != nil {
				return err
			}
			continue
		}
		if o.instance == 0 { // a result that came by ticket alone (Engine.Report)
			for id, a := range e.running {
				if a.ticket == o.res.Ticket {
					o.instance = id
					break
				}
			}
		}
		a := e.running[o.instance]
		if a == nil || a.ticket != o.res.Ticket {
			if e.inboxSeen[o.res.Ticket] {
				closed[o.res.Ticket] = "stale"
			}
			if err := e.w().AppendAction(ctx, store.Action{At: now, Actor: Actor, Action: "stale_result", InstanceID: o.instance,
				Ticket: o.res.Ticket, Reason: "result for a ticket that is not the instance's current one: ignored", Detail: string(o.res.Status)}); err != nil {
				return err
			}
			e.log.Warn("stale_result", "instance", o.instance, "ticket", o.res.Ticket, "status", string(o.res.Status))
			e.m.staleResults.Inc()
			continue
		}
		a.begin() // its deadline and duration count from its real start
		p := store.TransitionParams{InstanceID: o.instance, Version: a.version, From: axtype.Running, Epoch: e.epoch, Now: now, Actor: Actor,
			Set:    store.Changes{EndedAt: &now, Error: ptr(o.res.Error)},
			Action: &store.Action{Actor: Actor, Action: "result", Pipeline: a.task.def.Pipeline, TaskID: a.task.id, Ticket: o.res.Ticket, Detail: string(o.res.Status)}}
		if o.res.Executor != "" {
			p.Set.Executor = ptr(o.res.Executor) // which executor ran it: local:HOST or the executor's URL
			p.Action.Detail += " on " + o.res.Executor
		}
		switch {
		case a.interrupted && o.res.Status != runner.StatusSuccess:
			// Cut off by a shutdown, or never started before it: given back
			// to run again at once (or at its fire time, when claimed ahead),
			// under whichever scheduler holds the lease next; the attempt is
			// not counted.
			att, next := a.attempt-1, now
			if a.due.After(now) {
				next = a.due
			}
			p.To, p.Set.NextFireAt, p.Set.Attempt = axtype.Retrying, &next, &att
			p.Set.Error = ptr("interrupted by shutdown")
			p.Reason = cmp.Or(o.notStarted, "interrupted by shutdown: given back after the grace period, the attempt not counted")
			p.Action.Action, p.Action.Reason = "interrupted", p.Reason
			params = append(params, p)
			meta = append(meta, applied{id: o.instance, a: a, to: p.To, refused: true, status: "interrupted"})
			continue
		case o.res.Refused && now.Before(e.refusalLimit(o.instance, a, o.res.Error)):
			// No executor took it (busy, full, re-entrant, unreachable): try again
			// shortly, the attempt not counted, until the deadline of the attempt
			// first refused.
			limit := e.refusalLimit(o.instance, a, o.res.Error)
			next, att := now.Add(RefusedRetry), a.attempt-1
			if next.After(limit) {
				next = limit
			}
			p.To, p.Set.NextFireAt, p.Set.Attempt = axtype.Retrying, &next, &att
			p.Reason = "no executor took it, trying again at " + next.Format(time.RFC3339) + " (until " + limit.Format(time.RFC3339) + "): " + o.res.Error
			p.Action.Action, p.Action.Reason = "refused", o.res.Error
			params = append(params, p)
			meta = append(meta, applied{id: o.instance, a: a, to: p.To, refused: true, status: "refused"})
			continue
		case o.res.Refused:
			// Refused until its deadline: a failure like any other, retried per its policy.
			o.res.Status, o.res.Refused = runner.StatusFailed, false
			o.res.Error = fmt.Sprintf("no executor took it within its timeout of %s: %s", a.task.def.Timeout, o.res.Error)
			p.Set.Error = ptr(o.res.Error)
		}
		delete(e.watch.refused, o.instance)
		switch o.res.Status {
		case runner.StatusSuccess:
			p.To, p.Reason = axtype.Success, fmt.Sprintf("succeeded in %s", o.res.Duration.Round(time.Millisecond))
		case runner.StatusKilled:
			p.To, p.Reason = axtype.Killed, "killed"
		default:
			retries := a.task.def.Retry.Count
			if !o.res.Permanent && a.attempt <= retries {
				next := now.Add(backoff.Delay(a.attempt, a.task.def.Retry.Interval, e.cfg.BackoffCap))
				p.To, p.Set.NextFireAt = axtype.Retrying, &next
				p.Reason = fmt.Sprintf("%s: retry %d of %d at %s: %s", o.res.Status, a.attempt, retries, next.Format(time.RFC3339), o.res.Error)
				p.Action.Action = "retry"
			} else {
				p.To = axtype.Failed
				p.Reason = fmt.Sprintf("%s after %d attempt(s): %s", o.res.Status, a.attempt, o.res.Error)
				p.Action.Action = "failed"
			}
			if o.res.Status == runner.StatusTimeout {
				p.Action.Action = "timeout"
			}
			p.Action.Reason = p.Reason
		}
		params = append(params, p)
		meta = append(meta, applied{id: o.instance, a: a, to: p.To, status: string(o.res.Status)})
	}
	// The results and the downstream instances they settle in the same run
	// commit in one transaction: a success is never recorded without its
	// release, nor a failure without the failure of what waited on it (R40).
	var same []release
	seen := map[int64]bool{}
	res, relRes, err := e.w().TransitionBatchLogs(ctx, params, logs, func(res []store.BatchResult) ([]store.TransitionParams, error) {
		for i, r := range res {
			m := meta[i]
			if r.Err != nil || (m.to != axtype.Success && m.to != axtype.Failed && m.to != axtype.Killed) {
				continue
			}
			rs, err := e.run(ctx, m.a.runID)
			if err != nil {
				return nil, err
			}
			if ref := rs.inst[m.a.task.id]; ref != nil {
				ref.state, ref.version, ref.err = m.to, r.Version, *params[i].Set.Error
			}
			rel, err := e.releasable(ctx, rs, m.a.task.down, now)
			if err != nil {
				return nil, err
			}
			for _, x := range rel {
				if !seen[x.p.InstanceID] {
					seen[x.p.InstanceID] = true
					same = append(same, x)
				}
			}
		}
		ps := make([]store.TransitionParams, len(same))
		for i, x := range same {
			ps[i] = x.p
		}
		return ps, nil
	})
	if hasLogs {
		e.logs.wrote(logs, err)
	}
	if err != nil {
		clear(e.runs) // the cache saw successes that were not recorded: reload on next use
		if hasLogs && !errors.Is(err, store.ErrNotLeader) {
			// A failure to store output costs the output, never the result:
			// the next turn records the results alone.
			for i := range batch {
				batch[i].logs = nil
			}
			e.log.Warn("attempt_output_lost", "attempts", len(logs.Attempts), "err", err)
		}
		return fmt.Errorf("engine: record %d result(s): %w", len(params), err) // kept in unapplied for the next turn
	}
	e.unapplied = e.unapplied[len(batch):]
	if len(e.unapplied) > 0 {
		e.soon() // the rest in the next turn, after the lease and the API had their turn
	}
	var cross []release
	for i, r := range res {
		m := meta[i]
		if e.inboxSeen[m.a.ticket] || m.a.task.def.Executor.Kind == defs.ExecHTTP {
			closed[m.a.ticket] = "applied"
			if r.Err != nil {
				closed[m.a.ticket] = "stale"
			}
		}
		e.untrack(m.id)
		e.emit(Event{Kind: "ended", Task: m.a.task.id, Run: m.a.runID, Logical: m.a.logical, Ticket: m.a.ticket, State: m.to,
			Error: *params[i].Set.Error, Duration: now.Sub(m.a.deadline.Add(-m.a.task.def.Timeout))})
		if r.Err != nil {
			e.log.Warn("result_not_applied", "task", m.a.task.id, "run", m.a.runID, "ticket", m.a.ticket, "err", r.Err.Error())
			e.dropCachedRunOf(m.id)
			continue
		}
		e.log.Info("result_applied", "task", m.a.task.id, "run", m.a.runID, "ticket", m.a.ticket, "state", string(m.to))
		e.m.results.WithLabelValues(m.status).Inc()
		e.observeEnd(m.a, m.status, now)
		if m.status == string(runner.StatusTimeout) {
			e.m.timeouts.Inc()
		}
		switch {
		case m.to == axtype.Retrying && !m.refused:
			e.m.retries.Inc()
		case m.to == axtype.Failed:
			e.notify(Alert{Kind: AlertTaskFailed, At: now, Pipeline: m.a.task.def.Pipeline, Task: m.a.task.id, Instance: m.id, Ticket: m.a.ticket,
				Message: params[i].Reason})
		}
		if (m.to == axtype.Success || m.to == axtype.Failed) && !m.refused {
			if ch, changed := e.brk.Record(m.a.task.id, m.to == axtype.Success, now); changed {
				e.breakerChanged(ctx, ch, now)
			}
		}
		rs, err := e.run(ctx, m.a.runID)
		if err != nil {
			return err
		}
		if ref := rs.inst[m.a.task.id]; ref != nil {
			ref.state, ref.version = m.to, r.Version
		}
		if m.to == axtype.Retrying {
			att := m.a.attempt
			if m.refused {
				att--
			}
			e.enqueue(ctx, axtype.Instance{ID: m.id, RunID: m.a.runID, TaskID: m.a.task.id, State: axtype.Retrying, Version: r.Version,
				NextFireAt: *params[i].Set.NextFireAt, LogicalTime: m.a.logical, Attempt: att})
		}
		if len(m.a.task.crossDown) > 0 && (m.to == axtype.Success || m.to == axtype.Failed || m.to == axtype.Killed) {
			// Another pipeline's instances read this outcome from the store: after the commit.
			rel, err := e.releaseCross(ctx, m.a.task.crossDown, now)
			if err != nil {
				return err
			}
			cross = append(cross, rel...)
		}
	}
	e.released(ctx, same, relRes)
	e.closeInbox(ctx, closed, now)
	e.bfDirty = true
	e.statsMu.Lock()
	e.stats.Applied += int64(len(res))
	e.statsMu.Unlock()
	return e.applyReleases(ctx, cross, now)
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
func (e *Engine) applyReleases(ctx context.Context, rel []release, now time.Time) error {
	if len(rel) == 0 {
		return nil
	}
	params := make([]store.TransitionParams, len(rel))
	for i, r := range rel {
		params[i] = r.p
	}
	res, err := e.w().TransitionBatch(ctx, params)
	if err != nil {
		clear(e.runs)     // the cache may be ahead of the store: reload on next use
		e.stranded = true // the successes are recorded: find what they release again
		return fmt.Errorf("engine: release %d downstream instance(s): %w", len(rel), err)
	}
	e.released(ctx, rel, res)
	// Instances failed without running fail what waits on them in other pipelines.
	var failed []*taskInfo
	for i, r := range res {
		if r.Err == nil && rel[i].p.To == axtype.Failed {
			if ti := e.tasks[rel[i].in.TaskID]; ti != nil && len(ti.crossDown) > 0 {
				failed = append(failed, ti)
			}
		}
	}
	return e.crossAfter(ctx, failed, now)
}

// released takes the recorded outcome of releases: the cache follows, and
// scheduled instances go into the wheel.
func (e *Engine) released(ctx context.Context, rel []release, res []store.BatchResult) {
	for i, r := range res {
		if r.Err != nil {
			if errors.Is(r.Err, store.ErrConflict) {
				e.dropCachedRunOf(rel[i].p.InstanceID)
			}
			continue
		}
		in := rel[i].in
		in.State, in.Version = rel[i].p.To, r.Version
		if rs := e.runs[in.RunID]; rs != nil {
			if ref := rs.inst[in.TaskID]; ref != nil {
				ref.state, ref.version = in.State, r.Version
			}
		}
		if in.State != axtype.Scheduled {
			continue // released into a pause
		}
		e.enqueue(ctx, in)
		e.log.Debug("released", "task", in.TaskID, "run", in.RunID, "fire_at", in.NextFireAt.Format(time.RFC3339))
	}
	for _, rs := range e.runs {
		e.forgetDone(rs)
	}
}

// releaseStranded releases the WAITING instances whose upstreams in their
// run have all succeeded. A success and the release of its downstream are
// two transactions: a process killed between them, or a store error on the
// second, leaves a downstream waiting for an event that has happened
// already. It runs at start and after a failed release.
func (e *Engine) releaseStranded(ctx context.Context, now time.Time) error {
	waiting, err := e.st.Instances(ctx, store.InstanceFilter{States: []axtype.State{axtype.Waiting}, Limit: 1 << 20})
	if err != nil {
		return fmt.Errorf("engine: find stranded instances: %w", err)
	}
	byRun := map[int64][]*taskInfo{}
	for _, in := range waiting {
		// A run whose logical time is ahead has nothing succeeded yet.
		if ti := e.tasks[in.TaskID]; ti != nil && len(ti.up) > 0 && !in.LogicalTime.After(now) {
			byRun[in.RunID] = append(byRun[in.RunID], ti)
		}
	}
	var rel []release
	for _, id := range sortedIDs(byRun) {
		rs, err := e.run(ctx, id)
		if err != nil {
			return err
		}
		r, err := e.releasable(ctx, rs, byRun[id], now)
		if err != nil {
			return err
		}
		rel = append(rel, r...)
	}
	if len(rel) > 0 {
		e.log.Warn("stranded_released", "instances", len(rel))
		e.m.strandReleased.Add(float64(len(rel)))
	}
	if err := e.applyReleases(ctx, rel, now); err != nil {
		return err
	}
	e.stranded = false
	return nil
}

func (e *Engine) dropCachedRunOf(instance int64) {
	for id, rs := range e.runs {
		for _, ref := range rs.inst {
			if ref.id == instance {
				delete(e.runs, id)
				return
			}
		}
	}
}

// kindOf returns the kind of a run (cached; schedule when unknown).
func (e *Engine) kindOf(ctx context.Context, runID int64) axtype.RunKind {
	if k, ok := e.runKind[runID]; ok {
		return k
	}
	r, err := e.st.Run(ctx, runID)
	if err != nil {
		return axtype.RunSchedule
	}
	if len(e.runKind) > 100_000 {
		clear(e.runKind)
	}
	e.runKind[r.ID] = r.Kind
	return r.Kind
}
