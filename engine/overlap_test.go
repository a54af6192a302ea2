package engine

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

func TestOverlapDecide(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	sec := func(n float64) time.Time { return now.Add(time.Duration(n * float64(time.Second))) }
	for _, tc := range []struct {
		name                   string
		p                      defs.Overlap
		due                    time.Time
		backlog                time.Time // when the misfire rule judged the backlog (zero: never)
		running, held, claimed int
		want                   overlapVerdict
		retry                  bool // a RETRYING instance, not a fire
	}{
		{"idle, due now", defs.OverlapSkip, now, time.Time{}, 0, 0, 0, overlapGo, false},
		{"idle, claimed ahead", defs.OverlapSkip, sec(0.5), time.Time{}, 0, 0, 0, overlapGo, false},
		{"next second while this second's attempt is held", defs.OverlapSkip, sec(1), time.Time{}, 0, 1, 0, overlapLater, false},
		{"next second while this second's attempt runs", defs.OverlapSkip, sec(1), time.Time{}, 1, 0, 0, overlapLater, false},
		{"next second while one goes out in this batch", defs.OverlapSkip, sec(1), time.Time{}, 0, 0, 1, overlapLater, false},
		{"wait policy is judged at the fire time too", defs.OverlapWait, sec(1), time.Time{}, 1, 0, 0, overlapLater, false},
		{"on time while one runs: skip", defs.OverlapSkip, now, time.Time{}, 1, 0, 0, overlapSkip, false},
		{"one second late while one runs: still on time", defs.OverlapSkip, sec(-1), time.Time{}, 1, 0, 0, overlapSkip, false},
		{"three seconds late while one runs: queues", defs.OverlapSkip, sec(-3), time.Time{}, 1, 0, 0, overlapWait, false},
		{"wait policy queues", defs.OverlapWait, now, time.Time{}, 1, 0, 0, overlapWait, false},
		{"catch-up behind one in this batch", defs.OverlapSkip, now, time.Time{}, 0, 0, 1, overlapWait, false},
		{"misfire catch-up just due while one runs: queues", defs.OverlapSkip, sec(-1), now, 1, 0, 0, overlapWait, false},
		{"misfire catch-up run at the resume while one runs: queues", defs.OverlapSkip, now, now, 1, 0, 0, overlapWait, false},
		{"a regular fire after the backlog while one runs: skip", defs.OverlapSkip, now, sec(-0.5), 1, 0, 0, overlapSkip, false},
		{"allow ignores running", defs.OverlapAllow, now, time.Time{}, 3, 0, 0, overlapGo, false},
		{"allow claims ahead", defs.OverlapAllow, sec(1), time.Time{}, 3, 2, 1, overlapGo, false},
		{"a retry due now while one runs: queues, never skipped", defs.OverlapSkip, now, time.Time{}, 1, 0, 0, overlapWait, true},
		{"a retry not due yet while one runs: judged at its time", defs.OverlapSkip, sec(1), time.Time{}, 1, 0, 0, overlapLater, true},
		{"a retry with nothing live: goes", defs.OverlapSkip, now, time.Time{}, 0, 0, 0, overlapGo, true},
	} {
		if got := overlapDecide(tc.p, tc.due, now, tc.backlog, tc.running, tc.held, tc.claimed, tc.retry); got != tc.want {
			t.Errorf("%s: overlapDecide = %d, want %d", tc.name, got, tc.want)
		}
	}
}

// The overlap policy is judged against attempts that ran at the fire time,
// not against one that started after it (found by the simulator, seeds 329,
// 439 and 993 of 1000: a catch-up held back by --max-running started a
// second after the next fire, which a later batch then skipped as an
// overlap although nothing of its task ran when it fell due).
//
// Here the one local slot is held by hog from :00 to :10.5, so tick's :00
// fire starts at :10.5 and runs 2 s; tick's :10 fire fell due while nothing
// of tick ran, so it queues behind and runs at :12.5; it is not skipped.
// poke's fire at :11 only makes the loop judge the queue again then.
func TestOverlapJudgedAtTheFireTimeNotAtDispatch(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		src := `pipeline: cap
timezone: UTC
defaults: {function: record}
tasks:
  - {name: hog, cron: "0 * * * * *", priority: 1}
  - {name: tick, cron: "*/10 * * * * *", overlap: skip, priority: 3}
  - {name: poke, cron: "11 * * * * *", priority: 5}
`
		fns := map[string]func(context.Context, runner.Attempt) error{
			"cap.hog":  func(context.Context, runner.Attempt) error { time.Sleep(10500 * time.Millisecond); return nil },
			"cap.tick": func(context.Context, runner.Attempt) error { time.Sleep(2 * time.Second); return nil },
		}
		e := setup(t, Config{MaxRunning: 1}, fns, src)
		minute := time.Date(2000, 1, 1, 0, 1, 0, 0, time.UTC)
		sleep(time.Until(minute.Add(20 * time.Second)))
		e.stop()
		var got []string
		for _, in := range e.instances(store.InstanceFilter{TaskID: "cap.tick", ByLogicalTime: true, LogicalFrom: minute, LogicalTo: minute.Add(10 * time.Second)}) {
			got = append(got, fmt.Sprintf("%s %s %s", in.LogicalTime.UTC().Format("04:05"), in.State, in.Error))
		}
		want := []string{"01:00 SUCCESS ", "01:10 SUCCESS "}
		if !slices.Equal(got, want) {
			t.Errorf("tick's fires at 01:00 and 01:10: %q, want %q", got, want)
		}
	})
}
