package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"
)

// testDropRunsAhead: runs created ahead by a schedule, in which nothing has
// started, are deleted with their instances and history (also those a pause
// holds, PAUSED before any attempt); runs at or before the cut, runs in
// which an attempt started (a paused retry too), runs of other triggers and
// manual runs are kept.
func testDropRunsAhead(t *testing.T, s *store.Store) {
	Seed(t, s) // run of trigger "a" at T0: kept (not after the cut)
	l := acquire(t, s, "p", T0)
	f := s.Fence(l.Epoch)
	mk := func(trigger string, kind axtype.RunKind, at time.Time) []axtype.Instance {
		t.Helper()
		_, ins, err := f.CreateRun(ctx(), store.CreateRunParams{Pipeline: "a", Trigger: trigger, Kind: kind, LogicalTime: at, Now: T0,
			Instances: []store.NewInstance{{TaskID: "a.x", State: axtype.Scheduled, NextFireAt: at}, {TaskID: "a.y", State: axtype.Waiting}}})
		if err != nil {
			t.Fatal(err)
		}
		return ins
	}
	ahead1 := mk("a", axtype.RunSchedule, T0.Add(time.Minute))
	ahead2 := mk("a", axtype.RunSchedule, T0.Add(2*time.Minute))
	started := mk("a", axtype.RunSchedule, T0.Add(3*time.Minute))
	other := mk("a.x", axtype.RunSchedule, T0.Add(time.Minute))
	manual := mk("a", axtype.RunManual, T0.Add(time.Minute))
	paused := mk("a", axtype.RunSchedule, T0.Add(4*time.Minute))
	pausedRetry := mk("a", axtype.RunSchedule, T0.Add(5*time.Minute))
	one := 1
	for _, p := range []struct {
		in  axtype.Instance
		set store.Changes
	}{{paused[0], store.Changes{}}, {pausedRetry[0], store.Changes{Attempt: &one}}} {
		if _, err := f.Transition(ctx(), store.TransitionParams{InstanceID: p.in.ID, Version: p.in.Version, From: axtype.Scheduled, To: axtype.Paused,
			Set: p.set, Now: T0, Actor: "test", Reason: "paused"}); err != nil {
			t.Fatal(err)
		}
	}
	tk := "t-claimed"
	if _, err := f.Transition(ctx(), store.TransitionParams{InstanceID: started[0].ID, Version: started[0].Version, From: axtype.Scheduled, To: axtype.Running,
		Set: store.Changes{Ticket: &tk}, Now: T0, Actor: "test", Reason: "claimed ahead"}); err != nil {
		t.Fatal(err)
	}
	// A fence that lost the lease drops nothing.
	if _, err := s.Fence(l.Epoch+1).DropRunsAhead(ctx(), store.DropAheadParams{Trigger: "a", After: T0}); err == nil {
		t.Fatal("DropRunsAhead at a stale epoch succeeded")
	}
	ids, err := f.DropRunsAhead(ctx(), store.DropAheadParams{Trigger: "a", After: T0})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	if want := []int64{ahead1[0].RunID, ahead2[0].RunID, paused[0].RunID}; !slices.Equal(ids, want) {
		t.Fatalf("dropped runs %v, want %v", ids, want)
	}
	for _, in := range slices.Concat(ahead1, ahead2, paused) {
		if _, err := s.Instance(ctx(), in.ID); err == nil {
			t.Errorf("instance %d of a dropped run still exists", in.ID)
		}
		if h, err := s.History(ctx(), store.LogFilter{InstanceID: in.ID}); err != nil || len(h) != 0 {
			t.Errorf("history of dropped instance %d: %d rows, %v", in.ID, len(h), err)
		}
	}
	for _, in := range [][]axtype.Instance{started, other, manual, pausedRetry} {
		if _, err := s.Instance(ctx(), in[1].ID); err != nil {
			t.Errorf("instance %d of run %d (kept) is gone: %v", in[1].ID, in[1].RunID, err)
		}
	}
	runs, err := s.Runs(ctx(), "a", 100)
	if err != nil || len(runs) != 5 {
		t.Errorf("runs left = %d, %v; want 5 (T0, started, other trigger, manual, paused retry)", len(runs), err)
	}
	// Again: nothing more to drop.
	if ids, err := f.DropRunsAhead(ctx(), store.DropAheadParams{Trigger: "a", After: T0}); err != nil || len(ids) != 0 {
		t.Errorf("second drop: %v, %v", ids, err)
	}
}
