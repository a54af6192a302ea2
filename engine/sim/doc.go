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
// and the status queries of a scheduler that took over (R43). The network
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
//	   or a pause was in force, or the task's circuit breaker was open (R17:
//	   its dispatches cut to a tenth of its own; breaker_open in the action log); a root skipped by its overlap policy had
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
//	   are running, nor of its group as the group's cap in force (R45; the
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
// and the driver's last steps; `go test ./engine/sim -run Sim -seed N`
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
// # What it found
//
// Bugs, each kept as a named regression case in sim_test.go (a hand-built
// scenario that shows it, or its seed), skipped until the fix reaches main, with the
// generator or the check restricted meanwhile by a Restrictions field.
// "Found" is how long the simulator took on today's main (or, for a bug
// fixed meanwhile, on main with the fix reverted locally).
//
//	invariant  found                               bug (owner)                                regression case
//	I5         seed 2, then most seeds; 14         a FAILED or KILLED upstream leaves its     TestSimFailedUpstreamEndsRun
//	           simulated minutes                   downstream WAITING: the run never ends
//	                                               (issue 14 item 3; fixed)
//	I5         seeds 91 and 193 of 200 (wait      an instance that failed without an         TestSimPropagationIsTransitive
//	           timeout, after jumps of over a      attempt, by its wait_timeout or by
//	           day); later seed 142 (propagation)  propagation, leaves its own downstream
//	                                               WAITING (issue 14 items 3, 4)
//	I3         seeds 110, 154, 181 of 200; the     an operator's trigger of a manual task     TestSimGateWaitsForUpstream
//	           first trigger of a gate whose       starts it before its upstream succeeded
//	           upstream runs                       (issue 14 item 1; fixed)
//	I3         seeds 20, 69, 90 of 100, the first  a rerun of an instance an operator marked  TestSimRerunWaitsForUpstream
//	           run with the mark and cancel verbs  failed (or whose run was cancelled) while
//	                                               it waited starts it at once, before its
//	                                               upstream succeeded (issue 14)
//	I4         seeds 3, 94, 103, 106 of 200, on    wildcard schedules lose every fire in the  TestSimFallBackWildcard
//	           their first fall-back day; with     repeated hour of a fall-back day (issue
//	           the fix reverted: 38, 46, 84, 181   13 item 5; fixed)
//	I4         with the fix reverted: seed 24 of   @every 1s loses fires to the overlap       TestSimEverySecondNoOverlapSkip
//	           100; the scenario at simulated      check: an instance claimed ahead counts
//	           second 20                           as running (issue 13 item 1; fixed)
//	I4         seeds 4, 21, 29, 40, 51, 52, 53 of  a schedule with no run yet when every      TestSimOutageBeforeFirstRun
//	(misfire)  60, the first time the check ran    scheduler went down loses the fires of
//	                                               the outage: fire_once runs none (issue 13
//	                                               item 4's exactness)
//
//	I1         seed 17 of the first 30 with SDK    a graceful stop gave back an attempt       TestSimShutdownStopsRemoteWork
//	           executors over HTTP; the scenario   running on an HTTP executor without        (and runner's
//	           at its first stop                   stopping it there: the next scheduler      TestHTTPStopForwardedToExecutor)
//	                                               ran the instance again beside it (fixed:
//	                                               the shutdown is forwarded as a kill)
//
//	I1         seed 132 of the first 160 with SDK  a primary that took over queued the        TestSimInheritedTimeoutNotRedispatched
//	           executors, about one run in two     unknown-outcome timeout of an inherited
//	                                               HTTP ticket, then dispatched that ticket
//	                                               again (no executor knew it) beside the
//	                                               retry the timeout made (fixed)
//
//	I4         seeds 329, 439, 993 of 1000, once   a fire that fell due while its task's     TestOverlapJudgedAtTheFireTimeNotAtDispatch
//	(overlap)  the checks below were exact; about  previous instance only waited for a slot  (engine/overlap_test.go)
//	           a minute of simulated time after a  (--max-running) was skipped as an overlap
//	           takeover with a backlog             by a later batch, once that instance had
//	                                               started after the fire time
//
//	I1         seed 283 of 10,000 on main a1585b4, an SDK executor restarted on its journal   TestRestartDoesNotRunWorkPastItsDeadline
//	           the first failure, after 283 seeds  ran a ticket it had accepted before it     (runner/executor)
//	                                               was killed, 21 s past the ticket's
//	                                               deadline, beside the instance's third
//	                                               attempt (fixed: work killed or past its
//	                                               deadline before a worker takes it never
//	                                               starts; reported failed)
//
//	I1         seed 1090 of 10,000 on main a1585b4 a true double run, both succeeding: an     TestAcceptedDispatchCountsAsHeardFrom
//	           (the second failure, after 1090)    executor's heartbeats failed on a 14 s     (engine/sweep_test.go),
//	                                               store fault, so the sweep failed over as   TestFailedHeartbeatRetriedSoon
//	                                               lost (no heartbeat for 33 s) an attempt    (runner/executor)
//	                                               it had accepted 8 s before, while it ran
//	                                               (fixed: an accepted dispatch counts as
//	                                               hearing from the executor; the SDK sends
//	                                               a failed heartbeat again after 1 s)
//
//	I9         seed 110 of 400, the first run with  the rerun of a FAILED instance started at   TestRerunOfAFailedInstanceRespectsTheTaskCap
//	           caps and backfills drawn; in about  once (FAILED → RUNNING) outside the queue,  (engine/rerun_cap_test.go),
//	           1 run of the seed in 8, beside      past its task's max_running (4 RUNNING,     TestSimCapsCountExecutions
//	           other seeds. In today's worlds     cap 3); queued instead when a cap is full,
//	           seed 252 (of 201–800, 2.6 min;     it was then skipped as an overlap (a rerun
//	           3 runs of 3) finds it               is no fire; fixed)
//
//	I9         seed 6514 of 6401–7200 on integ     a primary that took over timed an          TestInheritedLocalAttemptTimesOutAfterTheOldLease
//	           47e51b3, once (36 replays alone     inherited local attempt out from its       (engine/inherited_test.go),
//	           passed: goroutine order in an       recorded start, though it had waited in    TestSimInheritedQueuedAttemptHoldsItsCap
//	           instant decides it)                 the stalled primary's start queue and
//	                                               ran on: its group slot went to another
//	                                               beside it, over the group's cap (fixed:
//	                                               it times out from the old lease's end)
//
//	I5         seed 3172 of 10,000 on main a1585b4 a rerun of a root that never ran (its run  TestStrandedRerunOfARootIsReleased
//	           (the fourth failure, after 3172; 2  cancelled before its fire time) brings it  (engine/stranded_root_test.go)
//	           runs of the seed in 3)              back to WAITING, then releases it; a
//	                                               store fault failed the release, and the
//	                                               stranded sweep looked only at instances
//	                                               with upstreams: the root waited forever
//	                                               (fixed: the sweep takes roots too)
//
//	I10        seeds 146, 158, 192, 201, 219, 244, a task whose only upstream is in another   TestSimNoStartBeforeTheFireTime,
//	           245, 267, 297 (and maybe more) of  pipeline started as soon as that           TestCrossUpstreamDoneEarlyWaitsForTheFireTime
//	           the first 300, the first time the   pipeline's run succeeded, up to the five   (engine/release_test.go)
//	           check ran                           minutes its run is made ahead before its
//	                                               fire time; a root whose run was cancelled
//	                                               before its fire time and rerun started at
//	                                               the rerun (fixed: one release time,
//	                                               releaseAt, for every path)
//
//	I12        seeds 7, 12, 35, 40, 51, 59, 100,   with every registered executor of a task   TestNoDispatchToAnExcludedExecutor
//	           106, 113, 116, 122, 157, 181, 201,  excluded (one silent, the other killed,     (engine/silence_test.go),
//	           216, 257, 284, 294 of 300 on main   or both after an outage), routing fell     TestSilentExecutorKeepsItsWork
//	           515a3da, the first run of the       back to the task's own URL, x1's address:  (runner/route_test.go),
//	           check                               work went to an excluded executor (fixed:  TestSimSilentIsNotDead
//	                                               it waits in the queue, sent nowhere)
//
//	I1         seeds 10 and 223 of 300 on main     an executor silent past runner.Silence,    TestSilentExecutorAttemptsStayRunning
//	           515a3da, once executions count to   still running an attempt, was declared     (engine/silence_test.go),
//	           their end on a silent executor and  lost and the attempt failed over: its      TestSimSilentIsNotDead
//	           long HTTP timeouts are drawn        retry ran on x2 beside it (fixed: silent
//	                                               is not dead; resolved by its /status or
//	                                               at its deadline)
//
//	I1         seed 5898 of 5601–6400, with        a primary dispatched again an inherited    TestInheritedRedispatchKeepsItsDeadline
//	           backfills and schedule changes      HTTP ticket its restarted executor did     (engine/orphan_test.go),
//	           drawn                               not know, then crashed; the next primary   TestSimRedispatchedTicketKeepsItsDeadline
//	                                               counted the timeout from the first
//	                                               dispatch, 36 s earlier, and retried the
//	                                               instance on x2 while x1 still ran the
//	                                               ticket (fixed: the timeout counts from
//	                                               the last recorded redispatch)
//
// Not bugs of the engine, but checks made exact (seeds 329, 426, 439, 458,
// 490, 536, 651, 690, 786, 883, 993 of 1000 on the second day): a fire
// whose run was made ahead and cancelled (or marked) by an operator before
// the outage is not part of the outage's backlog (docs/schedules.md: fires
// without a run, and runs made ahead that never started), so the misfire
// count leaves it out; and under a cap on local attempts (the limits verb's
// max_running, or the configured 16) a due fire waits for a slot however
// long that takes, so a root still SCHEDULED past the bound, or at the end,
// is explained when the cap was full then (as many local instances
// RUNNING as the cap in force), not by a guessed extra minute. A fire at
// the very instant a scheduler starts has not passed and is not in the
// backlog (seed 1032 of 3000). A task whose circuit breaker is open
// dispatches at a tenth of its base rate (R17), its fires, retries and
// re-offers alike, so its due fires may wait past the bound however long
// the backlog takes: I4 and I5 explain a wait while the task's breaker was
// open (from its breaker_open alert until breaker_closed or another
// primary), TestSimBreakerCutsTheRate (seed 1771 of 10,000 on main a1585b4,
// the third failure, after 1771 seeds, in about one run of the seed in six:
// an HTTP task on @every 2s refused as re-entrant by both executors until
// its breaker opened and held its fires 9 s).
//
// With backfills drawn, two more checks were made exact: in a backfill run
// an upstream in another pipeline is outside the selection and counts as
// done unless the backfill was told --wait-cross (docs/commands.md), so I3c
// looks for it only then (the driver's backfills wait with two runs in
// flight, from a draw made already); and I3c judges a
// cross-pipeline upstream by the instances that existed when the engine
// released the downstream one, by history order (seed 40: a backfill
// created the upstream's instance of an earlier logical time at the very
// instant, just after the release).
//
// I9 counts executions, not instances recorded RUNNING (seed 7801, one
// run in five: the slot is free when the executor returns, before the
// result is recorded), ordered by a sequence of starts and ends rather
// than by time (seed 790: an execution that ended in the instant it
// started), with no order across processes in one instant (seed 67, one
// run in 12: an HTTP attempt's deadline ended it on the executor and in
// the scheduler at once); TestSimCapsCountExecutions.
//
// With delays and schedule changes generated (seeds 1–300): I4 (misfire)
// on seeds 165, 211 and 225, a change of one schedule found at a start
// moved the backlog of the pipeline's other schedules that had not run
// yet (TestSimScheduleChangeMovesOnlyItsTrigger); I6 on seed 78, a batch
// that moved an instance twice wrote the moves out of order
// (TestSimBatchMovesTwiceInOrder); and the checker's own rules for them
// on seeds 6, 11, 29, 62, 205 and 294 (TestSimScheduleChangesAndDelays).
// I4 on seed 1260 (flaky, as a retake of the lease is): a process that led
// again kept its open breaker while the action log's last word was another
// primary's breaker_closed (it now says its kept breakers again; I14 does
// not judge such a repeat, which opened before). I15 was shown to fail
// (seed 165) on an engine that does not skip the old schedule's fires at a
// start.
//
// Seeds 205 (I1: one ticket executed by two engines at once after a
// takeover) and 206 (I4 misfire) of the first day no longer fail on
// today's engine.
//
// Findings that break no invariant are counted as notes: "engine exits"
// (a store error during a new primary's start-up ends Engine.Run; the
// simulator restarts the process as a supervisor would).
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
