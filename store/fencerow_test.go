package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"
	"github.com/ax-sched/ax/store/storetest"
)

// holdOpen starts write in a goroutine and stops it inside its transaction,
// its statements run and its commit not yet asked (the store's fault hook
// on what), until the returned release is called; release returns the
// write's error (each time it is called).
func holdOpen(t *testing.T, s *store.Store, what string, write func() error) (release func() error) {
	t.Helper()
	entered, wake := make(chan struct{}), make(chan struct{})
	var once, enter sync.Once
	open := func() { once.Do(func() { close(wake) }) }
	t.Cleanup(open) // before the store closes, on every path
	store.SetFault(s, func(w string) error {
		if w == what {
			enter.Do(func() { close(entered) })
			<-wake
		}
		return nil
	})
	done := make(chan error, 1)
	go func() { done <- write() }()
	select {
	case <-entered:
	case err := <-done:
		t.Fatalf("%s ended before it was held open: %v", what, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("%s never reached its commit", what)
	}
	var (
		released sync.Once
		err      error
	)
	return func() error { // may be called again: the first call's error
		released.Do(func() {
			open()
			err = <-done
			store.SetFault(s, nil)
		})
		return err
	}
}

// TestMySQLRenewalDoesNotWaitForFencedWrites (MySQL): the holder renews its
// lease while its own fenced writes are open (a dispatch batch of many
// instances, one of two, a setting). Before the fence had a row of its
// own, every fenced write held the lease row's shared lock to its commit,
// and the renewal's UPDATE waited for it: for every dispatch and result
// batch in progress during a 10,000-command burst, and here for as long as
// the write stays open (the renewal fails with its 3 s deadline). The
// writes still commit, under the epoch they checked.
func TestMySQLRenewalDoesNotWaitForFencedWrites(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, what string
		n          int // instances moved by the batch (0: a setting)
	}{
		{"batch of 50", "transition batch", 50},
		{"batch of 2", "transition batch", 2},
		{"setting", "set setting", 0},
	} {
		for server, open := range storetest.Servers() {
			t.Run(server+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				renewDuringFencedWrite(t, open(t), tc.name, tc.what, tc.n)
			})
		}
	}
}

// renewDuringFencedWrite renews s's lease while a fenced write of n
// instances (0: a setting) is held open.
func renewDuringFencedWrite(t *testing.T, s *store.Store, name, what string, n int) {
	ctx := context.Background()
	now := time.Now()
	l, err := s.AcquireLease(ctx, store.LeaseParams{Holder: "a", TTL: time.Minute, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	f := s.Fence(l.Epoch)
	var ps []store.TransitionParams
	if n > 0 {
		var insts []store.NewInstance
		for i := range n {
			insts = append(insts, store.NewInstance{TaskID: fmt.Sprintf("q.t%03d", i), State: axtype.Scheduled, NextFireAt: now})
		}
		_, ins, err := f.CreateRun(ctx, store.CreateRunParams{Pipeline: "q", Trigger: "q", Kind: axtype.RunManual, LogicalTime: now, Now: now, Actor: "test", Instances: insts})
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range ins {
			ps = append(ps, store.TransitionParams{InstanceID: in.ID, Version: in.Version, From: axtype.Scheduled, To: axtype.Running, Now: now, Actor: "test", Reason: "held"})
		}
	}
	release := holdOpen(t, s, what, func() error {
		if n == 0 {
			return f.SetSetting(ctx, "held", "written", now)
		}
		res, err := f.TransitionBatch(ctx, ps)
		for _, r := range res {
			err = errors.Join(err, r.Err)
		}
		return err
	})
	rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	asked := time.Now()
	_, rerr := s.RenewLease(rctx, store.LeaseParams{Holder: "a", Epoch: l.Epoch, TTL: time.Minute, Now: time.Now()})
	took := time.Since(asked)
	if err := release(); err != nil {
		t.Fatalf("the held write: %v", err)
	}
	if rerr != nil {
		t.Fatalf("renewal while a fenced write (%s) was open: %v after %s; want it not to wait for the write", name, rerr, took.Round(time.Millisecond))
	}
	t.Logf("renewed in %s with the %s open", took.Round(time.Millisecond), name)
	if n > 0 {
		ins, err := s.Instances(ctx, store.InstanceFilter{Pipeline: "q", States: []axtype.State{axtype.Running}, Limit: 1000})
		if err != nil || len(ins) != n {
			t.Errorf("%d instances running after the batch, want %d (%v)", len(ins), n, err)
		}
	} else if m, err := s.Settings(ctx); err != nil || m["held"] != "written" {
		t.Errorf("settings %v, %v: the held write did not commit", m, err)
	}
}

// TestMySQLReadsDoNotWaitForWriteConnections (MySQL): with every write
// connection held by an open fenced write, the lease (what /api/v1/status
// reads), the instances and the database's liveness (/readyz) are still
// read at once. They shared the write pool, and during a 10,000-command
// burst the API waited behind the primary's transactions for a connection.
func TestMySQLReadsDoNotWaitForWriteConnections(t *testing.T) {
	t.Parallel()
	for name, open := range storetest.Servers() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			readWithWritesHeld(t, open(t))
		})
	}
}

// readWithWritesHeld reads s0's database while its one write connection
// is held by an open fenced write.
func readWithWritesHeld(t *testing.T, s0 *store.Store) {
	ctx := context.Background()
	s, err := store.Open(ctx, storetest.Target(t, s0), store.Options{MaxConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l, err := s.AcquireLease(ctx, store.LeaseParams{Holder: "a", TTL: time.Minute, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	release := holdOpen(t, s, "set setting", func() error { return s.Fence(l.Epoch).SetSetting(ctx, "held", "written", time.Now()) })
	defer release() //nolint:errcheck // released on every path
	for _, read := range []struct {
		what string
		do   func(ctx context.Context) error
	}{
		{"GetLease", func(ctx context.Context) error { _, err := s.GetLease(ctx, ""); return err }},
		{"Instances", func(ctx context.Context) error {
			_, err := s.Instances(ctx, store.InstanceFilter{Limit: 10})
			return err
		}},
		{"Ping", s.Ping},
	} {
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := read.do(rctx)
		cancel()
		if err != nil {
			t.Errorf("%s with the one write connection held: %v; want it read on a connection of its own", read.what, err)
		}
	}
	if err := release(); err != nil {
		t.Fatalf("the held write: %v", err)
	}
}

// TestFenceRowMigrated: a store written before the fence had a row of its
// own (schema 9: the lease row only) gets it at open, at the lease's epoch,
// so that its holder's fenced writes go on; an epoch taken after that
// fences the old one out.
func TestFenceRowMigrated(t *testing.T) {
	t.Parallel()
	for name, open := range storetest.All() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := open(t)
			ctx := context.Background()
			storetest.Seed(t, s)
			l, err := s.AcquireLease(ctx, store.LeaseParams{Holder: "a", TTL: time.Minute, Now: storetest.T0})
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range []string{"DELETE FROM leases WHERE name = '" + store.FenceName + "'", "DELETE FROM ax_schema WHERE version > 9"} {
				if _, err := s.DB().Exec(q); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Fence(l.Epoch).SetSetting(ctx, "k", "v", storetest.T0); !errors.Is(err, store.ErrNotLeader) {
				t.Fatalf("a fenced write with no fence row: %v, want ErrNotLeader", err)
			}
			target := storetest.Target(t, s)
			if name == "sqlite" {
				s.Close()
			}
			s2, err := store.Open(ctx, target, store.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s2.Close()
			if err := s2.Fence(l.Epoch).SetSetting(ctx, "k", "v", storetest.T0); err != nil {
				t.Fatalf("the holder's fenced write after the migration: %v", err)
			}
			l2, err := s2.AcquireLease(ctx, store.LeaseParams{Holder: "b", TTL: time.Minute, Now: storetest.T0.Add(time.Hour)})
			if err != nil || l2.Epoch != l.Epoch+1 {
				t.Fatalf("takeover: %+v, %v", l2, err)
			}
			if err := s2.Fence(l.Epoch).SetSetting(ctx, "k", "stale", storetest.T0); !errors.Is(err, store.ErrNotLeader) {
				t.Errorf("the old epoch's write after a takeover: %v, want ErrNotLeader", err)
			}
			if m, err := s2.Settings(ctx); err != nil || m["k"] != "v" {
				t.Errorf("settings %v, %v", m, err)
			}
		})
	}
}
