package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/engine/wheel"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// These tests drive one component alone with plain values: no store, no
// engine, no fake host.

func aloneTask(id, group string, priority int) *taskInfo {
	pipeline, _ := splitID(id)
	return &taskInfo{id: id, def: &defs.Task{Pipeline: pipeline, Group: group, Priority: priority, Timeout: time.Minute,
		Executor: defs.Executor{Kind: defs.ExecFunction}}}
}

// The planner takes out of its wheel what comes due, and leaves the rest.
func TestPlannerDueAlone(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	var pl planner
	pl.newTerm(t0, 5*time.Minute)
	for id, at := range map[int64]time.Duration{1: 2 * time.Second, 2: 3 * time.Second, 3: time.Minute} {
		if !pl.wheel.Add(wheel.Entry{ID: id, Version: 1, At: t0.Add(at).UnixMilli()}) {
			t.Fatalf("the wheel refused instance %d", id)
		}
	}
	got := map[int64]bool{}
	for _, en := range pl.due(t0.Add(5 * time.Second)) {
		got[en.ID] = true
	}
	if len(got) != 2 || !got[1] || !got[2] {
		t.Errorf("due: %v, want instances 1 and 2", got)
	}
	if pl.wheel.Len() != 1 {
		t.Errorf("the wheel holds %d entries, want 1 (not due yet)", pl.wheel.Len())
	}
}

// The dispatcher admits what came due into its queue by priority, drops an
// entry whose instance changed since it was handed over, and queues at once
// what was due when handed over.
func TestDispatcherAdmitAlone(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	var d dispatcher
	d.clearWaiting()
	low, high := aloneTask("p.low", "g", 5), aloneTask("p.high", "g", 1) // 1 is the highest
	at := func(s int) int64 { return t0.Add(time.Duration(s) * time.Second).UnixMilli() }
	d.expect(1, &pend{at: at(2), version: 1, task: low}, false)
	d.expect(2, &pend{at: at(3), version: 1, task: high}, false)
	d.expect(3, &pend{at: at(1), version: 2, task: high}, false) // changed since its wheel entry (version 1)
	d.expect(4, &pend{at: at(9), version: 1, task: low}, true)   // due when handed over
	if !d.waiting(3, 2) || d.waiting(3, 1) {
		t.Errorf("waiting(3): at version 2 %v, at version 1 %v; want true, false", d.waiting(3, 2), d.waiting(3, 1))
	}
	d.admit([]wheel.Entry{{ID: 3, Version: 1, At: at(1)}, {ID: 1, Version: 1, At: at(2)}, {ID: 2, Version: 1, At: at(3)}})
	var got []int64
	for d.queue.Len() > 0 {
		it, _ := d.queue.Pop()
		got = append(got, it.Value)
	}
	if fmt.Sprint(got) != "[2 1 4]" {
		t.Errorf("queue: %v, want [2 1 4] (the higher priority first, then by fire time; the changed one dropped)", got)
	}
	if p := d.forget(1); p == nil || d.waiting(1, 1) {
		t.Errorf("forget(1) = %v, still waiting %v; want its entry, then not waiting", p, d.waiting(1, 1))
	}
}

// At shutdown the dispatcher withdraws the attempts it claimed ahead, each
// with the reason it never started, and keeps the ones already started.
func TestDispatcherUnstartedAlone(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	var d dispatcher
	d.newTerm(Config{Now: func() time.Time { return t0 }}, t0)
	ti := aloneTask("p.a", "g", 0)
	var cancelled []error
	held := &attempt{ticket: "held", task: ti, due: t0.Add(time.Second), cancel: func(err error) { cancelled = append(cancelled, err) }}
	running := &attempt{ticket: "running", task: ti}
	d.track(1, held)
	d.held[1] = held
	d.track(2, running)

	outs := d.unstarted()
	if len(outs) != 1 || outs[0].instance != 1 || outs[0].res.Ticket != "held" || !strings.Contains(outs[0].notStarted, "claimed ahead") {
		t.Fatalf("withdrawn: %+v, want instance 1 (ticket held) claimed ahead", outs)
	}
	if !held.interrupted || running.interrupted {
		t.Errorf("interrupted: held %v, running %v; want only the held one", held.interrupted, running.interrupted)
	}
	if len(cancelled) != 1 || !errors.Is(cancelled[0], errNotStartedByShutdown) {
		t.Errorf("cancelled with %v, want errNotStartedByShutdown once", cancelled)
	}
	if len(d.held) != 0 {
		t.Errorf("still held: %d, want none", len(d.held))
	}
}

// The operator finds the tasks a pause covers in its own snapshot of the
// tasks, and names an unknown target with a suggestion.
func TestOperatorScopeAlone(t *testing.T) {
	op := operator{sched: &inForce{&snapshot{tasks: map[string]*taskInfo{
		"etl.load": aloneTask("etl.load", "db", 0), "etl.sync": aloneTask("etl.sync", "net", 0), "web.ping": aloneTask("web.ping", "net", 0),
	}}}}
	got, err := op.inScope(store.ScopeGroup, "net")
	if err != nil || len(got) != 2 || got[0].id != "etl.sync" || got[1].id != "web.ping" {
		t.Errorf("group net covers %v (err %v), want etl.sync and web.ping", ids(got), err)
	}
	if _, err := op.inScope(store.ScopePipeline, "etk"); err == nil || err.Error() != `no pipeline "etk" (did you mean "etl"?)` {
		t.Errorf("unknown pipeline: %v", err)
	}
	if _, err := op.resolveTask("etl.lod"); err == nil || !strings.Contains(err.Error(), `no task "etl.lod"`) || !strings.Contains(err.Error(), "etl.load") {
		t.Errorf("unknown task: %v", err)
	}
}

func ids(ts []*taskInfo) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.id)
	}
	return out
}

// The resolver decides a run's waiting instances from its own view of the
// graph and the run's instances, and follows a failure down the run.
func TestResolverVerdictsAlone(t *testing.T) {
	g := compileOne(t, "pipeline: p\ntimezone: UTC\nschedule: \"@daily\"\ntasks:\n"+
		"  - {name: a, function: f}\n  - {name: b, function: f, depends_on: [a]}\n"+
		"  - {name: x, function: f}\n  - {name: c, function: f, depends_on: [a, x]}\n  - {name: d, function: f, depends_on: [c]}\n")
	tasks, _ := buildTasks(g)
	r := resolver{sched: &inForce{&snapshot{g: g, tasks: tasks}}}
	r.setGraph(g, tasks)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rs := newRunState(1, t0, []axtype.Instance{
		{ID: 1, TaskID: "p.a", State: axtype.Success}, {ID: 2, TaskID: "p.b", State: axtype.Waiting},
		{ID: 3, TaskID: "p.x", State: axtype.Failed}, {ID: 4, TaskID: "p.c", State: axtype.Waiting}, {ID: 5, TaskID: "p.d", State: axtype.Waiting},
	})
	out, err := r.verdicts(context.Background(), rs, []*taskInfo{tasks["p.b"], tasks["p.c"]}, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]verdict{}
	for _, s := range out {
		got[s.task] = s.verdict
	}
	want := map[string]verdict{"p.b": verdictReady, "p.c": verdictFail, "p.d": verdictFail}
	if len(got) != len(want) {
		t.Fatalf("verdicts %v, want %v", got, want)
	}
	for task, v := range want {
		if got[task] != v {
			t.Errorf("%s: verdict %v, want %v", task, got[task], v)
		}
	}
}

// The completer takes in outcomes from the attempts' goroutines and from the
// loop alike, and bounds how long an instance every executor refuses is
// offered again: until the deadline of its first refused attempt.
func TestCompleterAlone(t *testing.T) {
	c := completer{results: make(chan outcome, 4), abandoned: make(chan struct{}), watch: newWatch()}
	c.report(outcome{instance: 1, res: runner.Result{Ticket: "t1"}})
	c.gather(outcome{instance: 2, res: runner.Result{Ticket: "t2"}})
	c.report(outcome{instance: 3, res: runner.Result{Ticket: "t3"}})
	c.drainResults()
	if len(c.unapplied) != 3 || !c.resultQueued(1, "t1") || !c.resultQueued(3, "t3") || c.resultQueued(1, "t2") {
		t.Fatalf("taken in: %+v, want the outcomes of 1, 2 and 3 under their own tickets", c.unapplied)
	}
	close(c.abandoned)
	for range cap(c.results) + 1 {
		c.report(outcome{instance: 4}) // dropped once the attempts are abandoned: never blocks
	}

	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ti := aloneTask("p.a", "g", 0)
	first := &attempt{task: ti, deadline: t0.Add(time.Minute)} // started at t0
	if got := c.refusalLimit(7, first, "busy"); !got.Equal(t0.Add(time.Minute)) {
		t.Errorf("limit of the first refusal: %s, want %s", got, t0.Add(time.Minute))
	}
	again := &attempt{task: ti, deadline: t0.Add(10 * time.Minute)} // offered again later
	if got := c.refusalLimit(7, again, "full"); !got.Equal(t0.Add(time.Minute)) {
		t.Errorf("limit after a second refusal: %s, want the first one's %s", got, t0.Add(time.Minute))
	}
	if r := c.watch.refused[7]; r.last != "full" || r.task != "p.a" {
		t.Errorf("refusal remembered: %+v, want the last reason full, task p.a", r)
	}
}
