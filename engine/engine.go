package engine

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/engine/breaker"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// Actor is the actor of the engine's own transitions and actions.
const Actor = "scheduler"

// Executors maps each executor kind of the pipeline format to what runs it.
type Executors map[defs.ExecutorKind]runner.Executor

// FunctionChecker is implemented by executors that know which names they
// can run (runner.Functions), so that a missing function is caught at start.
type FunctionChecker interface{ Has(name string) bool }

// Engine schedules the pipelines of a graph. Create it with [New] and run it
// with [Engine.Run]; it is not reusable after Run returns. It holds the
// components of the package doc (planner, resolver, leadership, dispatcher,
// completer, operator, backfiller, takeover, retention) as named fields,
// all but retention owned by the loop goroutine, and answers the
// interfaces through which they ask each other (plannerHost,
// dispatcherHost, …) by routing each ask to its owner (hosts.go).
type Engine struct {
	cfg   Config
	st    *store.Store
	execs Executors
	log   *slog.Logger
	// sched is the schedule in force (snapshot.go), which the components
	// read through a pointer to it.
	sched inForce

	// Owned by the loop.
	planner    planner    // triggers, wheel, window (planner.go)
	resolver   resolver   // readiness and failure propagation (resolver.go, ready.go)
	leadership leadership // epoch, lease, fence of the term (lease.go)
	dispatcher dispatcher // queue, rates, pools, claims ahead, hand-out (dispatcher.go)
	completer  completer  // results, retries, timeouts, releases (completer.go)
	operator   operator   // operator requests and the pauses in force (operator.go)
	backfiller backfiller // backfills in progress (backfill.go)
	takeover   takeover   // attempts a previous term left RUNNING (takeover.go, orphan.go)
	retryAt    time.Time  // after a store error: when to try again
	failures   int        // turns in a row that stopped on a store error
	// stepDown is set by a turn when the primary should give up its lease
	// (stepDownDue); the loop then ends the term.
	stepDown error
	// commitsAtError is the store's count of committed writes at the
	// last store error: the store is back once it has grown.
	commitsAtError uint64
	faults         writeFaults // why this process cannot write, for /readyz
	// failedStarts counts the terms in a row whose start the store could
	// not take (pauseAfterFailedStart).
	failedStarts int
	reqs         chan request
	reqSeq       atomic.Int64         // the last id Do gave a request
	gone         map[string]*taskInfo // stand-ins of removed tasks with a running instance
	m            *metrics
	logs         *logWriter // task output
	retention    *retention // prunes finished runs beside the loop (retention.go)

	statsMu sync.Mutex
	stats   Stats

	// Live reload (reload.go): cur is the graph in force, read by other
	// goroutines through Graph; next a validated graph waiting to be applied
	// between two turns of the loop; reloadSig wakes the loop for it.
	cur       atomic.Pointer[dag.Graph]
	next      atomic.Pointer[dag.Graph]
	reloadSig chan struct{}
	reloadMu  sync.Mutex // one Reload at a time
	// reloadFailed is the last set the store refused for good (ReloadFailure).
	reloadFailed atomic.Pointer[reloadFailure]

	sla slaWatch     // owned by the loop (sla.go)
	tm  *taskMetrics // per pipeline and task (taskmetrics.go)
}

// The engine is the one host of its components: each declares what it asks
// of the others (backfill.go, planner.go, …), and the engine routes it to
// the owner of the answer (hosts.go).
var (
	_ plannerHost    = (*Engine)(nil)
	_ completerHost  = (*Engine)(nil)
	_ dispatcherHost = (*Engine)(nil)
	_ operatorHost   = (*Engine)(nil)
	_ backfillHost   = (*Engine)(nil)
)

// noteRecorded tells the backfiller, when the completer recorded results
// since it was last asked, that its backfills may step at the next turn.
func (e *Engine) noteRecorded() {
	if e.completer.takeRecorded() {
		e.backfiller.resultsIn()
	}
}

// countDispatched counts n attempts dispatched, for Stats.
func (e *Engine) countDispatched(n int) {
	e.statsMu.Lock()
	e.stats.Dispatched += int64(n)
	e.statsMu.Unlock()
}

// countApplied counts n results recorded, for Stats.
func (e *Engine) countApplied(n int) {
	e.statsMu.Lock()
	e.stats.Applied += int64(n)
	e.statsMu.Unlock()
}

// Stats is a snapshot of the loop, for status pages and tests.
type Stats struct {
	Epoch      int64 `json:"epoch"`
	Wheel      int   `json:"wheel"`   // instances waiting in the time wheel
	Queue      int   `json:"queue"`   // due instances in the priority queue
	Running    int   `json:"running"` // attempts awaiting their result
	Dispatched int64 `json:"dispatched"`
	Applied    int64 `json:"applied"` // results recorded
	Leader     bool  `json:"leader"`
	// RenewLateMax is how late the latest lease renewal of this term came
	// past its due time, at worst (it must stay well below the renewal period).
	RenewLateMax time.Duration `json:"renew_late_max"`
	Limits       Limits        `json:"limits"` // the dispatch limits in force
}

// New checks that every task of g has an executor (and every function is
// registered) and returns an engine.
func New(cfg Config, st *store.Store, g *dag.Graph, execs Executors) (*Engine, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	e := &Engine{cfg: cfg, st: st, execs: execs, log: cfg.Logger, sched: inForce{&snapshot{g: g, tasks: map[string]*taskInfo{}}}, m: newMetrics(cfg.Registerer),
		dispatcher: dispatcher{running: newInflight(), pending: map[int64]*pend{}, brk: breaker.New(cfg.Breaker)}, reqs: make(chan request),
		reloadSig: make(chan struct{}, 1)}
	// The role has one truth, Primary, which the status, /readyz and
	// ax_leader all read live: none says primary a moment after the lease is
	// no longer safely held, even while the loop is busy or was stopped.
	e.m.leader = promauto.With(cfg.Registerer).NewGaugeFunc(prometheus.GaugeOpts{Name: "ax_leader",
		Help: "1 while this process is the primary scheduler (it safely holds the lease), 0 as a standby."}, func() float64 { return boolGauge(e.Primary()) })
	e.resolver = newResolver(st, &e.operator.pauses)
	e.planner = newPlanner(cfg, e, st, &e.resolver.runs)
	e.backfiller = newBackfiller(e, st, cfg.Logger, e.m.backfillRuns)
	e.logs = newLogWriter(cfg)
	d := &e.dispatcher
	d.cfg, d.host, d.res, d.paused, d.execs, d.settings, d.log, d.logs, d.m =
		cfg, e, &e.resolver, &e.operator.pauses, execs, st, cfg.Logger, e.logs, e.m
	e.completer = completer{results: make(chan outcome, 4096), watch: newWatch(), abandoned: make(chan struct{}),
		cfg: cfg, host: e, res: &e.resolver, disp: &e.dispatcher, st: st, log: cfg.Logger, logs: e.logs, m: e.m}
	e.operator = operator{cfg: cfg, host: e, pl: &e.planner, res: &e.resolver, disp: &e.dispatcher, done: &e.completer,
		bf: &e.backfiller, st: st, log: cfg.Logger}
	e.retention = newRetention(cfg, e)
	e.takeover = takeover{st: st, log: cfg.Logger}
	e.planner.sched, e.resolver.sched, e.dispatcher.sched, e.completer.sched, e.operator.sched, e.backfiller.sched =
		&e.sched, &e.sched, &e.sched, &e.sched, &e.sched, &e.sched
	e.tm = newTaskMetrics(cfg.Registerer, !cfg.NoTaskLabels)
	if err := checkExecutors(g, execs); err != nil {
		return nil, err
	}
	tasks, trigs := buildTasks(g)
	e.setGraph(g, tasks, trigs)
	return e, nil
}

// setGraph puts g in force, with its resolved tasks and triggers, and what
// the loop derives from them. Only the loop calls it (and New).
func (e *Engine) setGraph(g *dag.Graph, tasks map[string]*taskInfo, trigs []*trigger) {
	e.sched.snapshot = &snapshot{g: g, tasks: tasks}
	e.planner.setGraph(trigs)
	e.completer.hasHTTP = hasHTTPTasks(tasks)
	e.dispatcher.tuneBreakers(g)
	e.resolver.setGraph(g, tasks)
	e.cur.Store(g)
}

// checkExecutors checks that every task of g has an executor, and every
// function task a registered function.
func checkExecutors(g *dag.Graph, execs Executors) error {
	var problems []string
	for _, t := range g.Order() {
		ex := execs[t.Executor.Kind]
		if ex == nil {
			problems = append(problems, fmt.Sprintf("task %s: no %s executor is available", t.ID(), t.Executor.Kind))
			continue
		}
		if fc, ok := ex.(FunctionChecker); ok && t.Executor.Kind == defs.ExecFunction && !fc.Has(t.Executor.Function) {
			problems = append(problems, fmt.Sprintf("task %s: function %q is not registered", t.ID(), t.Executor.Function))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("engine: %d task(s) cannot run:\n  %s", len(problems), strings.Join(problems, "\n  "))
	}
	return nil
}

// Stats returns a snapshot of the loop's state. Leader is read live from
// the lease, not from the loop's last turn: the moment the lease is no
// longer safely held (a renewal failed, the lease was released or taken),
// Stats says standby, however busy the loop is.
func (e *Engine) Stats() Stats {
	e.statsMu.Lock()
	s := e.stats
	e.statsMu.Unlock()
	s.Leader = e.Primary()
	return s
}

func (e *Engine) publish(now time.Time) {
	e.statsMu.Lock()
	defer e.statsMu.Unlock()
	e.stats.Epoch, e.stats.Wheel, e.stats.Queue, e.stats.Running = e.leadership.epoch, e.planner.wheel.Len(), e.dispatcher.queue.Len(), e.dispatcher.running.len()
	e.stats.Leader = e.leadership.leader(now)
	e.stats.RenewLateMax = 0
	if k := e.leadership.lease.Load(); k != nil {
		e.stats.RenewLateMax = time.Duration(k.lateMax.Load())
	}
	e.m.wheelEntries.Set(float64(e.stats.Wheel))
	e.m.queueDepth.Set(float64(e.stats.Queue))
	e.m.running.Set(float64(e.stats.Running))
	if e.dispatcher.pool != nil {
		e.dispatcher.pool.publish(e.m)
	}
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Run schedules until ctx is cancelled. It takes the lease first; while
// another process holds it, Run waits as a hot standby (dispatching and
// writing nothing) and tries again every LeaseRenew, so that a standby, or a
// restart after a crash, takes over once the holder's lease expires. A
// primary that loses the lease for good (a stall longer than the TTL)
// cancels what it runs and stands by again. On cancellation it stops
// dispatching, lets running attempts finish for Config.Grace, records their
// results, cancels the rest and releases the lease.
func (e *Engine) Run(ctx context.Context) error {
	// Output of running attempts is flushed until Run returns, through the
	// grace period of a shutdown too.
	logCtx, stopLogs := context.WithCancel(context.WithoutCancel(ctx))
	defer stopLogs()
	go e.logs.run(logCtx, e.cfg.LogFlush)
	for {
		l, err := e.awaitLease(ctx)
		if err != nil {
			return err
		}
		if l.Epoch == 0 {
			return nil // cancelled while standing by
		}
		err = e.lead(ctx, l)
		if !errors.Is(err, errLeaseLost) {
			return err
		}
		e.log.Warn("standby_again", "holder", e.cfg.Holder, "reason", err.Error())
		if !e.pauseAfterFailedStart(ctx, err) {
			return nil
		}
	}
}

// errStartUnavailable ends a term whose start the store could not take.
var errStartUnavailable = errors.New("engine: the store could not take the term's start")

// pauseAfterFailedStart waits, after a term whose start the store could not
// take (err), before the lease is asked for again: from a renewal period,
// doubling up to the TTL while starts keep failing, so that a store that
// takes the lease's writes but not the others' is not asked in a tight
// loop. Any other end of a term resets it. It returns false when ctx ended.
func (e *Engine) pauseAfterFailedStart(ctx context.Context, err error) bool {
	if !errors.Is(err, errStartUnavailable) {
		e.failedStarts = 0
		return true
	}
	e.failedStarts++
	wait := min(e.cfg.LeaseRenew<<min(e.failedStarts-1, 5), e.cfg.LeaseTTL)
	if errors.Is(err, errGaveUpLease) {
		wait = e.cfg.LeaseTTL // a standby, asking every renewal period, comes first
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// errLeaseLost ends a term as primary and stands the process by again:
// another process holds the lease, or the term could not start.
var errLeaseLost = errors.New("engine: the lease is held by another process")

// lead schedules as primary under lease l until ctx ends (nil) or the lease
// is lost for good (errLeaseLost: attempts still running here are cancelled,
// since their results could no longer be recorded).
func (e *Engine) lead(ctx context.Context, l store.Lease) error {
	now := e.cfg.Now()
	k := newKeeper(e.st, e.cfg, l, e.m.renewLate)
	k.alert = e.notify // not recorded in the store: it is the store that is gone
	k.fault = e.faults.noteLease
	keepCtx, stopKeeper := context.WithCancel(context.WithoutCancel(ctx))
	var keepWG sync.WaitGroup
	keepWG.Go(func() { k.run(keepCtx) })
	defer func() {
		stopKeeper()
		keepWG.Wait()
		e.leadership.end()
	}()
	e.leadership.begin(l, k, e.st.Fence(l.Epoch), now)
	e.resolver.setEpoch(l.Epoch)
	e.takeNext() // a set reloaded while standing by
	e.log.Info("lease_acquired", "holder", e.cfg.Holder, "epoch", l.Epoch)
	if from, changed := e.leadership.handover(e.cfg.Holder); changed {
		e.Alert(ctx, Alert{Kind: AlertLeaderChange, At: now, Message: fmt.Sprintf("%s became the primary scheduler at epoch %d, taking over from %s", e.cfg.Holder, l.Epoch, from)})
	}
	// Its breakers live in its memory: one it kept open from an earlier
	// term is said again, so that the action log's last word on the task
	// is what cuts it now (another primary may have closed its own since).
	for _, ch := range e.dispatcher.brk.Opened(now) {
		e.breakerChanged(ctx, ch, now)
	}
	e.newTerm(now)
	execCtx, cancelExec := context.WithCancelCause(context.WithoutCancel(ctx))
	e.dispatcher.execCtx = execCtx
	defer cancelExec(errors.New("engine stopped"))

	if err := e.dispatcher.loadLimits(ctx, now); err != nil {
		return e.startFailed(ctx, err, cancelExec, k)
	}
	e.publish(now) // the primary from now on, while it loads its window too
	if err := e.start(ctx, now); err != nil {
		return e.startFailed(ctx, err, cancelExec, k)
	}
	// Retention prunes beside the loop, in short batches, while this term lasts.
	retainCtx, stopRetain := context.WithCancel(ctx)
	var retainWG sync.WaitGroup
	retainWG.Go(func() { e.retention.Run(retainCtx) })
	defer func() {
		stopRetain()
		retainWG.Wait()
	}()
	return e.loop(ctx, k, cancelExec)
}

// newTerm empties what the loop caches of the store, for a term as primary
// that reads it again.
func (e *Engine) newTerm(now time.Time) {
	e.dispatcher.newTerm(e.cfg, now)
	e.planner.newTerm(now, e.cfg.Window)
	e.resolver.runs.invalidate()
	e.backfiller.newTerm()
	e.completer.reset()
	e.sla = slaWatch{} // read again from the store: alerts of an earlier term are in the action log
}

// loop is the scheduling loop of a term: a turn on every whole second, every
// top-up, result, wake-up, reload and operator request, until ctx ends (a
// shutdown) or keeper k reports the lease lost for good.
func (e *Engine) loop(ctx context.Context, k *keeper, cancelExec context.CancelCauseFunc) error {
	// Ticks on whole seconds, so that a fire at 02:00:00 is dispatched at
	// 02:00:00 and not up to a second later.
	tick := time.NewTimer(untilNextSecond(e.cfg.Now()))
	defer tick.Stop()
	topUp := time.NewTicker(e.cfg.TopUp)
	defer topUp.Stop()
	e.dispatcher.wake = time.NewTimer(time.Hour)
	e.dispatcher.again = make(chan struct{}, 1)
	defer e.dispatcher.wake.Stop()
	e.dispatcher.heldWake = time.NewTimer(time.Hour)
	defer e.dispatcher.heldWake.Stop()
	e.turn(ctx, false)
	for {
		if e.stepDown != nil {
			return e.giveUpLease(k, cancelExec)
		}
		select {
		case <-ctx.Done():
			return e.shutdown(cancelExec, k)
		case <-tick.C:
			tick.Reset(untilNextSecond(e.cfg.Now()))
			e.turn(ctx, false)
		case <-topUp.C:
			e.turn(ctx, true)
		case ev := <-k.events:
			if ev.err != nil {
				e.leaveTerm(cancelExec, ev.err)
				return ev.err
			}
			e.retaken(ctx, ev.retaken)
		case <-e.dispatcher.again:
			e.turn(ctx, false)
		case o := <-e.completer.results:
			e.completer.gather(o)
			e.completer.drainResults()
			e.turn(ctx, false)
		case <-e.dispatcher.wake.C:
			e.turn(ctx, false)
		case <-e.dispatcher.heldWake.C:
			e.turn(ctx, false)
		case <-e.reloadSig: // applied at the start of the turn
			e.turn(ctx, false)
		case req := <-e.reqs:
			if e.serve(ctx, req) {
				e.turn(ctx, false)
			}
		}
	}
}

// leaveTerm ends a term whose results this process can no longer record
// (its lease is lost, or it gives the lease up): what ended before is left
// in the inbox for the next primary; what is cancelled now, with cause, is
// the next primary's to judge.
func (e *Engine) leaveTerm(cancelExec context.CancelCauseFunc, cause error) {
	e.completer.drainResults()
	e.completer.leaveResults(context.Background(), e.cfg.Now())
	e.dispatcher.interrupt(cancelExec, cause)
	e.collect(nil)
	e.completer.leaveResults(context.Background(), e.cfg.Now())
}

// serve answers an operator request on the loop: an inspection at once,
// a change only while the lease is safely held. It reports whether the
// request could change something, for which a turn follows.
func (e *Engine) serve(ctx context.Context, req request) bool {
	now := e.cfg.Now()
	if req.inspect != nil {
		req.inspect(now)
		req.reply <- opReply{}
		return false
	}
	var r opReply
	if e.leadership.leader(now) {
		r.msg, r.err = e.operator.apply(ctx, req.req, req.by, now)
	} else {
		r.err = fmt.Errorf("%w: the lease is not safely held", errNotPrimary)
	}
	if req.gaveUp != nil && req.gaveUp.Err() != nil {
		// Its caller answered "accepted" (ErrAccepted): what came of it is
		// in the action log (applied) or here (refused).
		if r.err != nil {
			e.log.Warn("request_refused", "request", req.by.Request, "verb", req.req.Verb(), "err", r.err)
		} else {
			e.log.Info("request_applied", "request", req.by.Request, "verb", req.req.Verb(), "result", r.msg)
		}
	}
	req.reply <- r
	return true
}

// untilNextSecond is how long from now to the next whole second.
func untilNextSecond(now time.Time) time.Duration {
	return now.Truncate(time.Second).Add(time.Second).Sub(now)
}

// awaitLease takes the lease, waiting while another holder has it. A store
// that is unavailable (down, out of connections, out of disk) is asked again
// with backoff, from a renewal period up to the lease's TTL; only a
// permanent error ends the wait with an error.
func (e *Engine) awaitLease(ctx context.Context) (store.Lease, error) {
	logged, down := false, 0
	for {
		wait := e.cfg.LeaseRenew
		prev, perr := e.st.GetLease(ctx, "")
		l, err := e.st.AcquireLease(ctx, store.LeaseParams{Holder: e.cfg.Holder, TTL: e.cfg.LeaseTTL, Now: e.cfg.Now()})
		e.faults.noteLease(err, e.cfg.Now())
		switch {
		case err == nil:
			if l.Broke != "" {
				e.log.Warn("lease_holder_stalled_in_write", "holder", e.cfg.Holder, "ended", l.Broke)
			}
			e.leadership.took(l, prev, perr == nil)
			return l, nil
		case errors.Is(err, store.ErrLeaseHeld) && e.cfg.FailIfHeld:
			return store.Lease{}, fmt.Errorf("engine: %w", err)
		case errors.Is(err, store.ErrLeaseHeld):
			if !logged {
				e.log.Warn("standby", "holder", e.cfg.Holder, "reason", err.Error())
				logged = true
			}
		case ctx.Err() != nil:
			return store.Lease{}, nil // stopped while asking: a standby has nothing to give back
		case store.Classify(err) == store.Unavailable:
			down++
			wait = min(e.cfg.LeaseRenew<<min(down-1, 5), e.cfg.LeaseTTL)
			e.log.Warn("lease_unavailable", "err", err, "failures", down, "retry_in", wait.String())
		case store.Classify(err) == store.Conflict:
			// The lease row is locked by a transaction of its holder (a holder
			// stalled mid-write keeps it locked until it wakes): try again.
			e.log.Warn("lease_busy", "err", err)
		default:
			return store.Lease{}, fmt.Errorf("engine: take the scheduler lease: %w", err)
		}
		if !errors.Is(err, store.ErrUnavailable) {
			down = 0
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return store.Lease{}, nil
		case <-t.C:
		case <-e.reloadSig:
			t.Stop()
			e.takeNext()
		}
	}
}

// turn is one pass of the loop: take in what happened (takeIn), then move
// work on (moveOn). A store error stops the turn and the next ones until a
// backoff passes.
func (e *Engine) turn(ctx context.Context, topUp bool) {
	now := e.cfg.Now()
	defer e.publish(now)
	if now.Before(e.retryAt) {
		return
	}
	err := e.finishRetake(ctx, now)
	if err == nil {
		err = e.dropLeftUnfinished(ctx, now)
	}
	if err == nil {
		err = e.takeIn(ctx, now, topUp)
	}
	if err == nil {
		err = e.moveOn(ctx, now)
	}
	if ctx.Err() == nil {
		werr := err
		if werr == nil {
			werr = e.dispatcher.handOutErr // no error of the turn's own, but its hand-out was not written
		}
		e.faults.noteTurn(werr, now)
		if f := e.faults.turn.Load(); f != nil && e.leadership.leader(now) && stepDownDue(f, now, e.cfg.LeaseTTL) {
			e.stepDown = f.err
		}
	}
	if err != nil {
		e.failures++
		e.commitsAtError = e.st.Commits()
		e.m.storeErrors.Inc()
		wait := min(time.Duration(1<<min(e.failures, 5))*time.Second, 30*time.Second)
		e.retryAt = now.Add(wait)
		e.log.Error("store_error", "err", err, "retry_in", wait.String())
		return
	}
	if e.failures > 0 {
		if e.st.Commits() == e.commitsAtError {
			return // a turn that wrote nothing (a standby's, say) does not show the store back
		}
		e.log.Info("store_recovered", "after_failures", e.failures)
	}
	e.failures = 0
}

// takeIn is the first half of a turn: a reload waiting to be applied, the
// window topped up when asked, the inbox read, results recorded, wait
// deadlines and stranded instances settled, silent attempts timed out and
// executors swept.
func (e *Engine) takeIn(ctx context.Context, now time.Time, topUp bool) error {
	if e.leadership.leader(now) {
		if err := e.applyReload(ctx, now); err != nil {
			return err
		}
	}
	if topUp && e.leadership.leader(now) {
		if err := e.planner.createWindow(ctx, now); err != nil {
			return err
		}
		if err := e.planner.load(ctx, now); err != nil {
			return err
		}
		if err := e.completer.releaseCrossWaiting(ctx, now); err != nil {
			return err
		}
	} else if e.leadership.leader(now) {
		if err := e.planner.createBehind(ctx, now); err != nil {
			return err
		}
	}
	if e.leadership.leader(now) {
		if err := e.completer.pollInbox(ctx, now); err != nil {
			return err
		}
	}
	err := e.completer.applyResults(ctx, now)
	e.noteRecorded()
	if err != nil {
		return err
	}
	if e.leadership.leader(now) {
		if err := e.completer.deadlineDue(ctx, now); err != nil {
			return err
		}
	}
	if e.completer.stranded && e.leadership.leader(now) {
		if err := e.completer.releaseStranded(ctx, now); err != nil {
			return err
		}
	}
	if err := e.completer.checkTimeouts(ctx, now); err != nil {
		return err
	}
	if e.leadership.leader(now) {
		return e.completer.sweep(ctx, now)
	}
	return nil
}

// moveOn is the second half of a turn: held attempts whose fire time came
// start, due entries move to the queue, and, as primary, operator requests
// queued in the store, backfills and SLAs are served and the queue is
// dispatched.
func (e *Engine) moveOn(ctx context.Context, now time.Time) error {
	e.dispatcher.startHeld(ctx, now)
	// Entries due up to ClaimAhead from now go to the queue: the ones
	// not due yet are claimed ahead and held until their fire time.
	e.dispatcher.admit(e.planner.due(now.Add(e.cfg.ClaimAhead)))
	if !e.leadership.leader(now) {
		return nil
	}
	if now.Sub(e.operator.opsPolled) >= 200*time.Millisecond { // not a query per result batch
		e.operator.opsPolled = now
		if err := e.operator.pollOps(ctx, now); err != nil {
			return err
		}
	}
	if step, poll := e.backfiller.due(now); step {
		if err := e.backfiller.drive(ctx, now, poll); err != nil {
			return err
		}
	}
	if err := e.checkSLA(ctx, now); err != nil {
		return err
	}
	return e.dispatcher.dispatch(ctx, now)
}

// retaken redoes what a takeover does after the keeper took the lease again
// under a new epoch (it had been lost, typically because the database was
// gone for longer than its TTL, and nobody else took it): rebuild the window
// from the store and reconcile what runs.
func (e *Engine) retaken(ctx context.Context, l store.Lease) {
	now := e.cfg.Now()
	e.leadership.retake(l, e.st.Fence(l.Epoch))
	e.resolver.setEpoch(l.Epoch)
	e.planner.newTerm(now, e.cfg.Window)
	e.dispatcher.clearWaiting()
	e.resolver.runs.invalidate()
	if err := e.start(ctx, now); err != nil {
		e.log.Error("takeover_failed", "err", err)
		e.leadership.restart = true // redone by the next turns (finishRetake) until it succeeds
	}
}

// finishRetake redoes the start of a term whose lease was taken again when
// that start failed (retaken): the window and the running set were emptied
// and not rebuilt, so until it succeeds nothing else of a turn runs. The
// window's top-up is no substitute: it only tops up a window, and a retake
// whose start met one failed write (a database under load) would leave the
// primary idle for good.
func (e *Engine) finishRetake(ctx context.Context, now time.Time) error {
	if !e.leadership.restart {
		return nil
	}
	if err := e.start(ctx, now); err != nil {
		return fmt.Errorf("engine: start again after the lease was taken again: %w", err)
	}
	e.leadership.restart = false
	e.log.Info("takeover_completed")
	return nil
}

// errInterrupted is the cause given to attempts still running when the
// shutdown grace period ends: they are given back, not failed. It wraps
// runner.ErrInterrupted so that an HTTP executor asks the executor to stop
// the work, which would otherwise run on beside the next attempt.
var errInterrupted = fmt.Errorf("engine: interrupted by shutdown: %w", runner.ErrInterrupted)

// startFailed ends a term whose start failed with err: a stop asked
// meanwhile (its reads fail with the cancelled context) is a clean
// shutdown, which gives the lease back; a write refused for a stale epoch
// (the process stalled while it started and another took the lease) ends
// the term as a lost lease does, and the process stands by again; any
// other error is returned.
func (e *Engine) startFailed(ctx context.Context, err error, cancelExec context.CancelCauseFunc, k *keeper) error {
	if ctx.Err() != nil {
		return e.shutdown(cancelExec, k)
	}
	if errors.Is(err, store.ErrNotLeader) {
		e.dispatcher.interrupt(cancelExec, err)
		return fmt.Errorf("%w: fenced while the term started: %w", errLeaseLost, err)
	}
	if c := store.Classify(err); c == store.Unavailable || c == store.Conflict {
		// The store could not take the start's writes: stand by (the lease
		// given back if it can be) and ask for it again, with backoff while
		// the store stays unavailable, rather than end the process.
		e.log.Warn("term_start_failed", "err", err)
		e.dispatcher.interrupt(cancelExec, err)
		k.release(context.Background())
		return fmt.Errorf("%w: %w: %w", errLeaseLost, errStartUnavailable, err)
	}
	return err
}

// shutdown stops dispatch and releases the lease at once (a standby takes
// over), gives back the attempts claimed ahead, records the results of the
// attempts that finish within Grace, then cancels the rest and gives them
// back too: RETRYING at once, the attempt not counted.
func (e *Engine) shutdown(cancelExec context.CancelCauseFunc, k *keeper) error {
	ctx := context.Background()
	e.giveBack(ctx)
	k.release(ctx)
	timer := time.NewTimer(e.cfg.Grace)
	defer timer.Stop()
	e.collect(func() <-chan time.Time {
		if e.dispatcher.running.len() > 0 {
			e.log.Info("shutdown_waiting", "running", e.dispatcher.running.len(), "grace", e.cfg.Grace.String())
		}
		return timer.C
	}, func() {
		e.dispatcher.interrupt(cancelExec, errInterrupted)
	})
	err := e.completer.applyAll(ctx)
	e.noteRecorded()
	if err != nil {
		e.log.Warn("shutdown_results_not_recorded", "err", err, "count", len(e.completer.unapplied))
		e.completer.leaveResults(ctx, e.cfg.Now()) // the lease went to another process: the primary applies them
	}
	e.log.Info("engine_stopped", "epoch", e.leadership.epoch)
	return nil
}

// interrupt cancels the attempts running here with cause, marked
// interrupted: unless one succeeds anyway, its outcome is not a failure of
// its own (a shutdown gives it back; a lost lease leaves it to the primary).
func (d *dispatcher) interrupt(cancelExec context.CancelCauseFunc, cause error) {
	for _, a := range d.running.all() {
		if a.cancel != nil {
			a.interrupted = true
		}
	}
	cancelExec(cause)
}

// abandonAfter is how long a shutdown waits, once it has cancelled the
// attempts still running after the grace, for them to return.
const abandonAfter = 5 * time.Second

// collect waits for every attempt goroutine to end while taking in their
// results, so that none ever blocks on a full results channel (shutdown
// with 10,000 attempts in flight returns). With deadline set, when its
// channel fires, expire is called once (cancelling what still runs), and
// abandonAfter later collect stops waiting (see abandon). Results are
// recorded as they come, in the same batches as the loop's.
func (e *Engine) collect(deadline func() <-chan time.Time, expire ...func()) {
	done := make(chan struct{})
	go func() { e.dispatcher.execWG.Wait(); close(done) }() // ends when the attempts end
	var dl, giveUp <-chan time.Time
	waits := 0
	if deadline != nil {
		dl = deadline()
	}
	ctx := context.Background()
	for {
		select {
		case <-done:
			e.completer.drainResults()
			return
		case o := <-e.completer.results:
			e.completer.gather(o)
			e.completer.drainResults()
			var err error
			recordable := e.leadership.leader(e.cfg.Now()) || e.leadership.lease.Load().released.Load()
			if recordable {
				err = e.completer.applyAll(ctx)
				e.noteRecorded()
				if err != nil {
					e.log.Warn("results_not_recorded", "err", err, "count", len(e.completer.unapplied))
				}
			}
			if !recordable || errors.Is(err, store.ErrNotLeader) {
				// The term is over (leaveTerm), or another process took the
				// released lease: it gets each result as its attempt ends,
				// not once all have (see goneJudged).
				e.completer.leaveResults(ctx, e.cfg.Now())
			}
		case <-dl:
			dl = nil
			for _, f := range expire {
				f()
			}
			t := time.NewTimer(abandonAfter)
			defer t.Stop()
			giveUp = t.C
		case <-giveUp:
			e.completer.drainResults()
			if waits++; e.stillStopping() && waits < 4 {
				// A command is killed (SIGKILL after its grace) and an HTTP
				// call ends with its context: their results are coming.
				t := time.NewTimer(abandonAfter)
				defer t.Stop()
				giveUp = t.C
				continue
			}
			e.abandon()
			return
		}
	}
}

// stillRunning lists the attempts still running here after their
// cancellation whose result has not come.
func (e *Engine) stillRunning() []int64 {
	pending := map[int64]bool{}
	for _, o := range e.completer.unapplied {
		pending[o.instance] = true
	}
	var out []int64
	for _, id := range e.dispatcher.running.ids() {
		if a := e.dispatcher.running.get(id); !a.orphan && a.cancel != nil && !pending[id] {
			out = append(out, id)
		}
	}
	return out
}

// stillStopping reports whether an attempt other than a function still
// runs here after its cancellation: a command, which its runner kills
// (SIGTERM, then SIGKILL after its grace), or an HTTP call, which ends
// with its context. Their results are worth waiting for; a function that
// ignores its context is not.
func (e *Engine) stillStopping() bool {
	for _, id := range e.stillRunning() {
		if e.dispatcher.running.get(id).task.def.Executor.Kind != defs.ExecFunction {
			return true
		}
	}
	return false
}

// abandon stops waiting for the attempts whose goroutines have not
// returned abandonAfter after their cancellation (a command or an HTTP
// call up to three times as long, see collect): a function that ignores
// its context cannot be stopped, and the shutdown must return. They are
// left RUNNING, not given back: they may still be working in this process
// until it exits, and a retry elsewhere meanwhile would run them twice.
// The next primary judges them by the scheduler process recorded with
// them (gone: an unknown outcome, failed at its deadline, then retried
// per its policy). What their
// goroutines send later is dropped.
func (e *Engine) abandon() {
	close(e.completer.abandoned)
	for _, id := range e.stillRunning() {
		a := e.dispatcher.running.get(id)
		e.log.Warn("attempt_abandoned", "task", a.task.id, "instance", id, "ticket", a.ticket,
			"why", "still running after its cancellation; left RUNNING for the next primary")
	}
}

// start syncs definitions, reconciles what a previous process left running,
// applies misfire policies, creates the first window, loads the wheel and
// releases what a previous process left stranded.
func (e *Engine) start(ctx context.Context, now time.Time) error {
	if err := e.dropUnfinishedRuns(ctx, now); err != nil {
		return err
	}
	if err := e.syncDefinitions(ctx, now); err != nil {
		return err
	}
	if err := e.operator.loadPauses(ctx); err != nil {
		return fmt.Errorf("engine: load pauses: %w", err)
	}
	if err := e.reconcile(ctx, now); err != nil {
		return err
	}
	skips, err := e.planner.initTriggers(ctx, now)
	if err != nil {
		return err
	}
	if _, err := e.operator.transitionAll(ctx, skips); err != nil {
		return err
	}
	if err := e.planner.createWindow(ctx, now); err != nil {
		return err
	}
	if err := e.planner.load(ctx, now); err != nil {
		return err
	}
	return e.completer.releaseStranded(ctx, now)
}

// dropUnfinishedRuns deletes the runs whose creation a previous term (of
// this process or another) left unfinished (store.CreatingSetting), before
// anything of the store is loaded: nothing of such a run ran, since it is
// dispatched only once whole, so it is dropped as if never created — a
// schedule run is then created again by its trigger, a manual one is not
// (the action log says so).
func (e *Engine) dropUnfinishedRuns(ctx context.Context, now time.Time) error {
	ids, err := e.st.UnfinishedRuns(ctx)
	if err != nil {
		return fmt.Errorf("engine: read unfinished runs: %w", err)
	}
	for _, id := range ids {
		run, rerr := e.st.Run(ctx, id)
		if err := e.w().DropUnfinishedRun(ctx, id, e.cfg.CreateChunk); err != nil {
			return fmt.Errorf("engine: drop run %d, whose creation did not finish: %w", id, err)
		}
		detail := fmt.Sprintf("run %d dropped: its creation did not finish (the scheduler stopped or failed while writing its instances); nothing of it ran", id)
		if rerr == nil {
			detail += fmt.Sprintf("; it was a %s run of %s at logical time %s made by %s", run.Kind, run.Pipeline, run.LogicalTime.Format(time.RFC3339), run.Actor)
		}
		if err := e.w().AppendAction(ctx, store.Action{At: now, Actor: Actor, Action: "run_dropped", Pipeline: run.Pipeline, Detail: detail}); err != nil {
			return err
		}
		e.log.Warn("unfinished_run_dropped", "run", id)
	}
	return nil
}

// dropLeftUnfinished drops, before anything else of a turn reads the
// store, the part written of a run whose creation failed in this term (the
// store could not drop it at once); until it succeeds no turn goes on, so
// nothing of such a run is ever loaded.
func (e *Engine) dropLeftUnfinished(ctx context.Context, now time.Time) error {
	if !e.planner.unfinished {
		return nil
	}
	if err := e.dropUnfinishedRuns(ctx, now); err != nil {
		return err
	}
	e.planner.unfinished = false
	return nil
}

// syncDefinitions writes the definitions in force to the store; the tasks
// it finds removed (the files changed while no server ran) end as a reload
// ends them.
func (e *Engine) syncDefinitions(ctx context.Context, now time.Time) error {
	res, err := e.syncGraph(ctx, e.sched.g, now)
	if err != nil {
		return err
	}
	var tasks []string
	for _, id := range res.Removed {
		if strings.Contains(id, ".") { // a task id; the rest are pipelines, whose tasks are named too
			tasks = append(tasks, id)
		}
	}
	e.endUnstartedOfRemoved(ctx, tasks, "while no server ran", now)
	return nil
}

func hashJSON(v any) ([]byte, string) {
	b, err := json.Marshal(v)
	if err != nil { // definitions are plain data; params were checked by defs
		b = []byte(fmt.Sprintf("%q", fmt.Sprint(v)))
	}
	sum := sha256.Sum256(b)
	return b, hex.EncodeToString(sum[:16])
}

// newTicket returns a fresh, unguessable dispatch ticket.
func newTicket() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b)
}

// sortedIDs returns the keys of m in order, for deterministic iteration.
func sortedIDs[V any](m map[int64]V) []int64 {
	ids := make([]int64, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Event is an attempt starting or ending, for Config.OnEvent and
// Config.Observer, or a run ending, for Config.Observer.
type Event struct {
	Kind     string // "started", "ended" or "run_ended"
	Pipeline string
	Task     string // pipeline.task ("" for run_ended)
	Run      int64
	Logical  time.Time
	Ticket   string
	Instance int64
	Attempt  int          // the attempt's number
	State    axtype.State // when ended: SUCCESS, FAILED, RETRYING or KILLED; run_ended: SUCCESS or FAILED
	Error    string
	Duration time.Duration // when ended: how long since it started
	// Due is when the attempt was due (its fire time); Started when it
	// went to its executor (run_ended: when the run began); At when the
	// event happened.
	Due, Started, At time.Time
}

// Observer follows runs as they go (engine/tracing): it learns of every
// Event and names the trace context each attempt is handed. Both are called
// from the loop and from attempts' goroutines: they must be safe for
// concurrent use and must not block.
type Observer interface {
	Observe(Event)
	// TraceParent is the W3C traceparent handed to the attempt that ev
	// (a "started" one) starts: "" for none.
	TraceParent(ev Event) string
}

// emit hands ev to the observer and, unless it is a run's end, to OnEvent
// (which hears of attempts only).
func (e *Engine) emit(ev Event) {
	if e.cfg.OnEvent != nil && ev.Kind != "run_ended" {
		e.cfg.OnEvent(ev)
	}
	if e.cfg.Observer != nil {
		e.cfg.Observer.Observe(ev)
	}
}

// traceParent is the traceparent the observer hands the attempt ev starts.
func (e *Engine) traceParent(ev Event) string {
	if e.cfg.Observer == nil {
		return ""
	}
	return e.cfg.Observer.TraceParent(ev)
}

func ptr[T any](v T) *T { return &v }

// giveBack hands back, at shutdown and before the lease is released, the
// attempts that never started (dispatcher.unstarted). They go through the
// result path like every other attempt given back (applyResults,
// interrupted): RETRYING at their fire time or now, the attempt not
// counted, so that the next scheduler runs them once.
func (e *Engine) giveBack(ctx context.Context) {
	outs := e.dispatcher.unstarted()
	if len(outs) == 0 {
		return
	}
	for _, o := range outs {
		e.completer.gather(o)
	}
	err := e.completer.applyAll(ctx)
	e.noteRecorded()
	if err != nil {
		// They stay RUNNING: the next primary times them out (unknown outcome) and retries per policy.
		e.log.Error("give_back_failed", "instances", len(outs), "err", err)
		return
	}
	e.log.Info("given_back_unstarted", "instances", len(outs))
}
