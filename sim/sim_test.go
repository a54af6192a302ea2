package sim

import (
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/engine"
)

var (
	seedFlag   = flag.Int64("seed", -1, "run only this seed, and print its trace")
	seedsFlag  = flag.Int("seeds", 200, "how many seeds TestSim runs (from -first)")
	firstFlag  = flag.Int64("first", 1, "the first seed TestSim runs")
	stepsFlag  = flag.Int("steps", 0, "driver steps per seed (0: the default)")
	logFlag    = flag.Bool("simlog", false, "with -seed: print the engines' logs")
	reportFlag = flag.Bool("simreport", false, "print seeds/s and the invariant tally (make sim)")
)

// today are the restrictions in force on today's main: see Restrictions.
// Each restriction is lifted when `git merge main` brings the fix, and its
// regression case below then runs instead of skipping.
var today = Restrictions{
	// none: the rerun of an instance that never ran waits for its upstreams
	// whether it ended FAILED, KILLED or marked SUCCESS (regression:
	// TestSimRerunWaitsForUpstream; seeds 160, 161, 194 for SUCCESS).
}

// TestSim runs -seeds seeds (200; 5 with -short, as under the race
// detector), two at a time, each in its own bubble, and fails with the seed,
// the violations and the last steps of each seed that broke an invariant.
func TestSim(t *testing.T) {
	if *seedFlag >= 0 {
		o := Options{Steps: *stepsFlag, Restrict: today}
		if *logFlag {
			o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
		}
		rep := Run(t, *seedFlag, o)
		t.Log(rep.Spec)
		t.Log("\n" + strings.Join(rep.Trace, "\n"))
		t.Logf("stats %+v", rep.Stats)
		fail(t, rep)
		return
	}
	n := *seedsFlag
	if testing.Short() && n > 5 {
		n = 5
	}
	var (
		mu     sync.Mutex
		tally  = map[string]int{}
		notes  = map[string]int{}
		failed []int64
		stats  Stats
	)
	start := time.Now()
	t.Run("seeds", func(t *testing.T) {
		for seed := *firstFlag; seed < *firstFlag+int64(n); seed++ {
			t.Run(fmt.Sprint(seed), func(t *testing.T) {
				t.Parallel()
				rep := Run(t, seed, Options{Steps: *stepsFlag, Restrict: today})
				mu.Lock()
				for k, v := range rep.Tally {
					tally[k] += v
				}
				for k, v := range rep.Notes {
					notes[k] += v
				}
				if len(rep.Violations) > 0 {
					failed = append(failed, seed)
				}
				stats.add(rep.Stats)
				mu.Unlock()
				fail(t, rep)
			})
		}
	})
	elapsed := time.Since(start)
	var b strings.Builder
	fmt.Fprintf(&b, "%d seeds in %s: %.1f seeds/s; %d failed %v\n", n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(), len(failed), failed)
	fmt.Fprintf(&b, "simulated %s; %d runs, %d instances, %d executions, %d transitions; %d crashes, %d stalls, %d takeovers, %d store faults, %d clock jumps, %d verbs (%d bad), %d backfills; HTTP executors: %d executions (%d in the synchronous form), %d crashes, %d silences, %d results forged with a revoked token\n",
		stats.Simulated.Round(time.Minute), stats.Runs, stats.Instances, stats.Executions, stats.Transitions, stats.Crashes, stats.Stalls,
		stats.Takeovers, stats.Faults, stats.Jumps, stats.Verbs, stats.BadVerbs, stats.Backfills, stats.HTTPExecutions, stats.SyncExecutions, stats.ExecutorCrashes, stats.ExecutorSilences, stats.Forged)
	b.WriteString("invariant checks:\n")
	for _, k := range slices.Sorted(maps.Keys(tally)) {
		fmt.Fprintf(&b, "  %-45s %d\n", k, tally[k])
	}
	for _, k := range slices.Sorted(maps.Keys(notes)) {
		fmt.Fprintf(&b, "  note: %-39s %d\n", k, notes[k])
	}
	if *reportFlag {
		fmt.Fprint(os.Stderr, b.String())
	} else {
		t.Log(b.String())
	}
}

func fail(t *testing.T, rep Report) {
	t.Helper()
	if len(rep.Violations) == 0 {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %d violation(s); reproduce with: go test ./sim -run Sim -seed %d\n", rep.Seed, len(rep.Violations), rep.Seed)
	for _, v := range rep.Violations {
		fmt.Fprintf(&b, "  %s\n", v)
	}
	tail := rep.Trace
	if len(tail) > 30 {
		tail = tail[len(tail)-30:]
	}
	b.WriteString("last steps:\n  " + strings.Join(tail, "\n  "))
	t.Error(b.String())
}

// regression runs a hand-built scenario and fails on any violation: each
// is a bug the simulator found (see the table in the package doc), cut
// down to the world that shows it.
func regression(t *testing.T, sc *scenario) {
	t.Helper()
	rep := Run(t, 1, Options{scenario: sc})
	if len(rep.Violations) > 0 {
		t.Log("\n" + strings.Join(rep.Trace, "\n"))
	}
	fail(t, rep)
}

// advanceBy returns n steps that each let d pass.
func advanceBy(n int, d time.Duration) []step {
	out := make([]step, n)
	for i := range out {
		out[i].advance = d
	}
	return out
}

// TestSimFallBackWildcard: wildcard schedules lost every fire in the
// repeated hour of a fall-back day (found by I4 on seeds 3, 94, 103 and 106
// of the first 200, each on its first fall-back day). Fixed by issue 13.
func TestSimFallBackWildcard(t *testing.T) {
	t.Parallel()
	p := &genPipeline{name: "p0", zone: "America/New_York", group: "default", misfire: "fire_once", overlap: "skip", tasks: []*genTask{
		{name: "every5m", timeout: 10 * time.Second, cron: &cronForm{text: "*/5 * * * *", min: "*/5", hour: "*"}, misfire: "fire_once", overlap: "skip"},
		{name: "every20s", timeout: 10 * time.Second, cron: &cronForm{text: "*/20 * * * * *", sec: "*/20", min: "*", hour: "*"}, misfire: "fire_once", overlap: "skip"},
	}}
	regression(t, &scenario{pipelines: []*genPipeline{p}, start: time.Date(2026, 11, 1, 5, 50, 0, 0, time.UTC), // 01:50 EDT
		steps: advanceBy(90, time.Minute)})
}

// TestSimFailedUpstreamEndsRun: a FAILED upstream left its downstream
// WAITING forever, so the run never ended (found by I5 on seed 2, and on
// most seeds, within 14 simulated minutes). Fixed by issue 14.
func TestSimFailedUpstreamEndsRun(t *testing.T) {
	t.Parallel()
	p := &genPipeline{name: "p0", zone: "UTC", group: "default", misfire: "fire_once", overlap: "skip",
		schedule: &cronForm{text: "*/5 * * * *", min: "*/5", hour: "*"},
		tasks:    []*genTask{{name: "extract", timeout: 10 * time.Second}, {name: "load", timeout: 10 * time.Second, deps: []string{"extract"}}}}
	regression(t, &scenario{pipelines: []*genPipeline{p}, start: time.Date(2026, 6, 1, 0, 0, 30, 0, time.UTC),
		steps: advanceBy(12, time.Minute), behave: map[string]behaviour{"p0.extract": bPermanent}})
}

// TestSimGateWaitsForUpstream: an operator's trigger of a manual task
// started it while its upstream still ran (found by I3 on seeds 110, 154
// and 181 of the first 200).
func TestSimGateWaitsForUpstream(t *testing.T) {
	t.Parallel()
	p := &genPipeline{name: "p0", zone: "UTC", group: "default", misfire: "fire_once", overlap: "skip",
		schedule: &cronForm{text: "0 * * * *", min: "0", hour: "*"},
		tasks:    []*genTask{{name: "build", timeout: 30 * time.Second}, {name: "approve", timeout: 10 * time.Second, deps: []string{"build"}, manual: true}}}
	steps := []step{{advance: 65 * time.Second}, {op: engine.Trigger{Target: "p0.approve"}}}
	regression(t, &scenario{pipelines: []*genPipeline{p}, start: time.Date(2026, 6, 1, 0, 59, 0, 0, time.UTC),
		steps: append(steps, advanceBy(5, time.Minute)...), latency: map[string]time.Duration{"p0.build": 20 * time.Second}})
}

// TestSimOutageBeforeFirstRun: a schedule that had no run yet when every
// scheduler went down lost the fires of the outage: after the restart the
// trigger "starts now", so fire_once ran none instead of the latest (found
// by I4's misfire check on seeds 4, 21, 29, 40, 51, 52 and 53 of the first
// 60, the first time the check ran).
func TestSimOutageBeforeFirstRun(t *testing.T) {
	t.Parallel()
	p := &genPipeline{name: "p0", zone: "UTC", group: "default", misfire: "fire_once", overlap: "skip",
		schedule: &cronForm{text: "0 * * * *", min: "0", hour: "*"},
		tasks:    []*genTask{{name: "hourly", timeout: 10 * time.Second}}}
	regression(t, &scenario{pipelines: []*genPipeline{p}, start: time.Date(2026, 6, 1, 0, 40, 0, 0, time.UTC),
		steps: []step{{advance: time.Second}, {jump: 3 * time.Hour}, {advance: time.Minute}}})
}

// TestSimEverySecondNoOverlapSkip: a task on @every 1s lost fires as
// "skipped by overlap policy" while nothing else of it ran: the instance
// claimed ahead for the next second counted as running (issue 13 item 1,
// fixed there; the simulator found it again when the fix was reverted
// locally: this scenario at simulated second 20, the random worlds on
// seed 24 of the first 100).
func TestSimEverySecondNoOverlapSkip(t *testing.T) {
	t.Parallel()
	p := &genPipeline{name: "p0", zone: "UTC", group: "default", misfire: "fire_once", overlap: "skip", tasks: []*genTask{
		{name: "tick", timeout: 10 * time.Second, cron: &cronForm{text: "@every 1s", every: time.Second}, misfire: "fire_once", overlap: "skip"}}}
	regression(t, &scenario{pipelines: []*genPipeline{p}, start: time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC),
		steps: advanceBy(10, 10*time.Second)})
}

// TestSimPropagationIsTransitive: an instance that failed without an
// attempt, by propagation ("upstream p2.t2 failed") or by its wait_timeout
// ("upstream … not done after 24h"), left its own downstream WAITING: the
// run never ended. Found by I5 on seeds 91 and 193 of 200 (wait timeout,
// after jumps of over a day), then, once mark and cancel joined the verbs
// and changed every seed's draws, on seed 142 (propagation). Hand-built
// worlds did not show it, so the case is the seed itself (a generator
// change may call for a new one: run make sim with the restriction off).
func TestSimPropagationIsTransitive(t *testing.T) {
	t.Parallel()
	r := today
	r.WaitBehindUnattempted = false
	rep := Run(t, 142, Options{Restrict: r})
	fail(t, rep)
}

// TestSimRerunWaitsForUpstream: a rerun of an instance that an operator
// ended without an attempt (marked failed, or its run cancelled) went
// FAILED → RUNNING at once, before its upstream had succeeded (found by I3
// on seeds 20, 69 and 90 of 100, the first run with the mark and cancel
// verbs). A rerun of one failed by its upstream waits, as it should.
func TestSimRerunWaitsForUpstream(t *testing.T) {
	t.Parallel()
	p := &genPipeline{name: "p0", zone: "UTC", group: "default", misfire: "fire_once", overlap: "skip",
		schedule: &cronForm{text: "0 * * * *", min: "0", hour: "*"},
		tasks:    []*genTask{{name: "extract", timeout: 60 * time.Second}, {name: "load", timeout: 10 * time.Second, deps: []string{"extract"}}}}
	steps := []step{{advance: 65 * time.Second}, {op: engine.Mark{Instance: 2, State: axtype.Failed}},
		{op: engine.Rerun{Instance: 2}}, {advance: time.Minute}}
	regression(t, &scenario{pipelines: []*genPipeline{p}, start: time.Date(2026, 6, 1, 0, 59, 0, 0, time.UTC),
		steps: steps, latency: map[string]time.Duration{"p0.extract": 30 * time.Second}})
}

// TestSimShutdownStopsRemoteWork: a graceful stop gave back an attempt
// running on an HTTP executor (RETRYING, "interrupted by shutdown") without
// stopping it there, so the next scheduler dispatched the instance again
// while the first attempt still ran: two attempts at once (found by I1 on
// seed 17 of the first 30, the first run with SDK executors over HTTP).
// The shutdown now forwards the stop to the executor, as a kill does.
func TestSimShutdownStopsRemoteWork(t *testing.T) {
	t.Parallel()
	p := &genPipeline{name: "p0", zone: "UTC", group: "default", misfire: "fire_once", overlap: "skip",
		schedule: &cronForm{text: "0 * * * *", min: "0", hour: "*"},
		tasks:    []*genTask{{name: "slow", timeout: 30 * time.Second, http: true}}}
	steps := []step{{advance: 62 * time.Second}, {restart: true}}
	regression(t, &scenario{pipelines: []*genPipeline{p}, start: time.Date(2026, 6, 1, 0, 59, 0, 0, time.UTC),
		steps: append(steps, advanceBy(3, 20*time.Second)...), behave: map[string]behaviour{"p0.slow": bHang}})
}

// TestSimSameSeedSameTrace: a seed replays the same world, HTTP executors
// included (their faults, latencies, lost and duplicated results are drawn
// from the seed and the instance, never from a ticket or goroutine order):
// two runs of one seed give the same trace, line for line.
func TestSimSameSeedSameTrace(t *testing.T) {
	t.Parallel()
	type seedCase struct {
		seed    int64
		classic bool
	}
	cases := []seedCase{
		// Classic: the worlds these seeds were chosen in. With caps and
		// backfills drawn, seed 1 creates instances at one instant whose ids
		// come in goroutine order (see the package doc), and a verb then
		// names another instance.
		{1, true}, {2, true}, {17, true},
		// With caps, backfills (3 each) and, for 13, the synchronous form:
		// each replayed the same in 12 runs, 6 of them at once.
		{2, false}, {3, false}, {13, false},
	}
	if testing.Short() {
		// The race pass (-short): one world of each kind; the non-race pass
		// replays all six.
		cases = []seedCase{{17, true}, {13, false}}
	}
	for _, tc := range cases {
		seed := tc.seed
		a := Run(t, seed, Options{Restrict: today, Classic: tc.classic})
		b := Run(t, seed, Options{Restrict: today, Classic: tc.classic})
		if a.Stats.ExecutorCrashes+a.Stats.ExecutorSilences == 0 {
			t.Errorf("seed %d: no executor fault: pick a seed whose world has HTTP executors that crash or fall silent", seed)
		}
		if !slices.Equal(a.Trace, b.Trace) {
			for i := range min(len(a.Trace), len(b.Trace)) {
				if a.Trace[i] != b.Trace[i] {
					t.Errorf("seed %d: traces differ at line %d of %d/%d:\n  %s\n  %s", seed, i, len(a.Trace), len(b.Trace), a.Trace[i], b.Trace[i])
					break
				}
			}
			if len(a.Trace) != len(b.Trace) {
				t.Errorf("seed %d: traces of %d and %d lines", seed, len(a.Trace), len(b.Trace))
			}
		}
	}
}

// TestSimInheritedTimeoutNotRedispatched: a primary that took over queued
// the unknown-outcome timeout of an inherited HTTP ticket, then heard from
// the executors that none knew the ticket and dispatched it again under the
// same ticket, beside the retry the timeout made: two attempts at once
// (found by I1 on seed 132 of the first 160 with SDK executors, in about
// half of its runs: the answer and the timeout meet at one instant, in
// goroutine order). The case is the seed itself, run six times (a
// generator change may call for another seed: run make sim).
func TestSimInheritedTimeoutNotRedispatched(t *testing.T) {
	t.Parallel()
	runs := 6
	if testing.Short() {
		runs = 1 // the race pass (-short); the non-race pass runs all six
	}
	for range runs {
		rep := Run(t, 132, Options{Restrict: today})
		fail(t, rep)
		if len(rep.Violations) > 0 {
			return
		}
	}
}

// TestSimBreakerCutsTheRate: a task failing most of its attempts opens its
// circuit breaker, which cuts its dispatch rate to a tenth (1/s); a
// fire every second whose attempts are each retried needs more than that,
// so its due fires wait past I4's bound. The engine does as the breaker rule says; I4
// did not know it (found on seed 1771 of 10,000 on main a1585b4, the third
// failure, after 1771 seeds, in about one run of the seed in six: an HTTP
// task on @every 2s whose executors refused it as re-entrant until the
// breaker opened). I4 now explains a root still SCHEDULED past the bound
// while its task's breaker was open (breaker_open in the action log, until
// breaker_closed or another primary).
func TestSimBreakerCutsTheRate(t *testing.T) {
	t.Parallel()
	p := &genPipeline{name: "p0", zone: "UTC", group: "default", misfire: "fire_once", overlap: "allow", tasks: []*genTask{
		{name: "flaky", timeout: 10 * time.Second, retries: 2, interval: time.Second,
			cron: &cronForm{text: "@every 1s", every: time.Second}, misfire: "fire_once", overlap: "allow"}}}
	regression(t, &scenario{pipelines: []*genPipeline{p}, start: time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC),
		steps: advanceBy(12, 10*time.Second), behave: map[string]behaviour{"p0.flaky": bFail}})
}

// TestSimCheckerKnowsQueuedPausesAndReruns: four seeds of 5001–9000 that
// the checker failed on I4 (misfire) where the engine was right. Seed
// 5612: a pause queued through the store was applied after the driver last
// looked at the pauses and before every engine went down, so the checker
// missed that a pause held the fire (the engine keeps a PAUSED instance
// out of the misfire backlog, as docs/schedules.md says). Seeds 6244, 6767
// and 8317 (fire_all): an operator cancelled a run made ahead and reran
// its instance, which started before the outage, ahead of its fire; the
// checker counted that fire as missed, then as run. Each fails without the
// checker's fixes (notePauses at every step and outage; backlog counts a
// started instance as decided).
func TestSimCheckerKnowsQueuedPausesAndReruns(t *testing.T) {
	t.Parallel()
	seeds := []int64{5612, 6244, 6767, 8317}
	if testing.Short() {
		seeds = seeds[:1] // the race pass (-short); the non-race pass runs all four
	}
	for _, seed := range seeds {
		fail(t, Run(t, seed, Options{Restrict: today, Classic: true})) // their worlds before caps and backfills were drawn
	}
}

// TestSimTaskCapHoldsFires: a task with max_running 1 fired every second
// whose attempts take 3 s runs one at a time (I9), and its fires wait in
// the queue past I4's bound for the cap's slot, which I4 explains by the
// full cap rather than reporting them lost.
func TestSimTaskCapHoldsFires(t *testing.T) {
	t.Parallel()
	p := &genPipeline{name: "p0", zone: "UTC", group: "default", misfire: "fire_once", overlap: "allow", tasks: []*genTask{
		{name: "slow", timeout: 10 * time.Second, maxRunning: 1,
			cron: &cronForm{text: "@every 1s", every: time.Second}, misfire: "fire_once", overlap: "allow"}}}
	regression(t, &scenario{pipelines: []*genPipeline{p}, start: time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC),
		steps: advanceBy(6, 10*time.Second), latency: map[string]time.Duration{"p0.slow": 3 * time.Second}})
}

// TestSimMisfireSkipIsRemembered: seed 7915 of the 10,000-seed run with
// caps, backfills and the synchronous form (the one failure, I4 misfire,
// 6 of 6 runs): an outage of 36 h under misfire: skip skipped its 220
// fires and made no run; after a second outage 6 min later, the next start
// took the backlog from the trigger's last run again, counted a fire only
// 1.6 s late as part of the 36-hour misfire, and skipped it too. The
// newest fire a decision judged is now kept (judgedSetting).
func TestSimMisfireSkipIsRemembered(t *testing.T) {
	t.Parallel()
	fail(t, Run(t, 7915, Options{Restrict: today}))
}

// TestSimCapsCountExecutions: I9 counts executions as the executors saw
// them, in the order of their starts and ends. Counting instances recorded
// RUNNING, it reported seed 7801 in about one run in five: the engine frees
// a slot when the executor returns, a moment before the result is recorded,
// and the next attempt was recorded RUNNING first. Counting by time alone,
// it reported seed 790: an execution that ended in the instant it started,
// before the next of its group started in that instant. Seed 252 of the
// current worlds is the one that finds the rerun of a FAILED instance past
// its task's cap (TestRerunOfAFailedInstanceRespectsTheTaskCap) when that
// fix is reverted, 3 runs of 3. Seed 67 (one run in about 12): an HTTP
// attempt timed out and the next of its group started in the instant the
// executor ended it, in goroutine order; across processes an instant has
// no order. Seed 3209 (10,000 seeds of d619b4f): a group cap lowered
// through the store's queue while 16 of the group ran; attempts recorded
// RUNNING before it, waiting in the start queue, started after it, as
// docs/operating.md says (the caps are judged when an attempt is recorded).
func TestSimCapsCountExecutions(t *testing.T) {
	t.Parallel()
	seeds := []int64{7801, 790, 252, 67, 3209}
	if testing.Short() {
		// The race pass (-short): seed 252, the one that finds an engine bug
		// (the others were the checker's false alarms) and the cheapest
		// (7801 alone takes 20 s under -race); the non-race pass runs all five.
		seeds = []int64{252}
	}
	for _, seed := range seeds {
		fail(t, Run(t, seed, Options{Restrict: today}))
	}
}

// TestSimNoStartBeforeTheFireTime: I10 on seeds 146, 192 and 297 of the
// first 300 (nine of them failed, the first time the check ran). Seeds 146
// and 297: a root whose only upstream is in another pipeline started as
// soon as that pipeline's run succeeded, up to the five minutes its run
// is made ahead before its fire time (146: at the very instant the run was
// made, on the other pipeline's earlier success). Seed 192: a root whose
// run an operator cancelled before its fire time, then reran, started at
// the rerun, four minutes early. The release time is now one rule
// (engine's releaseAt): the later of the run's fire time and the moment
// nothing holds the instance, plus its delay.
func TestSimNoStartBeforeTheFireTime(t *testing.T) {
	t.Parallel()
	seeds := []int64{146, 192, 297}
	if testing.Short() {
		seeds = seeds[:1]
	}
	for _, seed := range seeds {
		fail(t, Run(t, seed, Options{Restrict: today}))
	}
}

// TestSimSilentIsNotDead: seeds that failed on main 515a3da once I1 counted
// executions to their end on a silent executor and long HTTP timeouts were
// drawn (drawSlow), and once I12 judged routing. Seeds 10 and 223 (I1): an
// executor fell silent while it ran a long attempt; the sweep failed the
// attempt over as lost and its retry ran on the other executor beside it.
// Seeds 7 and 113 (I12): with every registered executor of a task excluded,
// routing sent the work to the task's own URL, the excluded executor's
// address. Each passes once silent is not dead and routing sends nothing to
// an excluded executor (a generator change may call for other seeds: run
// make sim).
func TestSimSilentIsNotDead(t *testing.T) {
	t.Parallel()
	seeds := []int64{10, 223, 7, 113}
	if testing.Short() {
		seeds = seeds[:1]
	}
	for _, seed := range seeds {
		fail(t, Run(t, seed, Options{Restrict: today}))
	}
}

// TestSimPauseHoldsOperatorWork: I13 (nothing under a pause starts, whoever
// made it) failed on main 515a3da on seeds 153, 159, 166, 177, 180, 183, 189,
// 197, 214, 218 and more of 1–300 once the driver aimed triggers and reruns
// at paused tasks: seed 166 a rerun started at once under its pipeline's
// pause, 177 and 183 a trigger's run, 218 the retry of a manual run (the
// dispatcher and the resolver exempted manual runs).
func TestSimPauseHoldsOperatorWork(t *testing.T) {
	t.Parallel()
	seeds := []int64{166, 177, 183, 218}
	if testing.Short() {
		seeds = seeds[:1]
	}
	for _, seed := range seeds {
		fail(t, Run(t, seed, Options{}))
	}
}

// TestSimBreakerCutsToATenth: I14 (with a breaker open, a task's dispatches
// in the next window are at most a tenth, rounded up, of those in the
// window before) failed on main 515a3da on seeds 11, 64, 94, 101, 115, 165,
// 173, 201, 274 and 277 of 1–300: the open breaker cut the task to a tenth
// of a base rate (10/s by default), which slows nothing that fires slower
// than once a second (seed 115: 132 dispatches in the 67 s after it opened,
// after 34 in the five minutes before). With the cut, seeds 329, 341 and
// 445 of 301–600 failed on the checker: 341 counted, as the opener's, ten
// dispatches of the primary that started in the instant the opener
// stopped (I14 now leaves out the instant its window is cut at); 329 and
// 445 saw fires wait behind a cut whose breaker_open alert came between a
// change of primary and the next check, which breakerOpen gave to the old
// primary (I4 now takes either).
func TestSimBreakerCutsToATenth(t *testing.T) {
	t.Parallel()
	seeds := []int64{64, 115, 165, 201, 329, 341, 445}
	if testing.Short() {
		seeds = seeds[:1]
	}
	for _, seed := range seeds {
		fail(t, Run(t, seed, Options{}))
	}
}

// TestSimReleasedRerunNumbersPastItsAttempt: I11 on seeds 1260 and 3013 of
// 1201–3200, the first run of the merged invariants over them. An instance
// that ran (attempt 1), was rerun, skipped by the misfire policy while no
// scheduler ran, and rerun again ("it never ran") was released by its
// upstreams and dispatched as attempt 1 again: a release built the queued
// instance without its last attempt. The run cache now keeps each
// instance's last attempt (dispatched) and a release carries it.
func TestSimReleasedRerunNumbersPastItsAttempt(t *testing.T) {
	t.Parallel()
	seeds := []int64{1260, 3013}
	if testing.Short() {
		seeds = seeds[:1]
	}
	for _, seed := range seeds {
		fail(t, Run(t, seed, Options{Restrict: today}))
	}
}

// TestSimScheduleChangeMovesOnlyItsTrigger: I4 (misfire) on seeds 165,
// 211 and 225 of 1–300, the first run with schedule changes (reschedule):
// a schedule changed in the files while no scheduler ran moved the backlog
// of the other schedules of its pipeline that had not run yet to the
// restart, and their missed fires were lost (seed 165: p0.t2's 02:45 fire
// under fire_all). A schedule's backlog now counts from its own change.
func TestSimScheduleChangeMovesOnlyItsTrigger(t *testing.T) {
	t.Parallel()
	seeds := []int64{165, 211, 225}
	if testing.Short() {
		seeds = seeds[:1]
	}
	for _, seed := range seeds {
		fail(t, Run(t, seed, Options{Restrict: today}))
	}
}

// TestSimScheduleChangesAndDelays: seeds whose first runs with schedule
// changes and delays failed on the checker, each kept so that its rule
// stays: a live reload in the instant a start judged its backlog (294: the
// misfire check now takes the form in force before the instant); runs
// made ahead that a change dropped and the replay still held (205 and 6,
// I15; 62 and 29, I3c matched a dropped run): they are forgotten once
// their rows are gone; an overlap skip judged at the fire time when a
// delay releases the instance later (11, I4).
func TestSimScheduleChangesAndDelays(t *testing.T) {
	t.Parallel()
	seeds := []int64{294, 205, 6, 62, 29, 11}
	if testing.Short() {
		seeds = seeds[:1]
	}
	for _, seed := range seeds {
		fail(t, Run(t, seed, Options{Restrict: today}))
	}
}

// TestSimBatchMovesTwiceInOrder: I6 on seed 78 of 1–300 with schedule
// changes: a resume scheduled a paused instance whose fire had passed and
// the misfire rule skipped it, in one batch after another instance's skip
// of the same shape; the store wrote the skip first, the instance stayed
// SCHEDULED under a history that says FAILED, and it was dispatched. The
// store now writes an instance's moves in batch order.
func TestSimBatchMovesTwiceInOrder(t *testing.T) {
	t.Parallel()
	fail(t, Run(t, 78, Options{Restrict: today}))
}

// TestSimChangedScheduleRules: seeds 4040 and 4457 of 4001–4800 failed on
// the checker's reading of schedule changes: an old schedule's fire just
// before a start found the change, released after it by its delay, is the
// old schedule's fire before the change, not one missed (4040, I15); a
// live reload that the primary applies later (its loop in a store error's
// backoff) is in force from when it is applied (4457: its writes were
// taken for a refused verb's, I8).
func TestSimChangedScheduleRules(t *testing.T) {
	t.Parallel()
	for _, seed := range []int64{4040, 4457} {
		fail(t, Run(t, seed, Options{Restrict: today}))
	}
}

// TestSimDelayedFireAtTheStart: I4 (misfire) on seed 5865 of 5601–6400
// failed on the checker: a fire 12 s before a start, whose task's delay
// releases it after the start, falls due when a scheduler runs, so the
// engine runs it on time beside the misfire rule's one catch-up; the
// check now leaves such fires out of the backlog.
func TestSimDelayedFireAtTheStart(t *testing.T) {
	t.Parallel()
	fail(t, Run(t, 5865, Options{Restrict: today}))
}

// TestSimGivenUpLeaseLeavesAttemptsToTheNext: I1 on seed 7801 (make test's
// cap seeds, once worlds changed schedules): a primary whose writes failed
// three turns in a row gave its lease up and, still holding it while it
// cancelled its attempts, recorded an HTTP attempt as given back; the next
// primary dispatched it again while its executor still ran the first. A
// primary that gives its lease up now ends its term before cancelling, so
// the attempts are the next primary's to judge, as after a lost lease.
func TestSimGivenUpLeaseLeavesAttemptsToTheNext(t *testing.T) {
	t.Parallel()
	fail(t, Run(t, 7801, Options{Restrict: today}))
}

// TestSimRedispatchedTicketKeepsItsDeadline: I1 on seed 5898 of 5601–6400.
// A primary that took over found an inherited HTTP ticket unknown to its
// restarted executor and dispatched it again, its timeout counted from then,
// and crashed; the next primary counted the timeout from the first dispatch,
// 36 s earlier, failed the ticket as an unknown outcome while the executor
// still ran it (and said so) and ran the retry on another executor beside
// it. A new primary now counts an inherited ticket's timeout from its last
// recorded redispatch.
func TestSimRedispatchedTicketKeepsItsDeadline(t *testing.T) {
	t.Parallel()
	fail(t, Run(t, 5898, Options{Restrict: today}))
}

// TestSimInheritedQueuedAttemptHoldsItsCap: I9 on seed 6514 (once in an
// 800-seed run of 6401-7200; the order of goroutines in an instant decides
// it, and 36 replays alone passed). Primary e5, with a server cap of 2,
// recorded local attempts of group etl RUNNING that waited in its start
// queue and started up to two seconds later, their timeouts counting from
// then; it stalled past its lease, and e6 took over, timed one of them out
// from its recorded start, freed its slot under the group cap of 4
// and started two more of the group while e5 still ran one. An inherited
// local attempt now times out from the old lease's end
// (engine's TestInheritedLocalAttemptTimesOutAfterTheOldLease fails
// without it, every time).
func TestSimInheritedQueuedAttemptHoldsItsCap(t *testing.T) {
	t.Parallel()
	fail(t, Run(t, 6514, Options{Restrict: today}))
}

// TestSimFireReleasedAfterTheStartWithoutARun: I4 (misfire) on seed 6031
// failed on the engine: a task with a delay under fire_once missed fires
// while no scheduler ran; the last fell 8 s before the start, released 11 s
// after it, and had no run yet. The engine counted fires without a run by
// their fire time (those made ahead by their release), took that one for
// the latest missed fire, and skipped the real latest: the catch-up never
// ran. Fires without a run now count by their release too.
func TestSimFireReleasedAfterTheStartWithoutARun(t *testing.T) {
	t.Parallel()
	fail(t, Run(t, 6031, Options{Restrict: today}))
}

// TestSimRunMadeUnderTheOldScheduleAfterAnOutage: I4 (misfire) on seed
// 6672 failed on the checker: a run made ahead under */10, which a live
// change to */2 could not drop (an operator had marked one of its tasks),
// fell due in a later outage; the engine skipped it as the old schedule's
// fire (the change rule), and the check took it for a run fire_once let
// through. The check now leaves such runs to the change rule and checks
// there that they never start.
func TestSimRunMadeUnderTheOldScheduleAfterAnOutage(t *testing.T) {
	t.Parallel()
	fail(t, Run(t, 6672, Options{Restrict: today}))
}

// TestSimResumeOfANumberedRequest: I13 on seed 5869 failed on the checker:
// p0.t0, paused at 02:05, was resumed at 02:30:44.667 and ran from then on;
// the resume's action detail ends with " (request 1)" after the request's
// JSON, which the check could not decode, so it kept the pause in force and
// took every later dispatch for one under it. The check now reads the JSON
// object alone.
func TestSimResumeOfANumberedRequest(t *testing.T) {
	t.Parallel()
	fail(t, Run(t, 5869, Options{Restrict: today}))
}

// TestSimBreakerOpenedAsThePrimaryChanges: I14 on seed 5675 (about one run
// in three; goroutine order in one instant decides it): a stopping primary
// recorded its last results, opening p0.t4's breaker, in the instant the
// next took the lease; the checker took the new primary for the opener and
// counted its dispatches against a breaker it never had. The checker now
// leaves out a window whose alert falls where the primary changed.
func TestSimBreakerOpenedAsThePrimaryChanges(t *testing.T) {
	t.Parallel()
	fail(t, Run(t, 5675, Options{Restrict: today}))
}
