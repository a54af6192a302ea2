package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"
)

// schedP is a pipeline on schedule s under fire_once.
func schedP(s string) string {
	return fmt.Sprintf(`pipeline: s
timezone: UTC
schedule: %q
misfire: fire_once
defaults: {function: record}
tasks:
  - {name: a}
`, s)
}

// startOn starts an engine (holder h) on e's store with the pipelines srcs,
// as a process restarted with changed files would; the function it returns
// stops it.
func (e *env) startOn(h string, srcs ...string) func() {
	e.t.Helper()
	eng, err := New(Config{Holder: h, Logger: e.eng.cfg.Logger}, e.st, compile(e.t, srcs...), e.eng.execs)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	synctest.Wait()
	return func() {
		e.t.Helper()
		cancel()
		if err := <-done; err != nil {
			e.t.Fatal(err)
		}
	}
}

// TestScheduleChangedWhileDownMisfiresByTheNewSchedule: a schedule changed
// from every second to daily while no scheduler ran. At the restart, no
// fire of the old schedule runs under fire_once (neither its runs made
// ahead that fell due in the outage, nor those still ahead), and the new
// schedule counts its fires from the change on. After a second outage
// over a fire of the new schedule, fire_once runs that fire once.
func TestScheduleChangedWhileDownMisfiresByTheNewSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now() // midnight
		e := setup(t, Config{}, nil, schedP("* * * * * *"))
		sleep(10 * time.Second)
		e.stop() // runs exist ahead up to +5m10s
		old := len(e.rec.snapshot())
		if old < 9 {
			t.Fatalf("the old schedule ran %d times in 10 s", old)
		}
		sleep(2*time.Hour - 10*time.Second) // the outage; the file now says daily at 02:30
		daily := schedP("0 30 2 * * *")
		stop := e.startOn("test-2", daily)
		sleep(time.Minute)
		stop()
		var after []string
		for _, c := range e.rec.snapshot()[old:] {
			after = append(after, fmt.Sprintf("%s@%s", c.logical.Sub(start), c.at.Sub(start)))
		}
		if len(after) > 0 {
			t.Errorf("after the restart with the schedule changed to daily at 02:30, ran %v (logical@start), want nothing: fires of the old schedule", after)
		}
		for _, in := range e.instances(store.InstanceFilter{TaskID: "s.a"}) {
			if in.State == axtype.Scheduled || in.State == axtype.Waiting || in.State == axtype.Retrying {
				t.Errorf("instance %d for +%s of the old schedule is still %s", in.ID, in.LogicalTime.Sub(start), in.State)
			}
		}
		sleep(time.Hour) // a second outage, over 02:30: a fire of the new schedule after the change
		stop = e.startOn("test-3", daily)
		sleep(time.Minute)
		stop()
		after = after[:0]
		for _, c := range e.rec.snapshot()[old:] {
			after = append(after, fmt.Sprintf("%s@%s", c.logical.Sub(start), c.at.Sub(start)))
		}
		if got := strings.Join(after, " "); got != "2h30m0s@3h1m0s" {
			t.Errorf("after an outage over 02:30, the new schedule's fire, ran %q, want 2h30m0s@3h1m0s (fire_once: the missed fire once)", got)
		}
	})
}

// TestScheduleChangedByReloadWhilePaused: a live reload that changes a
// paused schedule behaves as a restart with the change does. The reload
// drops the old schedule's runs ahead; at the resume, the fires of the
// old schedule held by the pause are not run (fire_once does not run the
// latest of them), and the new schedule fires on time.
func TestScheduleChangedByReloadWhilePaused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		e := setup(t, Config{}, nil, schedP("* * * * * *"))
		sleep(5 * time.Second)
		if _, err := e.do(Pause{Scope: store.ScopePipeline, Target: "s"}); err != nil {
			t.Fatal(err)
		}
		sleep(20 * time.Second) // the old schedule's fires pass under the pause
		old := len(e.rec.snapshot())
		if _, err := e.eng.Reload(compile(t, schedP("0 1 0 * * *"))); err != nil { // daily at 00:01
			t.Fatal(err)
		}
		sleep(10 * time.Second)
		if _, err := e.do(Resume{Scope: store.ScopePipeline, Target: "s"}); err != nil {
			t.Fatal(err)
		}
		sleep(time.Minute)
		e.stop()
		var after []string
		for _, c := range e.rec.snapshot()[old:] {
			after = append(after, fmt.Sprintf("%s@%s", c.logical.Sub(start), c.at.Sub(start)))
		}
		if got := strings.Join(after, " "); got != "1m0s@1m0s" {
			t.Errorf("after the reload to daily at 00:01 and the resume, ran %q (logical@start), want 1m0s@1m0s: no fire of the old schedule", got)
		}
	})
}

// twoCrons is pipeline m with two task schedules under fire_once: a daily
// at 01:00 (which has not fired yet) and b on form bForm.
func twoCrons(bForm string) string {
	return fmt.Sprintf(`pipeline: m
timezone: UTC
misfire: fire_once
defaults: {function: record}
tasks:
  - {name: a, cron: "0 0 1 * * *"}
  - {name: b, cron: %q}
`, bForm)
}

// TestScheduleChangeMovesOnlyItsTrigger: a schedule changed while no
// scheduler ran is in force from the restart on, and the other schedules
// of its pipeline keep theirs. m.a (daily at 01:00, never fired before the
// outage) missed its 01:00 fire while down; the restart finds m.b's
// schedule changed and m.a's not: fire_once runs m.a's 01:00 fire once.
// The backlog of a schedule that never ran counted from the last change of
// its pipeline's stored definition, which m.b's change moved to the
// restart: m.a's fire was lost (the simulator's seed 165, I4).
func TestScheduleChangeMovesOnlyItsTrigger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now() // midnight
		e := setup(t, Config{}, nil, twoCrons("0 */10 * * * *"))
		sleep(30 * time.Minute)
		e.stop()
		sleep(time.Hour) // the outage, over m.a's 01:00; m.b now fires every 20 minutes
		stop := e.startOn("test-2", twoCrons("0 */20 * * * *"))
		sleep(time.Minute)
		stop()
		var ran []string
		for _, c := range e.rec.snapshot() {
			if c.task == "m.a" {
				ran = append(ran, fmt.Sprintf("%s@%s", c.logical.Sub(start), c.at.Sub(start)))
			}
		}
		if got := strings.Join(ran, " "); got != "1h0m0s@1h30m0s" {
			t.Errorf("m.a ran %q, want its 01:00 fire once at the restart (1h0m0s@1h30m0s): its own schedule did not change", got)
		}
	})
}

// TestScheduleAddedWhileDownCountsFromTheStart: a schedule added to the
// files while no scheduler ran is in force from the start that finds it:
// its fire in the outage (01:00, before it existed) is not missed.
func TestScheduleAddedWhileDownCountsFromTheStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := setup(t, Config{}, nil, twoCrons("0 */10 * * * *"))
		sleep(30 * time.Minute)
		e.stop()
		sleep(time.Hour) // the outage, over 01:00; m.c is added, daily at 01:00
		stop := e.startOn("test-2", twoCrons("0 */10 * * * *")+"  - {name: c, cron: \"0 0 1 * * *\"}\n")
		sleep(time.Minute)
		stop()
		for _, c := range e.rec.snapshot() {
			if c.task == "m.c" {
				t.Errorf("m.c, added while no scheduler ran, ran its fire at %s from before it existed", c.logical.Format("15:04"))
			}
		}
	})
}
