package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// yearly fires once a year, on June 1 (the synctest clock starts on January
// 1), so that no run of its own appears in the tests: they make the runs
// they need.
const yearly = `pipeline: y
timezone: UTC
schedule: "0 0 1 6 *"
defaults: {function: record}
tasks:
  - {name: a}
  - {name: b, depends_on: [a]}
  - {name: c, depends_on: [b]}
`

// TestStrandedDownstreamReleasedAtStart: an upstream's success and the
// release of its downstream are two transactions. A process killed between
// them leaves a = SUCCESS and b = WAITING; the next scheduler must release b
// (and c after it) instead of leaving the run waiting forever.
func TestStrandedDownstreamReleasedAtStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		e := setup(t, Config{}, nil, yearly)
		e.stop()
		ctx := context.Background()
		at := start.Add(-time.Minute)
		_, insts, err := e.st.CreateRun(ctx, store.CreateRunParams{Pipeline: "y", Trigger: "y", Kind: axtype.RunSchedule, LogicalTime: at,
			Actor: "test", Now: at, Instances: []store.NewInstance{
				{TaskID: "y.a", Priority: 3, State: axtype.Scheduled, NextFireAt: at},
				{TaskID: "y.b", Priority: 3, State: axtype.Waiting},
				{TaskID: "y.c", Priority: 3, State: axtype.Waiting},
			}})
		if err != nil {
			t.Fatal(err)
		}
		a := insts[0]
		v, err := e.st.Transition(ctx, store.TransitionParams{InstanceID: a.ID, Version: a.Version, From: axtype.Scheduled, To: axtype.Running, Now: at, Actor: "test"})
		if err == nil {
			_, err = e.st.Transition(ctx, store.TransitionParams{InstanceID: a.ID, Version: v, From: axtype.Running, To: axtype.Success, Now: at, Actor: "test"})
		}
		if err != nil {
			t.Fatal(err)
		}
		// The process died here: b was never released.
		e.restart(Config{}, 5*time.Second)
		got := map[string]int{}
		for _, c := range e.rec.snapshot() {
			got[c.task]++
		}
		if got["y.a"] != 0 || got["y.b"] != 1 || got["y.c"] != 1 {
			t.Errorf("executions after restart: %v, want b and c once each and a not again", got)
		}
		for _, in := range e.instances(store.InstanceFilter{Pipeline: "y"}) {
			if in.State != axtype.Success {
				t.Errorf("%s is %s, want SUCCESS", in.TaskID, in.State)
			}
		}
	})
}

// diamond: d waits for b and c, which both wait for a.
const diamond = `pipeline: d
timezone: UTC
schedule: "0 0 1 6 *"
defaults: {function: record}
tasks:
  - {name: a}
  - {name: b, depends_on: [a]}
  - {name: c, depends_on: [a]}
  - {name: d, depends_on: [b, c]}
`

// TestBackfillSelectionWithUpstreamOutsideIt: backfilling b+ of a diamond
// runs b and then d; d's other upstream c is outside the selection and
// counts as satisfied, so the backfill ends instead of waiting for c.
func TestBackfillSelectionWithUpstreamOutsideIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		e := setup(t, Config{}, nil, diamond)
		from, to := start.AddDate(-2, 0, 0), start
		id := e.startBackfill(BackfillParams{Pipeline: "d", From: from, To: to, Select: "b+"})
		sleep(10 * time.Second)
		e.stop()
		if b := e.backfill(id); b.State != BackfillDone || b.DoneRuns != 2 || b.FailedRuns != 0 {
			t.Fatalf("backfill: %s, %d/%d runs done, %d failed, want done 2/2", b.State, b.DoneRuns, b.TotalRuns, b.FailedRuns)
		}
		got := map[string]int{}
		for _, c := range e.rec.snapshot() {
			got[c.task]++
		}
		if len(got) != 2 || got["d.b"] != 2 || got["d.d"] != 2 {
			t.Errorf("executions: %v, want d.b and d.d twice each (two logical times) and nothing else", got)
		}
	})
}

// TestBackfillResumeAdoptsEveryCreatedRun: a backfill interrupted after it
// created the runs of its first and third logical times, the second having
// had nothing to do (another run holds it), resumes by adopting both runs:
// it waits for the third and reports its failure, rather than counting it
// done unseen.
func TestBackfillResumeAdoptsEveryCreatedRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		fail1999 := map[string]func(context.Context, runner.Attempt) error{"y.a": func(_ context.Context, a runner.Attempt) error {
			if a.LogicalTime.Year() == 1999 {
				return errors.New("no data for 1999")
			}
			return nil
		}}
		e := setup(t, Config{}, fail1999, yearly)
		e.stop()
		ctx := context.Background()
		spec, err := PlanBackfill(e.eng.sched.g, BackfillParams{Pipeline: "y", From: start.AddDate(-3, 0, 0), To: start})
		if err != nil || len(spec.Times) != 3 {
			t.Fatalf("plan: %v %v", spec.Times, err)
		}
		id, err := CreateBackfill(ctx, e.st, e.eng.sched.g, spec, "operator:test", start)
		if err != nil {
			t.Fatal(err)
		}
		newRun := func(at time.Time, kind axtype.RunKind, key string, bf int64) {
			t.Helper()
			if _, _, err := e.st.CreateRun(ctx, store.CreateRunParams{Pipeline: "y", Trigger: "test", Kind: kind, LogicalTime: at,
				DedupKey: key, BackfillID: bf, Actor: "test", Now: start, Instances: []store.NewInstance{
					{TaskID: "y.a", Priority: 3, State: axtype.Scheduled, NextFireAt: start},
					{TaskID: "y.b", Priority: 3, State: axtype.Waiting},
					{TaskID: "y.c", Priority: 3, State: axtype.Waiting},
				}}); err != nil {
				t.Fatal(err)
			}
		}
		newRun(spec.Times[1], axtype.RunManual, "", 0)
		for _, i := range []int{0, 2} {
			newRun(spec.Times[i], axtype.RunBackfill, fmt.Sprintf("backfill/%d/%d", id, spec.Times[i].UnixMilli()), id)
		}
		e.restart(Config{}, 10*time.Second)
		if b := e.backfill(id); b.State != BackfillDone || b.DoneRuns != 3 || b.FailedRuns != 1 || !strings.Contains(b.Error, "1999-06-01T00:00:00Z: a") {
			t.Errorf("backfill: %s, %d/%d runs done, %d failed (%s); want done, 3/3, the 1999 run failed at a", b.State, b.DoneRuns, b.TotalRuns, b.FailedRuns, b.Error)
		}
		got := map[string]int{}
		for _, c := range e.rec.snapshot() {
			got[fmt.Sprintf("%s@%d", c.task, c.logical.Year())]++
		}
		for _, y := range []int{1997, 1998, 1999} {
			for _, task := range []string{"y.a", "y.b", "y.c"} {
				want := 1
				if y == 1999 && task != "y.a" {
					want = 0 // behind the failed a
				}
				if n := got[fmt.Sprintf("%s@%d", task, y)]; n != want {
					t.Errorf("%s@%d executed %d times, want %d", task, y, n, want)
				}
			}
		}
	})
}
