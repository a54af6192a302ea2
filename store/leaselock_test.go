package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"
	"github.com/ax-sched/ax/store/storetest"
)

// On MySQL a renewal of the lease is not held up by a long fenced write of
// its holder: creating a run of 10,000 instances, or syncing 10,000
// definitions, checks the epoch just before its commit, so the lease row's
// shared lock is held for the commit only. When it was taken first and
// held through the write, a renewal waited for the whole write (seconds on
// a loaded MariaDB: a server starting with 10,000 tasks lost its lease).
func TestMySQLRenewalDoesNotWaitForALongWrite(t *testing.T) {
	s := storetest.MySQL(t)
	ctx := context.Background()
	now := time.Now()
	l, err := s.AcquireLease(ctx, store.LeaseParams{Holder: "a", TTL: time.Minute, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	const n = 10_000
	var defs store.PipelineDef
	defs.Name, defs.Hash, defs.Definition = "q", "h", []byte("{}")
	var insts []store.NewInstance
	for i := range n {
		id := fmt.Sprintf("q.t%05d", i)
		defs.Tasks = append(defs.Tasks, store.TaskDef{ID: id, Pipeline: "q", Name: id[2:], Group: "default", Priority: 3, Hash: "h", Definition: []byte("{}")})
		insts = append(insts, store.NewInstance{TaskID: id, State: axtype.Scheduled, NextFireAt: now})
	}
	for _, write := range []struct {
		what string
		do   func() error
	}{
		{"sync of 10,000 definitions", func() error {
			_, err := s.SyncDefinitions(ctx, store.SyncParams{Pipelines: []store.PipelineDef{defs}, Epoch: l.Epoch, Now: now})
			return err
		}},
		{"run of 10,000 instances", func() error {
			_, _, err := s.CreateRun(ctx, store.CreateRunParams{Pipeline: "q", Trigger: "q", Kind: axtype.RunSchedule, LogicalTime: now, Now: now,
				Actor: "test", Instances: insts, Epoch: l.Epoch})
			return err
		}},
	} {
		var (
			wg       sync.WaitGroup
			wrote    time.Time
			writeErr error
		)
		began := time.Now()
		wg.Go(func() {
			writeErr = write.do()
			wrote = time.Now()
		})
		time.Sleep(50 * time.Millisecond) // the write is under way (it takes hundreds of ms)
		asked := time.Now()
		if _, err := s.RenewLease(ctx, store.LeaseParams{Holder: "a", Epoch: l.Epoch, TTL: time.Minute, Now: time.Now()}); err != nil {
			t.Fatal(err)
		}
		renewal := time.Since(asked)
		wg.Wait()
		if writeErr != nil {
			t.Fatalf("%s: %v", write.what, writeErr)
		}
		took := wrote.Sub(began)
		t.Logf("%s: %s; a renewal asked 50 ms in took %s", write.what, took, renewal)
		if renewal > took/2 {
			t.Errorf("during a %s (%s): a renewal took %s, more than half of it; want it not to wait for the write", write.what, took, renewal)
		}
	}
}

// On MySQL a renewal of the lease is not held up by a batch of transitions
// of its holder either, however long the batch lasts (the engine's result
// batches read a run of 10,000 instances inside theirs when it is not
// cached, and every statement is a round trip to a database that may be
// starved of CPU): the batch checks the epoch just before its commit. The
// batch here waits, inside its transaction, for the renewal: when the
// renewal waits for the batch instead (the epoch checked first, its lease
// row lock held through the batch), the batch gives up after 5 s and the
// test fails; nothing here depends on how fast the machine is.
func TestMySQLRenewalDoesNotWaitForABatch(t *testing.T) {
	s := storetest.MySQL(t)
	ctx := context.Background()
	now := time.Now()
	l, err := s.AcquireLease(ctx, store.LeaseParams{Holder: "a", TTL: time.Minute, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 10} { // the single-row form (fence in its UPDATE) and the multi-row one
		var insts []store.NewInstance
		for i := range n {
			insts = append(insts, store.NewInstance{TaskID: fmt.Sprintf("q.t%d", i), State: axtype.Scheduled, NextFireAt: now})
		}
		_, ins, err := s.CreateRun(ctx, store.CreateRunParams{Pipeline: "q", Trigger: "q", Kind: axtype.RunManual, LogicalTime: now.Add(time.Duration(n) * time.Hour),
			Now: now, Actor: "test", Instances: insts, Epoch: l.Epoch})
		if err != nil {
			t.Fatal(err)
		}
		var ps []store.TransitionParams
		for _, in := range ins {
			ps = append(ps, store.TransitionParams{InstanceID: in.ID, Version: in.Version, From: axtype.Scheduled, To: axtype.Running, Epoch: l.Epoch, Now: now, Actor: "test"})
		}
		renewed := make(chan error, 1)
		waited := false
		res, _, err := s.TransitionBatchThen(ctx, ps, func([]store.BatchResult) ([]store.TransitionParams, error) {
			go func() {
				_, err := s.RenewLease(ctx, store.LeaseParams{Holder: "a", Epoch: l.Epoch, TTL: time.Minute, Now: time.Now()})
				renewed <- err
			}()
			select {
			case err := <-renewed:
				renewed <- err
			case <-time.After(5 * time.Second):
				waited = true
			}
			return nil, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := <-renewed; err != nil {
			t.Fatal(err)
		}
		if waited {
			t.Errorf("%d transition(s): a renewal asked inside the batch's transaction waited for its commit (the lease row locked through the batch)", n)
		}
		for i, r := range res {
			if r.Err != nil {
				t.Errorf("%d transition(s): transition %d: %v", n, i, r.Err)
			}
		}
		got, err := s.Instance(ctx, ins[0].ID)
		if err != nil || got.State != axtype.Running {
			t.Errorf("%d transition(s): instance %d is %s (%v), want RUNNING", n, ins[0].ID, got.State, err)
		}
	}
}
