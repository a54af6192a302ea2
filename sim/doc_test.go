// Package sim is the deterministic simulator of ax: it runs the real engine
// on the real SQLite store inside a testing/synctest bubble, drives it with
// one seed, and checks the README's promises after every step. It owns the
// simulated world (pipelines, executors, faults, operators) and the
// invariants; it must not reach into the engine's state, only observe what
// a user could: the store, the executors' side and the answers to requests.
//
// # One seed, one world
//
// From a seed the generator draws (gen.go):
//   - 1–4 pipelines of 1–8 tasks, one in twelve of 50–300 tasks; DAGs with
//     up to three upstreams per task, chains behind task crons, edges to
//     earlier pipelines' tasks, manual gates (one task in fifteen);
//   - schedules in America/New_York, Europe/Berlin, Australia/Sydney,
//     Australia/Lord_Howe (30-minute shift), America/Santiago (changes at
//     midnight) and UTC: `@every Ns`, seconds wildcards `*/N * * * * *`,
//     minute wildcards `*/N * * * *`, hourly `M * * * *`, fixed daily
//     `M H * * *` and `S M H * * *` around the hours DST changes at;
//   - every misfire (fire_once, skip, fire_all) and overlap (skip, wait,
//     allow) policy, retries, timeouts (3–30 s; for one HTTP task in three,
//     drawn apart, 40–120 s with a retry), groups, a global and per
//     group dispatch rate now and then, a standby engine now and then;
//   - in one seed in three, concurrency caps (drawCaps, from a source of
//     its own so that the rest of a seed's world stays as it was): a
//     max_running of 1–2 on a task in four, of 1–3 in a pipeline's
//     defaults now and then, and a configured cap of 1–4 on a group;
//   - on half the cross-pipeline dependencies, a match rule (exact,
//     interval, latest) and an offset (drawMatches, from a source of its
//     own too);
//   - a start shortly before one of the zone's DST changes in 2026–2027.
//
// Pipelines whose schedules would create over 2,500 instances an hour are
// drawn again, so that a seed takes a fraction of a second.
//
// Every attempt (exec.go) draws, from the seed, the instance and how many
// attempts of it came before, a latency (up to 2 s, now and then past the
// deadline) and a behaviour: succeed, fail, fail permanently, hang until the
// deadline, do the work and lose the result, succeed and report the result
// twice, or refuse (busy). Function tasks run in the engine's process: they
// die with it, a lost result never comes, a duplicate goes into the results
// inbox as a server receiving a retried POST would write it.
//
// One task in four is an HTTP task, run by the real SDK (runner/executor)
// over HTTP inside the bubble (sdk.go, memnet.go): two executor processes,
// http://x1 and http://x2, serve it, register with the scheduler and
// heartbeat every 10 s; each engine dispatches through runner.Routed in
// the asynchronous form, where results go to the scheduler's results
// endpoint (package api's executor endpoints, served in the bubble with
// the executor token required: registration, heartbeats, results into the
// inbox, unknown tickets refused), or, in one world in three (drawn apart, with
// the caps), in the synchronous form, where the result is the dispatch's
// answer and a scheduler that hangs up stops the work; the SDK's ticket cache answers repeated dispatches
// and the status queries of a scheduler that took over. The network
// is net.Pipe pairs made in the bubble, so a blocked read is durably
// blocked. There a lost result is lost on the way one to three times (the
// SDK delivers it again, with backoff), a duplicate arrives twice, and
// every delivery takes a latency drawn from the instance. Once in twelve
// steps (drawn from a generator of its own, so the driver's draws stay
// those of the seed) an executor process is killed (its work never
// returns; its connections break) and restarted after up to 20 s, with its
// ticket journal (same boot id: it resumes what it accepted, reports what
// it started as interrupted) or without (a new boot id: the scheduler fails
// over what the old one ran), or it falls silent, cut off the network for
// longer than runner.Silence (the sweep declares it lost; its attempts stay
// RUNNING, resolved by its /status or at their deadline). While every scheduler is down its endpoints are
// unreachable; through an outage of over an hour the executors go down too.
// In one world in three (drawn apart) a third process, http://x9, runs the
// SDK with a token the scheduler no longer takes (a revoked executor): it
// tries to register every 10 s, and after one step in four (drawn apart)
// it forges a success for an HTTP attempt that runs, with its revoked
// token or none (I8).
//
// The driver (world.go) then takes 60 steps, each one of: let time pass
// (50 ms–3 s, now and then up to 95 s); crash the primary (its clock
// freezes for good: a kill -9 whose in-process attempts die with it; a new
// process starts after up to two minutes unless a standby runs); stall the
// primary for 0.5–15 s (its clock blocks: a GC pause or SIGSTOP, sometimes
// with a standby started to take over); stop it gracefully and start
// another; fail write transactions at random for 1–20 s with probability
// 0.1, 0.3 or 1 (store.SetFault: rolled back at commit); crash every engine
// and jump the clock 2–60 minutes, or once per seed 20–50 hours across a
// DST day, then restart; a valid operator request (pause, resume, trigger,
// kill, rerun, mark, cancel, limits of rate, of running attempts and of a group's running attempts), one in
// four queued through the store as `ax … --store` does (while a pause is in
// force, one trigger or rerun in two, drawn from a source of its own, aims
// at what the pause covers, one in three of them with Hold; a pause is of
// a task, a pipeline or, one in three, a group); or a bad one
// (unknown task, pipeline or scope, an unknown verb through the queue (the engine takes only its sealed set of request types), kill of an instance that is not running, rerun of one that is not over,
// mark of a running or succeeded instance or to a state that is no outcome,
// cancel of an unknown run, an unknown instance, a negative rate, an
// unknown group; a valid request to an engine that is not the primary;
// writes straight to the store under a lease epoch no longer current). One
// step in twenty (drawn from a source of its own, backfillStep) stores a
// backfill of a pipeline over the last 30 minutes to 4 hours (up to its 8
// latest logical times, a selection now and then, 1–3 active runs, each
// rerun mode, stop on failure and approval of gates now and then), as
// `ax backfill --store` and the API do, or cancels one in progress, or
// resumes a cancelled one, through the engine. Then comes a
// calm: faults end, pauses are lifted, and time runs for the longest
// attempt chain any task can take, before the final checks.
//
// # Invariants
//
// Each is a promise of the README, checked after every step (I5 after the
// calm), against the store and what executors saw, never against the
// engine's own bookkeeping:
//
//	I1 one attempt at a time: no instance (task, logical time, run) has two
//	   executions at once, across engines, crashes, stalls and takeovers.
//	I2 one success, and only from a run: no instance records SUCCESS twice
//	   without an operator rerun between, and every SUCCESS the scheduler
//	   records carries the ticket of an execution that succeeded.
//	I3 no start before upstreams succeeded: when an execution starts, each
//	   upstream in its run has a recorded SUCCESS.
//	I3c a cross-pipeline release matches its window: when an execution
//	   starts, for each upstream in another pipeline, the upstream's latest
//	   instance at or before the end of the dependency's window
//	   (defs.CrossWindow: by default the downstream's schedule interval that
//	   holds its logical time) lies inside the window and has a recorded
//	   SUCCESS. A backfill's runs are checked only with --wait-cross. It
//	   failed on the engine that took the latest run at or before the logical
//	   time, however old (seeds 146, 158, 159, 160, 171, 174, 178 of the
//	   first 200: a run released on the upstream's run of an older interval).
//	I4 every due fire dispatched or explained: each fire of each schedule,
//	   computed second by second from the zone data by the DST rules of
//	   docs/schedules.md (expect.go; not by defs.Schedule), that fell due
//	   while one engine led without faults, has its run, and each root of
//	   the run left SCHEDULED within a bound (8 s, plus what the dispatch
//	   rates need), or waits behind the task's previous instance (overlap),
//	   or a pause was in force, or the task's circuit breaker was open (its
//	   dispatches cut to a tenth of its own; breaker_open in the action log); a root skipped by its overlap policy had
//	   another attempt of its task really running at its fire time (or one
//	   inherited from a previous process). After an outage, the fires
//	   missed follow the misfire policy exactly: all run when the earliest
//	   is at most a minute late; else fire_once runs one, the latest; skip
//	   none; fire_all the latest, up to the bound.
//	I5 every run ends or names its wait: after the calm, each instance is
//	   over, or waits on something that can still happen (a manual gate, an
//	   upstream not over, a cross-pipeline upstream, its task's previous
//	   instance, a slot under the cap, its task's open breaker), or its fire
//	   time is ahead.
//	I6 history replays to state: each instance's history rows start with
//	   its creation in WAITING or SCHEDULED, continue one another, follow
//	   the state table (axtype.CanTransition), and end in the instance's
//	   state, at a version no lower than their number (an approval bumps
//	   the version without a transition).
//	I7 no fenced write lands: lease epochs in the history never go back, so
//	   no engine wrote after a newer epoch took over.
//	I8 bad verbs change nothing: each bad operator request is refused with
//	   an error, and no pause, setting or history row by the operator
//	   appears; the revoked executor is never in the registry, and each
//	   result it forges is refused (401) and never lands in the inbox.
//	I9 caps hold: no execution starts while as many executions of its
//	   task as its max_running (from its file or its pipeline's defaults)
//	   are running, nor of its group as the group's cap in force (the
//	   limits verb changes group caps at run time, and a lowered cap stops
//	   nothing that runs). Executions are counted as the executors saw
//	   them, not as instances recorded RUNNING: the engine frees a slot when
//	   the executor returns, a moment before the result is recorded. The
//	   cap on local attempts is not checked this way: it is per server, and
//	   a stalled primary's attempts run on beside its successor's (I4 and
//	   I5 explain a wait by it).
//	I10 no start before the fire time: no execution starts before its
//	   run's fire time plus its task's delay (docs/schedules.md: a
//	   schedule's or a backfill's run fires at its logical time, an
//	   operator's run when it was triggered), however early its upstreams
//	   succeeded (in another pipeline, or marked by an operator) and whoever
//	   released it (a result, an approval, a rerun, a resume, a takeover).
//	I11 every attempt is its own: the k-th move of an instance into
//	   RUNNING is its attempt k (a retry, a give-back, a refusal and a
//	   rerun each take the next number; an orphan redispatched under the
//	   same ticket keeps its number), and the output and attempt record
//	   stored under k are that dispatch's (docs/output.md).
//	I12 no dispatch to an excluded executor: no engine sends a dispatch to
//	   an executor that registered and was not heard from within
//	   runner.Silence (by a heartbeat or registration the scheduler took,
//	   or by a dispatch of that engine it accepted), by rotation or by the
//	   task's own URL (in the worlds, http://x1's address).
//	I13 nothing under a pause starts: no dispatch of a task is recorded
//	   while a pause of the task, its group or its pipeline is in force
//	   (pause and resume by the action log), whoever made the instance: a
//	   fire, a trigger, an approval, a rerun, a backfill, a retry.
//	I14 an open breaker cuts the task to a tenth: a task's dispatches in
//	   the window after its breaker_open alert (up to its next breaker
//	   alert, and to the last check before another primary was seen lead)
//	   are at most a tenth, rounded up and at least one, of its dispatches
//	   in the window before.
//	I15 a changed schedule is judged by the new schedule from the change
//	   on (docs/schedules.md): I4 judges each fire by the form in force at
//	   it (a reload's instant, or the start that found the files changed);
//	   for a change found at a start, none of the new schedule's fires in
//	   the outage gets a run, and none of the old schedule's that fell due
//	   in it runs (none gets a run at the start; those made ahead are
//	   skipped, not started); a run of the old schedule made ahead that a
//	   change kept (something in it had moved) and that falls due in a
//	   later outage is the change rule's, not I4's: its roots do not start.
//	   The runs made ahead that a change drops are
//	   forgotten by the replay (I6) when their rows are gone.
//
// The world changes schedules (reschedule, one step in thirty, drawn
// apart): a cron schedule of a small pipeline gets another cron form,
// either live (every running engine reloads the new files) or in the
// files during an outage of 2 to 30 minutes, found by the next start. One
// task in six has a `delay:` of 1 to 20 s (drawDelay), which I10 adds to
// the fire time and I4 to the bound a root may take to leave SCHEDULED.
//
// The HTTP executors put I1 to the SDK's dedupe by ticket and re-entrancy
// guard, the failover of a restarted executor, silent executors that come
// back and finish what they ran (an execution counts as running to its end
// as the executor saw it, silent or not: silent is not dead, and one
// HTTP task in three, drawSlow, has a timeout past runner.Silence and now
// and then works most of it, so a silence can fall inside it) and the
// give-back at a shutdown; I2 to late, repeated and
// duplicated results through the results endpoint and the inbox, and to
// the journal's earlier result for a ticket; I5 to results that never come
// (an executor killed without a journal) and refusals; I6 and I7 to
// results a primary applies from the inbox after takeovers.
//
// # Reproducing
//
// A failure prints the seed, the violations with the instance's history,
// and the driver's last steps; `go test ./sim -run Sim -seed N`
// replays that seed and prints its pipelines and whole trace (-simlog adds
// the engines' logs). Every random choice comes from the seed, and
// executors draw from the seed and the instance, not from the order in
// which goroutines run, so a seed replays the same world
// (TestSimSameSeedSameTrace); a new engine process runs until it blocks
// before anything else happens, so that two started at one instant do not
// race for the lease. The bubble's scheduling of goroutines that wake at
// the same instant is still Go's: instances created at one instant may
// take their ids in another order (seed 10: a bad verb then names another
// instance id), and a rare race may need a few runs of its seed.
//
// # Not generated (yet)
//
// @every schedules changed (one is anchored where it starts), changes of
// a schedule's zone or misfire policy, live clock jumps of a running engine (a stall is the nearest),
// store errors on reads, and cron forms beyond the ones above (day, month
// and weekday fields, Quartz L/W/#). The admin API is not called: operator
// requests reach the engine as the API's handlers hand them over
// (Engine.Do), or through the store's queue.
package sim
