package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/ax-sched/ax/store"
)

// testProcs: where an attempt runs is written with task output, read back
// by ticket with every field (its kind too: held, server, group), replaced
// when written again, and not written at all under a stale epoch.
func testProcs(t *testing.T, s *store.Store) {
	in := Seed(t, s)["a.x"]
	l := acquire(t, s, "p1", T0)
	f := s.Fence(l.Epoch)
	rec := store.ProcRecord{Ticket: "t-proc", InstanceID: in.ID, RunID: in.RunID, Host: "host-1", Boot: "0b5e7c6a-boot",
		PidNS: "pid:[4026531836]", Pgid: 31337, Start: 1 << 40, At: T0}
	if err := f.WriteLogs(ctx(), store.LogWrite{Procs: []store.ProcRecord{rec}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Procs(ctx(), []string{"t-proc", "t-none"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got["t-proc"] != rec {
		t.Fatalf("procs = %+v, want only %+v", got, rec)
	}
	// Written again (the same ticket): the second replaces the first.
	again := rec
	again.Pgid, again.Start, again.At = 4242, 99, T0.Add(time.Second)
	if err := f.WriteLogs(ctx(), store.LogWrite{Procs: []store.ProcRecord{again}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Procs(ctx(), []string{"t-proc"}); got["t-proc"] != again {
		t.Errorf("after a second write: %+v, want %+v", got["t-proc"], again)
	}
	// Its kind goes and comes back: claimed ahead (held), handed out by a
	// scheduler process (server), then the command's group (the default).
	for _, kind := range []string{store.ProcHeld, store.ProcServer, store.ProcGroup} {
		k := again
		k.Kind, k.Epoch = kind, l.Epoch
		if err := f.WriteLogs(ctx(), store.LogWrite{Procs: []store.ProcRecord{k}}); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.Procs(ctx(), []string{"t-proc"}); got["t-proc"] != k {
			t.Errorf("kind %q: read back %+v, want %+v", kind, got["t-proc"], k)
		}
		again = k
	}
	// The hand-out of held attempts: one row per epoch that claimed them,
	// up to a fire time that only grows.
	for _, upto := range []time.Time{T0.Add(time.Second), T0.Add(2 * time.Second)} {
		if err := f.HandOut(ctx(), []int64{l.Epoch, l.Epoch - 1}, upto, T0); err != nil {
			t.Fatal(err)
		}
		if got, err := s.HandOuts(ctx()); err != nil || len(got) != 2 || !got[l.Epoch].Equal(upto) || !got[l.Epoch-1].Equal(upto) {
			t.Errorf("hand-outs %v, %v; want epochs %d and %d up to %s", got, err, l.Epoch, l.Epoch-1, upto)
		}
	}
	// A stale epoch writes nothing, and changes nothing.
	stale := store.ProcRecord{Ticket: "t-stale", InstanceID: in.ID, RunID: in.RunID, Host: "h", Pgid: 1, At: T0}
	changed := again
	changed.Pgid, changed.Kind = 1, store.ProcServer
	err = s.Fence(l.Epoch+1).WriteLogs(ctx(), store.LogWrite{Procs: []store.ProcRecord{stale, changed}})
	if !errors.Is(err, store.ErrNotLeader) {
		t.Errorf("stale epoch: %v, want ErrNotLeader", err)
	}
	got, _ = s.Procs(ctx(), []string{"t-proc", "t-stale"})
	if len(got) != 1 || got["t-proc"] != again {
		t.Errorf("after a stale write: %+v, want only %+v", got, again)
	}
}

// testRedispatched: the last redispatch of each ticket of the instances
// asked about, by ticket; other actions, other instances and tickets never
// dispatched again are left out.
func testRedispatched(t *testing.T, s *store.Store) {
	seeded := Seed(t, s)
	a, b := seeded["a.x"], seeded["a.y"]
	for _, act := range []store.Action{
		{At: T0, Action: "redispatch", InstanceID: a.ID, Ticket: "t-a"},
		{At: T0.Add(2 * time.Second), Action: "redispatch", InstanceID: a.ID, Ticket: "t-a"},
		{At: T0.Add(time.Second), Action: "redispatch", InstanceID: a.ID, Ticket: "t-a-old"},
		{At: T0.Add(5 * time.Second), Action: "result", InstanceID: a.ID, Ticket: "t-a"},
		{At: T0.Add(3 * time.Second), Action: "redispatch", InstanceID: b.ID, Ticket: "t-b"},
	} {
		act.Actor, act.Pipeline, act.TaskID = "scheduler", "a", "a.x"
		if err := s.AppendAction(ctx(), act); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Redispatched(ctx(), []int64{a.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || !got["t-a"].Equal(T0.Add(2*time.Second)) || !got["t-a-old"].Equal(T0.Add(time.Second)) {
		t.Errorf("redispatched of instance %d = %v, want t-a at %s and t-a-old at %s", a.ID, got, T0.Add(2*time.Second), T0.Add(time.Second))
	}
	if got, err := s.Redispatched(ctx(), nil); err != nil || len(got) != 0 {
		t.Errorf("redispatched of no instance = %v, %v; want none", got, err)
	}
}
