package engine

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

const withB = "pipeline: p\ntimezone: UTC\nschedule: \"@every 2m\"\ntasks:\n  - {name: a, function: record}\n  - {name: b, function: record, timeout: 30s, retry: {count: 3, interval: 1s}}\n"
const withoutB = "pipeline: p\ntimezone: UTC\nschedule: \"@every 2m\"\ntasks:\n  - {name: a, function: record}\n"

// leftRunning records b's first instance RUNNING, as a process that crashed
// while b ran would have left it, and returns it.
func leftRunning(t *testing.T, e *env) axtype.Instance {
	t.Helper()
	ins := e.instances(store.InstanceFilter{TaskID: "p.b"})
	if len(ins) == 0 {
		t.Fatal("no instance of p.b")
	}
	in := ins[0]
	// Started a second before that process's lease ended: it really ran.
	ticket, att, now, started := "left-behind", 1, time.Now(), time.Now().Add(-time.Second)
	v, err := e.st.Transition(context.Background(), store.TransitionParams{InstanceID: in.ID, Version: in.Version, From: in.State, To: axtype.Running,
		Set: store.Changes{Ticket: &ticket, Attempt: &att, Counted: &att, StartedAt: &started}, Now: now, Actor: "test", Reason: "dispatched by a process that then crashed"})
	if err != nil {
		t.Fatal(err)
	}
	in.State, in.Version, in.Ticket = axtype.Running, v, ticket
	return in
}

// restartWithout runs a new engine on e's store with the pipelines of src.
func (e *env) restartWithout(src string) (*Engine, func()) {
	e.t.Helper()
	p, errs := defs.Parse("p0.yaml", []byte(src), defs.Options{Now: time.Now()})
	if errs.Err() != nil {
		e.t.Fatal(errs)
	}
	g, errs := dag.Compile([]*defs.Pipeline{p}, dag.Options{Now: time.Now(), DispatchRate: -1})
	if errs.Err() != nil {
		e.t.Fatal(errs)
	}
	eng, err := New(Config{Holder: "test-2"}, e.st, g, e.eng.execs)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	synctest.Wait()
	return eng, func() {
		cancel()
		if err := <-done; err != nil {
			e.t.Error(err)
		}
	}
}

// A RUNNING instance whose task was removed from the files is still
// tracked: it times out at its deadline (and is not retried: its task is
// gone), rather than staying RUNNING forever.
func TestRemovedRunningTaskTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := setup(t, Config{}, nil, withB)
		e.stop()
		in := leftRunning(t, e)
		eng, stop := e.restartWithout(withoutB)
		if got := eng.Stats().Running; got != 1 {
			t.Errorf("running after the restart: %d, want the removed task's instance tracked", got)
		}
		sleep(35 * time.Second)
		stop()
		got, err := e.st.Instance(context.Background(), in.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != axtype.Failed || !strings.Contains(got.Error, "removed from the pipeline files") {
			t.Errorf("removed task's instance: %s %q; want FAILED saying its task was removed", got.State, got.Error)
		}
	})
}

// …and it can be killed.
func TestRemovedRunningTaskCanBeKilled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := setup(t, Config{}, nil, withB)
		e.stop()
		in := leftRunning(t, e)
		eng, stop := e.restartWithout(withoutB)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := eng.Do(ctx, Kill{Instance: in.ID}, By{Actor: "operator:ann"}); err != nil {
			t.Fatalf("kill: %v", err)
		}
		sleep(time.Second)
		stop()
		got, _ := e.st.Instance(context.Background(), in.ID)
		if got.State != axtype.Killed {
			t.Errorf("removed task's instance after a kill: %s %q", got.State, got.Error)
		}
	})
}

// ax explain on a task removed from the files while its instance ran says
// what happened: removed, still tracked, when it times out, how to kill it;
// and once it timed out, how it ended.
func TestExplainRemovedRunningTask(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := setup(t, Config{}, nil, withB)
		e.stop()
		in := leftRunning(t, e)
		eng, stop := e.restartWithout(withoutB)
		defer stop()
		x, err := eng.Explain(context.Background(), "p.b")
		if err != nil {
			t.Fatalf("explain of a removed task with a running instance: %v", err)
		}
		f := findings(x)
		for _, want := range []string{"task p.b was removed from the pipeline files", "was running when the task was removed",
			"still tracks it", "is not retried", "ax kill " + itoa(int(in.ID)) + " stops it"} {
			if !strings.Contains(f, want) {
				t.Errorf("explain while running: missing %q in\n%s", want, f)
			}
		}
		if x.Latest == nil || x.Latest.ID != in.ID {
			t.Errorf("latest instance %+v, want %d", x.Latest, in.ID)
		}
		sleep(35 * time.Second) // past its 30 s timeout
		x, err = eng.Explain(context.Background(), "p.b")
		if err != nil {
			t.Fatal(err)
		}
		if f := findings(x); !strings.Contains(f, "ended FAILED") || !strings.Contains(f, "removed from the pipeline files") {
			t.Errorf("explain after its timeout:\n%s", f)
		}
		// The latest instance may be one of a run ahead, which never
		// started and ended at the restart; the one that ran ended so.
		if got, err := e.st.Instance(context.Background(), in.ID); err != nil || got.State != axtype.Failed ||
			!strings.Contains(got.Error, "removed from the pipeline files while it ran") {
			t.Errorf("the instance that ran: %+v, %v; want FAILED, removed while it ran", got, err)
		}
		if _, err := eng.Explain(context.Background(), "p.nope"); err == nil || !strings.Contains(err.Error(), `no task "p.nope"`) {
			t.Errorf("explain of a task that never existed: %v", err)
		}
	})
}

// A task removed by a live reload while its attempt runs here is still
// tracked the same way: the attempt, cut off at its deadline, is not
// retried (its task is gone); a second one, removed the same way, can be
// killed.
func TestRemovedByReloadWhileRunning(t *testing.T) {
	for _, kill := range []bool{false, true} {
		t.Run(map[bool]string{false: "times out", true: "killed"}[kill], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				hang := map[string]func(context.Context, runner.Attempt) error{"p.b": func(ctx context.Context, _ runner.Attempt) error {
					<-ctx.Done()
					return context.Cause(ctx)
				}}
				e := setup(t, Config{}, hang, withB)
				defer e.stop()
				sleep(2*time.Minute + time.Second) // the first fire: b runs, and hangs
				ins := e.instances(store.InstanceFilter{TaskID: "p.b", States: []axtype.State{axtype.Running}})
				if len(ins) != 1 {
					t.Fatalf("p.b running: %+v", ins)
				}
				in := ins[0]
				if _, err := e.eng.Reload(compile(t, withoutB)); err != nil {
					t.Fatalf("reload: %v", err)
				}
				sleep(time.Second)
				if got := e.eng.Stats().Running; got != 1 {
					t.Errorf("running after the reload: %d, want the removed task's attempt tracked", got)
				}
				want := axtype.Failed
				if kill {
					want = axtype.Killed
					if _, err := e.do(Kill{Instance: in.ID}); err != nil {
						t.Fatalf("kill: %v", err)
					}
				}
				sleep(35 * time.Second) // past its 30 s timeout
				got, err := e.st.Instance(context.Background(), in.ID)
				if err != nil {
					t.Fatal(err)
				}
				if got.State != want || got.Attempt != 1 {
					t.Errorf("removed task's instance: %s attempt %d %q; want %s at attempt 1, not retried", got.State, got.Attempt, got.Error, want)
				}
			})
		})
	}
}

// A task removed by a live reload while its attempt waits in the start
// queue for a slot under --max-running (recorded RUNNING, not started):
// the attempt never starts, and ends FAILED with the reason, the attempt
// not counted. Before, it started once a slot freed and failed "unknown
// task" (outside finding: counted, and a task_failed alert).
func TestRemovedByReloadWhileInTheStartQueue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var ranB atomic.Int32
		fns := map[string]func(context.Context, runner.Attempt) error{
			"q.keep": func(ctx context.Context, _ runner.Attempt) error {
				select { // holds the one slot
				case <-release:
					return nil
				case <-ctx.Done():
					return context.Cause(ctx)
				}
			},
			"q.gone": func(context.Context, runner.Attempt) error { ranB.Add(1); return nil },
		}
		const both = "pipeline: q\ntimezone: UTC\nschedule: \"0 * * * *\"\ntasks:\n  - {name: keep, function: record, priority: 1}\n  - {name: gone, function: record, priority: 5, retry: {count: 2, interval: 1s}}\n"
		const keepOnly = "pipeline: q\ntimezone: UTC\nschedule: \"0 * * * *\"\ntasks:\n  - {name: keep, function: record, priority: 1}\n"
		e := setup(t, Config{MaxRunning: 1}, fns, both)
		defer e.stop()
		sleep(time.Hour + time.Second) // both fire; keep holds the slot, gone waits in the start queue
		gone := e.instances(store.InstanceFilter{TaskID: "q.gone"})
		if len(gone) != 1 || gone[0].State != axtype.Running {
			t.Fatalf("q.gone: %+v; want RUNNING, waiting in the start queue", gone)
		}
		if _, err := e.eng.Reload(compile(t, keepOnly)); err != nil {
			t.Fatalf("reload: %v", err)
		}
		sleep(time.Second)
		close(release) // the slot frees
		sleep(time.Minute)
		got, err := e.st.Instance(context.Background(), gone[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != axtype.Failed || got.Attempt != 1 || got.Counted != 0 || !strings.Contains(got.Error, "removed from the pipeline files by a reload while it waited for a slot") {
			t.Errorf("q.gone after the reload: %s attempt %d counted %d %q; want FAILED after attempt 1, not counted, not started because its task was removed", got.State, got.Attempt, got.Counted, got.Error)
		}
		if n := ranB.Load(); n != 0 {
			t.Errorf("q.gone ran %d time(s) after its task was removed", n)
		}
	})
}
