package engine

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"
)

// TestClaimedAheadPastTheOldLeaseRunsOnce: the previous primary claimed an
// instance ahead (RUNNING, started_at = its fire time) and died before that
// time; its lease ended before the fire time, so it never started it. The
// new primary gives it back (RETRYING at its fire time, the attempt not
// counted, the reason in its history) and it runs once, at its fire time,
// rather than timing out as an unknown outcome. (No record of the claim is
// written here, as by a primary before store version 11: the lease's end
// alone tells.)
func TestClaimedAheadPastTheOldLeaseRunsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := setup(t, Config{}, nil, `pipeline: ca
timezone: UTC
schedule: "0 0 1 6 *"
tasks:
  - {name: job, function: record, timeout: 10m}
`)
		e.stop()
		ctx := context.Background()
		now := time.Now()
		// The old primary: its lease ends at now+3s; it claimed the instance for now+20s.
		if _, err := e.st.AcquireLease(ctx, store.LeaseParams{Holder: "old", TTL: 3 * time.Second, Now: now}); err != nil {
			t.Fatal(err)
		}
		fire := now.Add(20 * time.Second)
		_, ins, err := e.st.CreateRun(ctx, store.CreateRunParams{Pipeline: "ca", Trigger: "ca", Kind: axtype.RunManual, LogicalTime: fire, Actor: "old", Now: now,
			Instances: []store.NewInstance{{TaskID: "ca.job", State: axtype.Scheduled, NextFireAt: fire}}})
		if err != nil {
			t.Fatal(err)
		}
		ticket, att := "claimed-ahead-ticket", 1
		if _, err := e.st.Transition(ctx, store.TransitionParams{InstanceID: ins[0].ID, Version: ins[0].Version, From: axtype.Scheduled, To: axtype.Running,
			Set: store.Changes{Ticket: &ticket, Attempt: &att, Counted: &att, StartedAt: &fire}, Now: now, Actor: "old", Reason: "claimed ahead"}); err != nil {
			t.Fatal(err)
		}
		e.restart(Config{}, time.Minute)
		calls := e.rec.snapshot()
		if len(calls) != 1 || calls[0].ticket == ticket || !calls[0].at.Equal(fire) {
			t.Fatalf("executions %+v, want one, under a fresh ticket, at its fire time %s", calls, fire)
		}
		in, _ := e.st.Instance(ctx, ins[0].ID)
		if in.State != axtype.Success || in.Ticket != calls[0].ticket || in.Attempt != 2 || in.Counted != 1 {
			t.Errorf("instance %+v, want SUCCESS at attempt 2 (1 counted) under the ticket it ran with", in)
		}
		if h, ok := givenBackRow(e, "ca.job", "after the previous primary's lease ended"); !ok || h.Ticket != ticket {
			t.Errorf("history %+v: want the claimed ticket given back, saying why it never started", e.history("ca.job"))
		}
	})
}
