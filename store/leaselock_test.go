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
