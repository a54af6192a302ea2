package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"
	"github.com/ax-sched/ax/store/storetest"
)

// storeMethods classifies every exported method of *store.Store. A method
// added without a class fails TestEveryWriteIsFenced: a write the primary
// makes must have a twin on *store.Fence; any other write must say here why
// it is not fenced.
var storeMethods = map[string]string{
	// Reads, and the handle itself.
	"Dialect": "read", "String": "read", "DB": "read", "Bind": "read", "Close": "read", "Fence": "read", "SchemaVersion": "read", "Check": "read", "Commits": "read",
	"GetLease": "read", "History": "read", "Actions": "read", "Pauses": "read", "Settings": "read", "Backfills": "read",
	"Tasks": "read", "PipelineChangedAt": "read", "PipelineAddedAt": "read", "PipelineDefinition": "read", "TaskSummary": "read", "Instance": "read", "InstanceByTicket": "read", "DueInstances": "read",
	"Instances": "read", "Runs": "read", "LastRun": "read", "Run": "read", "BackfillRuns": "read", "BackfillRunsFirst": "read", "BackfillProgress": "read",
	"Executors": "read", "Ping": "read", "PendingOps": "read", "GetOp": "read", "PendingResults": "read", "InboxEntryOf": "read",
	// Writes that are not the primary's, by design.
	"AcquireLease":         "unfenced: the lease row is the fence itself",
	"RenewLease":           "unfenced: the lease row is the fence itself",
	"ReleaseLease":         "unfenced: the lease row is the fence itself",
	"RegisterExecutor":     "unfenced: executors register with any server",
	"Heartbeat":            "unfenced: executors heartbeat to any server",
	"ReceiveResult":        "unfenced: any server stores a result in the inbox before acknowledging it",
	"EnqueueOp":            "unfenced: an operator request, queued at any server for the primary",
	"CreateBackfill":       "unfenced: an operator request, queued at any server for the primary; fenced on *store.Fence for a process that runs it under the lease it holds",
	"WithdrawOp":           "unfenced: its author fails its own request still pending; one the primary claimed is left to it",
	"SettingOnce":          "unfenced: a value any server may be first to need (the session key, a sign-out), stored once, never overwritten",
	"InstallationID":       "unfenced: any server may be first to need the installation id; created once (SettingOnce), never overwritten",
	"DeleteSettingsBefore": "unfenced: any server forgets the sign-outs of sessions expired since",
	"Setting":              "read",
	// The primary's writes: unfenced here for operator tools and tests, fenced on *store.Fence.
	"Transition": "fenced", "TransitionBatch": "fenced", "TransitionBatchThen": "fenced", "CreateRun": "fenced", "CreateRuns": "fenced", "DropUnfinishedRun": "fenced", "UnfinishedRuns": "read",
	"SyncDefinitions": "fenced", "ClaimOp": "fenced", "FinishOp": "fenced", "SetPause": "fenced", "ClearPause": "fenced", "SetSetting": "fenced",
	"UpdateBackfill": "fenced", "AppendAction": "fenced", "WriteLogs": "fenced", "Approve": "fenced",
	"LogChunks": "read", "Attempts": "read", "LatestAttempt": "read", "RunOutputs": "read", "Redispatched": "read", "Procs": "read", "HandOuts": "read", "LogAttempts": "read", "PruneDryRun": "read", "PrunedSummary": "read", "RunsPage": "read", "RunsMovedAhead": "read", "RunsDeferred": "read", "RunsCreated": "read", "BackfillsPage": "read", "LatestInstances": "read", "NextFires": "read", "Outcomes": "read", "InstancesOfRuns": "read", "RunStates": "read", "RunStateCounts": "read", "RunStatesOf": "read", "AwaitingGates": "read", "RootFailures": "read", "RowsRead": "read",
}

func TestEveryWriteIsFenced(t *testing.T) {
	t.Parallel()
	st := reflect.TypeFor[*store.Store]()
	ft := reflect.TypeFor[*store.Fence]()
	for i := range st.NumMethod() {
		m := st.Method(i).Name
		class, ok := storeMethods[m]
		switch {
		case !ok:
			t.Errorf("store.Store.%s is not classified: if the primary calls it to write, add it to store.Fence (fenced by epoch) and to the stale-epoch cases of TestFencedWritesRefuseStaleEpoch; if it reads or is written by any server by design, say so in storeMethods", m)
		case class == "fenced":
			if _, ok := ft.MethodByName(m); !ok {
				t.Errorf("store.Store.%s is a primary write without a store.Fence twin", m)
			}
		}
	}
	for i := range ft.NumMethod() {
		m := ft.Method(i).Name
		if m == "Epoch" {
			continue
		}
		if !slices.Contains(fencedCaseNames(), m) {
			t.Errorf("store.Fence.%s has no stale-epoch case in TestFencedWritesRefuseStaleEpoch", m)
		}
	}
}

// fencedCase is one write through a Fence.
type fencedCase struct {
	name  string
	write func(ctx context.Context, f *store.Fence) error
}

func fencedCases(x axtype.Instance, bfID, opID int64) []fencedCase {
	now := storetest.T0.Add(time.Hour)
	tp := func() store.TransitionParams {
		return store.TransitionParams{InstanceID: x.ID, Version: x.Version, From: axtype.Scheduled, To: axtype.Paused, Now: now, Actor: "test", Reason: "fenced"}
	}
	return []fencedCase{
		{"Transition", func(ctx context.Context, f *store.Fence) error { _, err := f.Transition(ctx, tp()); return err }},
		{"TransitionBatch", func(ctx context.Context, f *store.Fence) error {
			_, err := f.TransitionBatch(ctx, []store.TransitionParams{tp()})
			return err
		}},
		{"TransitionBatchThen", func(ctx context.Context, f *store.Fence) error {
			_, _, err := f.TransitionBatchThen(ctx, []store.TransitionParams{tp(), tp()}, nil)
			return err
		}},
		{"TransitionBatchLogs", func(ctx context.Context, f *store.Fence) error {
			// One transition (its UPDATE carries the fence) and the output of
			// an attempt: neither is written at a stale epoch.
			_, _, err := f.TransitionBatchLogs(ctx, []store.TransitionParams{tp()}, store.LogWrite{
				Chunks:   []store.LogChunk{{InstanceID: x.ID, Attempt: 1, Seq: 1, Text: 1, Data: []byte{1, 0, 0, 0, 1, 'x'}, At: now}},
				Attempts: []store.AttemptRecord{{InstanceID: x.ID, Attempt: 1, Status: "success", EndedAt: now}}}, nil)
			return err
		}},
		{"CreateRun", func(ctx context.Context, f *store.Fence) error {
			_, _, err := f.CreateRun(ctx, store.CreateRunParams{Pipeline: "a", Trigger: "a", Kind: axtype.RunSchedule, LogicalTime: now, Now: now,
				Instances: []store.NewInstance{{TaskID: "a.x", State: axtype.Scheduled, NextFireAt: now}}})
			return err
		}},
		{"CreateRuns", func(ctx context.Context, f *store.Fence) error {
			_, _, err := f.CreateRuns(ctx, []store.CreateRunParams{{Pipeline: "a", Trigger: "a", Kind: axtype.RunSchedule, LogicalTime: now.Add(time.Second), Now: now,
				Instances: []store.NewInstance{{TaskID: "a.x", State: axtype.Scheduled, NextFireAt: now}}}})
			return err
		}},
		{"DropUnfinishedRun", func(ctx context.Context, f *store.Fence) error {
			return f.DropUnfinishedRun(ctx, x.RunID, 0) // marked unfinished below
		}},
		{"Approve", func(ctx context.Context, f *store.Fence) error {
			// Seed creates a.x, then a.y (WAITING, version 1) in the same run.
			_, err := f.Approve(ctx, store.ApproveParams{InstanceID: x.ID + 1, Version: 1, Actor: "test", Now: now})
			return err
		}},
		{"SyncDefinitions", func(ctx context.Context, f *store.Fence) error {
			_, err := f.SyncDefinitions(ctx, store.SyncParams{Now: now}) // would mark every pipeline removed
			return err
		}},
		{"ClaimOp", func(ctx context.Context, f *store.Fence) error { return f.ClaimOp(ctx, opID) }},
		{"FinishOp", func(ctx context.Context, f *store.Fence) error { return f.FinishOp(ctx, opID, "done", nil, now) }},
		{"SetPause", func(ctx context.Context, f *store.Fence) error {
			return f.SetPause(ctx, store.Pause{Scope: store.ScopeTask, Name: "a.x", Actor: "test", At: now})
		}},
		{"ClearPause", func(ctx context.Context, f *store.Fence) error { return f.ClearPause(ctx, store.ScopeGroup, "g") }},
		{"SetSetting", func(ctx context.Context, f *store.Fence) error {
			return f.SetSetting(ctx, "limits", `{"global":1}`, now)
		}},
		{"UpdateBackfill", func(ctx context.Context, f *store.Fence) error {
			return f.UpdateBackfill(ctx, store.Backfill{ID: bfID, State: "done", TotalRuns: 1, DoneRuns: 1}, now)
		}},
		{"CreateBackfill", func(ctx context.Context, f *store.Fence) error {
			_, err := f.CreateBackfill(ctx, store.Backfill{Pipeline: "a", State: "pending", TotalRuns: 1, Actor: "test"}, now)
			return err
		}},
		{"AppendAction", func(ctx context.Context, f *store.Fence) error {
			return f.AppendAction(ctx, store.Action{At: now, Actor: "test", Action: "fenced"})
		}},
		{"WriteLogs", func(ctx context.Context, f *store.Fence) error {
			return f.WriteLogs(ctx, store.LogWrite{Chunks: []store.LogChunk{{InstanceID: x.ID, Attempt: 1, Seq: 1, Text: 1, Data: []byte{1, 0, 0, 0, 1, 'x'}, At: now}},
				Attempts: []store.AttemptRecord{{InstanceID: x.ID, Attempt: 1, Status: "success", EndedAt: now}}})
		}},
		{"PruneBatch", func(ctx context.Context, f *store.Fence) error {
			_, err := f.PruneBatch(ctx, store.PruneParams{Before: now.Add(24 * time.Hour), Now: now})
			return err
		}},
		{"MarkResultsApplied", func(ctx context.Context, f *store.Fence) error {
			return f.MarkResultsApplied(ctx, map[string]string{"t-inbox": "applied"}, now)
		}},
		{"HandOut", func(ctx context.Context, f *store.Fence) error {
			return f.HandOut(ctx, []int64{7}, now, now)
		}},
		{"SetSettings", func(ctx context.Context, f *store.Fence) error {
			return f.SetSettings(ctx, map[string]string{"k": "v", "k2": "v2"}, now)
		}},
		{"DropRunsAhead", func(ctx context.Context, f *store.Fence) error {
			_, err := f.DropRunsAhead(ctx, store.DropAheadParams{Trigger: "a", After: storetest.T0.Add(-time.Hour)})
			return err
		}},
	}
}

func fencedCaseNames() []string {
	var out []string
	for _, c := range fencedCases(axtype.Instance{}, 0, 0) {
		out = append(out, c.name)
	}
	return out
}

// snapshot is every table a fenced write could touch, as JSON.
func snapshot(t *testing.T, s *store.Store) string {
	t.Helper()
	ctx := context.Background()
	var snap []any
	add := func(v any, err error) {
		if err != nil {
			t.Fatal(err)
		}
		snap = append(snap, v)
	}
	add(s.Instances(ctx, store.InstanceFilter{Limit: 1000}))
	add(s.Runs(ctx, "a", 100))
	add(s.Tasks(ctx, store.TaskFilter{}))
	add(s.History(ctx, store.LogFilter{Limit: 1000}))
	add(s.Actions(ctx, store.LogFilter{Limit: 1000}))
	add(s.Pauses(ctx))
	add(s.Settings(ctx))
	add(s.Backfills(ctx, 0))
	add(s.PendingOps(ctx, 100))
	add(s.PendingResults(ctx, 100))
	add(s.HandOuts(ctx))
	ins, _ := s.Instances(ctx, store.InstanceFilter{Limit: 1000})
	for _, in := range ins { // task output and attempt records
		add(s.Attempts(ctx, in.ID))
		add(s.LogAttempts(ctx, in.ID))
	}
	b, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestFencedWritesRefuseStaleEpoch(t *testing.T) {
	t.Parallel()
	for kind, open := range storetest.All() {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			for _, c := range fencedCases(axtype.Instance{}, 0, 0) {
				t.Run(c.name, func(t *testing.T) {
					t.Parallel()
					s := open(t)
					x := storetest.Seed(t, s)["a.x"]
					if err := s.SetPause(ctx, store.Pause{Scope: store.ScopeGroup, Name: "g", Actor: "test", At: storetest.T0}); err != nil {
						t.Fatal(err)
					}
					bf, err := s.CreateBackfill(ctx, store.Backfill{Pipeline: "a", Spec: "{}", State: "running", TotalRuns: 1}, storetest.T0)
					if err != nil {
						t.Fatal(err)
					}
					op, err := s.EnqueueOp(ctx, store.Op{Kind: "pause", Target: "a.x", Args: "{}", Actor: "test"}, storetest.T0)
					if err != nil {
						t.Fatal(err)
					}
					if _, err := s.ReceiveResult(ctx, store.InboxEntry{Ticket: "t-inbox", InstanceID: x.ID, Report: "{}", ReceivedBy: "test", ReceivedAt: storetest.T0}); err != nil {
						t.Fatal(err)
					}
					// A run that ended, for PruneBatch.
					_, ended, err := s.CreateRun(ctx, store.CreateRunParams{Pipeline: "a", Trigger: "a.z", Kind: axtype.RunManual, LogicalTime: storetest.T0.Add(-time.Hour),
						Now: storetest.T0, Instances: []store.NewInstance{{TaskID: "a.z", State: axtype.Scheduled, NextFireAt: storetest.T0}}})
					if err != nil {
						t.Fatal(err)
					}
					v, err := s.Transition(ctx, store.TransitionParams{InstanceID: ended[0].ID, Version: ended[0].Version, From: axtype.Scheduled, To: axtype.Running, Now: storetest.T0, Actor: "test", Reason: "t"})
					if err == nil {
						_, err = s.Transition(ctx, store.TransitionParams{InstanceID: ended[0].ID, Version: v, From: axtype.Running, To: axtype.Killed, Now: storetest.T0, Actor: "test", Reason: "t"})
					}
					if err != nil {
						t.Fatal(err)
					}
					old, err := s.AcquireLease(ctx, store.LeaseParams{Holder: "old", TTL: 10 * time.Second, Now: storetest.T0})
					if err != nil {
						t.Fatal(err)
					}
					cur, err := s.AcquireLease(ctx, store.LeaseParams{Holder: "new", TTL: 10 * time.Second, Now: storetest.T0.Add(time.Minute)})
					if err != nil || cur.Epoch != old.Epoch+1 {
						t.Fatalf("takeover: %+v, %v", cur, err)
					}
					cs := fencedCases(x, bf, op)
					i := slices.IndexFunc(cs, func(k fencedCase) bool { return k.name == c.name })
					if c.name == "DropUnfinishedRun" {
						if err := s.SetSetting(ctx, store.CreatingSetting+strconv.FormatInt(x.RunID, 10), "1", storetest.T0); err != nil {
							t.Fatal(err)
						}
					}
					before := snapshot(t, s)
					for _, epoch := range []int64{old.Epoch, 0, cur.Epoch + 1} {
						if err := cs[i].write(ctx, s.Fence(epoch)); !errors.Is(err, store.ErrNotLeader) {
							t.Errorf("%s at epoch %d (current %d): err = %v, want ErrNotLeader", c.name, epoch, cur.Epoch, err)
						}
					}
					if after := snapshot(t, s); after != before {
						t.Errorf("%s with a stale epoch changed the store:\nbefore %s\nafter  %s", c.name, before, after)
					}
					// The holder of the current epoch writes fine.
					if err := cs[i].write(ctx, s.Fence(cur.Epoch)); err != nil {
						t.Errorf("%s at the current epoch %d: %v", c.name, cur.Epoch, err)
					}
					if after := snapshot(t, s); after == before {
						t.Errorf("%s at the current epoch changed nothing", c.name)
					}
				})
			}
		})
	}
}
