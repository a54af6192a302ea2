// Package engine is the scheduler core of ax. It decides what runs when; it
// stores through package store and executes through package runner.
//
// # One owner, several components
//
// One goroutine, the loop of [Engine.Run], owns all scheduling state. The
// state is split into components, each a type in a file of its own that
// says what it owns and what it must not do; [Engine] composes them, and
// the loop is the only goroutine that touches any of them (no locks on the
// hot path):
//
//   - leadership (lease.go): the term as primary — its epoch, the keeper
//     that renews the lease on a timer and goroutine of its own, and the
//     fence through which every write of the term goes (R44).
//   - planner (planner.go, trigger.go, misfire.go): the triggers, runs
//     created ahead for every fire inside the window, the misfire rule for
//     fires that passed unrun, and the time wheel of instances due soon.
//   - resolver (ready.go, settle.go): readiness and failure propagation,
//     one pure rule (decide, settle) of a run's instances; settle.go reads
//     what it needs and turns its verdicts into transitions.
//   - dispatcher (dispatcher.go, dispatch.go, overlap.go, pool.go): the
//     priority queue of due instances, pauses, the overlap policy judged
//     at the fire time, rate limits, concurrency caps, claims ahead of the
//     fire time, and the hand-out of recorded starts to executors.
//   - completer (completer.go): results, retries, timeouts and give-backs
//     (one pure rule, judgeResult), recorded with the downstream they
//     settle, and the releases of what waited on them.
//   - operator requests (request.go, control.go, settleop.go): a sealed
//     set of typed requests applied on the loop.
//   - backfill (backfill.go): runs of past logical times, a few at a time.
//
// How an instance flows through them:
//
//	                     lease (keeper: own timer, epoch E)
//	                       │ fences every write below with epoch E;
//	                       │ nothing starts unless the lease is safely held
//	                       ▼
//	planner ──────────► resolver ──────────► dispatcher ─────────► workers
//	trigger fires:      WAITING → SCHEDULED  due (wheel → queue):   executors run
//	run created ahead   when every upstream  pause? overlap at the  the attempt in
//	(roots SCHEDULED,   succeeded (gate      fire time? cap? token? goroutines of
//	others WAITING);    approved); → FAILED  SCHEDULED → RUNNING    their own
//	misfire judges      when one failed, was with a fresh ticket,         │
//	missed fires;       killed, skipped or   recorded before any          │ result
//	wheel loaded for    its wait timed out   executor sees it             │ (channel,
//	the window               ▲                                            │  inbox)
//	                         │                                            ▼
//	                         └────────────────────────────────────── completer
//	                           success/failure settles the run's     RUNNING → SUCCESS,
//	                           downstream in the same transaction    RETRYING (→ wheel),
//	                           (R40); other pipelines after commit   FAILED, KILLED;
//	                                                                 timeouts, give-backs
//
// # The store is the truth
//
// Every change of state is a compare-and-set through store.Transition,
// fenced by the engine's lease epoch. The loop's state is a cache of the
// store:
//   - runs are created ahead, for every fire inside the five-minute window,
//     and the store's run key makes each (trigger, logical time) exist once,
//     however often the engine, or a second engine, tries;
//   - the wheel is loaded from the store at start and topped up every 30 s;
//     an entry whose instance was paused or changed meanwhile fails its
//     compare-and-set at dispatch and is dropped;
//   - an attempt is handed to an executor only after SCHEDULED → RUNNING was
//     recorded with its fresh ticket: a database that is gone stops dispatch,
//     it never causes an unrecorded run;
//   - a result is applied only for the instance's current ticket.
//
// Writes are batched per turn of the loop (one transaction for all the
// dispatches of a tick, one for all the results drained at once), which is
// what lets SQLite reach thousands of instances a second.
package engine
