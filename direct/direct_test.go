package direct

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ax-sched/ax/api"
	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/store"
	"github.com/ax-sched/ax/store/storetest"
)

// TestRefusalsNameWhatIsThereAndQueueNothing: what a command asks of a
// store about a name it does not hold is refused with the name and a
// suggestion, and nothing is queued for the primary.
func TestRefusalsNameWhatIsThereAndQueueNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.SQLite(t)
	storetest.Seed(t, st) // tasks a.x, a.y, a.z of pipeline a, group g
	s := &Store{st: st, wait: time.Second, actor: "operator:test"}
	var usage *api.UsageError
	for _, tc := range []struct {
		name, want string
		usage      bool
		ask        func() error
	}{
		{"pipeline", `no pipeline "b" in the store (did you mean "a"?)`, false, func() error { _, err := s.PipelineSummary(ctx, "b"); return err }},
		{"task's instances", `no task "a.q" in the store`, false, func() error { _, err := s.Instances(ctx, api.InstanceQuery{Task: "a.q", Limit: 5}); return err }},
		{"task's history", `no task "a.xq" (did you mean "a.x"?)`, false, func() error { _, err := s.History(ctx, "a.xq", 10); return err }},
		{"backfill", "no backfill 9 (ax backfill list shows them)", false, func() error { _, _, err := s.Backfill(ctx, 9); return err }},
		{"prune now", "a store read directly only counts what retention would prune: the primary prunes", true, func() error { _, err := s.PruneNow(ctx); return err }},
		{"pause of a group", `no group "gg" (did you mean "g"?)`, false, func() error {
			_, _, err := s.Apply(ctx, engine.Pause{Scope: axtype.ScopeGroup, Target: "gg"}, "", "why")
			return err
		}},
		{"trigger at a time without offset", `--at "2026-03-01T02:00:00": with --store give RFC 3339 with an offset (2026-03-01T02:00:00+08:00); the API reads other forms in the pipeline's zone`, true, func() error {
			_, _, err := s.Apply(ctx, engine.Trigger{Target: "a.x"}, "2026-03-01T02:00:00", "")
			return err
		}},
	} {
		err := tc.ask()
		if err == nil || err.Error() != tc.want || errors.As(err, &usage) != tc.usage {
			t.Errorf("%s: %v; want %q (a usage error: %v)", tc.name, err, tc.want, tc.usage)
		}
	}
	if ops, err := st.PendingOps(ctx, 10); err != nil || len(ops) != 0 {
		t.Errorf("queued after refusals: %+v, %v", ops, err)
	}
}

// TestHistoryNewestFirst: a task's history and actions come as the API
// gives them, newest first and at most limit.
func TestHistoryNewestFirst(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := storetest.SQLite(t)
	ins := storetest.Seed(t, st)
	in := ins["a.x"]
	for _, to := range []axtype.State{axtype.Running, axtype.Success} {
		v, err := st.Transition(ctx, store.TransitionParams{InstanceID: in.ID, Version: in.Version, From: in.State, To: to, Now: storetest.T0, Actor: "scheduler"})
		if err != nil {
			t.Fatalf("%s → %s: %v", in.State, to, err)
		}
		in.State, in.Version = to, v
	}
	s := &Store{st: st}
	hs, err := s.History(ctx, "a.x", 2)
	if err != nil || len(hs) != 2 || hs[0].To != axtype.Success || hs[1].To != axtype.Running {
		t.Errorf("History(a.x, 2) = %+v, %v; want SUCCESS then RUNNING", hs, err)
	}
}
