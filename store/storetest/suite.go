package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"
)

// T0 is the reference "now" of the suite; every time is passed in.
var T0 = time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)

// Run runs the conformance suite against stores made by open. Every store
// implementation must pass it unchanged.
func Run(t *testing.T, open Opener) {
	for _, c := range []struct {
		name string
		fn   func(t *testing.T, s *store.Store)
	}{
		{"SchemaRecorded", testSchema},
		{"SyncDefinitions", testSync},
		{"SyncDefinitionsInChunks", testSyncInChunks},
		{"PipelineChangedAt", testPipelineChangedAt},
		{"CreateRunIsIdempotentPerLogicalTime", testCreateRun},
		{"CreateRunInChunks", testCreateRunInChunks},
		{"CreateRunsInOneTransaction", testCreateRuns},
		{"TransitionWritesStateAndHistory", testTransition},
		{"TransitionErrorsAreDistinct", testTransitionErrors},
		{"RaceExactlyOneWinner", testRace},
		{"FencingStaleEpochCannotWrite", testFencing},
		{"BatchTransitions", testBatch},
		{"BatchMovesAnInstanceTwiceInOrder", testBatchTwiceInOrder},
		{"BatchThenCommitsBothOrNeither", testBatchThen},
		{"DueInstancesInFireOrder", testDue},
		{"HistoryAndActions", testLogs},
		{"ExecutorRegistrationIsIdempotent", testExecutors},
		{"Lease", testLease},
		{"PausesSettingsBackfills", testMisc},
		{"OperatorRequests", testOps},
		{"DropRunsAhead", testDropRunsAhead},
		{"TaskOutput", testTaskOutput},
		{"PruneFinishedRuns", testPrune},
		{"RunsPagedByKey", testRunsPaged},
		{"BackfillsPagedByKey", testBackfillsPaged},
		{"LatestInstancesAndNextFires", testLatestAndNext},
		{"OutcomeCountsKeptByTransitions", testOutcomeCounts},
		{"CommandProcesses", testProcs},
		{"RedispatchedTickets", testRedispatched},
		{"GatesAndFailuresOfARun", testGatesAndFailures},
		{"SettingOnceAndDeletedByAge", testSettingOnce},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.fn(t, open(t))
		})
	}
}

func ctx() context.Context { return context.Background() }

// Seed creates tasks a.x, a.y, a.z in pipeline "a" and one schedule run of
// them at logical time T0 (x SCHEDULED, y and z WAITING), and returns the
// instances by task.
func Seed(t testing.TB, s *store.Store) map[string]axtype.Instance {
	t.Helper()
	def := store.PipelineDef{Name: "a", File: "a.yaml", Hash: "h1", Definition: []byte(`{}`)}
	for _, n := range []string{"x", "y", "z"} {
		def.Tasks = append(def.Tasks, store.TaskDef{ID: "a." + n, Pipeline: "a", Name: n, Group: "g", Priority: 3, Hash: "h1", Definition: []byte(`{}`)})
	}
	if _, err := s.SyncDefinitions(ctx(), store.SyncParams{Pipelines: []store.PipelineDef{def}, Now: T0}); err != nil {
		t.Fatal(err)
	}
	_, ins, err := s.CreateRun(ctx(), store.CreateRunParams{
		Pipeline: "a", Trigger: "a", Kind: axtype.RunSchedule, LogicalTime: T0, Actor: "scheduler", Now: T0,
		Instances: []store.NewInstance{
			{TaskID: "a.x", Group: "g", Priority: 1, State: axtype.Scheduled, NextFireAt: T0},
			{TaskID: "a.y", Group: "g", Priority: 2, State: axtype.Waiting, Reason: "waiting for a.x"},
			{TaskID: "a.z", Group: "h", Priority: 3, State: axtype.Waiting},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]axtype.Instance{}
	for _, in := range ins {
		out[in.TaskID] = in
	}
	return out
}

func testSchema(t *testing.T, s *store.Store) {
	v, err := s.SchemaVersion(ctx())
	if err != nil || v != store.SchemaVersion {
		t.Fatalf("schema version = %d, %v; want %d", v, err, store.SchemaVersion)
	}
}

func testSync(t *testing.T, s *store.Store) {
	p := func(hash string, tasks ...string) store.PipelineDef {
		d := store.PipelineDef{Name: "p", File: "p.yaml", Hash: hash, Definition: []byte(`{"v":"` + hash + `"}`)}
		for _, n := range tasks {
			d.Tasks = append(d.Tasks, store.TaskDef{ID: "p." + n, Pipeline: "p", Name: n, Group: "g", Priority: 2, Hash: hash + n, Definition: []byte(`{}`)})
		}
		return d
	}
	sync := func(defs ...store.PipelineDef) store.SyncResult {
		t.Helper()
		r, err := s.SyncDefinitions(ctx(), store.SyncParams{Pipelines: defs, Now: T0})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := sync(p("1", "a", "b")); fmt.Sprint(r) != "{[p p.a p.b] [] []}" {
		t.Errorf("first sync = %v", r)
	}
	if r := sync(p("1", "a", "b")); fmt.Sprint(r) != "{[] [] []}" {
		t.Errorf("same sync = %v, want no change", r)
	}
	if r := sync(p("2", "a")); fmt.Sprint(r) != "{[] [p p.a] [p.b]}" {
		t.Errorf("changed sync = %v", r)
	}
	tasks, err := s.Tasks(ctx(), store.TaskFilter{Pipeline: "p"})
	if err != nil || len(tasks) != 1 || tasks[0].ID != "p.a" || tasks[0].Version != 2 || tasks[0].Priority != 2 {
		t.Fatalf("tasks = %+v, %v; want p.a at version 2", tasks, err)
	}
	all, _ := s.Tasks(ctx(), store.TaskFilter{Pipeline: "p", IncludeRemoved: true})
	if len(all) != 2 || !all[1].Removed {
		t.Errorf("removed task is not kept for history: %+v", all)
	}
	if r := sync(p("2", "a", "b")); fmt.Sprint(r) != "{[] [p.b] []}" {
		t.Errorf("returning task = %v, want changed", r)
	}
	if r := sync(); fmt.Sprint(r) != "{[] [] [p p.a p.b]}" {
		t.Errorf("empty sync = %v", r)
	}
	// The definition as last synced stays readable after its removal.
	if def, err := s.PipelineDefinition(ctx(), "p"); err != nil || string(def) != `{"v":"2"}` {
		t.Errorf("PipelineDefinition(p) = %s, %v; want the last synced {\"v\":\"2\"}", def, err)
	}
	if _, err := s.PipelineDefinition(ctx(), "nosuch"); !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), `pipeline "nosuch"`) {
		t.Errorf("PipelineDefinition of an unknown pipeline: %v, want ErrNotFound naming it", err)
	}
}

// testCreateRunInChunks: a run of more instances than a chunk is written
// whole, each instance with its one creation history row, in instance
// order, and is not left marked unfinished; a second run of the same
// schedule fire is refused before any instance is written.
func testCreateRunInChunks(t *testing.T, s *store.Store) {
	var news []store.NewInstance
	for i := range 10 {
		news = append(news, store.NewInstance{TaskID: fmt.Sprintf("a.t%d", i), State: axtype.Scheduled, NextFireAt: T0})
	}
	p := store.CreateRunParams{Pipeline: "a", Trigger: "a", Kind: axtype.RunSchedule, LogicalTime: T0, Now: T0, Instances: news, Chunk: 3}
	run, ins, err := s.CreateRun(ctx(), p)
	if err != nil || len(ins) != 10 {
		t.Fatalf("create run of 10 in chunks of 3: %v, %d instances", err, len(ins))
	}
	for i, in := range ins {
		if in.TaskID != news[i].TaskID || in.RunID != run.ID {
			t.Errorf("instance %d = %s of run %d, want %s of run %d", i, in.TaskID, in.RunID, news[i].TaskID, run.ID)
		}
		if h, _ := s.History(ctx(), store.LogFilter{InstanceID: in.ID}); len(h) != 1 || h[0].From != "" || h[0].To != axtype.Scheduled {
			t.Errorf("creation history of %s = %+v, want one row to SCHEDULED", in.TaskID, h)
		}
	}
	if ids, err := s.UnfinishedRuns(ctx()); err != nil || len(ids) != 0 {
		t.Errorf("unfinished runs after a whole creation: %v (%v), want none", ids, err)
	}
	if _, _, err := s.CreateRun(ctx(), p); !errors.Is(err, store.ErrDuplicate) {
		t.Errorf("the same fire again: %v, want ErrDuplicate", err)
	}
	if all, _ := s.Instances(ctx(), store.InstanceFilter{Pipeline: "a", Limit: 100}); len(all) != 10 {
		t.Errorf("%d instances after the duplicate, want 10", len(all))
	}
}

func testCreateRuns(t *testing.T, s *store.Store) {
	fire := func(i int, state axtype.State) store.CreateRunParams {
		at := T0.Add(time.Duration(i) * time.Second)
		return store.CreateRunParams{Pipeline: "a", Trigger: "a", Kind: axtype.RunSchedule, LogicalTime: at, Now: T0, Actor: "test",
			Instances: []store.NewInstance{{TaskID: "a.x", State: state, NextFireAt: at}, {TaskID: "a.y", State: axtype.Waiting, Reason: "waiting for a.x"}}}
	}
	if _, _, err := s.CreateRun(ctx(), fire(1, axtype.Scheduled)); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		t.Helper()
		all, err := s.Instances(ctx(), store.InstanceFilter{Pipeline: "a", Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		return len(all)
	}
	// Refused whole, nothing written: a bad run in the batch, a run over one
	// chunk, two epochs.
	big := fire(5, axtype.Scheduled)
	big.Chunk = 1
	other := fire(6, axtype.Scheduled)
	other.Epoch = 7
	for _, c := range []struct {
		name  string
		batch []store.CreateRunParams
		want  string
	}{
		{"an instance created RUNNING", []store.CreateRunParams{fire(2, axtype.Scheduled), fire(3, axtype.Running)}, "WAITING or SCHEDULED only"},
		{"a run over one chunk", []store.CreateRunParams{fire(4, axtype.Scheduled), big}, "create it alone (CreateRun)"},
		{"two epochs", []store.CreateRunParams{fire(4, axtype.Scheduled), other}, "epochs 0 and 7 in one batch"},
	} {
		if _, _, err := s.CreateRuns(ctx(), c.batch); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		}
		if n := count(); n != 2 {
			t.Fatalf("%s: %d instances after the refused batch, want the 2 from before", c.name, n)
		}
	}
	// The fire made already is skipped; the others are written, with
	// their creation history.
	runs, insts, err := s.CreateRuns(ctx(), []store.CreateRunParams{fire(1, axtype.Scheduled), fire(2, axtype.Scheduled), fire(3, axtype.Scheduled)})
	if err != nil || len(runs) != 3 || len(insts) != 3 {
		t.Fatalf("create runs: %v, %d runs, %d instance lists", err, len(runs), len(insts))
	}
	if runs[0].ID != 0 || insts[0] != nil {
		t.Errorf("the fire made already: run %+v, %d instances; want skipped", runs[0], len(insts[0]))
	}
	for i := 1; i < 3; i++ {
		at := T0.Add(time.Duration(i+1) * time.Second)
		if runs[i].ID == 0 || !runs[i].LogicalTime.Equal(at) || len(insts[i]) != 2 || insts[i][0].RunID != runs[i].ID ||
			insts[i][0].State != axtype.Scheduled || !insts[i][0].NextFireAt.Equal(at) || insts[i][1].Reason != "waiting for a.x" {
			t.Fatalf("run %d: %+v with %+v", i, runs[i], insts[i])
		}
		if h, _ := s.History(ctx(), store.LogFilter{InstanceID: insts[i][1].ID}); len(h) != 1 || h[0].From != "" || h[0].To != axtype.Waiting {
			t.Errorf("creation history of run %d's a.y = %+v, want one row to WAITING", i, h)
		}
	}
	if n := count(); n != 6 {
		t.Errorf("%d instances, want 6 (3 runs of 2)", n)
	}
}

func testCreateRun(t *testing.T, s *store.Store) {
	ins := Seed(t, s)
	if len(ins) != 3 || ins["a.x"].State != axtype.Scheduled || ins["a.x"].Version != 1 || !ins["a.x"].NextFireAt.Equal(T0) ||
		ins["a.y"].Reason != "waiting for a.x" || !ins["a.z"].LogicalTime.Equal(T0) || ins["a.z"].Group != "h" {
		t.Fatalf("instances = %+v", ins)
	}
	// The same schedule fire again: refused, nothing written.
	_, _, err := s.CreateRun(ctx(), store.CreateRunParams{Pipeline: "a", Trigger: "a", Kind: axtype.RunSchedule, LogicalTime: T0, Now: T0,
		Instances: []store.NewInstance{{TaskID: "a.x", State: axtype.Scheduled, NextFireAt: T0}}})
	if !errors.Is(err, store.ErrDuplicate) {
		t.Fatalf("second schedule run for the same logical time: err = %v, want ErrDuplicate", err)
	}
	// A manual run of the same logical time lives beside it.
	_, man, err := s.CreateRun(ctx(), store.CreateRunParams{Pipeline: "a", Trigger: "a.x", Kind: axtype.RunManual, LogicalTime: T0, Now: T0,
		Instances: []store.NewInstance{{TaskID: "a.x", State: axtype.Scheduled, NextFireAt: T0}}})
	if err != nil || len(man) != 1 || man[0].RunID == ins["a.x"].RunID {
		t.Fatalf("manual run: %v, %+v", err, man)
	}
	all, err := s.Instances(ctx(), store.InstanceFilter{TaskID: "a.x"})
	if err != nil || len(all) != 2 {
		t.Fatalf("instances of a.x = %d, %v; want 2", len(all), err)
	}
	h, _ := s.History(ctx(), store.LogFilter{InstanceID: ins["a.y"].ID})
	if len(h) != 1 || h[0].From != "" || h[0].To != axtype.Waiting {
		t.Errorf("creation history = %+v", h)
	}
	_, _, err = s.CreateRun(ctx(), store.CreateRunParams{Pipeline: "a", Trigger: "a", Kind: axtype.RunManual, LogicalTime: T0, Now: T0,
		Instances: []store.NewInstance{{TaskID: "a.x", State: axtype.Running}}})
	if !errors.Is(err, store.ErrIllegalTransition) {
		t.Errorf("instance created RUNNING: err = %v", err)
	}
	runs, err := s.Runs(ctx(), "a", 10)
	if err != nil || len(runs) != 2 || runs[0].Kind != axtype.RunManual || !runs[1].LogicalTime.Equal(T0) {
		t.Errorf("runs = %+v, %v", runs, err)
	}
}

func ptr[T any](v T) *T { return &v }

func testTransition(t *testing.T, s *store.Store) {
	x := Seed(t, s)["a.x"]
	now := T0.Add(time.Second)
	v, err := s.Transition(ctx(), store.TransitionParams{InstanceID: x.ID, Version: x.Version, From: axtype.Scheduled, To: axtype.Running,
		Set: store.Changes{Ticket: ptr("tk-1"), Attempt: ptr(1), Executor: ptr("local"), StartedAt: &now},
		Now: now, Actor: "scheduler", Reason: "dispatch",
		Action: &store.Action{Actor: "scheduler", Action: "dispatch", TaskID: "a.x", Ticket: "tk-1"}})
	if err != nil || v != 2 {
		t.Fatalf("transition = %d, %v", v, err)
	}
	got, err := s.InstanceByTicket(ctx(), "tk-1")
	if err != nil || got.ID != x.ID || got.State != axtype.Running || got.Version != 2 || got.Attempt != 1 || got.Executor != "local" || !got.StartedAt.Equal(now) {
		t.Fatalf("after transition: %+v, %v", got, err)
	}
	later := now.Add(time.Second)
	if _, err := s.Transition(ctx(), store.TransitionParams{InstanceID: x.ID, Version: 2, From: axtype.Running, To: axtype.Success,
		Set: store.Changes{EndedAt: &later, NextFireAt: &time.Time{}}, Now: later, Actor: "scheduler", Reason: "result"}); err != nil {
		t.Fatal(err)
	}
	got, _ = s.Instance(ctx(), x.ID)
	if got.State != axtype.Success || !got.NextFireAt.IsZero() || !got.EndedAt.Equal(later) {
		t.Errorf("after success: %+v", got)
	}
	h, _ := s.History(ctx(), store.LogFilter{InstanceID: x.ID})
	if len(h) != 3 || h[1].From != axtype.Scheduled || h[1].To != axtype.Running || h[1].Ticket != "tk-1" || h[1].Reason != "dispatch" ||
		h[2].To != axtype.Success || !h[2].At.Equal(later) || h[2].TaskID != "a.x" || h[2].RunID != x.RunID {
		t.Errorf("history = %+v", h)
	}
	sum, err := s.TaskSummary(ctx(), "a.x")
	if err != nil || sum.SuccessCount != 1 || sum.FailureCount != 0 || sum.Last == nil || sum.Last.ID != x.ID || sum.LastExecutor != "local" ||
		!sum.NextFireAt.IsZero() {
		t.Errorf("summary = %+v, %v", sum, err)
	}
	_, _, err = s.CreateRun(ctx(), store.CreateRunParams{Pipeline: "a", Trigger: "a", Kind: axtype.RunManual, LogicalTime: T0, Now: T0,
		Instances: []store.NewInstance{{TaskID: "a.x", State: axtype.Scheduled, NextFireAt: T0.Add(time.Hour)}}})
	if err != nil {
		t.Fatal(err)
	}
	sum, _ = s.TaskSummary(ctx(), "a.x")
	if !sum.NextFireAt.Equal(T0.Add(time.Hour)) {
		t.Errorf("next fire time = %s, want the scheduled instance's %s", sum.NextFireAt, T0.Add(time.Hour))
	}
	// The last executor is that of the last attempt, not of the newest
	// instance, which has not run (a scheduled task always has one ahead).
	if sum.Last == nil || sum.Last.State != axtype.Scheduled || sum.LastExecutor != "local" {
		t.Errorf("with an instance ahead: last %+v, last executor %q, want the scheduled one and \"local\"", sum.Last, sum.LastExecutor)
	}
	acts, _ := s.Actions(ctx(), store.LogFilter{InstanceID: x.ID})
	if len(acts) != 1 || acts[0].Action != "dispatch" || acts[0].Ticket != "tk-1" {
		t.Errorf("actions = %+v", acts)
	}
}

func testTransitionErrors(t *testing.T, s *store.Store) {
	x := Seed(t, s)["a.x"]
	for _, tc := range []struct {
		name string
		p    store.TransitionParams
		want error
	}{
		{"illegal", store.TransitionParams{InstanceID: x.ID, Version: 1, From: axtype.Scheduled, To: axtype.Success}, store.ErrIllegalTransition},
		{"unknown state", store.TransitionParams{InstanceID: x.ID, Version: 1, From: "DONE", To: axtype.Running}, store.ErrIllegalTransition},
		{"not found", store.TransitionParams{InstanceID: 999999, Version: 1, From: axtype.Scheduled, To: axtype.Running}, store.ErrNotFound},
		{"stale version", store.TransitionParams{InstanceID: x.ID, Version: 7, From: axtype.Scheduled, To: axtype.Running}, store.ErrConflict},
		{"wrong from state", store.TransitionParams{InstanceID: x.ID, Version: 1, From: axtype.Waiting, To: axtype.Scheduled}, store.ErrConflict},
		{"no lease", store.TransitionParams{InstanceID: x.ID, Version: 1, From: axtype.Scheduled, To: axtype.Running, Epoch: 1}, store.ErrNotLeader},
	} {
		tc.p.Now = T0
		_, err := s.Transition(ctx(), tc.p)
		var te *store.TransitionError
		if !errors.Is(err, tc.want) || !errors.As(err, &te) {
			t.Errorf("%s: err = %v, want %v as *TransitionError", tc.name, err, tc.want)
		}
		for _, other := range []error{store.ErrIllegalTransition, store.ErrNotFound, store.ErrConflict, store.ErrNotLeader} {
			if other != tc.want && errors.Is(err, other) {
				t.Errorf("%s: err %v is also %v", tc.name, err, other)
			}
		}
	}
	got, _ := s.Instance(ctx(), x.ID)
	h, _ := s.History(ctx(), store.LogFilter{InstanceID: x.ID})
	if got.State != axtype.Scheduled || got.Version != 1 || len(h) != 1 {
		t.Errorf("a refused transition changed something: %+v, %d history rows", got, len(h))
	}
	_, err := s.Transition(ctx(), store.TransitionParams{InstanceID: x.ID, Version: 7, From: axtype.Scheduled, To: axtype.Running, Now: T0})
	if want := fmt.Sprintf("instance %d: SCHEDULED → RUNNING: store: lost the race: version or state changed (it is SCHEDULED at version 1)", x.ID); err.Error() != want {
		t.Errorf("message = %q, want %q", err, want)
	}
}

// testRace: 8 callers move the same instance SCHEDULED → RUNNING at once.
func testRace(t *testing.T, s *store.Store) {
	x := Seed(t, s)["a.x"]
	const n = 8
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		errs    = make([]error, n)
		winners = make([]bool, n)
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, err := s.Transition(ctx(), store.TransitionParams{InstanceID: x.ID, Version: 1, From: axtype.Scheduled, To: axtype.Running,
				Set: store.Changes{Ticket: ptr(fmt.Sprintf("race-%d", i))}, Now: T0, Actor: fmt.Sprintf("caller-%d", i)})
			errs[i], winners[i] = err, err == nil
		}()
	}
	close(start)
	wg.Wait()
	won, lost := 0, 0
	for i, err := range errs {
		switch {
		case winners[i]:
			won++
		case errors.Is(err, store.ErrConflict):
			lost++
		default:
			t.Errorf("caller %d: unexpected error %v", i, err)
		}
	}
	if won != 1 || lost != n-1 {
		t.Fatalf("%d won, %d lost the race; want 1 and %d", won, lost, n-1)
	}
	h, _ := s.History(ctx(), store.LogFilter{InstanceID: x.ID})
	if len(h) != 2 || h[1].To != axtype.Running {
		t.Errorf("history holds %d rows (%+v), want the creation and exactly one dispatch", len(h), h)
	}
}

func acquire(t *testing.T, s *store.Store, holder string, now time.Time) store.Lease {
	t.Helper()
	l, err := s.AcquireLease(ctx(), store.LeaseParams{Holder: holder, TTL: 15 * time.Second, Now: now})
	if err != nil {
		t.Fatalf("acquire by %s: %v", holder, err)
	}
	return l
}

func testFencing(t *testing.T, s *store.Store) {
	x := Seed(t, s)["a.x"]
	now := T0
	var l store.Lease
	for i := range 3 { // epochs 1, 2, 3: each holder lets the lease expire
		l = acquire(t, s, fmt.Sprintf("node-%d", i), now)
		now = now.Add(20 * time.Second)
	}
	if l.Epoch != 3 {
		t.Fatalf("epoch = %d, want 3", l.Epoch)
	}
	// The holder of epoch 3 writes fine …
	v, err := s.Transition(ctx(), store.TransitionParams{InstanceID: x.ID, Version: 1, From: axtype.Scheduled, To: axtype.Paused, Epoch: 3, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	// … until epoch 4 is granted to another process.
	if l4 := acquire(t, s, "node-new", now.Add(20*time.Second)); l4.Epoch != 4 {
		t.Fatalf("epoch = %d, want 4", l4.Epoch)
	}
	_, err = s.Transition(ctx(), store.TransitionParams{InstanceID: x.ID, Version: v, From: axtype.Paused, To: axtype.Waiting, Epoch: 3, Now: now})
	if !errors.Is(err, store.ErrNotLeader) {
		t.Fatalf("write with epoch 3 after epoch 4: err = %v, want ErrNotLeader", err)
	}
	_, _, err = s.CreateRun(ctx(), store.CreateRunParams{Pipeline: "a", Trigger: "a", Kind: axtype.RunSchedule, LogicalTime: T0.Add(time.Hour), Epoch: 3, Now: now,
		Instances: []store.NewInstance{{TaskID: "a.x", State: axtype.Scheduled, NextFireAt: now}}})
	if !errors.Is(err, store.ErrNotLeader) {
		t.Fatalf("create run with epoch 3: err = %v, want ErrNotLeader", err)
	}
	if _, err := s.TransitionBatch(ctx(), []store.TransitionParams{{InstanceID: x.ID, Version: v, From: axtype.Paused, To: axtype.Waiting, Epoch: 3, Now: now}}); !errors.Is(err, store.ErrNotLeader) {
		t.Fatalf("batch with epoch 3: err = %v", err)
	}
	got, _ := s.Instance(ctx(), x.ID)
	runs, _ := s.Runs(ctx(), "a", 10)
	if got.State != axtype.Paused || got.Version != v || len(runs) != 1 {
		t.Errorf("the fenced writer changed something: %+v, %d runs", got, len(runs))
	}
	if _, err := s.Transition(ctx(), store.TransitionParams{InstanceID: x.ID, Version: v, From: axtype.Paused, To: axtype.Waiting, Epoch: 4, Now: now}); err != nil {
		t.Errorf("write with the current epoch 4: %v", err)
	}
}

func testBatch(t *testing.T, s *store.Store) {
	ins := Seed(t, s)
	x, y, z := ins["a.x"], ins["a.y"], ins["a.z"]
	res, err := s.TransitionBatch(ctx(), []store.TransitionParams{
		{InstanceID: x.ID, Version: 1, From: axtype.Scheduled, To: axtype.Running, Now: T0, Set: store.Changes{Ticket: ptr("b1")}},
		{InstanceID: y.ID, Version: 5, From: axtype.Waiting, To: axtype.Scheduled, Now: T0}, // stale
		{InstanceID: z.ID, Version: 1, From: axtype.Waiting, To: axtype.Running, Now: T0},   // illegal
		{InstanceID: z.ID, Version: 1, From: axtype.Waiting, To: axtype.Scheduled, Now: T0}, // fine
	})
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil || res[0].Version != 2 || !errors.Is(res[1].Err, store.ErrConflict) || !errors.Is(res[2].Err, store.ErrIllegalTransition) || res[3].Err != nil {
		t.Fatalf("batch results = %+v", res)
	}
	for id, want := range map[int64]axtype.State{x.ID: axtype.Running, y.ID: axtype.Waiting, z.ID: axtype.Scheduled} {
		got, _ := s.Instance(ctx(), id)
		h, _ := s.History(ctx(), store.LogFilter{InstanceID: id})
		if got.State != want || (want == axtype.Waiting) != (len(h) == 1) {
			t.Errorf("instance %d: %s with %d history rows, want %s", id, got.State, len(h), want)
		}
	}
}

// testBatchThen: a batch and the transitions computed from its results
// commit in one transaction; an error from the callback writes nothing, and
// a failing transition of the second phase fails alone.
func testBatchThen(t *testing.T, s *store.Store) {
	ins := Seed(t, s)
	x, y, z := ins["a.x"], ins["a.y"], ins["a.z"]
	run := []store.TransitionParams{{InstanceID: x.ID, Version: 1, From: axtype.Scheduled, To: axtype.Running, Now: T0, Set: store.Changes{Ticket: ptr("t1")}}}
	_, _, err := s.TransitionBatchThen(ctx(), run, func([]store.BatchResult) ([]store.TransitionParams, error) {
		return nil, errors.New("cache gone")
	})
	if err == nil || err.Error() != "cache gone" {
		t.Fatalf("callback error: %v", err)
	}
	if got, _ := s.Instance(ctx(), x.ID); got.State != axtype.Scheduled || got.Version != 1 {
		t.Fatalf("after a failed callback x is %s v%d: the first phase was written", got.State, got.Version)
	}
	first, second, err := s.TransitionBatchThen(ctx(), run, func(res []store.BatchResult) ([]store.TransitionParams, error) {
		if len(res) != 1 || res[0].Err != nil || res[0].Version != 2 {
			t.Errorf("the callback saw %+v", res)
		}
		return []store.TransitionParams{
			{InstanceID: y.ID, Version: 1, From: axtype.Waiting, To: axtype.Scheduled, Now: T0},
			{InstanceID: z.ID, Version: 9, From: axtype.Waiting, To: axtype.Scheduled, Now: T0}, // stale: fails alone
		}, nil
	})
	if err != nil || first[0].Err != nil || second[0].Err != nil || !errors.Is(second[1].Err, store.ErrConflict) {
		t.Fatalf("batch then: %+v %+v %v", first, second, err)
	}
	for id, want := range map[int64]axtype.State{x.ID: axtype.Running, y.ID: axtype.Scheduled, z.ID: axtype.Waiting} {
		if got, _ := s.Instance(ctx(), id); got.State != want {
			t.Errorf("instance %d: %s, want %s", id, got.State, want)
		}
	}
}

func testDue(t *testing.T, s *store.Store) {
	Seed(t, s)
	mk := func(task string, at time.Time, logical time.Time) {
		_, _, err := s.CreateRun(ctx(), store.CreateRunParams{Pipeline: "a", Trigger: "a." + task, Kind: axtype.RunSchedule, LogicalTime: logical, Now: T0,
			Instances: []store.NewInstance{{TaskID: "a." + task, State: axtype.Scheduled, NextFireAt: at}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	mk("z", T0.Add(4*time.Minute), T0.Add(1*time.Hour))
	mk("y", T0.Add(2*time.Minute), T0.Add(2*time.Hour))
	mk("x", T0.Add(6*time.Minute), T0.Add(3*time.Hour)) // outside a 5-minute window
	due, err := s.DueInstances(ctx(), store.DueParams{Until: T0.Add(5 * time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, in := range due {
		got = append(got, fmt.Sprintf("%s@%s", in.TaskID, in.NextFireAt.Sub(T0)))
	}
	if fmt.Sprint(got) != "[a.x@0s a.y@2m0s a.z@4m0s]" {
		t.Errorf("due = %v", got)
	}
	due, _ = s.DueInstances(ctx(), store.DueParams{Until: T0.Add(5 * time.Minute), Limit: 1})
	if len(due) != 1 {
		t.Errorf("limit 1 gave %d", len(due))
	}
	in, _ := s.Instances(ctx(), store.InstanceFilter{LogicalFrom: T0.Add(90 * time.Minute), LogicalTo: T0.Add(3 * time.Hour), Ascending: true})
	if len(in) != 2 || in[0].TaskID != "a.y" || in[1].TaskID != "a.x" {
		t.Errorf("by logical time: %+v", in)
	}
	latest, _ := s.Instances(ctx(), store.InstanceFilter{TaskID: "a.z", LogicalTo: T0.Add(2 * time.Hour), ByLogicalTime: true, Limit: 1})
	if len(latest) != 1 || !latest[0].LogicalTime.Equal(T0.Add(time.Hour)) {
		t.Errorf("latest a.z at or before T0+2h: %+v", latest)
	}
	last, err := s.LastRun(ctx(), "a.y", axtype.RunSchedule)
	if err != nil || !last.LogicalTime.Equal(T0.Add(2*time.Hour)) {
		t.Errorf("last run of a.y = %+v, %v", last, err)
	}
	if _, err := s.LastRun(ctx(), "a.none", axtype.RunSchedule); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("last run of a trigger that never ran: %v", err)
	}
}

func testLogs(t *testing.T, s *store.Store) {
	for i := range 5 {
		if err := s.AppendAction(ctx(), store.Action{At: T0.Add(time.Duration(i) * time.Second), Actor: "operator:ann", Action: "pause",
			Pipeline: "a", TaskID: fmt.Sprintf("a.t%d", i%2), Reason: "maintenance"}); err != nil {
			t.Fatal(err)
		}
	}
	page1, err := s.Actions(ctx(), store.LogFilter{Limit: 2})
	if err != nil || len(page1) != 2 {
		t.Fatal(page1, err)
	}
	page2, _ := s.Actions(ctx(), store.LogFilter{Limit: 10, AfterID: page1[1].ID})
	if len(page2) != 3 || page2[0].ID <= page1[1].ID || !page2[2].At.Equal(T0.Add(4*time.Second)) || page2[0].Actor != "operator:ann" {
		t.Errorf("page 2 = %+v", page2)
	}
	byTask, _ := s.Actions(ctx(), store.LogFilter{TaskID: "a.t1"})
	if len(byTask) != 2 {
		t.Errorf("actions of a.t1 = %d, want 2", len(byTask))
	}
	// Newest first, paged backwards with BeforeID.
	newest, _ := s.Actions(ctx(), store.LogFilter{Newest: true, Limit: 2})
	if len(newest) != 2 || !newest[0].At.Equal(T0.Add(4*time.Second)) || newest[1].ID >= newest[0].ID {
		t.Errorf("newest 2 = %+v", newest)
	}
	older, _ := s.Actions(ctx(), store.LogFilter{Newest: true, BeforeID: newest[1].ID, Limit: 10})
	if len(older) != 3 || older[0].ID >= newest[1].ID || !older[2].At.Equal(T0) {
		t.Errorf("older than %d = %+v", newest[1].ID, older)
	}
	// By actor: one actor's, or everyone's but one.
	if err := s.AppendAction(ctx(), store.Action{At: T0.Add(5 * time.Second), Actor: "scheduler", Action: "dispatch", Pipeline: "a", TaskID: "a.t1"}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Actions(ctx(), store.LogFilter{Actor: "scheduler"}); err != nil || len(got) != 1 || got[0].Action != "dispatch" {
		t.Errorf("the scheduler's actions = %+v %v, want its dispatch", got, err)
	}
	if got, err := s.Actions(ctx(), store.LogFilter{NotActor: "scheduler", TaskID: "a.t1"}); err != nil || len(got) != 2 || got[0].Actor != "operator:ann" || got[1].Actor != "operator:ann" {
		t.Errorf("actions on a.t1 of every actor but the scheduler = %+v %v, want ann's two", got, err)
	}
}

func testExecutors(t *testing.T, s *store.Store) {
	reg := func(addr string, now time.Time, tasks ...string) {
		t.Helper()
		if err := s.RegisterExecutor(ctx(), store.RegisterParams{Address: addr, Protocol: "http", Tasks: tasks, Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	reg("10.0.0.1:9090", T0, "a.x", "a.y")
	reg("10.0.0.1:9090", T0.Add(time.Minute), "a.x", "a.y") // a restart
	reg("10.0.0.2:9090", T0, "a.x")
	ex, err := s.Executors(ctx(), "")
	if err != nil || len(ex) != 2 || fmt.Sprint(ex[0].Tasks) != "[a.x a.y]" || !ex[0].LastHeartbeat.Equal(T0.Add(time.Minute)) || !ex[0].RegisteredAt.Equal(T0) {
		t.Fatalf("executors = %+v, %v", ex, err)
	}
	reg("10.0.0.1:9090", T0.Add(2*time.Minute), "a.x") // it no longer serves a.y
	ex, _ = s.Executors(ctx(), "a.y")
	if len(ex) != 0 {
		t.Errorf("executors of a.y = %+v, want none", ex)
	}
	ex, _ = s.Executors(ctx(), "a.x")
	if len(ex) != 2 {
		t.Errorf("executors of a.x = %d, want 2", len(ex))
	}
	if err := s.Heartbeat(ctx(), "10.0.0.2:9090", T0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := s.Heartbeat(ctx(), "10.9.9.9:1", T0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("heartbeat of an unknown executor: %v", err)
	}
}

func testLease(t *testing.T, s *store.Store) {
	l := acquire(t, s, "a", T0)
	if l.Epoch != 1 {
		t.Fatalf("first epoch = %d", l.Epoch)
	}
	if _, err := s.AcquireLease(ctx(), store.LeaseParams{Holder: "b", TTL: 15 * time.Second, Now: T0.Add(5 * time.Second)}); !errors.Is(err, store.ErrLeaseHeld) {
		t.Fatalf("b took a held lease: %v", err)
	}
	l, err := s.RenewLease(ctx(), store.LeaseParams{Holder: "a", Epoch: 1, TTL: 15 * time.Second, Now: T0.Add(10 * time.Second)})
	if err != nil || !l.ExpiresAt.Equal(T0.Add(25*time.Second)) {
		t.Fatalf("renew = %+v, %v", l, err)
	}
	// Renewing twice at the same instant is still a renewal.
	if _, err := s.RenewLease(ctx(), store.LeaseParams{Holder: "a", Epoch: 1, TTL: 15 * time.Second, Now: T0.Add(10 * time.Second)}); err != nil {
		t.Fatalf("same-instant renew: %v", err)
	}
	// a stalls past its expiry; b takes over with a new epoch.
	lb := acquire(t, s, "b", T0.Add(26*time.Second))
	if lb.Epoch != 2 {
		t.Fatalf("takeover epoch = %d", lb.Epoch)
	}
	if _, err := s.RenewLease(ctx(), store.LeaseParams{Holder: "a", Epoch: 1, TTL: 15 * time.Second, Now: T0.Add(27 * time.Second)}); !errors.Is(err, store.ErrNotLeader) {
		t.Fatalf("stale renew: %v", err)
	}
	if err := s.ReleaseLease(ctx(), store.LeaseParams{Holder: "b", Epoch: 2, Now: T0.Add(30 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if la := acquire(t, s, "a", T0.Add(31*time.Second)); la.Epoch != 3 {
		t.Errorf("after release: epoch = %d, want 3", la.Epoch)
	}
	got, err := s.GetLease(ctx(), "")
	if err != nil || got.Holder != "a" || got.Epoch != 3 {
		t.Errorf("lease = %+v, %v", got, err)
	}
}

func testMisc(t *testing.T, s *store.Store) {
	p := store.Pause{Scope: store.ScopeGroup, Name: "g", Actor: "operator:ann", Reason: "db maintenance", At: T0}
	if err := s.SetPause(ctx(), p); err != nil {
		t.Fatal(err)
	}
	if err := s.SetPause(ctx(), p); !errors.Is(err, store.ErrDuplicate) {
		t.Errorf("pausing twice: %v", err)
	}
	ps, _ := s.Pauses(ctx())
	if len(ps) != 1 || ps[0] != p {
		t.Errorf("pauses = %+v", ps)
	}
	if err := s.ClearPause(ctx(), store.ScopeGroup, "g"); err != nil {
		t.Fatal(err)
	}
	if err := s.ClearPause(ctx(), store.ScopeGroup, "g"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("resuming what is not paused: %v", err)
	}
	if err := s.SetSetting(ctx(), "rate.global", "100", T0); err != nil {
		t.Fatal(err)
	}
	if err := s.SetSetting(ctx(), "rate.global", "50", T0); err != nil {
		t.Fatal(err)
	}
	if set, _ := s.Settings(ctx()); set["rate.global"] != "50" {
		t.Errorf("settings = %v", set)
	}
	id, err := s.CreateBackfill(ctx(), store.Backfill{Pipeline: "a", Spec: `{"from":"2026-03-01"}`, State: "running", TotalRuns: 7}, T0)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.UpdateBackfill(ctx(), store.Backfill{ID: id, State: "running", TotalRuns: 7, DoneRuns: 3, FailedRuns: 1}, T0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	bf, _ := s.Backfills(ctx(), id)
	if len(bf) != 1 || bf[0].DoneRuns != 3 || bf[0].FailedRuns != 1 || bf[0].Spec != `{"from":"2026-03-01"}` {
		t.Errorf("backfill = %+v", bf)
	}
	// A spec given is written (an approval of its gates changes it); an
	// empty one keeps the stored spec, as above.
	if err := s.UpdateBackfill(ctx(), store.Backfill{ID: id, Spec: `{"approve_manual":true}`, State: "running", TotalRuns: 7, DoneRuns: 3}, T0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if bf, _ := s.Backfills(ctx(), id); len(bf) != 1 || bf[0].Spec != `{"approve_manual":true}` {
		t.Errorf("backfill after a spec update = %+v", bf)
	}
	if err := s.UpdateBackfill(ctx(), store.Backfill{ID: id + 100}, T0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("update of unknown backfill: %v", err)
	}
}

func testOps(t *testing.T, s *store.Store) {
	id, err := s.EnqueueOp(ctx(), store.Op{Kind: "pause", Target: "a.x", Args: "{}", Actor: "operator:ann", Reason: "db work"}, T0)
	if err != nil {
		t.Fatal(err)
	}
	pending, err := s.PendingOps(ctx(), 10)
	if err != nil || len(pending) != 1 || pending[0].ID != id || pending[0].State != store.OpPending || pending[0].Actor != "operator:ann" {
		t.Fatalf("pending = %+v, %v", pending, err)
	}
	if err := s.FinishOp(ctx(), id, "paused", nil, 0, T0.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishOp(ctx(), id, "again", nil, 0, T0); !errors.Is(err, store.ErrConflict) {
		t.Errorf("finishing twice: %v", err)
	}
	op, err := s.GetOp(ctx(), id)
	if err != nil || op.State != store.OpDone || op.Result != "paused" || !op.DoneAt.Equal(T0.Add(time.Second)) {
		t.Errorf("op = %+v, %v", op, err)
	}
	id2, _ := s.EnqueueOp(ctx(), store.Op{Kind: "kill", Target: "a.y"}, T0)
	if err := s.FinishOp(ctx(), id2, "", errors.New("a.y is not running"), 0, T0); err != nil {
		t.Fatal(err)
	}
	if op, _ := s.GetOp(ctx(), id2); op.State != store.OpFailed || op.Error != "a.y is not running" {
		t.Errorf("failed op = %+v", op)
	}
	if p, _ := s.PendingOps(ctx(), 10); len(p) != 0 {
		t.Errorf("still pending: %+v", p)
	}
	if _, err := s.GetOp(ctx(), 999); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown op: %v", err)
	}
	// Claimed before its author gives up: not withdrawn, and not claimed
	// again; its outcome is recorded.
	id3, _ := s.EnqueueOp(ctx(), store.Op{Kind: "trigger", Target: "a.x"}, T0)
	if err := s.ClaimOp(ctx(), id3, 0); err != nil {
		t.Fatal(err)
	}
	if p, _ := s.PendingOps(ctx(), 10); len(p) != 0 {
		t.Errorf("a claimed request is still pending: %+v", p)
	}
	if err := s.WithdrawOp(ctx(), id3, "withdrawn", T0); !errors.Is(err, store.ErrConflict) {
		t.Errorf("withdrawal of a claimed request: %v, want a conflict", err)
	}
	if err := s.ClaimOp(ctx(), id3, 0); !errors.Is(err, store.ErrConflict) {
		t.Errorf("second claim: %v, want a conflict", err)
	}
	if op, _ := s.GetOp(ctx(), id3); op.State != store.OpApplying {
		t.Errorf("claimed op = %+v", op)
	}
	if err := s.FinishOp(ctx(), id3, "run 1 started", nil, 0, T0); err != nil {
		t.Fatal(err)
	}
	// Withdrawn before the primary claims it: never claimed, so never applied.
	id4, _ := s.EnqueueOp(ctx(), store.Op{Kind: "trigger", Target: "a.x"}, T0)
	if err := s.WithdrawOp(ctx(), id4, "withdrawn: nobody applied it", T0); err != nil {
		t.Fatal(err)
	}
	if err := s.ClaimOp(ctx(), id4, 0); !errors.Is(err, store.ErrConflict) {
		t.Errorf("claim of a withdrawn request: %v, want a conflict", err)
	}
	if op, _ := s.GetOp(ctx(), id4); op.State != store.OpFailed || op.Error != "withdrawn: nobody applied it" {
		t.Errorf("withdrawn op = %+v", op)
	}
}

// testPipelineChangedAt: the time a pipeline's definition was added, moved
// by a change and by a removal, kept by a sync that changes nothing; an
// unknown pipeline is ErrNotFound.
func testPipelineChangedAt(t *testing.T, s *store.Store) {
	sync := func(at time.Time, defs ...store.PipelineDef) {
		t.Helper()
		if _, err := s.SyncDefinitions(ctx(), store.SyncParams{Pipelines: defs, Now: at}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(want time.Time) {
		t.Helper()
		got, err := s.PipelineChangedAt(ctx(), "q")
		if err != nil || !got.Equal(want) {
			t.Errorf("PipelineChangedAt(q) = %v, %v; want %v", got, err, want)
		}
	}
	if _, err := s.PipelineChangedAt(ctx(), "q"); !errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), `pipeline "q"`) {
		t.Errorf("PipelineChangedAt of an unknown pipeline: %v, want ErrNotFound naming it", err)
	}
	q := func(hash string) store.PipelineDef {
		return store.PipelineDef{Name: "q", File: "q.yaml", Hash: hash, Definition: []byte(`{}`)}
	}
	if _, err := s.PipelineAddedAt(ctx(), "q"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("PipelineAddedAt of an unknown pipeline: %v, want ErrNotFound", err)
	}
	sync(T0, q("1"))
	check(T0)
	defer func() {
		if got, err := s.PipelineAddedAt(ctx(), "q"); err != nil || !got.Equal(T0) {
			t.Errorf("PipelineAddedAt(q) after its changes = %v, %v; want %v, when it was first stored", got, err, T0)
		}
	}()
	sync(T0.Add(time.Hour), q("1")) // unchanged
	check(T0)
	sync(T0.Add(2*time.Hour), q("2")) // changed
	check(T0.Add(2 * time.Hour))
	sync(T0.Add(3 * time.Hour)) // removed
	check(T0.Add(3 * time.Hour))
}

// testRunsPaged: the runs list pages by key (logical time, then id, newest
// first), ties on logical time included; a cursor that is no run of the
// pipeline is ErrNotFound; and the runs ahead worth showing are those in
// which an instance moved.
func testRunsPaged(t *testing.T, s *store.Store) {
	Seed(t, s) // run 1 of "a" at T0 (a.x SCHEDULED)
	mk := func(pipeline, trigger string, at time.Time, state axtype.State) int64 {
		t.Helper()
		r, ins, err := s.CreateRun(ctx(), store.CreateRunParams{Pipeline: pipeline, Trigger: trigger, Kind: axtype.RunManual, LogicalTime: at, Actor: "t", Now: T0,
			Instances: []store.NewInstance{{TaskID: pipeline + ".x", Group: "g", Priority: 1, State: axtype.Scheduled, NextFireAt: at}}})
		if err != nil {
			t.Fatal(err)
		}
		if state != axtype.Scheduled {
			tk := fmt.Sprintf("tk-paged-%d", r.ID)
			if _, err := s.Transition(ctx(), store.TransitionParams{InstanceID: ins[0].ID, Version: ins[0].Version, From: axtype.Scheduled, To: state,
				Set: store.Changes{Ticket: &tk, Attempt: ptr(1), Executor: ptr("local"), StartedAt: &T0}, Now: T0, Actor: "t", Reason: "dispatch"}); err != nil {
				t.Fatal(err)
			}
		}
		return r.ID
	}
	r2 := mk("a", "a.x", T0.Add(-time.Hour), axtype.Scheduled)
	r3 := mk("a", "a.y", T0, axtype.Scheduled) // ties with run 1 on logical time
	r4 := mk("a", "a.x", T0.Add(-2*time.Hour), axtype.Scheduled)
	r5 := mk("a", "a.x", T0.Add(2*time.Minute), axtype.Scheduled) // ahead, nothing moved
	r6 := mk("a", "a.z", T0.Add(time.Minute), axtype.Running)     // ahead, moved
	// Newest logical time first, then newest id: 5, 6, 3, 1, 2, 4.
	want := fmt.Sprint([]int64{r5, r6, r3, 1, r2, r4})
	var got []int64
	before := int64(0)
	for range 10 {
		page, err := s.RunsPage(ctx(), store.RunFilter{Pipeline: "a", Before: before, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range page {
			got = append(got, r.ID)
		}
		if len(page) < 2 {
			break
		}
		before = page[len(page)-1].ID
	}
	if fmt.Sprint(got) != want {
		t.Fatalf("runs paged by 2: %v, want %v", got, want)
	}
	// Time bounds and the cursor together.
	page, err := s.RunsPage(ctx(), store.RunFilter{Pipeline: "a", To: T0, Before: r3, Limit: 10})
	if err != nil || len(page) != 3 || page[0].ID != 1 || page[2].ID != r4 {
		t.Fatalf("page before run %d up to T0: %+v, %v", r3, page, err)
	}
	for _, c := range []struct {
		pipeline string
		before   int64
	}{{"a", 999}, {"b", r2}} {
		if _, err := s.RunsPage(ctx(), store.RunFilter{Pipeline: c.pipeline, Before: c.before}); !errors.Is(err, store.ErrNotFound) ||
			!strings.Contains(err.Error(), fmt.Sprint(c.before)) {
			t.Errorf("pipeline %s before=%d: %v, want ErrNotFound naming the run", c.pipeline, c.before, err)
		}
	}
	ahead, err := s.RunsMovedAhead(ctx(), "a", T0)
	if err != nil || len(ahead) != 1 || ahead[0].ID != r6 {
		t.Fatalf("runs ahead of T0 that moved: %+v, %v; want only run %d", ahead, err, r6)
	}
	// The instances of several runs in one read, by run, oldest first.
	insOf, err := s.InstancesOfRuns(ctx(), []int64{1, r6, 999})
	if err != nil || len(insOf) != 2 || len(insOf[1]) != 3 || len(insOf[r6]) != 1 || insOf[r6][0].RunID != r6 ||
		insOf[1][0].TaskID != "a.x" || insOf[1][2].TaskID != "a.z" {
		t.Errorf("instances of runs 1, %d and 999: %+v, %v; want run 1's three (a.x, a.y, a.z) and run %d's one", r6, insOf, err, r6)
	}
	// What a run's summary reads: the same instances, their states and errors.
	statesOf, err := s.RunStates(ctx(), []int64{1, r6, 999})
	states := statesOf[1]
	if err != nil || len(statesOf) != 2 || len(statesOf[r6]) != 1 || len(states) != len(insOf[1]) {
		t.Fatalf("states of run 1: %+v, %v; want %d", states, err, len(insOf[1]))
	}
	for i, in := range insOf[1] {
		if got := states[i]; got.ID != in.ID || got.RunID != 1 || got.TaskID != in.TaskID || got.State != in.State || got.Error != in.Error ||
			got.Version != in.Version || !got.LogicalTime.Equal(in.LogicalTime) || !got.CreatedAt.Equal(in.CreatedAt) || got.ApprovedBy != in.ApprovedBy {
			t.Errorf("state %d of run 1: %+v, want that of %+v", i, got, in)
		}
	}
	// The states of some tasks of a run: only their rows are read.
	read0 := s.RowsRead()
	some, err := s.RunStatesOf(ctx(), 1, []string{"a.z", "a.x", "a.none"})
	if read := s.RowsRead() - read0; err != nil || len(some) != 2 || read != 2 ||
		fmt.Sprint(some) != fmt.Sprint([]axtype.Instance{states[0], states[2]}) {
		t.Errorf("states of a.z, a.x and a.none in run 1: %+v, %v, %d rows read; want those of a.x and a.z, 2 rows", some, err, read)
	}
	if none, err := s.RunStatesOf(ctx(), 1, nil); err != nil || len(none) != 0 {
		t.Errorf("states of no task of run 1: %+v, %v; want none", none, err)
	}
	counts, err := s.RunStateCounts(ctx(), []int64{1, r6, 999})
	wantCounts := map[axtype.State]int{}
	for _, in := range insOf[1] {
		wantCounts[in.State]++
	}
	if err != nil || len(counts) != 2 || fmt.Sprint(counts[1]) != fmt.Sprint(wantCounts) || counts[r6][insOf[r6][0].State] != 1 {
		t.Errorf("state counts of runs 1, %d and 999: %v, %v; want run 1's %v and run %d's one", r6, counts, err, wantCounts, r6)
	}
	// A run's instances by task, a page at a time.
	var byTask []string
	for after := ""; ; {
		page, err := s.Instances(ctx(), store.InstanceFilter{RunID: 1, ByTask: true, AfterTask: after, Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range page {
			byTask = append(byTask, in.TaskID)
		}
		if len(page) < 2 {
			break
		}
		after = page[len(page)-1].TaskID
	}
	if fmt.Sprint(byTask) != "[a.x a.y a.z]" {
		t.Errorf("run 1 by task, pages of 2: %v, want [a.x a.y a.z]", byTask)
	}
}

// testBackfillsPaged: backfills page by id, newest first, limit bounded.
func testBackfillsPaged(t *testing.T, s *store.Store) {
	var ids []int64
	for range 5 {
		id, err := s.CreateBackfill(ctx(), store.Backfill{Pipeline: "a", State: "running"}, T0)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	want := fmt.Sprint([]int64{ids[4], ids[3], ids[2], ids[1], ids[0]})
	var got []int64
	before := int64(0)
	for range 5 {
		page, err := s.BackfillsPage(ctx(), before, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) > 2 {
			t.Fatalf("page of %d backfills, limit 2", len(page))
		}
		for _, b := range page {
			got = append(got, b.ID)
		}
		if len(page) < 2 {
			break
		}
		before = page[len(page)-1].ID
	}
	if fmt.Sprint(got) != want {
		t.Errorf("backfills paged by 2: %v, want %v", got, want)
	}
}

// testLatestAndNext: the newest instance of each task and the earliest
// next fire of each task with a scheduled one, for many tasks in one read.
func testLatestAndNext(t *testing.T, s *store.Store) {
	first := Seed(t, s) // run at T0: a.x SCHEDULED at T0, a.y and a.z WAITING
	_, second, err := s.CreateRun(ctx(), store.CreateRunParams{Pipeline: "a", Trigger: "a", Kind: axtype.RunSchedule, LogicalTime: T0.Add(time.Hour), Actor: "scheduler", Now: T0,
		Instances: []store.NewInstance{
			{TaskID: "a.x", Group: "g", Priority: 1, State: axtype.Scheduled, NextFireAt: T0.Add(time.Hour)},
			{TaskID: "a.y", Group: "g", Priority: 2, State: axtype.Waiting},
		}})
	if err != nil {
		t.Fatal(err)
	}
	latest, err := s.LatestInstances(ctx(), []string{"a.x", "a.y", "a.z", "a.nope"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"a.x": second[0].ID, "a.y": second[1].ID, "a.z": first["a.z"].ID}
	if len(latest) != len(want) {
		t.Errorf("latest instances of %d tasks, want %d: %+v", len(latest), len(want), latest)
	}
	for task, id := range want {
		if in := latest[task]; in.ID != id || in.TaskID != task {
			t.Errorf("latest instance of %s: %d (%s), want %d", task, in.ID, in.TaskID, id)
		}
	}
	next, err := s.NextFires(ctx(), []string{"a.x", "a.y", "a.z"})
	if err != nil {
		t.Fatal(err)
	}
	if len(next) != 1 || !next["a.x"].Equal(T0) {
		t.Errorf("next fires %v, want only a.x at %s", next, T0)
	}
}

// testOutcomeCounts: the per-task outcome counts that summaries read follow
// every transition into and out of SUCCESS and FAILED, single or batched
// (small batches are written one by one, large ones in bulk), and leave
// with what retention prunes; at each step they equal a count of the
// instances' states.
func testOutcomeCounts(t *testing.T, s *store.Store) {
	Seed(t, s)
	check := func(step string) {
		t.Helper()
		for _, task := range []string{"a.x", "a.y"} {
			var want [2]int64
			ins, err := s.Instances(ctx(), store.InstanceFilter{TaskID: task, Limit: 1 << 20})
			if err != nil {
				t.Fatal(err)
			}
			for _, in := range ins {
				switch in.State {
				case axtype.Success:
					want[0]++
				case axtype.Failed:
					want[1]++
				}
			}
			succ, fail, err := s.Outcomes(ctx(), task)
			if err != nil || [2]int64{succ, fail} != want {
				t.Errorf("%s: %s counts success %d, failed %d (%v); its instances: %v", step, task, succ, fail, err, want)
			}
		}
	}
	// Twelve runs of a.x and a.y, each instance SCHEDULED.
	var xs, ys []axtype.Instance
	for i := range 12 {
		_, ins, err := s.CreateRun(ctx(), store.CreateRunParams{Pipeline: "a", Trigger: "a", Kind: axtype.RunManual, LogicalTime: T0.Add(time.Duration(i+1) * time.Minute), Actor: "t", Now: T0,
			Instances: []store.NewInstance{{TaskID: "a.x", Group: "g", State: axtype.Scheduled, NextFireAt: T0}, {TaskID: "a.y", Group: "g", State: axtype.Scheduled, NextFireAt: T0}}})
		if err != nil {
			t.Fatal(err)
		}
		xs, ys = append(xs, ins[0]), append(ys, ins[1])
	}
	move := func(batch []axtype.Instance, from, to axtype.State) {
		t.Helper()
		var ps []store.TransitionParams
		for i, in := range batch {
			ps = append(ps, store.TransitionParams{InstanceID: in.ID, Version: in.Version, From: from, To: to, Now: T0, Actor: "t", Reason: "t"})
			batch[i].Version++
		}
		res, err := s.TransitionBatch(ctx(), ps)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Err != nil {
				t.Fatal(r.Err)
			}
		}
	}
	check("created")
	move(xs, axtype.Scheduled, axtype.Running) // a large batch: in bulk
	move(ys, axtype.Scheduled, axtype.Running)
	move(xs[:9], axtype.Running, axtype.Success)
	move(xs[9:], axtype.Running, axtype.Failed)
	move(ys[:2], axtype.Running, axtype.Failed) // a small batch: one by one
	move(ys[2:], axtype.Running, axtype.Success)
	check("ended")
	in := xs[0] // a rerun out of SUCCESS, and a mark of a failure as success, one at a time
	if _, err := s.Transition(ctx(), store.TransitionParams{InstanceID: in.ID, Version: in.Version, From: axtype.Success, To: axtype.Scheduled, Now: T0, Actor: "t", Reason: "rerun"}); err != nil {
		t.Fatal(err)
	}
	in = xs[10]
	if _, err := s.Transition(ctx(), store.TransitionParams{InstanceID: in.ID, Version: in.Version, From: axtype.Failed, To: axtype.Success, Now: T0, Actor: "t", Reason: "mark"}); err != nil {
		t.Fatal(err)
	}
	check("rerun and marked")
	// A refused transition (stale version) counts nothing.
	if _, err := s.Transition(ctx(), store.TransitionParams{InstanceID: in.ID, Version: in.Version, From: axtype.Failed, To: axtype.Success, Now: T0, Actor: "t", Reason: "mark again"}); err == nil {
		t.Fatal("a stale transition was applied")
	}
	check("refused")
	// Retention moves the pruned outcomes out of the live counts (into
	// task_pruned, where the summary adds them back).
	before, err := s.TaskSummary(ctx(), "a.y")
	if err != nil {
		t.Fatal(err)
	}
	l := acquire(t, s, "p1", T0)
	for p := (store.PruneParams{Before: T0.Add(time.Hour), Now: T0}); ; {
		r, err := s.Fence(l.Epoch).PruneBatch(ctx(), p)
		if err != nil {
			t.Fatal(err)
		}
		if !r.More {
			break
		}
		p.AfterRun = r.LastRun
	}
	check("pruned")
	after, err := s.TaskSummary(ctx(), "a.y")
	if err != nil || after.SuccessCount != before.SuccessCount || after.FailureCount != before.FailureCount || before.SuccessCount != 10 || before.FailureCount != 2 {
		t.Errorf("a.y summary before pruning %d/%d, after %d/%d (%v): want 10/2 both times", before.SuccessCount, before.FailureCount, after.SuccessCount, after.FailureCount, err)
	}
}

// countTx installs a fault hook on s that counts the "sync definitions"
// transactions and fails the one numbered failAt (0: none); the count is
// read with the function it returns. The hook is removed at the end of t.
func countTx(t *testing.T, s *store.Store, failAt int) func() int {
	var (
		mu sync.Mutex
		n  int
	)
	store.SetFault(s, func(what string) error {
		if what != "sync definitions" {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		n++
		if n == failAt {
			return errors.New("the database went away")
		}
		return nil
	})
	t.Cleanup(func() { store.SetFault(s, nil) })
	return func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// testSyncInChunks: a sync writes at most a chunk of definitions per
// transaction (DefaultCreateChunk when not told), so that a reload of any
// size never holds the store past the lease's renewal margin. One that
// fails midway leaves what it wrote, and the next sync writes the rest and
// reports every change from the set before, those of the sync that failed
// included; then the store is as if the first had not failed.
func testSyncInChunks(t *testing.T, s *store.Store) {
	pipe := func(name, hash string, tasks ...string) store.PipelineDef {
		d := store.PipelineDef{Name: name, File: name + ".yaml", Hash: hash, Definition: []byte(`{}`)}
		for _, n := range tasks {
			d.Tasks = append(d.Tasks, store.TaskDef{ID: name + "." + n, Pipeline: name, Name: n, Group: "g", Hash: hash, Definition: []byte(`{}`)})
		}
		return d
	}
	names := func(pre string, from, to int) []string {
		var out []string
		for i := from; i < to; i++ {
			out = append(out, fmt.Sprintf("%s%04d", pre, i))
		}
		return out
	}
	// The default chunk: 5,000 new tasks take three transactions.
	big := pipe("big", "1", names("t", 0, 5000)...)
	count := countTx(t, s, 0)
	if r, err := s.SyncDefinitions(ctx(), store.SyncParams{Pipelines: []store.PipelineDef{big}, Now: T0}); err != nil || len(r.Added) != 5001 {
		t.Fatalf("sync of 5,000 new tasks: %v, %d added", err, len(r.Added))
	}
	if n, want := count(), (5001+store.DefaultCreateChunk-1)/store.DefaultCreateChunk; n != want {
		t.Errorf("sync of 5,000 new tasks in %d transaction(s), want %d of at most %d definitions", n, want, store.DefaultCreateChunk)
	}

	// p: a0..a9 at hash 1; then at hash 2: a0..a3 changed, a4..a9
	// removed, b0..b2 added: 14 writes, five transactions of 3.
	before := pipe("p", "1", names("a", 0, 10)...)
	if _, err := s.SyncDefinitions(ctx(), store.SyncParams{Pipelines: []store.PipelineDef{big, before}, Now: T0}); err != nil {
		t.Fatal(err)
	}
	after := pipe("p", "2", append(names("a", 0, 4), names("b", 0, 3)...)...)
	stored := func() string {
		t.Helper()
		ts, err := s.Tasks(ctx(), store.TaskFilter{Pipeline: "p", IncludeRemoved: true})
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, x := range ts {
			fmt.Fprintf(&b, "%s:%s:%v ", x.Name, x.Hash, x.Removed)
		}
		return b.String()
	}
	was := stored()
	count = countTx(t, s, 2)
	at := T0.Add(time.Minute)
	_, err := s.SyncDefinitions(ctx(), store.SyncParams{Pipelines: []store.PipelineDef{big, after}, Now: at, Chunk: 3})
	if err == nil || !strings.Contains(err.Error(), "sync definitions") {
		t.Fatalf("sync failing in its second transaction: %v, want the failure", err)
	}
	if n := count(); n != 2 {
		t.Errorf("the sync went on after its second transaction failed: %d transactions", n)
	}
	// The first chunk (p's first tasks in the order given: a0, a1, a2
	// changed) stays; nothing else changed.
	want := strings.NewReplacer("a0000:1:", "a0000:2:", "a0001:1:", "a0001:2:", "a0002:1:", "a0002:2:").Replace(was)
	if got := stored(); got != want {
		t.Errorf("after the sync failed in its second transaction:\n got %s\nwant %s (its first chunk only)", got, want)
	}
	if set, _ := s.Settings(ctx()); set[store.SyncingSetting] == "" {
		t.Errorf("the sync that failed midway is not marked unfinished")
	}

	count = countTx(t, s, 0)
	r, err := s.SyncDefinitions(ctx(), store.SyncParams{Pipelines: []store.PipelineDef{big, after}, Now: at.Add(time.Minute), Chunk: 3})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(r), fmt.Sprint(store.SyncResult{Added: names("p.b", 0, 3), Changed: append([]string{"p"}, names("p.a", 0, 4)...),
		Removed: names("p.a", 4, 10)}); got != want {
		t.Errorf("the sync after the one that failed reports %s, want every change from the set before: %s", got, want)
	}
	if n := count(); n != 4 { // 11 writes left, in chunks of 3
		t.Errorf("the rest written in %d transaction(s), want 4", n)
	}
	if set, _ := s.Settings(ctx()); set[store.SyncingSetting] != "" {
		t.Errorf("the finished sync left its mark: %q", set[store.SyncingSetting])
	}
	if r, err := s.SyncDefinitions(ctx(), store.SyncParams{Pipelines: []store.PipelineDef{big, after}, Now: at.Add(2 * time.Minute), Chunk: 3}); err != nil ||
		len(r.Added)+len(r.Changed)+len(r.Removed) != 0 {
		t.Errorf("the same set again: %v, %v; want no change", r, err)
	}
	if got := stored(); got != "a0000:2:false a0001:2:false a0002:2:false a0003:2:false a0004:1:true a0005:1:true a0006:1:true a0007:1:true a0008:1:true a0009:1:true b0000:2:false b0001:2:false b0002:2:false " {
		t.Errorf("stored after the syncs: %s", got)
	}
}

// testBatchTwiceInOrder: a batch that moves one instance twice (a resume
// schedules a late instance, then the misfire rule skips it) leaves it as
// the later transition does, at the version after both, whatever the
// transitions of other instances before them: an earlier transition of
// the later one's shape (here a.x, failed with an error) made the batch
// write the later one first, and the instance ended SCHEDULED with a
// history that says FAILED.
func testBatchTwiceInOrder(t *testing.T, s *store.Store) {
	ins := Seed(t, s)
	x, y, z := ins["a.x"], ins["a.y"], ins["a.z"]
	now := T0.Add(time.Minute)
	zero, empty, skipped := time.Time{}, "", "skipped by misfire policy fire_all"
	ps := []store.TransitionParams{
		{InstanceID: x.ID, Version: x.Version, From: axtype.Scheduled, To: axtype.Failed, Set: store.Changes{NextFireAt: &zero, Error: ptr("a fire of the old schedule")}, Now: now, Actor: "scheduler", Reason: "old plan"},
	}
	for _, in := range []axtype.Instance{y, z} {
		ps = append(ps,
			store.TransitionParams{InstanceID: in.ID, Version: in.Version, From: axtype.Waiting, To: axtype.Scheduled, Set: store.Changes{NextFireAt: &now, Reason: &empty}, Now: now, Actor: "scheduler", Reason: "resume"},
			store.TransitionParams{InstanceID: in.ID, Version: in.Version + 1, From: axtype.Scheduled, To: axtype.Failed, Set: store.Changes{NextFireAt: &zero, Error: &skipped}, Now: now, Actor: "scheduler", Reason: "skip"})
	}
	res, err := s.TransitionBatch(ctx(), ps)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil {
			t.Fatalf("transition %d: %v", i, r.Err)
		}
	}
	for _, in := range []axtype.Instance{y, z} {
		got, err := s.Instance(ctx(), in.ID)
		if err != nil || got.State != axtype.Failed || got.Version != in.Version+2 || got.Error != skipped {
			t.Errorf("%s after SCHEDULED then FAILED in one batch: %s at version %d (%q), %v; want FAILED at version %d", in.TaskID, got.State, got.Version, got.Error, err, in.Version+2)
		}
	}
}

// testGatesAndFailures: a run's gates awaiting approval and the failures
// that ended it are counted and listed by task id in the store, the
// failures with the error words of a failure caused upstream matched
// letter case included.
func testGatesAndFailures(t *testing.T, s *store.Store) {
	tasks := []string{"g1", "g2", "g3", "f1", "f2", "f3", "f4", "f5"}
	def := store.PipelineDef{Name: "p_q", File: "p.yaml", Hash: "h1", Definition: []byte(`{}`)}
	var news []store.NewInstance
	for _, n := range tasks {
		def.Tasks = append(def.Tasks, store.TaskDef{ID: "p_q." + n, Pipeline: "p_q", Name: n, Group: "g", Hash: "h1", Definition: []byte(`{}`)})
		ni := store.NewInstance{TaskID: "p_q." + n, Group: "g", State: axtype.Waiting}
		if n == "g2" {
			ni.ApprovedBy = "op"
		}
		news = append(news, ni)
	}
	if _, err := s.SyncDefinitions(ctx(), store.SyncParams{Pipelines: []store.PipelineDef{def}, Now: T0}); err != nil {
		t.Fatal(err)
	}
	run, ins, err := s.CreateRun(ctx(), store.CreateRunParams{Pipeline: "p_q", Trigger: "p_q", Kind: axtype.RunManual, LogicalTime: T0, Actor: "t", Now: T0, Instances: news})
	if err != nil {
		t.Fatal(err)
	}
	manual := []string{"p_q.g1", "p_q.g2", "p_q.g3"}
	for _, c := range []struct {
		manual []string
		limit  int
		want   string
	}{{manual, 1, "[p_q.g1] 2"}, {manual, 10, "[p_q.g1 p_q.g3] 2"}, {nil, 10, "[] 0"}} {
		got, n, err := s.AwaitingGates(ctx(), run.ID, c.manual, c.limit)
		if err != nil || fmt.Sprint(got, " ", n) != c.want {
			t.Errorf("AwaitingGates(%v, %d) = %v %d, %v; want %s", c.manual, c.limit, got, n, err, c.want)
		}
	}
	move := func(in axtype.Instance, errText string, path ...axtype.State) {
		t.Helper()
		v, from := in.Version, axtype.Waiting
		for i, to := range path {
			p := store.TransitionParams{InstanceID: in.ID, Version: v, From: from, To: to, Now: T0, Actor: "t", Reason: "t"}
			if i == len(path)-1 && errText != "" {
				p.Set.Error = &errText
			}
			if v, err = s.Transition(ctx(), p); err != nil {
				t.Fatal(err)
			}
			from = to
		}
	}
	byTask := map[string]axtype.Instance{}
	for _, in := range ins {
		byTask[in.TaskID] = in
	}
	move(byTask["p_q.f1"], "boom", axtype.Failed)
	move(byTask["p_q.f2"], "upstream p_q.f1 failed", axtype.Failed)
	move(byTask["p_q.f3"], "Upstream p_q.f1 failed", axtype.Failed)
	move(byTask["p_q.f4"], "", axtype.Scheduled, axtype.Running, axtype.Killed)
	move(byTask["p_q.f5"], "upstream p_q.f1 was skipped", axtype.Failed)
	// "_" in the pipeline's name is a letter, not LIKE's any-letter.
	move(byTask["p_q.g3"], "upstream pxq.f1 failed", axtype.Failed)
	words := []string{" failed", " was killed", " was skipped"}
	for _, c := range []struct {
		limit int
		want  string
	}{{2, "[p_q.f1:FAILED:boom p_q.f3:FAILED:Upstream p_q.f1 failed] 4"}, {10, "[p_q.f1:FAILED:boom p_q.f3:FAILED:Upstream p_q.f1 failed p_q.f4:KILLED: p_q.g3:FAILED:upstream pxq.f1 failed] 4"}} {
		got, n, err := s.RootFailures(ctx(), run.ID, "upstream p_q.", words, c.limit)
		var names []string
		for _, in := range got {
			names = append(names, in.TaskID+":"+string(in.State)+":"+in.Error)
		}
		if err != nil || fmt.Sprint(names, " ", n) != c.want {
			t.Errorf("RootFailures(limit %d) = %v %d, %v; want %s", c.limit, names, n, err, c.want)
		}
	}
}

// testSettingOnce: SettingOnce stores the first value and hands it to
// every later caller; DeleteSettingsBefore deletes by prefix and age.
func testSettingOnce(t *testing.T, s *store.Store) {
	if v, err := s.SettingOnce(ctx(), "once", "first", T0); err != nil || v != "first" {
		t.Fatalf("the first SettingOnce: %q %v", v, err)
	}
	if v, err := s.SettingOnce(ctx(), "once", "second", T0.Add(time.Minute)); err != nil || v != "first" {
		t.Fatalf("a later SettingOnce: %q %v; want the first value", v, err)
	}
	for i, name := range []string{"old/a", "old/b", "other/c"} {
		if err := s.SetSetting(ctx(), name, "v", T0.Add(time.Duration(i)*time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := s.DeleteSettingsBefore(ctx(), "old/", T0.Add(90*time.Minute)); err != nil || n != 2 {
		t.Fatalf("DeleteSettingsBefore: %d %v; want old/a and old/b", n, err)
	}
	for name, want := range map[string]bool{"old/a": false, "old/b": false, "other/c": true, "once": true} {
		if _, ok, err := s.Setting(ctx(), name); err != nil || ok != want {
			t.Errorf("setting %s: kept %v (%v); want %v", name, ok, err, want)
		}
	}
}
