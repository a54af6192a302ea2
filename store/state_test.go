package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"
	"github.com/ax-sched/ax/store/storetest"
)

// TestAllStatePairs walks all 64 (from, to) pairs through Store.Transition on
// a real store: each pair the table allows succeeds, every other fails with
// the illegal-transition error and writes nothing. The table itself is
// pinned, against a copy written out by hand and against docs/states.md, by
// the tests of package axtype.
func TestAllStatePairs(t *testing.T) {
	t.Parallel()
	s := storetest.SQLite(t)
	ctx := context.Background()
	var news []store.NewInstance
	for range 64 {
		news = append(news, store.NewInstance{TaskID: "a.x", Group: "g", Priority: 3, State: axtype.Waiting})
	}
	ok := 0
	for i, from := range axtype.States {
		for j, to := range axtype.States {
			// A fresh instance per pair, driven to `from` along allowed edges.
			_, ins, err := s.CreateRun(ctx, store.CreateRunParams{Pipeline: "a", Trigger: "a", Kind: axtype.RunManual,
				LogicalTime: storetest.T0, Now: storetest.T0, Instances: news[:1]})
			if err != nil {
				t.Fatal(err)
			}
			in := ins[0]
			for _, step := range pathTo(from) {
				v, err := s.Transition(ctx, store.TransitionParams{InstanceID: in.ID, Version: in.Version, From: step[0], To: step[1], Now: storetest.T0})
				if err != nil {
					t.Fatalf("driving to %s: %v", from, err)
				}
				in.Version = v
			}
			_, err = s.Transition(ctx, store.TransitionParams{InstanceID: in.ID, Version: in.Version, From: from, To: to, Now: storetest.T0})
			want := axtype.CanTransition(from, to)
			switch {
			case want && err != nil:
				t.Errorf("pair %d,%d %s → %s: %v", i, j, from, to, err)
			case !want && !errors.Is(err, store.ErrIllegalTransition):
				t.Errorf("pair %d,%d %s → %s: err = %v, want ErrIllegalTransition", i, j, from, to, err)
			case want:
				ok++
			}
			if !want {
				got, _ := s.Instance(ctx, in.ID)
				if got.State != from || got.Version != in.Version {
					t.Errorf("%s → %s was refused but changed the instance to %s v%d", from, to, got.State, got.Version)
				}
			}
		}
	}
	if ok != 25 {
		t.Errorf("%d allowed transitions succeeded, want 25", ok)
	}
	_, err := s.Transition(ctx, store.TransitionParams{InstanceID: 1, Version: 1, From: axtype.Success, To: axtype.Running, Now: storetest.T0})
	if want := "instance 1: SUCCESS → RUNNING: store: illegal transition (from SUCCESS it may move to [SCHEDULED WAITING])"; fmt.Sprint(err) != want {
		t.Errorf("message = %q, want %q", err, want)
	}
}

// pathTo returns the allowed steps from WAITING to s.
func pathTo(s axtype.State) [][2]axtype.State {
	w, sc, r := axtype.Waiting, axtype.Scheduled, axtype.Running
	switch s {
	case axtype.Waiting:
		return nil
	case axtype.Scheduled:
		return [][2]axtype.State{{w, sc}}
	case axtype.Running:
		return [][2]axtype.State{{w, sc}, {sc, r}}
	case axtype.Paused:
		return [][2]axtype.State{{w, axtype.Paused}}
	default: // RETRYING, SUCCESS, FAILED, KILLED are reached from RUNNING
		return [][2]axtype.State{{w, sc}, {sc, r}, {r, s}}
	}
}
