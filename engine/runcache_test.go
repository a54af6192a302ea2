package engine

import (
	"context"
	"errors"
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
