// Package engine is the scheduler core of ax. It decides what runs when; it
// stores through package store and executes through package runner.
//
// # One owner, several components
//
// One goroutine, the loop of [Engine.Run], owns all scheduling state. The
// state is split into components, each a type in files named after it
// whose methods carry its rules, and which says what it owns and what it
// must not do. [Engine] holds each as a named field (none is embedded) and
// runs the loop. Each component declares, where it is used, the small
// interface of what it asks of the others (plannerHost,
// dispatcherHost, completerHost, operatorHost, backfillHost; fenced, the
// leadership's fence and epoch, is the part of those that record) and of
// the store (plannerReader, takeoverReader, …); the Engine answers each
// ask by handing it to the component that owns the answer (hosts.go).
// Some components still hold those their work acts on (the operator, the
// completer and the dispatcher; see docs/design.md). The tasks and graph
// in force are one snapshot (snapshot.go), read by every component through
// one holder and swapped by the loop on reload. The loop is the only
// goroutine that touches any of them (no locks on the hot path):
//
//   - leadership (lease.go): the term as primary — its epoch, the keeper
//     that renews the lease on a timer and goroutine of its own, the fence
//     through which every write of the term goes, and what is known
//     of the term before (who held it, when it ended).
//   - planner (planner.go, trigger.go, misfire.go): the triggers, runs
//     created ahead for every fire inside the window (newRunWith, the one
//     way to create a run), the misfire rule for fires that passed unrun,
//     and the time wheel of instances due soon.
//   - resolver (ready.go, resolver.go, runcache.go): readiness and failure
//     propagation, one pure rule (decide, settle) of a run's instances;
//     resolver.go reads what it needs and turns its verdicts into the
//     transitions others record. It owns the run cache (runCache), the
//     store's runs as the rule reads them, and says when a run is over
//     (runFinished, StatusOf's rule).
//   - dispatcher (dispatcher.go, dispatcher_limits.go, attempt.go,
//     inflight.go, overlap.go, pool.go, breaker.go): the priority queue
//     of due instances, the attempts in flight (inflight), the overlap
//     policy judged at the fire time, rate limits and the breakers that cut
//     a task's dispatches, concurrency caps, claims ahead of the fire time, and
//     the hand-out of recorded starts to executors (execute).
//   - completer (completer.go, sweep.go, orphan.go, inbox.go): results,
//     retries, timeouts and give-backs (one pure rule, judgeResult),
//     recorded with the downstream they settle, and the releases of what
//     waited on them. Every outcome comes in through gather; what the
//     executor sweep remembers (refusals, inherited attempts) is its own.
//   - operator (request.go, operator.go, operator_settle.go): a sealed set of typed
//     requests, each applied by the operator on the loop, and the pauses in
//     force (pauses), whose coverage rule is store.PauseSet.Covering.
//   - backfiller (backfill.go): runs of past logical times, a few at a time,
//     stepped as results come in and the store polled every second.
//   - takeover (takeover.go): at a term's start, the attempts a previous
//     term left RUNNING, read from the store and judged from plain values
//     (inherited with their deadline, or given back when they certainly
//     never started); the loop hands the verdicts to the dispatcher and
//     the completer.
//   - retention (retention.go): a service beside the loop, with Run(ctx),
//     that prunes finished runs while the lease is held.
//
// What stays on [Engine] is the loop and its lifecycle (Run, the term's
// start and end, a turn), the routing between components (hosts.go), the
// public API (Do, Explain, Reload, Stats, Alert), alerts and live reload.
//
// How an instance flows through them:
//
//	planner     a trigger fires: its run is created ahead, inside the window;
//	 │          the misfire rule judges fires that passed unrun
//	 │ roots:      │ the others:
//	 │ SCHEDULED   ▼ WAITING
//	 │          resolver    WAITING → SCHEDULED when every upstream succeeded
//	 │             │        (and a manual gate was approved); WAITING → FAILED
//	 │             │        when one failed, was killed or skipped, or the wait
//	 │             │        timed out, and so on down the run
//	 ▼             ▼
//	wheel (planner): instances due within the window, by fire time  ◄──────┐
//	 │ due (or within claim-ahead)                                         │
//	 ▼                                                                     │
//	dispatcher  queue by priority; paused? overlap at the fire time?       │
//	 │          a cap free? a token? then SCHEDULED → RUNNING with a       │
//	 │          fresh ticket, recorded before any executor sees it; the    │
//	 │          attempt is in flight (inflight) until its end is recorded  │
//	 ▼                                                                     │
//	workers     executors, in goroutines of their own (HTTP results        │
//	 │          also through the inbox)                                    │
//	 │ result, or a timeout, kill or give-back                             │
//	 ▼                                                                     │
//	completer   RUNNING → SUCCESS, FAILED, KILLED, or RETRYING ────────────┘
//	            (at its backoff time); in the same transaction, the run's
//	            downstream that the resolver settles; the attempt
//	            leaves inflight, the breaker learns the outcome
//
//	leadership  the keeper renews the lease on a timer of its own; every
//	            write above goes through the fence of the term's epoch, and
//	            nothing starts unless the lease is safely held
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
