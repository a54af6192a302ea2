package engine

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"
)

// Retention on the simulated clock: runs that ended more than Retain ago go
// with their rows; paused work stays however old; the task's summary keeps
// its counts; every pass is in the action log and the metrics.
func TestRetentionPrunesOnlyFinishedOldRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		e := setup(t, Config{Registerer: reg, Retain: 2 * time.Hour, RetainEvery: 10 * time.Minute, RetainBatch: 2}, nil, `pipeline: x
timezone: UTC
schedule: "*/30 * * * *"
tasks:
  - {name: a, function: record}
`, `pipeline: y
timezone: UTC
schedule: "*/30 * * * *"
tasks:
  - {name: b, function: record}
`)
		start := time.Now()
		if _, err := e.do(Pause{Scope: store.ScopeTask, Target: "y.b"}, By{Actor: "operator:ann", Reason: "hold"}); err != nil {
			t.Fatal(err)
		}
		sleep(5*time.Hour + 5*time.Minute)
		now := time.Now()
		e.stop()
		ctx := context.Background()
		xs := e.instances(store.InstanceFilter{TaskID: "x.a"})
		// Fires every 30 min for 5 h: 10 ran; those that ended before now − 2 h
		// (logical times up to 3 h after the start, at the last pass, 5 h) are gone.
		horizon := now.Add(-2 * time.Hour).Truncate(10 * time.Minute) // the last pass ran on a 10 min step
		for _, in := range xs {
			if in.State == axtype.Success && in.UpdatedAt.Before(horizon) {
				t.Errorf("instance %d of x.a ended at %s, before the horizon %s, and is still there", in.ID, in.UpdatedAt.Format(time.TimeOnly), horizon.Format(time.TimeOnly))
			}
		}
		ran := len(e.rec.snapshot())
		if len(xs) == 0 || len(xs) >= ran {
			t.Errorf("x.a has %d instances left of %d that ran: want the old ones pruned and the recent kept", len(xs), ran)
		}
		// The paused task's instances are all kept, the oldest too.
		ys := e.instances(store.InstanceFilter{TaskID: "y.b"})
		if len(ys) < 10 || !ys[0].LogicalTime.Before(start.Add(time.Hour)) {
			t.Errorf("y.b kept %d instances from %s, want every one since the start", len(ys), first2(ys))
		}
		for _, in := range ys {
			if in.State != axtype.Paused {
				t.Errorf("y.b instance %d is %s, want PAUSED", in.ID, in.State)
			}
		}
		// Summaries survive: every run that succeeded still counts.
		sum, err := e.st.TaskSummary(ctx, "x.a")
		if err != nil || sum.SuccessCount != int64(ran) {
			t.Errorf("x.a summary counts %d successes (%v), want all %d that ran", sum.SuccessCount, err, ran)
		}
		acts, _ := e.st.Actions(ctx, store.LogFilter{Action: "prune", Limit: 100})
		pruned := testutil.ToFloat64(e.eng.retention.m.runs)
		if len(acts) == 0 || pruned != float64(ran-len(xs)) {
			t.Errorf("%d prune actions, ax_pruned_runs_total %v; want actions and %d runs", len(acts), pruned, ran-len(xs))
		}
		if h, _ := e.st.History(ctx, store.LogFilter{TaskID: "x.a", Limit: 1000}); len(h) != 3*len(xs) {
			t.Errorf("x.a has %d history rows for %d instances, want 3 each (the pruned ones' gone)", len(h), len(xs))
		}
	})
}

func first2(ins []axtype.Instance) string {
	if len(ins) == 0 {
		return "-"
	}
	return ins[0].LogicalTime.Format(time.TimeOnly)
}

// With Retain zero nothing is ever pruned.
func TestRetentionZeroKeepsEverything(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := setup(t, Config{RetainEvery: time.Minute}, nil, `pipeline: x
timezone: UTC
schedule: "@every 10m"
tasks:
  - {name: a, function: record}
`)
		sleep(3 * time.Hour)
		e.stop()
		if n, ran := len(e.instances(store.InstanceFilter{TaskID: "x.a"})), len(e.rec.snapshot()); n != ran || n < 17 {
			t.Errorf("%d instances kept of %d that ran", n, ran)
		}
	})
}

// Pruning is paced by its own cost: after a slow batch the pause grows to
// four times the batch's duration, after a quick one it is the least pause.
func TestPrunePausePacedByBatch(t *testing.T) {
	for _, c := range []struct{ least, took, want time.Duration }{
		{50 * time.Millisecond, 5 * time.Millisecond, 50 * time.Millisecond},
		{50 * time.Millisecond, 100 * time.Millisecond, 400 * time.Millisecond},
		{0, 30 * time.Millisecond, 120 * time.Millisecond},
	} {
		if got := prunePause(c.least, c.took); got != c.want {
			t.Errorf("pause after a batch of %s (least %s) = %s, want %s", c.took, c.least, got, c.want)
		}
	}
}
