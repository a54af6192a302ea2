package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/engine/backoff"
	"github.com/ax-sched/ax/engine/breaker"
	"github.com/ax-sched/ax/engine/bucket"
	"github.com/ax-sched/ax/engine/queue"
	"github.com/ax-sched/ax/engine/wheel"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// dispatcher owns the way from due to running: the priority queue of due
// instances, the attempts in flight (inflight.go: added at hand-out,
// removed when the completer records their end), the token buckets
// (global and group rates), the per-task breakers and the cut an open one
// puts on its task's dispatches (breaker.go), the concurrency caps and
// start queue (pool), and the attempts claimed ahead of their fire time
// with the gates that start them; and the workers: the attempts'
// goroutines (execute), their context and the wait group a shutdown waits
// on. The loop goroutine owns it, but for the pool's start queue, which
// attempt goroutines wait on under the pool's own lock, and the workers'
// context and wait group, set by the loop at a term's start and safe for
// concurrent use.
//
// Its rules: an instance leaves the queue only when no pause covers its
// task (whatever made it), the overlap policy lets it go at its fire time
// (overlap.go), a cap has room, its task's open breaker allows one more
// and the buckets a token; it is recorded SCHEDULED → RUNNING with a fresh
// ticket before any executor sees it (dispatchBatch), and handed out
// afterwards (handOut, execute). It must not judge results (the completer
// does) nor readiness (ready.go).
type dispatcher struct {
	queue queue.Queue[int64]
	// pending are the instances waiting in the planner's wheel or in the
	// queue, as the planner handed them over (expect): what a due entry
	// is admitted against, and what a dispatch starts.
	pending map[int64]*pend
	running inflight // the attempts in flight (inflight.go)
	bucket  *bucket.Bucket
	brk     *breaker.Breaker        // per-task circuit breakers, fed by the completer; kept across terms
	pool    *pool                   // concurrency caps and what runs against them
	held    map[int64]*attempt      // claimed ahead, waiting for their fire time (also in running)
	gates   map[int64]chan struct{} // by fire time (Unix ms): closed to start the attempts held for it
	// wake is armed for the next token of a rate limit or the fire time at
	// which the overlap rule judges an instance; heldWake for the earliest
	// gate; again asks for the next turn when one stopped at its budget.
	wake, heldWake *time.Timer
	again          chan struct{}
	bufferLogged   time.Time
	// handOutRetry: the hand-out of the held attempts whose gates opened
	// could not be recorded; startHeld tries again from then on.
	handOutRetry time.Time
	// handOutErr is why the last hand-out could not be recorded, nil once
	// one is: a turn that ran without an error of its own still failed to
	// write (see Engine.turn).
	handOutErr error

	// The workers: the executors, the context of the term's attempts, and
	// the goroutines running them, which a shutdown waits for.
	execs   Executors
	execCtx context.Context
	execWG  sync.WaitGroup
	// routes is the executor registry as the sweep last read it (unrouted).
	routes []store.Executor

	cfg  Config
	host dispatcherHost
	// res is the resolver, which settles what a skip fails, and whose run
	// cache follows the starts.
	res      *resolver
	paused   pauseCover      // the pauses in force (the operator requests')
	sched    *inForce        // the schedule in force (snapshot.go)
	settings dispatcherStore // the dialect (the size of a batch), the limits set at run time
	log      *slog.Logger
	logs     *logWriter // task output, written by the attempts
	m        *metrics
}

// dispatcherHost is what the dispatcher asks of the other components.
// Primary, report, observeStart and emit are called from the attempts'
// goroutines as well: they are safe for concurrent use. The others are
// called on the loop.
type dispatcherHost interface {
	fenced
	leader(now time.Time) bool // the lease safely held, judged on the loop
	Primary() bool             // the same, from an attempt's goroutine
	released(ctx context.Context, rel []release, res []store.BatchResult)
	report(o outcome)
	countDispatched(n int) // Stats.Dispatched
	queueWaitOf(t *taskInfo) prometheus.Observer
	observeStart(a *attempt, now time.Time)
	emit(ev Event)
	traceParent(ev Event) string
	publishLimits(l Limits) // Stats.Limits
}

// dispatcherStore is what the dispatcher asks of the store: its dialect
// (the size of a batch) and the limits set at run time, in its settings.
type dispatcherStore interface {
	settingsReader
	Dialect() string
	// RunOutputs reads the outputs of a run's upstream tasks (upstream.go).
	RunOutputs(ctx context.Context, runID int64, taskIDs []string) (map[string]map[string]string, error)
}

// newTerm gives the dispatcher an empty queue and fresh limits for a term
// as primary (the store is read again into it).
func (d *dispatcher) newTerm(cfg Config, now time.Time) {
	d.clearWaiting()
	d.running = newInflight()
	d.held, d.gates = map[int64]*attempt{}, map[int64]chan struct{}{}
	d.handOutErr = nil
	d.bucket = bucket.New(bucket.Limits{Global: cfg.DispatchRate, Groups: cfg.GroupRates}, now)
	d.pool = newPool(Pools{MaxRunning: cfg.MaxRunning, GroupMaxRunning: cfg.GroupMaxRunning}, cfg.Now)
}

// clearWaiting forgets what waits: the queue and the instances the
// planner handed over, which a new term loads again from the store.
func (d *dispatcher) clearWaiting() {
	d.queue = queue.Queue[int64]{}
	d.pending = map[int64]*pend{}
}

// waiting reports whether instance id waits here at version.
func (d *dispatcher) waiting(id, version int64) bool {
	p := d.pending[id]
	return p != nil && p.version == version
}

// expect takes instance id, waiting in the planner's wheel, or into the
// queue at once when dueNow.
func (d *dispatcher) expect(id int64, p *pend, dueNow bool) {
	if dueNow {
		d.queue.Push(p.task.def.Priority, p.at, id)
	}
	d.pending[id] = p
}

// admit moves the wheel's entries that came due into the queue, in
// priority order; an entry whose instance changed since it was loaded (a
// newer version, or gone) is dropped.
func (d *dispatcher) admit(due []wheel.Entry) {
	for _, en := range due {
		if p := d.pending[en.ID]; p != nil && p.version == en.Version {
			d.queue.Push(p.task.def.Priority, en.At, en.ID)
		}
	}
}

// forget drops instance id from what waits (it was dispatched, or changed
// by a request), and returns what was known of it; a stale wheel or queue
// entry left behind is dropped when due.
func (d *dispatcher) forget(id int64) *pend {
	p := d.pending[id]
	delete(d.pending, id)
	return p
}

// rebind points what waits at the tasks of a new graph (tasks); an
// instance of a removed task, or of a run the reload dropped (droppedRun),
// is no longer loaded.
func (d *dispatcher) rebind(tasks map[string]*taskInfo, droppedRun map[int64]bool) {
	for id, p := range d.pending {
		nt := tasks[p.task.id]
		if nt == nil || droppedRun[p.runID] {
			delete(d.pending, id)
			continue
		}
		p.task = nt
	}
}

// inFlight reports whether the attempt of instance id is in flight.
func (d *dispatcher) inFlight(id int64) bool { return d.running.get(id) != nil }

// soon asks for another turn as soon as the loop has served what else waits.
func (d *dispatcher) soon() {
	select {
	case d.again <- struct{}{}:
	default:
	}
}

// gate returns the channel that opens the attempts held for fire time due.
func (d *dispatcher) gate(due time.Time) <-chan struct{} {
	g := d.gates[due.UnixMilli()]
	if g == nil {
		g = make(chan struct{})
		d.gates[due.UnixMilli()] = g
	}
	return g
}

// armHeld wakes the loop at the earliest fire time of the held attempts.
func (d *dispatcher) armHeld(now time.Time) {
	first := int64(0)
	for due := range d.gates {
		if first == 0 || due < first {
			first = due
		}
	}
	if first != 0 {
		d.heldWake.Reset(max(time.UnixMilli(first).Sub(now), 0))
	}
}

// dispatch moves queued instances to RUNNING, as many as the token bucket
// allows, in transactions of up to batchSize, handing each recorded one to its
// executor as soon as its batch is committed.
//
// A turn's dispatch stops after TurnBudget (the rest, still in priority
// order in the queue, goes out in the next turn), so that operator
// requests, results and timers are served between batches of a burst.
func (d *dispatcher) dispatch(ctx context.Context, now time.Time) error {
	left, err := withinBudget(now, d.cfg.TurnBudget, d.cfg.Now, func(now time.Time) (bool, error) {
		return d.dispatchBatch(ctx, now)
	})
	if left {
		d.soon() // the next turn goes on with it
	}
	return err
}

// withinBudget is the rule of a turn's budget: it calls step (with the
// time) until step reports nothing more to do or fails, or until budget
// has passed since began, reading the clock after each step; left reports
// that it stopped on the budget with work still to do. One step always
// runs, so a turn makes progress however slow the store.
func withinBudget(began time.Time, budget time.Duration, clock func() time.Time, step func(time.Time) (bool, error)) (left bool, err error) {
	now := began
	for {
		more, err := step(now)
		if err != nil || !more {
			return false, err
		}
		now = clock()
		if now.Sub(began) >= budget {
			return true, nil
		}
	}
}

// batchSize is the most instances one dispatch or result transaction
// records: 1,000 on SQLite; 250 on MySQL and PostgreSQL, where every fenced transaction
// holds a shared lock on the lease row until it commits and a renewal of
// the lease waits for it. A 1,000-instance batch held it 100-300 ms on a
// loaded MariaDB, a renewal waited as long, and the lease renewal must
// never be late by a third of its TTL (1 s at --lease-ttl 3s) whatever the
// load; a quarter of that keeps its wait to tens of milliseconds.
func (d *dispatcher) batchSize() int {
	if d.settings.Dialect() != "sqlite" {
		return 250
	}
	return 1000
}

// batchPlan is a dispatch batch as planned from the queue: the transitions
// to record, and what stays queued and why.
type batchPlan struct {
	params   []store.TransitionParams
	picked   []int64                 // the instance of each of params
	deferred []int64                 // held back by a token bucket
	waiting  []int64                 // held back by the overlap rule
	capped   []int64                 // held back by a concurrency cap
	unrouted []int64                 // held back: no executor could take it (unrouted)
	claimed  map[string]int          // dispatches of this batch, per task, for the overlap check
	live     map[string]liveAttempts // per task, for the overlap check (built when needed)
	later    time.Time               // the earliest fire time left to judge at that time
	reserved []*taskInfo             // pool slots taken by this batch until it is recorded
	wait     time.Duration           // until the next token
}

// dispatchBatch records and starts one batch; more reports whether the queue
// still holds instances that have tokens.
func (d *dispatcher) dispatchBatch(ctx context.Context, now time.Time) (more bool, err error) {
	size := d.batchSize()
	b := &batchPlan{claimed: map[string]int{}}
	for d.queue.Len() > 0 && len(b.params) < size {
		it, _ := d.queue.Pop()
		if p := d.pending[it.Value]; p != nil && d.plan(b, it.Value, p, now) {
			break
		}
	}
	d.requeue(b, now)
	if len(b.params) == 0 {
		return false, nil
	}
	// A skip (overlap) fails what waited on it in its run, in the same transaction.
	var settled []release
	// Where each start is handed out, or that it is held, recorded with it (claimRecords).
	res, relRes, err := d.host.w().TransitionBatchLogs(ctx, b.params, store.LogWrite{Procs: d.claimRecords(b, now)}, d.res.settleAfter(ctx, b.params, now, &settled))
	for _, t := range b.reserved {
		d.pool.remove(t) // the recorded ones are counted by track below
	}
	if err != nil {
		d.res.runs.invalidate()
		// Nothing was recorded, so nothing runs: put them back for the next try.
		d.undoStarts(b, nil, now)
		d.pushBack(b.picked)
		return false, fmt.Errorf("engine: record dispatch of %d instance(s): %w", len(b.params), err)
	}
	d.undoStarts(b, res, now)
	dispatched := 0
	for i, r := range res {
		if d.handOut(b, i, r, now) {
			dispatched++
		}
	}
	if len(settled) > 0 {
		d.host.released(ctx, settled, relRes)
	}
	d.host.countDispatched(dispatched)
	d.m.dispatches.Add(float64(dispatched))
	d.armHeld(d.cfg.Now())
	return len(b.params) == size && b.wait == 0 && len(b.waiting) == 0 && len(b.capped) == 0 && len(b.unrouted) == 0, nil
}

// undoStarts takes back from the breakers the starts of batch b that were
// counted when planned (Dispatched) and not recorded: all of them when the
// batch failed (res nil), else those the store refused.
func (d *dispatcher) undoStarts(b *batchPlan, res []store.BatchResult, now time.Time) {
	for i, p := range b.params {
		if p.To == axtype.Running && (res == nil || res[i].Err != nil) {
			d.brk.Undispatched(d.pending[b.picked[i]].task.id, now)
		}
	}
}

// plan judges queued instance id for batch b: paused, held back by its
// overlap policy, a cap or a bucket, or dispatched. It reports whether the
// batch should stop taking from the queue (too many held back at once).
func (d *dispatcher) plan(b *batchPlan, id int64, p *pend, now time.Time) (stop bool) {
	// The pause rule holds whatever made the instance (a fire, a trigger, a
	// rerun, a backfill, a retry): it waits PAUSED until the resume.
	if why, paused := d.paused.by(p.task); paused {
		b.params = append(b.params, store.TransitionParams{InstanceID: id, Version: p.version, From: p.state, To: axtype.Paused,
			Epoch: d.host.termEpoch(), Now: now, Actor: Actor, Reason: "due while " + why})
		b.picked = append(b.picked, id)
		return false
	}
	if d.disabledSkip(b, id, p, now) {
		return false
	}
	// Backfill: overlap is a policy of the live schedule; neither held back nor counted.
	if !p.manual && p.kind == axtype.RunSchedule && d.overlapHolds(b, id, p, now) {
		return false
	}
	if why := d.unrouted(p.task, now); why != "" {
		// Every executor that could take it is excluded: it waits in the
		// queue, never sent, until one is heard from again.
		p.unrouted = why
		b.unrouted = append(b.unrouted, id)
		return len(b.unrouted) > 1000
	}
	p.unrouted = ""
	if why := d.pool.full(p.task); why != "" {
		// Over a concurrency cap: it waits in the queue, in priority order,
		// until an attempt ends; its deadline starts when it starts.
		p.capped = why
		b.capped = append(b.capped, id)
		return len(b.capped) > 1000
	}
	if d.breakerHolds(b, id, p, now) {
		return len(b.deferred) > 1000
	}
	ok, w := d.bucket.Take(p.task.def.Group, now)
	if !ok {
		p.throttled = true
		b.deferred = append(b.deferred, id)
		if b.wait == 0 || w < b.wait {
			b.wait = w
		}
		return len(b.deferred) > 1000
	}
	p.capped, p.cut = "", false
	d.brk.Dispatched(p.task.id, now) // what an open breaker allows, and what it will measure its cut against
	d.pool.add(p.task)               // reserved while the batch is recorded, so the caps hold within it
	b.reserved = append(b.reserved, p.task)
	b.params = append(b.params, startTransition(id, p, d.host.termEpoch(), now))
	b.picked = append(b.picked, id)
	if p.kind == axtype.RunSchedule {
		b.claimed[p.task.id]++
	}
	return false
}

// disabledSkip ends, not started, the first attempt of an operator's run
// of a pipeline disabled since it was triggered (a run deferred with --in
// or a time to come): a disabled pipeline starts nothing new, and the
// reason is recorded on the instance and in the action log.
func (d *dispatcher) disabledSkip(b *batchPlan, id int64, p *pend, now time.Time) bool {
	if p.kind != axtype.RunManual || p.attempt > 0 || p.state != axtype.Scheduled || p.task.disabled == "" {
		return false
	}
	why := "not run: " + p.task.disabled
	b.params = append(b.params, store.TransitionParams{InstanceID: id, Version: p.version, From: p.state, To: axtype.Failed,
		Set:   store.Changes{NextFireAt: &time.Time{}, Error: ptr(why)},
		Epoch: d.host.termEpoch(), Now: now, Actor: Actor, Reason: why,
		Action: &store.Action{Actor: Actor, Action: "disabled_skip", Pipeline: p.task.def.Pipeline, TaskID: p.task.id, Reason: why}})
	b.picked = append(b.picked, id)
	return true
}

// overlapHolds applies the overlap policy (overlapDecide) to schedule
// instance id at its fire time: it reports whether the instance is held
// back (to judge later, or queued behind the running one) or skipped,
// rather than dispatched.
func (d *dispatcher) overlapHolds(b *batchPlan, id int64, p *pend, now time.Time) bool {
	due := time.UnixMilli(p.at)
	running, held := 0, 0
	if d.running.live(p.task.id) > 0 {
		if b.live == nil {
			b.live = d.liveByTask()
		}
		running, held = b.live[p.task.id].at(due)
	}
	// A retry, or an operator's rerun of an instance that ran (attempt > 0
	// while SCHEDULED), is not a fire: it waits behind a running attempt.
	notAFire := p.state == axtype.Retrying || p.attempt > 0
	switch overlapDecide(p.task.def.Overlap, due, now, p.task.backlog, running, held, b.claimed[p.task.id], notAFire) {
	case overlapLater:
		b.waiting = append(b.waiting, id)
		if b.later.IsZero() || due.Before(b.later) {
			b.later = due
		}
	case overlapWait:
		b.waiting = append(b.waiting, id)
	case overlapSkip:
		b.params = append(b.params, store.TransitionParams{InstanceID: id, Version: p.version, From: p.state, To: axtype.Failed,
			Set:   store.Changes{NextFireAt: &time.Time{}, Error: ptr("skipped: the previous instance was still running (overlap: skip)")},
			Epoch: d.host.termEpoch(), Now: now, Actor: Actor, Reason: "skipped by overlap policy skip: previous instance still running",
			Action: &store.Action{Actor: Actor, Action: "overlap_skip", TaskID: p.task.id, Reason: "previous instance still running"}})
		b.picked = append(b.picked, id)
	default:
		return false
	}
	return true
}

// startTransition is the SCHEDULED or RETRYING → RUNNING of instance id
// with a fresh ticket: started now, or, claimed ahead, at its fire time.
func startTransition(id int64, p *pend, epoch int64, now time.Time) store.TransitionParams {
	ticket, zero := newTicket(), time.Time{}
	att, counted := nextAttempt(p.attempt, p.counted)
	why := fmt.Sprintf("dispatch attempt %d", att)
	started := now
	if due := time.UnixMilli(p.at); due.After(now) {
		started = due // claimed ahead: it starts at its fire time
		why = fmt.Sprintf("dispatch attempt %d, claimed ahead to start at %s", att, due.UTC().Format("15:04:05.000"))
	}
	return store.TransitionParams{InstanceID: id, Version: p.version, From: p.state, To: axtype.Running,
		Set:   store.Changes{Ticket: &ticket, Attempt: &att, Counted: &counted, StartedAt: &started, NextFireAt: &zero, Executor: ptr(executorOf(p.task.def)), Error: ptr("")},
		Epoch: epoch, Now: now, Actor: Actor, Reason: why,
		Action: &store.Action{Actor: Actor, Action: "dispatch", Pipeline: p.task.def.Pipeline, TaskID: p.task.id, Ticket: ticket, Reason: why,
			Detail: dueDetail(p.at)},
	}
}

// claimRecords are the procs rows recorded with the starts of batch b, all
// naming this scheduler process: held, under this term's epoch, for an
// attempt claimed ahead of its fire time (startHeld records the hand-out
// before it starts), and, for a local attempt started now, the process it
// lives in (a function) or is killed with (a command, until its group is
// recorded).
func (d *dispatcher) claimRecords(b *batchPlan, now time.Time) []store.ProcRecord {
	var out []store.ProcRecord
	for i, p := range b.params {
		if p.To != axtype.Running || p.Set.StartedAt == nil || p.Set.Ticket == nil {
			continue
		}
		pd := d.pending[b.picked[i]]
		kind := store.ProcServer
		switch {
		case p.Set.StartedAt.After(now):
			kind = store.ProcHeld
		case !isLocal(pd.task.def):
			continue
		}
		self := runner.Self()
		out = append(out, store.ProcRecord{Ticket: *p.Set.Ticket, InstanceID: p.InstanceID, RunID: pd.runID, Host: self.Host, Boot: self.Boot,
			PidNS: self.PidNS, Pgid: self.Pgid, Start: self.Start, At: now, Kind: kind, Epoch: d.host.termEpoch()})
	}
	return out
}

// pushBack puts instances back into the queue, in their priority order.
func (d *dispatcher) pushBack(ids []int64) {
	for _, id := range ids {
		p := d.pending[id]
		d.queue.Push(p.task.def.Priority, p.at, id)
	}
}

// requeue puts back what batch b held back, and arms the loop's wake for
// the next token or the next fire time the overlap rule judges.
func (d *dispatcher) requeue(b *batchPlan, now time.Time) {
	d.pushBack(b.waiting) // overlap: wait — behind the running instance
	d.pushBack(b.deferred)
	d.m.bufferDepth.Set(float64(len(b.deferred)))
	if b.wait > 0 {
		// Wake for a handful of tokens rather than each one, so that a rate
		// limit still dispatches in batches (100/s: ten per transaction).
		b.wait = max(b.wait, 100*time.Millisecond)
		d.wake.Reset(b.wait)
		d.logBuffer(now)
	}
	if !b.later.IsZero() && (b.wait == 0 || b.later.Sub(now) < b.wait) {
		d.wake.Reset(b.later.Sub(now)) // judge the overlap at the fire time
	}
	d.pushBack(b.capped)
	d.m.poolWaiting.Set(float64(len(b.capped)))
	d.pushBack(b.unrouted)
}

// handOut takes the recorded outcome r of transition i of batch b: a
// recorded start is tracked and handed to its executor (at once, or at its
// fire time when claimed ahead); it reports whether one was.
func (d *dispatcher) handOut(b *batchPlan, i int, r store.BatchResult, now time.Time) bool {
	id := b.picked[i]
	p := d.forget(id)
	if r.Err != nil {
		// Paused, changed or taken by another caller since it was loaded: drop the trigger.
		d.log.Info("dispatch_dropped", "task", p.task.id, "run", p.runID, "instance", id, "reason", r.Err.Error())
		d.res.runs.dropRunOf(id) // its cached state is stale: read the run again when needed
		return false
	}
	if to := b.params[i].To; to != axtype.Running {
		d.log.Info("not_dispatched", "task", p.task.id, "run", p.runID, "instance", id, "state", string(to), "reason", b.params[i].Reason)
		d.res.runs.dropRunOf(id)
		return false
	}
	started := *b.params[i].Set.StartedAt
	a := &attempt{ticket: *b.params[i].Set.Ticket, version: r.Version, task: p.task, runID: p.runID, logical: p.logical,
		attempt: *b.params[i].Set.Attempt, counted: *b.params[i].Set.Counted, deadline: deadlineAfter(started, p.task.def), live: p.kind == axtype.RunSchedule, kind: p.kind, due: time.UnixMilli(p.at),
		started: started}
	d.track(id, a)
	d.res.runs.dispatched(p.runID, p.task.id, r.Version, a.attempt)
	if p.throttled {
		d.m.bufferWait.Observe(max(now.Sub(a.due).Seconds(), 0))
	}
	if started.After(now) {
		a.held, a.claimEpoch = true, d.host.termEpoch()
		d.held[id] = a
		d.execute(id, a, d.gate(a.due))
		return true
	}
	d.execute(id, a, nil)
	return true
}

// logBuffer reports, at most every 5 s, how many due instances wait for
// tokens and how long the oldest has waited: a rate limit delays
// instances visibly and never drops one.
func (d *dispatcher) logBuffer(now time.Time) {
	if now.Before(d.bufferLogged.Add(5 * time.Second)) {
		return
	}
	d.bufferLogged = now
	oldest := now
	for _, p := range d.pending {
		if t := time.UnixMilli(p.at); t.Before(oldest) {
			oldest = t
		}
	}
	d.log.Info("rate_limited", "buffer_depth", d.queue.Len(), "oldest_wait", now.Sub(oldest).Round(time.Millisecond).String(),
		"global_rate", d.bucket.Limits().Global)
}

// RefusedRetry is how long after a refusal by every executor (busy, full,
// re-entrant, unreachable) an instance is offered again.
const RefusedRetry = 5 * time.Second

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

// started records that an attempt went to its executor. Local attempts
// start in their own goroutines (see execute), so it is safe for
// concurrent use.
func (d *dispatcher) started(a *attempt, now time.Time) {
	d.host.observeStart(a, now)
	d.log.Info("dispatched", "task", a.task.id, "run", a.runID, "ticket", a.ticket, "attempt", a.attempt)
	ev := a.event("started", now)
	ev.Started = now
	d.host.emit(ev)
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
	a.instance = id
	if gate == nil && !local {
		d.started(a, d.cfg.Now())
	}
	a.queued, a.begun = local, new(atomic.Int64)
	if local && gate == nil {
		a.slot = d.pool.enqueue(t.Priority, a.due.UnixMilli(), id)
	}
	at := runner.Attempt{Pipeline: t.Pipeline, Task: t.Name, InstanceID: id, Ticket: a.ticket,
		LogicalTime: a.logical.In(d.sched.g.Pipeline(t.Pipeline).Location), Deadline: a.deadline, Params: d.sched.g.Pipeline(t.Pipeline).TypedParams(d.res.runs.paramsOf(a.runID, t.Params)),
		TicketTTL: backoff.SpanOf(t.Retry, t.Timeout, d.cfg.BackoffCap) + 5*time.Minute}
	at.TraceParent = d.host.traceParent(a.event("started", time.Time{}))
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
		res, err := d.run(xctx, at, t, runID)
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
			Executor: res.Executor, Argv: res.Argv, Status: string(res.Status), ExitCode: res.ExitCode, Error: res.Error, StartedAt: started, EndedAt: d.cfg.Now(), Outputs: res.Outputs})
		d.host.report(outcome{instance: id, res: res, logs: logs})
	}()
}

// errNotStartedByShutdown is why an attempt claimed ahead did not start:
// the scheduler stopped before its fire time.
var errNotStartedByShutdown = errors.New("engine: stopped before its fire time")

// unstarted withdraws, at shutdown, the attempts recorded RUNNING that never
// started: claimed ahead of a fire time still to come, or waiting in the
// start queue for a slot. Each is marked interrupted, and its outcome
// returned for the completer to give it back.
func (d *dispatcher) unstarted() []outcome {
	why := map[int64]string{}
	for _, id := range d.pool.shut() {
		why[id] = "interrupted by shutdown: it waited in the start queue for a slot (--max-running) and never started; given back, the attempt not counted"
	}
	for id, a := range d.held {
		a.cancel(errNotStartedByShutdown) // its goroutine returns without running
		why[id] = "interrupted by shutdown: claimed ahead, but the scheduler stopped before its fire time; not started, given back due at " + a.due.UTC().Format(time.RFC3339)
	}
	clear(d.held)
	var out []outcome
	for _, id := range sortedIDs(why) {
		a := d.running.get(id)
		if a == nil {
			continue
		}
		a.interrupted = true
		out = append(out, outcome{instance: id, notStarted: why[id],
			res: runner.Result{Ticket: a.ticket, Status: runner.StatusFailed, Error: why[id]}})
	}
	return out
}
