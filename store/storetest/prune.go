package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"
)

// oldRun creates a run of a.x and a.y created at `at`, moves each instance
// through RUNNING to its final state at `at` (or leaves it as given), and
// returns the run's id and instances.
func oldRun(t *testing.T, s *store.Store, logical, at time.Time, backfill int64, final ...axtype.State) (int64, []axtype.Instance) {
	t.Helper()
	kind := axtype.RunManual
	if backfill != 0 {
		kind = axtype.RunBackfill
	}
	run, ins, err := s.CreateRun(ctx(), store.CreateRunParams{Pipeline: "a", Trigger: "a", Kind: kind, LogicalTime: logical, Now: at, BackfillID: backfill,
		Instances: []store.NewInstance{{TaskID: "a.x", State: axtype.Scheduled, NextFireAt: at}, {TaskID: "a.y", State: axtype.Scheduled, NextFireAt: at}}})
	if err != nil {
		t.Fatal(err)
	}
	for i, to := range final {
		in := ins[i]
		if to == axtype.Scheduled {
			continue
		}
		if to == axtype.Paused {
			if _, err := s.Transition(ctx(), store.TransitionParams{InstanceID: in.ID, Version: in.Version, From: axtype.Scheduled, To: axtype.Paused, Now: at, Actor: "t", Reason: "t"}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		exec, ticket := "local:h", "tk-"+time.Duration(in.ID).String()
		v, err := s.Transition(ctx(), store.TransitionParams{InstanceID: in.ID, Version: in.Version, From: axtype.Scheduled, To: axtype.Running, Now: at, Actor: "t", Reason: "t",
			Set: store.Changes{Ticket: &ticket, Attempt: ptr(1), Executor: &exec, StartedAt: &at}, Action: &store.Action{Actor: "t", Action: "dispatch", TaskID: in.TaskID}})
		if err != nil {
			t.Fatal(err)
		}
		if to == axtype.Running {
			continue
		}
		if _, err := s.Transition(ctx(), store.TransitionParams{InstanceID: in.ID, Version: v, From: axtype.Running, To: to, Now: at, Actor: "t", Reason: "t",
			Set: store.Changes{EndedAt: &at}}); err != nil {
			t.Fatal(err)
		}
		if err := s.WriteLogs(ctx(), store.LogWrite{Chunks: []store.LogChunk{{InstanceID: in.ID, Attempt: 1, Seq: 1, Text: 1, Data: []byte{1, 0, 0, 0, 1, 'x'}, At: at}},
			Attempts: []store.AttemptRecord{{InstanceID: in.ID, Attempt: 1, RunID: run.ID, TaskID: in.TaskID, Executor: exec, Status: "success", EndedAt: at}},
			Procs:    []store.ProcRecord{{Ticket: ticket, InstanceID: in.ID, RunID: run.ID, Host: "h", Boot: "b", PidNS: "pid:[1]", Pgid: 42, Start: 7, At: at}}}); err != nil {
			t.Fatal(err)
		}
	}
	return run.ID, ins
}

// testPrune: finished runs older than the horizon go, with their rows;
// waiting, running and paused work stays, as do runs of an unfinished
// backfill and runs that ended after the horizon; summaries survive.
func testPrune(t *testing.T, s *store.Store) {
	Seed(t, s) // a run at T0 with x SCHEDULED: never pruned
	day := 24 * time.Hour
	old, recent := T0.Add(-40*day), T0.Add(-10*day)
	horizon := T0.Add(-30 * day)
	bfRunning, err := s.CreateBackfill(ctx(), store.Backfill{Pipeline: "a", State: "running"}, old)
	if err != nil {
		t.Fatal(err)
	}
	bfDone, _ := s.CreateBackfill(ctx(), store.Backfill{Pipeline: "a", State: "done"}, old)
	gone1, gi1 := oldRun(t, s, old, old, 0, axtype.Success, axtype.Failed)
	gone2, _ := oldRun(t, s, old.Add(time.Hour), old.Add(time.Hour), bfDone, axtype.Success, axtype.Killed)
	paused, _ := oldRun(t, s, old.Add(2*time.Hour), old.Add(2*time.Hour), 0, axtype.Success, axtype.Paused)
	running, _ := oldRun(t, s, old.Add(3*time.Hour), old.Add(3*time.Hour), 0, axtype.Success, axtype.Running)
	waiting, _ := oldRun(t, s, old.Add(4*time.Hour), old.Add(4*time.Hour), 0, axtype.Success, axtype.Scheduled)
	unfinishedBF, _ := oldRun(t, s, old.Add(5*time.Hour), old.Add(5*time.Hour), bfRunning, axtype.Success, axtype.Success)
	fresh, _ := oldRun(t, s, recent, recent, 0, axtype.Success, axtype.Success)
	if err := s.AppendAction(ctx(), store.Action{At: old, Actor: "operator:ann", Action: "pause", TaskID: "a.x"}); err != nil {
		t.Fatal(err)
	}
	before, err := s.TaskSummary(ctx(), "a.x")
	if err != nil {
		t.Fatal(err)
	}
	// Results in the inbox: applied before the horizon (goes), applied
	// after it (stays), received long ago and never applied (stays).
	l := acquire(t, s, "p1", T0)
	f := s.Fence(l.Epoch)
	for _, e := range []struct {
		ticket  string
		applied time.Time
	}{{"in-old", old}, {"in-recent", recent}, {"in-pending", time.Time{}}} {
		if _, err := s.ReceiveResult(ctx(), store.InboxEntry{Ticket: e.ticket, InstanceID: gi1[0].ID, Report: "{}", ReceivedBy: "t", ReceivedAt: old}); err != nil {
			t.Fatal(err)
		}
		if !e.applied.IsZero() {
			if err := f.MarkResultsApplied(ctx(), map[string]string{e.ticket: "applied"}, e.applied); err != nil {
				t.Fatal(err)
			}
		}
	}
	p := store.PruneParams{Before: horizon, FinishedBackfills: []string{"done", "failed", "cancelled"}, Now: T0, Runs: 1}
	dry, err := s.PruneDryRun(ctx(), p)
	if err != nil {
		t.Fatal(err)
	}
	// Two runs of two instances; each instance: 2 or 3 history rows (created, running, ended), one dispatch action, one chunk, one attempt.
	if dry.Runs != 2 || dry.Instances != 4 || dry.History != 12 || dry.Actions != 4 || dry.Chunks != 4 || dry.Attempts != 4 || dry.Inbox != 1 {
		t.Errorf("dry run = %+v, want 2 runs, 4 instances, 12 history rows, 4 actions, 4 chunks, 4 attempts, 1 inbox entry", dry)
	}
	if _, err := s.InboxEntryOf(ctx(), "in-old"); err != nil {
		t.Fatalf("the dry run deleted an inbox entry: %v", err)
	}
	if r, _ := s.Run(ctx(), gone1); r.ID != gone1 {
		t.Fatalf("the dry run deleted run %d", gone1)
	}
	var total store.PruneResult
	for batches := 0; ; batches++ {
		r, err := f.PruneBatch(ctx(), p)
		if err != nil {
			t.Fatal(err)
		}
		total = total.Add(r)
		if !r.More {
			break
		}
		p.AfterRun = r.LastRun
		if batches > 10 {
			t.Fatal("pruning does not end")
		}
	}
	if total.Runs != 2 || total.Instances != 4 || total.History != 12 || total.Actions != 4 || total.Chunks != 4 || total.Attempts != 4 || total.Inbox != 1 {
		t.Errorf("pruned %+v, want what the dry run said (%+v)", total, dry)
	}
	for _, id := range []int64{gone1, gone2} {
		if _, err := s.Run(ctx(), id); err == nil {
			t.Errorf("run %d is still there", id)
		}
	}
	for _, id := range []int64{paused, running, waiting, unfinishedBF, fresh} {
		if _, err := s.Run(ctx(), id); err != nil {
			t.Errorf("run %d was pruned: %v", id, err)
		}
	}
	for ticket, kept := range map[string]bool{"in-old": false, "in-recent": true, "in-pending": true} {
		if _, err := s.InboxEntryOf(ctx(), ticket); (err == nil) != kept {
			t.Errorf("inbox entry %s: kept %v, want %v (%v)", ticket, err == nil, kept, err)
		}
	}
	if c, _ := s.LogChunks(ctx(), gi1[0].ID, 1, 0, 0); len(c) != 0 {
		t.Errorf("the pruned instance's output is still there")
	}
	tk := func(id int64) string { return "tk-" + time.Duration(id).String() }
	freshIns, _ := s.Instances(ctx(), store.InstanceFilter{RunID: fresh})
	if len(freshIns) == 0 {
		t.Fatal("the fresh run has no instances")
	}
	procs, err := s.Procs(ctx(), []string{tk(gi1[0].ID), tk(freshIns[0].ID)})
	if _, gone := procs[tk(gi1[0].ID)]; err != nil || gone {
		t.Errorf("the pruned instance's process record is still there (%v)", err)
	}
	if _, kept := procs[tk(freshIns[0].ID)]; !kept {
		t.Errorf("the process record of an instance not pruned went: %+v", procs)
	}
	if h, _ := s.History(ctx(), store.LogFilter{InstanceID: gi1[0].ID}); len(h) != 0 {
		t.Errorf("the pruned instance's history is still there: %d rows", len(h))
	}
	if acts, _ := s.Actions(ctx(), store.LogFilter{Action: "pause"}); len(acts) != 1 {
		t.Errorf("an operator action not tied to an instance was pruned")
	}
	after, err := s.TaskSummary(ctx(), "a.x")
	if err != nil {
		t.Fatal(err)
	}
	if before.LastExecutor != "local:h" {
		t.Errorf("summary before pruning: last executor %q, want local:h (the newest instance, scheduled, has none)", before.LastExecutor)
	}
	if after.SuccessCount != before.SuccessCount || after.FailureCount != before.FailureCount || after.LastExecutor != before.LastExecutor {
		t.Errorf("summary before %d/%d %q, after %d/%d %q: want it kept", before.SuccessCount, before.FailureCount, before.LastExecutor,
			after.SuccessCount, after.FailureCount, after.LastExecutor)
	}
	// Nothing left to prune: a second pass deletes nothing.
	if again, err := s.PruneDryRun(ctx(), store.PruneParams{Before: horizon, FinishedBackfills: []string{"done"}, Now: T0}); err != nil || again.Runs != 0 {
		t.Errorf("second pass: %+v %v", again, err)
	}
	_ = context.Background
}
