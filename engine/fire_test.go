package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// TestEverySecondFiresEverySecond: a task on @every 1s that takes a few
// milliseconds fires 3,600 times in a simulated hour. The instance of the
// next second is claimed while the one of this second still counts as
// running; that must never make it an overlap (R39).
func TestEverySecondFiresEverySecond(t *testing.T) {
	hour := 3600
	if testing.Short() {
		// The race pass (-short): ten minutes, as for wait; the hour runs
		// in the non-race pass (go test ./... without -short).
		hour = 600
	}
	t.Run("skip", func(t *testing.T) { everySecond(t, "skip", hour) })
	t.Run("wait", func(t *testing.T) { everySecond(t, "wait", 600) }) // the same rule: ten minutes show it
}

// everySecond runs a few-millisecond task on @every 1s for fires seconds.
func everySecond(t *testing.T, policy string, fires int) {
	synctest.Test(t, func(t *testing.T) {
		quick := map[string]func(context.Context, runner.Attempt) error{
			"s.a": func(context.Context, runner.Attempt) error { time.Sleep(5 * time.Millisecond); return nil },
		}
		start := time.Now()
		e := setup(t, Config{}, quick, "pipeline: s\ntimezone: UTC\nschedule: \"@every 1s\"\noverlap: "+policy+"\ntasks:\n  - {name: a, function: record}\n")
		span := time.Duration(fires) * time.Second
		sleep(span + 500*time.Millisecond)
		e.stop()
		calls := e.rec.snapshot()
		seen := map[time.Duration]int{}
		for _, c := range calls {
			seen[c.logical.Sub(start)]++
		}
		for s := time.Second; s <= span; s += time.Second {
			if seen[s] != 1 {
				t.Fatalf("the fire at +%s ran %d times, want once (%d executions in all)", s, seen[s], len(calls))
			}
		}
		if len(calls) != fires {
			t.Errorf("%d executions in %s, want %d", len(calls), span, fires)
		}
		for _, c := range calls {
			if !c.at.Equal(c.logical) {
				t.Fatalf("the fire at +%s started %s late", c.logical.Sub(start), c.at.Sub(c.logical))
			}
		}
		if a := e.actions("overlap_skip"); len(a) != 0 {
			t.Errorf("%d overlap skips, want none; first: %+v", len(a), a[0])
		}
	})
}

// TestOverlapSkipsExactlyTheFiresWhileRunning: a task on @every 1s that
// takes 1.5 s runs at every fire that finds it idle and skips exactly the
// fires that arrive while an attempt runs.
func TestOverlapSkipsExactlyTheFiresWhileRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := map[string]func(context.Context, runner.Attempt) error{
			"s.a": func(context.Context, runner.Attempt) error { time.Sleep(1500 * time.Millisecond); return nil },
		}
		start := time.Now()
		const fires = 600
		e := setup(t, Config{}, slow, "pipeline: s\ntimezone: UTC\nschedule: \"@every 1s\"\ntasks:\n  - {name: a, function: record}\n")
		sleep(fires*time.Second + 500*time.Millisecond)
		e.stop()
		// Worked by hand: the fire at +1s runs until +2.5s, so +2s is skipped
		// and +3s runs (until +4.5s): odd seconds run, even seconds skip.
		ran := map[time.Duration]bool{}
		for _, c := range e.rec.snapshot() {
			at := c.logical.Sub(start)
			if ran[at] {
				t.Errorf("the fire at +%s ran twice", at)
			}
			ran[at] = true
			if c.at.Sub(c.logical) != 0 {
				t.Errorf("the fire at +%s started %s late", at, c.at.Sub(c.logical))
			}
		}
		skipped := map[time.Duration]bool{}
		for _, in := range e.instances(store.InstanceFilter{TaskID: "s.a", States: []axtype.State{axtype.Failed}}) {
			if !strings.Contains(in.Error, "overlap: skip") {
				t.Errorf("instance at +%s failed: %s", in.LogicalTime.Sub(start), in.Error)
			}
			skipped[in.LogicalTime.Sub(start)] = true
		}
		for s := 1; s <= fires; s++ {
			at := time.Duration(s) * time.Second
			wantRun := s%2 == 1
			if ran[at] != wantRun || skipped[at] == wantRun {
				t.Fatalf("fire at +%s: ran %v, skipped %v; want ran %v", at, ran[at], skipped[at], wantRun)
			}
		}
		if n := len(e.actions("overlap_skip")); n != fires/2 {
			t.Errorf("%d overlap_skip actions, want %d", n, fires/2)
		}
	})
}

// TestMisfireAfterOutage: a scheduler stopped for 30 s, 10 minutes or 3
// days starts again; the fires that passed meanwhile follow the misfire
// policy exactly: fire_once runs one (the latest), skip none (logged),
// fire_all all of them up to MisfireLimit (the latest ones).
func TestMisfireAfterOutage(t *testing.T) {
	const every = 10 * time.Second
	for _, outage := range []time.Duration{30 * time.Second, 10 * time.Minute, 72 * time.Hour} {
		for _, policy := range []string{"fire_once", "skip", "fire_all"} {
			t.Run(fmt.Sprintf("%s/%s", outage, policy), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					start := time.Now()
					cfg := Config{} // the default threshold: a 30 s outage is a misfire
					e := setup(t, cfg, nil, fmt.Sprintf("pipeline: m\ntimezone: UTC\nschedule: \"@every 10s\"\nmisfire: %s\ntasks:\n  - {name: a, function: record}\n", policy))
					// Stopped half a second before +40s: that fire is claimed ahead
					// and given back at the stop, a missed fire like the others.
					sleep(39*time.Second + 500*time.Millisecond) // fires at +10s, +20s, +30s run
					e.stop()
					before := len(e.rec.snapshot())
					if before != 3 {
						t.Fatalf("%d executions before the outage, want 3", before)
					}
					sleep(outage)
					back := 39*time.Second + 500*time.Millisecond + outage
					e.restart(cfg, 4*time.Second)
					// The missed fires are +40s … the last multiple of 10 s before back.
					first, last := 40*time.Second, back/every*every
					missed := int((last-first)/every) + 1
					var want []time.Duration
					switch policy {
					case "fire_once":
						want = []time.Duration{last}
					case "fire_all":
						for at := last - time.Duration(min(missed, 100)-1)*every; at <= last; at += every {
							want = append(want, at)
						}
					}
					var got []time.Duration
					for _, c := range e.rec.snapshot()[before:] {
						if at := c.logical.Sub(start); at < back { // later ones are regular fires
							got = append(got, at)
						}
					}
					if fmt.Sprint(got) != fmt.Sprint(want) {
						t.Errorf("after the outage ran %d fire(s) %v, want %v", len(got), short(got), short(want))
					}
					acts := e.actions("misfire")
					if len(acts) != 1 || acts[0].Reason != policy || !strings.Contains(acts[0].Detail, fmt.Sprintf("%d missed fire(s)", missed)) {
						t.Errorf("misfire actions: %+v, want one naming %d missed fire(s)", acts, missed)
					}
					// No instance of a missed fire is left to run later.
					for _, in := range e.instances(store.InstanceFilter{TaskID: "m.a", LogicalTo: start.Add(last)}) {
						if in.State != axtype.Success && in.State != axtype.Failed {
							t.Errorf("fire at +%s left %s", in.LogicalTime.Sub(start), in.State)
						}
						if in.State == axtype.Failed && !strings.Contains(in.Error, "skipped by misfire policy "+policy) {
							t.Errorf("fire at +%s failed without the reason: %s", in.LogicalTime.Sub(start), in.Error)
						}
					}
				})
			})
		}
	}
}

// short prints a long list of offsets by its ends.
func short(d []time.Duration) string {
	if len(d) <= 6 {
		return fmt.Sprint(d)
	}
	return fmt.Sprintf("%v … %v", d[:3], d[len(d)-3:])
}

// TestShortOutageRunsLate: a backlog whose earliest fire is within
// MisfireAfter (here set to a minute) is no misfire: even under skip, each
// fire runs late, once, and no misfire is logged.
func TestShortOutageRunsLate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		e := setup(t, Config{MisfireAfter: time.Minute}, nil, "pipeline: m\ntimezone: UTC\nschedule: \"@every 10s\"\nmisfire: skip\ntasks:\n  - {name: a, function: record}\n")
		sleep(39*time.Second + 500*time.Millisecond)
		e.stop()
		before := len(e.rec.snapshot())
		sleep(30 * time.Second) // back at +69.5s: +40s is 29.5 s late
		e.restart(Config{MisfireAfter: time.Minute}, 4*time.Second)
		var got []time.Duration
		for _, c := range e.rec.snapshot()[before:] {
			got = append(got, c.logical.Sub(start))
		}
		if want := "[40s 50s 1m0s 1m10s]"; fmt.Sprint(got) != want { // +70s is the first regular fire after the restart
			t.Errorf("after a 30 s outage ran %v, want %s", got, want)
		}
		if a := e.actions("misfire"); len(a) != 0 {
			t.Errorf("misfire actions %+v, want none", a)
		}
	})
}

// TestMisfireCatchUpsAreNeverOverlapSkipped: every fire of a backlog that
// the misfire rule chose to run runs, however little late the latest of
// them is when its turn comes. Found from outside on a real server: after a
// 93-second outage, fire_all logged "run=93" but the latest fire, under two
// seconds late, met a running catch-up and was skipped by the overlap
// policy (92 ran). Here a per-second task taking 40 ms is stopped at +9.5 s
// for 60 s: the backlog is +10s … +69s (60 fires, back at +69.5 s), all
// within MisfireLimit, so all 60 run, once each, in fire order.
func TestMisfireCatchUpsAreNeverOverlapSkipped(t *testing.T) {
	for _, policy := range []string{"fire_all", "fire_once"} {
		t.Run(policy, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				slowish := map[string]func(context.Context, runner.Attempt) error{
					"m.a": func(context.Context, runner.Attempt) error { time.Sleep(40 * time.Millisecond); return nil },
				}
				start := time.Now()
				cfg := Config{MisfireAfter: 5 * time.Second}
				e := setup(t, cfg, slowish, "pipeline: m\ntimezone: UTC\nschedule: \"@every 1s\"\nmisfire: "+policy+"\ntasks:\n  - {name: a, function: record}\n")
				sleep(9*time.Second + 500*time.Millisecond) // +1s … +9s run
				e.stop()
				before := len(e.rec.snapshot())
				if before != 9 {
					t.Fatalf("%d executions before the outage, want 9", before)
				}
				sleep(60 * time.Second)
				e.restart(cfg, 10*time.Second)
				var want []time.Duration
				if policy == "fire_all" {
					for s := 10; s <= 69; s++ {
						want = append(want, time.Duration(s)*time.Second)
					}
				} else {
					want = []time.Duration{69 * time.Second}
				}
				var got []time.Duration
				for _, c := range e.rec.snapshot()[before:] {
					if at := c.logical.Sub(start); at < 69500*time.Millisecond {
						got = append(got, at)
					}
				}
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("the backlog ran %d fire(s) %v, want %d %v", len(got), short(got), len(want), short(want))
				}
				for _, in := range e.instances(store.InstanceFilter{TaskID: "m.a", States: []axtype.State{axtype.Failed}}) {
					if at := in.LogicalTime.Sub(start); at < 69500*time.Millisecond && strings.Contains(in.Error, "overlap") {
						t.Errorf("backlog fire at +%s skipped by the overlap policy: %s", at, in.Error)
					}
				}
			})
		})
	}
}

// TestResumeCatchUpsAreNeverOverlapSkipped: the same at a resume. A
// per-second task taking 400 ms is paused for 30 s with fire_all; at the
// resume all 30 missed fires run late, one after the other (12 s of work),
// and none is skipped by the overlap policy while the one before runs.
func TestResumeCatchUpsAreNeverOverlapSkipped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slowish := map[string]func(context.Context, runner.Attempt) error{
			"m.a": func(context.Context, runner.Attempt) error { time.Sleep(400 * time.Millisecond); return nil },
		}
		start := time.Now()
		e := setup(t, Config{MisfireAfter: 5 * time.Second}, slowish,
			"pipeline: m\ntimezone: UTC\nschedule: \"@every 1s\"\nmisfire: fire_all\ntasks:\n  - {name: a, function: record}\n")
		sleep(500 * time.Millisecond)
		if _, err := e.do(Pause{Scope: store.ScopePipeline, Target: "m"}); err != nil {
			t.Fatal(err)
		}
		sleep(30 * time.Second) // fires +1s … +30s pass while paused; back at +30.5s
		if _, err := e.do(Resume{Scope: store.ScopePipeline, Target: "m"}); err != nil {
			t.Fatal(err)
		}
		sleep(20 * time.Second)
		e.stop()
		ran := map[time.Duration]int{}
		for _, c := range e.rec.snapshot() {
			ran[c.logical.Sub(start)]++
		}
		for s := 1; s <= 30; s++ {
			if at := time.Duration(s) * time.Second; ran[at] != 1 {
				t.Errorf("missed fire at +%s ran %d times, want once", at, ran[at])
			}
		}
		for _, in := range e.instances(store.InstanceFilter{TaskID: "m.a", States: []axtype.State{axtype.Failed}}) {
			if at := in.LogicalTime.Sub(start); at <= 30*time.Second {
				t.Errorf("missed fire at +%s failed: %s", at, in.Error)
			}
		}
	})
}

// TestMisfireCountsFiresByTheirRelease: a fire falls due at its release,
// the fire time plus its task's delay, whether or not its run was made
// ahead. A task on "@every 1m" with delay 30s is stopped at +1m45s and
// started again at +12m10s: the fires +2m … +11m were released while no
// scheduler ran (fire_once runs the latest, +11m); the fire at +12m is
// released at +12m30s, after the start, so it is no misfire and runs on
// time beside the catch-up.
func TestMisfireCountsFiresByTheirRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		e := setup(t, Config{}, nil, "pipeline: m\ntimezone: UTC\nschedule: \"@every 1m\"\nmisfire: fire_once\ntasks:\n  - {name: a, function: record, delay: 30s}\n")
		sleep(time.Minute + 45*time.Second) // the fire at +1m runs at +1m30s
		e.stop()
		before := len(e.rec.snapshot())
		if before != 1 {
			t.Fatalf("%d executions before the outage, want 1", before)
		}
		sleep(10*time.Minute + 25*time.Second) // back at +12m10s
		e.restart(Config{}, 25*time.Second)    // to +12m35s
		var got []time.Duration
		for _, c := range e.rec.snapshot()[before:] {
			got = append(got, c.logical.Sub(start))
		}
		if want := "[11m0s 12m0s]"; fmt.Sprint(got) != want {
			t.Errorf("after the outage ran %v, want %s (the catch-up, then the fire released after the start)", got, want)
		}
		acts := e.actions("misfire")
		if len(acts) != 1 || !strings.Contains(acts[0].Detail, "10 missed fire(s)") {
			t.Errorf("misfire actions: %+v, want one naming 10 missed fire(s) (+2m … +11m)", acts)
		}
	})
}
