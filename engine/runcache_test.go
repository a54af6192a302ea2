package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"
)

// fakeRuns is a runSource from fixed rows, counting its reads.
type fakeRuns struct {
	insts map[int64][]axtype.Instance
	runs  map[int64]axtype.Run
	reads int
}

func (f *fakeRuns) Instances(_ context.Context, fl store.InstanceFilter) ([]axtype.Instance, error) {
	f.reads++
	return f.insts[fl.RunID], nil
}

func (f *fakeRuns) Backfills(context.Context, int64) ([]store.Backfill, error) {
	return nil, errors.New("no backfills")
}

func (f *fakeRuns) Run(_ context.Context, id int64) (axtype.Run, error) {
	f.reads++
	r, ok := f.runs[id]
	if !ok {
		return axtype.Run{}, errors.New("no such run")
	}
	return r, nil
}

// TestRunCacheReadsOnceAndForgets: a run is read from the store once, kept
// while something of it is in flight, and read again after it was dropped
// (by an instance of it, or all at once).
func TestRunCacheReadsOnceAndForgets(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	src := &fakeRuns{insts: map[int64][]axtype.Instance{
		1: {{ID: 10, RunID: 1, TaskID: "p.a", State: axtype.Running, Version: 2, LogicalTime: at}, {ID: 11, RunID: 1, TaskID: "p.b", State: axtype.Waiting, Version: 1, LogicalTime: at}},
	}}
	c := newRunCache(src)
	ctx := context.Background()
	get := func() *runState {
		t.Helper()
		rs, err := c.get(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	rs := get()
	get()
	if src.reads != 1 {
		t.Fatalf("read the store %d times for two gets, want 1", src.reads)
	}
	c.setState(1, "p.a", axtype.Success, 3)
	if ref := rs.inst["p.a"]; ref.state != axtype.Success || ref.version != 3 {
		t.Fatalf("p.a after setState = %s v%d, want SUCCESS v3", ref.state, ref.version)
	}
	c.forgetAllDone() // p.b waits: nothing in flight, so the run goes
	if c.cached(1) != nil {
		t.Fatal("a run with nothing in flight stayed cached")
	}
	get()
	c.setState(1, "p.b", axtype.Scheduled, 2)
	c.forgetAllDone()
	if c.cached(1) == nil {
		t.Fatal("a run with a SCHEDULED instance was forgotten")
	}
	c.dropRunOf(99) // not an instance of a cached run: nothing changes
	if c.cached(1) == nil {
		t.Fatal("dropRunOf(99) dropped run 1")
	}
	c.dropRunOf(11)
	if c.cached(1) != nil {
		t.Fatal("dropRunOf(11) kept run 1")
	}
	get()
	c.invalidate()
	if c.cached(1) != nil {
		t.Fatal("invalidate kept run 1")
	}
	if _, err := c.get(ctx, 2); err == nil {
		t.Fatal("a run with no instances was cached")
	}
	if c.cached(2) != nil {
		t.Fatal("a run with no instances was cached")
	}
}

// TestRunCacheKindsAndParams: a run's kind is read once and schedule when
// unknown; a manual run's --param values go over the task's, a schedule
// run's params are the task's, unread.
func TestRunCacheKindsAndParams(t *testing.T) {
	t.Parallel()
	src := &fakeRuns{runs: map[int64]axtype.Run{
		1: {ID: 1, Kind: axtype.RunManual, Params: `{"day":"2026-03-01"}`},
		2: {ID: 2, Kind: axtype.RunBackfill},
		3: {ID: 3, Kind: axtype.RunManual},
	}}
	c := newRunCache(src)
	ctx := context.Background()
	for _, tc := range []struct {
		run  int64
		want axtype.RunKind
	}{{1, axtype.RunManual}, {2, axtype.RunBackfill}, {9, axtype.RunSchedule}, {1, axtype.RunManual}} {
		if got := c.kindOf(ctx, tc.run); got != tc.want {
			t.Errorf("kindOf(%d) = %s, want %s", tc.run, got, tc.want)
		}
	}
	if src.reads != 3 {
		t.Errorf("read the store %d times, want 3 (run 1 once)", src.reads)
	}
	task := map[string]any{"day": "task", "env": "prod"}
	for _, tc := range []struct {
		name string
		run  int64
		want map[string]any
	}{
		{"manual run with params", 1, map[string]any{"day": "2026-03-01", "env": "prod"}},
		{"backfill run", 2, task},
		{"manual run without params", 3, task},
		{"unknown run", 9, task},
	} {
		if got := c.paramsOf(tc.run, task); !maps.Equal(got, tc.want) {
			t.Errorf("%s: paramsOf = %v, want %v", tc.name, got, tc.want)
		}
	}
	if task["day"] != "task" {
		t.Errorf("paramsOf changed the task's params: %v", task)
	}
	rs := newRunState(4, time.Time{}, nil)
	c.created(rs, axtype.RunManual, `{"x":"1"}`)
	reads := src.reads
	if got := c.paramsOf(4, nil); got["x"] != "1" || src.reads != reads {
		t.Errorf("paramsOf(4) = %v after %d reads, want x=1 from the cache", got, src.reads-reads)
	}
}

// TestRunCacheIndexFollowsTheRuns: the instance → run index and the set of
// runs with nothing in flight follow every way a run enters and leaves the
// cache: a state set on the run itself (as settle does), a run read again
// in place of its stale copy, a drop, a forget and an invalidate.
func TestRunCacheIndexFollowsTheRuns(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	inst := func(id, run int64, task string, s axtype.State) axtype.Instance {
		return axtype.Instance{ID: id, RunID: run, TaskID: task, State: s, Version: 1, LogicalTime: at}
	}
	c := newRunCache(&fakeRuns{})
	c.created(newRunState(1, at, []axtype.Instance{inst(10, 1, "p.a", axtype.Running), inst(11, 1, "p.b", axtype.Waiting)}), axtype.RunSchedule, "")
	c.created(newRunState(2, at, []axtype.Instance{inst(20, 2, "p.a", axtype.Scheduled)}), axtype.RunSchedule, "")
	c.forgetAllDone()
	if c.cached(1) == nil || c.cached(2) == nil {
		t.Fatal("forgetAllDone dropped a run with an instance in flight")
	}
	c.cached(1).set("p.a", axtype.Success, 2) // on the run itself, as settle does
	c.forgetAllDone()
	if c.cached(1) != nil || c.cached(2) == nil {
		t.Fatalf("after run 1's last instance in flight ended: run 1 cached %v (want gone), run 2 cached %v (want kept)", c.cached(1) != nil, c.cached(2) != nil)
	}
	if _, ok := c.owner[10]; ok {
		t.Error("the index still names instance 10 of a forgotten run")
	}
	// Read again in place of a stale copy: the new copy's instances are indexed.
	c.created(newRunState(2, at, []axtype.Instance{inst(21, 2, "p.b", axtype.Running)}), axtype.RunSchedule, "")
	if _, ok := c.owner[20]; ok {
		t.Error("the index still names instance 20 of the replaced copy of run 2")
	}
	c.dropRunOf(20) // of the stale copy: the cached run stays
	if c.cached(2) == nil {
		t.Fatal("dropRunOf of an instance of a replaced copy dropped the run")
	}
	c.dropRunOf(21)
	if c.cached(2) != nil || len(c.owner) != 0 || len(c.idle) != 0 {
		t.Fatalf("after dropRunOf(21): run 2 cached %v, index %v, idle %d; want all empty", c.cached(2) != nil, c.owner, len(c.idle))
	}
	c.created(newRunState(3, at, []axtype.Instance{inst(30, 3, "p.a", axtype.Waiting)}), axtype.RunSchedule, "")
	c.forget(3)
	c.created(newRunState(4, at, []axtype.Instance{inst(40, 4, "p.a", axtype.Running)}), axtype.RunSchedule, "")
	rs := c.cached(4)
	c.invalidate()
	if len(c.runs) != 0 || len(c.owner) != 0 || len(c.idle) != 0 {
		t.Fatalf("after forget and invalidate: %d runs, index %v, idle %d; want none", len(c.runs), c.owner, len(c.idle))
	}
	rs.set("p.a", axtype.Success, 2) // a copy no longer cached: never comes back through idle
	if len(c.idle) != 0 {
		t.Fatal("a state set on an invalidated copy marked it idle in the cache")
	}
}

// BenchmarkRunCache measures what the loop does to the run cache on each
// dispatch, result or skip, with 1,000 to 100,000 runs cached: drop the run
// of an instance (a failed compare-and-set, an overlap skip), set a state,
// and forget the runs that ended. Each must cost the same at every size.
func BenchmarkRunCache(b *testing.B) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, n := range []int{1_000, 10_000, 100_000} {
		fill := func() *runCache {
			c := new(newRunCache(&fakeRuns{}))
			for i := range int64(n) {
				c.created(newRunState(i, at, []axtype.Instance{{ID: i, RunID: i, TaskID: "p.a", State: axtype.Scheduled, LogicalTime: at}}), axtype.RunSchedule, "")
			}
			return c
		}
		b.Run(fmt.Sprintf("dropRunOf/runs=%d", n), func(b *testing.B) {
			c := fill()
			i := int64(0)
			for b.Loop() {
				id := (i * 7919) % int64(n) // spread over the cache
				c.dropRunOf(id)
				c.created(newRunState(id, at, []axtype.Instance{{ID: id, RunID: id, TaskID: "p.a", State: axtype.Scheduled, LogicalTime: at}}), axtype.RunSchedule, "")
				i++
			}
		})
		b.Run(fmt.Sprintf("endAndForget/runs=%d", n), func(b *testing.B) {
			c := fill()
			i := int64(0)
			for b.Loop() {
				id := (i * 7919) % int64(n)
				c.setState(id, "p.a", axtype.Success, 2)
				c.forgetAllDone()
				c.created(newRunState(id, at, []axtype.Instance{{ID: id, RunID: id, TaskID: "p.a", State: axtype.Scheduled, LogicalTime: at}}), axtype.RunSchedule, "")
				i++
			}
		})
	}
}
