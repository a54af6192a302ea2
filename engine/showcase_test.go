package engine

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// okExec succeeds at once for every task, of any executor kind, and
// remembers what it ran.
type okExec struct {
	mu  sync.Mutex
	ran []string
}

var _ runner.Executor = (*okExec)(nil)

func (x *okExec) Execute(_ context.Context, a runner.Attempt) (runner.Result, error) {
	x.mu.Lock()
	x.ran = append(x.ran, a.Pipeline+"."+a.Task)
	x.mu.Unlock()
	return runner.Result{Ticket: a.Ticket, Status: runner.StatusSuccess}, nil
}

// examplesEnv runs an engine over make run's pipelines (examples/), every
// task succeeding.
func examplesEnv(t *testing.T) (*env, *okExec) {
	t.Helper()
	g, errs, err := dag.Load([]string{"../examples"}, defs.Options{Now: time.Now()}, dag.Options{Now: time.Now(), DispatchRate: -1})
	if err != nil || errs.Err() != nil {
		t.Fatalf("examples: %v %v", err, errs)
	}
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "ax.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	x := &okExec{}
	eng, err := New(Config{Holder: "test"}, st, g, Executors{defs.ExecFunction: x, defs.ExecCommand: x, defs.ExecHTTP: x})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &env{t: t, st: st, eng: eng, rec: &recorder{}, cancel: cancel, done: make(chan error, 1)}
	go func() { e.done <- eng.Run(ctx) }()
	synctest.Wait()
	return e, x
}

// The README's showcase, `ax trigger orders_daily.sync_orders --downstream`
// against make run's pipelines, without billing triggered first: report
// waits for billing_daily.settle in its run's schedule interval (the one
// that holds the trigger's time, up to orders' next 02:00 fire), which no
// run has yet (the billing run of that morning came before the scheduler
// started, and an older interval never counts), so explain names the wait
// and its finite deadline; billing's 01:30 fire, inside the interval,
// releases it before the deadline, and the run then waits at its gate.
func TestShowcaseRunEnds(t *testing.T) {
	if testing.Short() {
		t.Skip("simulates a day of the example pipelines (about 30 s); runs without -short")
	}
	synctest.Test(t, func(t *testing.T) {
		e, _ := examplesEnv(t)
		ctx := context.Background()
		msg, err := e.do(Trigger{Target: "orders_daily.sync_orders", Downstream: true}, By{Actor: "operator:readme"})
		if err != nil {
			t.Fatal(err)
		}
		sleep(time.Minute)
		runs, _ := e.st.Runs(ctx, "orders_daily", 100)
		var run axtype.Run
		for _, r := range runs {
			if r.Kind == axtype.RunManual {
				run = r
			}
		}
		if run.ID == 0 {
			t.Fatalf("no run from %q", msg)
		}
		x, err := e.eng.Explain(ctx, "orders_daily.report")
		shanghai := e.eng.sched.g.Pipeline("orders_daily").Location
		deadline := run.LogicalTime.Add(24 * time.Hour).In(shanghai).Format(time.RFC3339)
		// The trigger came at 08:00 Shanghai: the interval is (today 02:00, tomorrow 02:00].
		wait := "billing_daily.settle: no run yet: waits for a run in (1999-12-31T18:00:00Z, 2000-01-01T18:00:00Z]"
		found, names := false, false
		for _, f := range x.Findings {
			found = found || (f.Check == "deadline" && strings.Contains(f.Detail, "fails at "+deadline))
			names = names || (f.Check == "cross" && f.Detail == wait)
		}
		if err != nil || !found || !names {
			t.Errorf("explain report names no finite deadline %s or no wait %q: %+v %v", deadline, wait, x.Findings, err)
		}
		sleep(24 * time.Hour)
		e.stop()
		in := e.byTask(run.ID)
		if r := in["orders_daily.report"]; r.State != axtype.Success {
			t.Errorf("report: %s %q, want it run on billing's 01:30 run", r.State, r.Error)
		}
		st := e.statusOf(run.ID)
		if st.State != RunAwaiting || len(st.Awaiting) != 1 || st.Awaiting[0] != "orders_daily.approve_publish" {
			t.Errorf("the showcase run a day on: %+v, want it awaiting approval at its gate", st)
		}
	})
}

// With billing triggered first and the gate approved, the same showcase run
// succeeds: every instance ran, in order.
func TestShowcaseRunSucceedsWithBillingAndApproval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, x := examplesEnv(t)
		for _, op := range []Trigger{
			{Target: "billing_daily"},
			{Target: "orders_daily.sync_orders", Downstream: true},
		} {
			if _, err := e.do(op, By{Actor: "operator:readme"}); err != nil {
				t.Fatal(err)
			}
			sleep(time.Second)
		}
		sleep(11 * time.Minute) // report's delay
		msg, err := e.do(Trigger{Target: "orders_daily.approve_publish"}, By{Actor: "operator:readme"})
		if err != nil || !strings.Contains(msg, "it runs now") {
			t.Errorf("approve: %q %v", msg, err)
		}
		sleep(time.Second)
		e.stop()
		runs, _ := e.st.Runs(context.Background(), "orders_daily", 100)
		for _, r := range runs {
			if r.Kind != axtype.RunManual {
				continue
			}
			if st := e.statusOf(r.ID); !st.Over || st.State != RunSuccess {
				t.Errorf("run %d: %+v", r.ID, st)
			}
		}
		x.mu.Lock()
		defer x.mu.Unlock()
		var orders []string
		for _, r := range x.ran {
			if strings.HasPrefix(r, "orders_daily.") {
				orders = append(orders, r)
			}
		}
		if got := strings.Join(orders, " "); got != "orders_daily.sync_orders orders_daily.clean_orders orders_daily.report orders_daily.approve_publish" {
			t.Errorf("ran %s", got)
		}
	})
}
