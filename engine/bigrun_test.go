package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"
)

// widePipeline is a pipeline of n independent tasks that fires once a year.
func widePipeline(n int) string {
	var src strings.Builder
	src.WriteString("pipeline: wide\ntimezone: UTC\nschedule: \"0 0 3 1 1 *\"\ndefaults: {function: record}\ntasks:\n")
	for i := range n {
		fmt.Fprintf(&src, "  - {name: t%04d}\n", i)
	}
	return src.String()
}

// committedInstances counts the instances committed in e's store: read on
// a connection of the read pool, it does not see a transaction in progress.
func (e *env) committedInstances() int {
	in, err := e.st.Instances(context.Background(), store.InstanceFilter{Pipeline: "wide", Limit: 1 << 20})
	if err != nil {
		e.t.Fatal(err)
	}
	return len(in)
}

// TestBigTriggerWritesInChunks: a trigger of a pipeline of 250 tasks with
// CreateChunk 40 writes no transaction of more than 40 instances (each
// counted as what is committed before it and after it), so that no write
// holds the store past the lease's renewal margin; the run is whole when
// the trigger answers, every task runs once, every instance has its first
// history row, the lease keeps its epoch, and the action log has the
// trigger with the run's id.
func TestBigTriggerWritesInChunks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, chunk = 250, 40
		e := setup(t, Config{MaxRunning: -1, CreateChunk: chunk}, nil, widePipeline(n))
		epoch := e.eng.leadership.lease.Load().epoch.Load()
		var before []int // instances committed before each transaction creating the run
		store.SetFault(e.st, func(what string) error {
			if strings.HasPrefix(what, "create run") {
				before = append(before, e.committedInstances())
			}
			return nil
		})
		msg, err := e.eng.Do(context.Background(), Trigger{Target: "wide"}, By{Actor: "operator:test"})
		store.SetFault(e.st, nil)
		if err != nil {
			t.Fatalf("trigger: %v", err)
		}
		before = append(before, e.committedInstances())
		for i := 1; i < len(before); i++ {
			if rows := before[i] - before[i-1]; rows > chunk {
				t.Errorf("transaction %d of the run's creation wrote %d instances, want at most %d (counts %v)", i, rows, chunk, before)
			}
		}
		if before[len(before)-1] != n {
			t.Fatalf("%d instances after the trigger, want %d", before[len(before)-1], n)
		}
		var run int64
		if _, err := fmt.Sscanf(msg, "run %d started", &run); err != nil {
			t.Fatalf("trigger answered %q, want it to name the run", msg)
		}
		hist, err := e.st.History(context.Background(), store.LogFilter{Limit: 10 * n})
		if err != nil {
			t.Fatal(err)
		}
		created := map[int64]bool{}
		for _, h := range hist {
			if h.RunID == run && h.From == "" {
				created[h.InstanceID] = true
			}
		}
		if len(created) != n {
			t.Errorf("%d instances of run %d have their first history row, want %d", len(created), run, n)
		}
		sleep(30 * time.Second)
		if calls := e.rec.snapshot(); len(calls) != n {
			t.Errorf("%d executions after the trigger, want %d (each task once)", len(calls), n)
		}
		if got := e.eng.leadership.lease.Load().epoch.Load(); got != epoch {
			t.Errorf("lease epoch %d after the trigger, want %d (the lease kept)", got, epoch)
		}
		acts, err := e.st.Actions(context.Background(), store.LogFilter{Action: OpTrigger})
		if err != nil {
			t.Fatal(err)
		}
		if len(acts) != 1 || acts[0].Pipeline != "wide" || !strings.Contains(acts[0].Detail, fmt.Sprintf("run %d started", run)) {
			t.Errorf("action log triggers %+v, want one of pipeline wide naming run %d", acts, run)
		}
		e.stop()
	})
}

// TestBigTriggerFailedMidwayLeavesNothing: when a transaction of a run's
// creation fails after the first, the part written is dropped: no run, no
// instance, nothing runs, and the trigger says it failed. When the drop
// fails too, the run stays marked unfinished, nothing of it runs, and the
// next turn that can write drops it and logs so.
func TestBigTriggerFailedMidwayLeavesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, chunk = 100, 30
		e := setup(t, Config{MaxRunning: -1, CreateChunk: chunk}, nil, widePipeline(n))
		failSecond(e.st, true)
		if _, err := e.eng.Do(context.Background(), Trigger{Target: "wide"}, By{}); err == nil {
			t.Fatal("trigger succeeded though a write of its run failed")
		}
		if got := e.committedInstances(); got != 0 {
			t.Errorf("%d instances after a failed creation, want 0 (the part written dropped)", got)
		}
		failSecond(e.st, false)
		if _, err := e.eng.Do(context.Background(), Trigger{Target: "wide"}, By{}); err == nil {
			t.Fatal("trigger succeeded though a write of its run failed")
		}
		ids, err := e.st.UnfinishedRuns(context.Background())
		if err != nil || len(ids) != 1 {
			t.Fatalf("unfinished runs %v (%v), want the one whose drop failed", ids, err)
		}
		sleep(10 * time.Second) // every drop fails meanwhile: no turn goes on
		store.SetFault(e.st, nil)
		sleep(60 * time.Second)
		e.stop()
		checkDropped(t, e, ids[0])
	})
}

// failSecond makes the second "create run instances" transaction on st
// fail, and with keepDrop false every drop of the unfinished run after it.
func failSecond(st *store.Store, keepDrop bool) {
	k := 0
	store.SetFault(st, func(what string) error {
		if what == "create run instances" {
			if k++; k == 2 {
				return errors.New("injected")
			}
		}
		if !keepDrop && k >= 2 && what == "drop unfinished run" {
			return errors.New("injected drop")
		}
		return nil
	})
}

// checkDropped checks that run id is gone, with all its instances, that
// nothing of it ran, and that the action log says it was dropped.
func checkDropped(t *testing.T, e *env, id int64) {
	t.Helper()
	if got := e.committedInstances(); got != 0 {
		t.Errorf("%d instances left, want 0 (the unfinished run dropped)", got)
	}
	if ids, _ := e.st.UnfinishedRuns(context.Background()); len(ids) != 0 {
		t.Errorf("unfinished runs %v left, want none", ids)
	}
	if _, err := e.st.Run(context.Background(), id); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("run %d: %v, want it dropped", id, err)
	}
	acts, err := e.st.Actions(context.Background(), store.LogFilter{Action: "run_dropped"})
	if err != nil || len(acts) != 1 || !strings.Contains(acts[0].Detail, fmt.Sprintf("run %d dropped", id)) {
		t.Errorf("run_dropped actions %+v (%v), want one naming run %d", acts, err, id)
	}
	if calls := e.rec.snapshot(); len(calls) != 0 {
		t.Errorf("%d executions of an unfinished run, want none", len(calls))
	}
}

// TestUnfinishedRunDroppedAtTermStart: a run whose creation a crash cut
// short (marked unfinished, some of its instances SCHEDULED and due) is
// dropped by the next term before anything is loaded: nothing of it runs.
func TestUnfinishedRunDroppedAtTermStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n, chunk = 100, 30
		var id int64
		e := setupOn(t, Config{MaxRunning: -1, CreateChunk: chunk}, nil, func(st *store.Store) {
			var news []store.NewInstance
			for i := range n {
				news = append(news, store.NewInstance{TaskID: fmt.Sprintf("wide.t%04d", i), Group: "default", State: axtype.Scheduled, NextFireAt: time.Now()})
			}
			failSecond(st, false)
			_, _, err := st.CreateRun(context.Background(), store.CreateRunParams{Pipeline: "wide", Trigger: "wide", Kind: axtype.RunManual,
				LogicalTime: time.Now(), Actor: "operator", Instances: news, Now: time.Now(), Chunk: chunk})
			store.SetFault(st, nil)
			ids, _ := st.UnfinishedRuns(context.Background())
			if err == nil || len(ids) != 1 {
				t.Fatalf("create run with failing writes: %v, unfinished %v; want an error and one unfinished run", err, ids)
			}
			id = ids[0]
		}, widePipeline(n))
		sleep(30 * time.Second)
		e.stop()
		checkDropped(t, e, id)
	})
}
