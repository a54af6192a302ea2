package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/ax-sched/ax/store"
	"github.com/ax-sched/ax/store/storetest"
)

// allowed is the table of SPEC R7 with its documented additions (R7, R40),
// written out again here so that a change to store/state.go has to be made
// twice, on purpose.
var allowed = map[[2]store.State]bool{
	{store.Waiting, store.Scheduled}: true, {store.Waiting, store.Paused}: true,
	{store.Scheduled, store.Running}: true, {store.Scheduled, store.Failed}: true, {store.Scheduled, store.Paused}: true,
	{store.Running, store.Success}: true, {store.Running, store.Failed}: true, {store.Running, store.Retrying}: true, {store.Running, store.Killed}: true,
	{store.Retrying, store.Running}: true, {store.Retrying, store.Failed}: true, {store.Retrying, store.Paused}: true,
	{store.Success, store.Scheduled}: true, {store.Success, store.Waiting}: true,
	{store.Failed, store.Running}: true,
	{store.Paused, store.Waiting}: true, {store.Paused, store.Running}: true,
	{store.Killed, store.Waiting}: true,
	// R40: runs always end; operators settle any instance.
	{store.Waiting, store.Failed}: true, {store.Waiting, store.Success}: true,
	{store.Failed, store.Waiting}: true, {store.Failed, store.Success}: true,
	{store.Paused, store.Failed}:  true,
	{store.Killed, store.Success}: true, {store.Killed, store.Failed}: true,
}

// TestAllStatePairs walks all 64 (from, to) pairs through Store.Transition on
// a real store: each allowed pair succeeds, every other fails with the
// illegal-transition error and writes nothing.
func TestAllStatePairs(t *testing.T) {
	t.Parallel()
	s := storetest.SQLite(t)
	ctx := context.Background()
	var news []store.NewInstance
	for range 64 {
		news = append(news, store.NewInstance{TaskID: "a.x", Group: "g", Priority: 3, State: store.Waiting})
	}
	ok := 0
	for i, from := range store.States {
		for j, to := range store.States {
			// A fresh instance per pair, driven to `from` along allowed edges.
			_, ins, err := s.CreateRun(ctx, store.CreateRunParams{Pipeline: "a", Trigger: "a", Kind: store.RunManual,
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
			want := allowed[[2]store.State{from, to}]
			if store.CanTransition(from, to) != want {
				t.Errorf("CanTransition(%s, %s) = %v, want %v", from, to, !want, want)
			}
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
	if ok != len(allowed) {
		t.Errorf("%d allowed transitions succeeded, want %d", ok, len(allowed))
	}
	_, err := s.Transition(ctx, store.TransitionParams{InstanceID: 1, Version: 1, From: store.Success, To: store.Running, Now: storetest.T0})
	if want := "instance 1: SUCCESS → RUNNING: store: illegal transition (from SUCCESS it may move to [SCHEDULED WAITING])"; fmt.Sprint(err) != want {
		t.Errorf("message = %q, want %q", err, want)
	}
}

// pathTo returns the allowed steps from WAITING to s.
func pathTo(s store.State) [][2]store.State {
	w, sc, r := store.Waiting, store.Scheduled, store.Running
	switch s {
	case store.Waiting:
		return nil
	case store.Scheduled:
		return [][2]store.State{{w, sc}}
	case store.Running:
		return [][2]store.State{{w, sc}, {sc, r}}
	case store.Paused:
		return [][2]store.State{{w, store.Paused}}
	default: // RETRYING, SUCCESS, FAILED, KILLED are reached from RUNNING
		return [][2]store.State{{w, sc}, {sc, r}, {r, s}}
	}
}
