package engine

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"
)

// TestInheritedLocalAttemptTimesOutAfterTheOldLease: the previous primary
// recorded a function attempt RUNNING, which may have waited in its start
// queue and started as late as the end of its lease (its timeout counting
// from that start), and stalled. The new primary keeps the attempt RUNNING,
// holding its slot under the caps, until that lease's end plus the timeout,
// then fails it as an unknown outcome; it does not judge it from the
// recorded start, while the old process may still run it.
func TestInheritedLocalAttemptTimesOutAfterTheOldLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := setup(t, Config{}, nil, `pipeline: il
timezone: UTC
schedule: "0 0 1 6 *"
tasks:
  - {name: job, function: record, timeout: 20s}
`)
		e.stop()
		ctx := context.Background()
		now := time.Now()
		leaseEnd := now.Add(30 * time.Second)
		if _, err := e.st.AcquireLease(ctx, store.LeaseParams{Holder: "old", TTL: leaseEnd.Sub(now), Now: now}); err != nil {
			t.Fatal(err)
		}
		_, ins, err := e.st.CreateRun(ctx, store.CreateRunParams{Pipeline: "il", Trigger: "il", Kind: axtype.RunManual, LogicalTime: now, Actor: "old", Now: now,
			Instances: []store.NewInstance{{TaskID: "il.job", State: axtype.Scheduled, NextFireAt: now}}})
		if err != nil {
			t.Fatal(err)
		}
		ticket, att := "queued-ticket", 1
		if _, err := e.st.Transition(ctx, store.TransitionParams{InstanceID: ins[0].ID, Version: ins[0].Version, From: axtype.Scheduled, To: axtype.Running,
			Set: store.Changes{Ticket: &ticket, Attempt: &att, Counted: &att, StartedAt: &now}, Now: now, Actor: "old", Reason: "dispatched"}); err != nil {
			t.Fatal(err)
		}
		_, stop := e.takeOver(Config{})
		defer stop()
		sleep(leaseEnd.Add(20 * time.Second).Sub(time.Now())) // the latest deadline of the old process, exactly
		if in, _ := e.st.Instance(ctx, ins[0].ID); in.State != axtype.Running {
			t.Fatalf("at %s after the old lease's end (the attempt may have started then, with a timeout of 20s): instance %s, want RUNNING", time.Since(leaseEnd), in.State)
		}
		sleep(5 * time.Second)
		in, _ := e.st.Instance(ctx, ins[0].ID)
		if in.State != axtype.Failed || !strings.Contains(in.Error, "unknown outcome") {
			t.Errorf("past the old lease's end plus the timeout: instance %s (%q), want FAILED as an unknown outcome", in.State, in.Error)
		}
		if calls := e.rec.snapshot(); len(calls) != 0 {
			t.Errorf("executions %+v: the inherited attempt must not run again here", calls)
		}
	})
}
