// Package engine is the scheduler core of ax. It decides what runs when; it
// stores through package store and executes through package runner.
//
// One goroutine, the loop of [Engine.Run], owns all scheduling state: the
// time wheel (engine/wheel), the dispatch queue (engine/queue), the token
// bucket (engine/bucket), the set of running attempts and a cache of active
// runs. Executors run attempts in goroutines of their own and send results
// back on a channel; nothing else touches the loop's state.
//
// The store is the source of truth, and every change of state is a
// compare-and-set through store.Transition, fenced by the engine's lease
// epoch. The loop's state is a cache of the store:
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
