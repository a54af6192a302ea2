package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

func TestWindowAndTopUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := setup(t, Config{}, nil, "pipeline: m\ntimezone: UTC\nschedule: \"@every 1m\"\ntasks:\n  - {name: a, function: record}\n")
		runs := func() int {
			r, err := e.st.Runs(context.Background(), "m", 1000)
			if err != nil {
				t.Fatal(err)
			}
			return len(r)
		}
		// At start: the fires at +1m … +5m exist and wait in the wheel.
		if w, n := e.eng.Stats().Wheel, runs(); w != 5 || n != 5 {
			t.Fatalf("at start: wheel %d, runs %d; want 5 and 5", w, n)
		}
		sleep(31 * time.Second) // the first top-up finds nothing new
		if w, n := e.eng.Stats().Wheel, runs(); w != 5 || n != 5 {
			t.Errorf("after 31 s: wheel %d, runs %d; want 5 and 5", w, n)
		}
		sleep(30 * time.Second) // +61s: +1m fired; the top-up at +60s added +6m
		if w, n := e.eng.Stats().Wheel, runs(); w != 5 || n != 6 {
			t.Errorf("after 61 s: wheel %d, runs %d; want 5 and 6", w, n)
		}
		if got := len(e.rec.snapshot()); got != 1 {
			t.Errorf("%d executions, want 1", got)
		}
		e.stop()
	})
}

func TestPausedAfterLoadDoesNotFire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		e := setup(t, Config{}, nil, "pipeline: p\ntimezone: UTC\nschedule: \"@every 10s\"\ntasks:\n  - {name: a, function: record}\n")
		// The instance for +20s sits in the wheel; an operator pauses it in the store.
		ins := e.instances(store.InstanceFilter{TaskID: "p.a", LogicalFrom: start.Add(20 * time.Second), LogicalTo: start.Add(20 * time.Second)})
		if len(ins) != 1 || ins[0].State != axtype.Scheduled {
			t.Fatalf("instance for +20s: %+v", ins)
		}
		if _, err := e.st.Transition(context.Background(), store.TransitionParams{InstanceID: ins[0].ID, Version: ins[0].Version,
			From: axtype.Scheduled, To: axtype.Paused, Now: time.Now(), Actor: "operator:test", Reason: "pause"}); err != nil {
			t.Fatal(err)
		}
		sleep(35 * time.Second)
		e.stop()
		var got []string
		for _, c := range e.rec.snapshot() {
			got = append(got, c.logical.Sub(start).String())
		}
		if fmt.Sprint(got) != "[10s 30s]" {
			t.Errorf("executions at %v, want [10s 30s]", got)
		}
		in, _ := e.st.Instance(context.Background(), ins[0].ID)
		if in.State != axtype.Paused {
			t.Errorf("paused instance is %s", in.State)
		}
	})
}

// priorities builds a pipeline of n independent tasks, due together at each
// fire, with priority 1 + i%5.
func priorities(n int, schedule string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "pipeline: burst\ntimezone: UTC\nschedule: %q\ndefaults: {function: record}\ntasks:\n", schedule)
	for i := range n {
		fmt.Fprintf(&b, "  - {name: t%05d, priority: %d}\n", i, 1+i%5)
	}
	return b.String()
}

// dispatchOrder returns the priority of each dispatch, in the order the
// SCHEDULED → RUNNING transitions were recorded.
func dispatchOrder(t *testing.T, e *env, n int) ([]int, []time.Time) {
	t.Helper()
	h, err := e.st.History(context.Background(), store.LogFilter{Limit: 1 << 22})
	if err != nil {
		t.Fatal(err)
	}
	var prio []int
	var at []time.Time
	for _, r := range h {
		if r.To == axtype.Running {
			var i int
			fmt.Sscanf(strings.TrimPrefix(r.TaskID, "burst.t"), "%d", &i)
			prio = append(prio, 1+i%5)
			at = append(at, r.At)
		}
	}
	return prio, at
}

func TestPriorityOrderUnderContention(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := setup(t, Config{DispatchRate: 2}, nil, priorities(10, "@every 1h"))
		sleep(time.Hour + 10*time.Second)
		e.stop()
		prio, _ := dispatchOrder(t, e, 10)
		if fmt.Sprint(prio) != "[1 1 2 2 3 3 4 4 5 5]" {
			t.Errorf("dispatch order by priority %v", prio)
		}
	})
}

// TestTenThousandDueInOneSecond: 10,000 tasks due in the same second at
// 100 dispatches/s are all dispatched, none dropped, in priority order, over
// about 100 simulated seconds.
func TestTenThousandDueInOneSecond(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 instances through SQLite")
	}
	synctest.Test(t, func(t *testing.T) {
		const n = 10000
		start := time.Now()
		e := setup(t, Config{DispatchRate: 100}, nil, priorities(n, "@every 1h"))
		sleep(time.Hour + 120*time.Second)
		e.stop()
		prio, at := dispatchOrder(t, e, n)
		if len(prio) != n {
			t.Fatalf("%d of %d dispatched", len(prio), n)
		}
		for i := 1; i < n; i++ {
			if prio[i] < prio[i-1] {
				t.Fatalf("dispatch %d has priority %d after %d", i, prio[i], prio[i-1])
			}
		}
		fire := start.Add(time.Hour)
		if span := at[n-1].Sub(fire); span < 95*time.Second || span > 105*time.Second {
			t.Errorf("the last of %d dispatches came %s after the fire, want about 100 s", n, span)
		}
		if got := len(e.rec.snapshot()); got != n {
			t.Errorf("%d executions, want %d", got, n)
		}
		ok := e.instances(store.InstanceFilter{Pipeline: "burst", States: []axtype.State{axtype.Success}})
		if len(ok) != n {
			t.Errorf("%d of %d succeeded", len(ok), n)
		}
	})
}

func TestDownstreamOnlyOnItsOwnRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		failFirst := map[string]func(context.Context, runner.Attempt) error{
			"own.a": func(_ context.Context, a runner.Attempt) error {
				if a.LogicalTime.Equal(start.Add(10 * time.Second)) {
					return fmt.Errorf("source missing: %w", runner.ErrPermanent)
				}
				return nil
			},
		}
		e := setup(t, Config{}, failFirst, "pipeline: own\ntimezone: UTC\nschedule: \"@every 10s\"\ndefaults: {function: record}\ntasks:\n  - {name: a}\n  - {name: b, depends_on: [a]}\n")
		sleep(25 * time.Second)
		e.stop()
		var got []string
		for _, c := range e.rec.snapshot() {
			got = append(got, fmt.Sprintf("%s@%s", c.task, c.logical.Sub(start)))
		}
		if fmt.Sprint(got) != "[own.a@10s own.a@20s own.b@20s]" {
			t.Errorf("executions %v", got)
		}
		b10 := e.instances(store.InstanceFilter{TaskID: "own.b", LogicalFrom: start.Add(10 * time.Second), LogicalTo: start.Add(10 * time.Second)})
		// It can no longer run: it fails with its upstream, without running (R40).
		if len(b10) != 1 || b10[0].State != axtype.Failed || b10[0].Error != "upstream own.a failed" || b10[0].Attempt != 0 {
			t.Errorf("b of the failed run: %+v", b10)
		}
	})
}

func TestSlowRunsOverlapApart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		slow := map[string]func(context.Context, runner.Attempt) error{
			"slow.a": func(ctx context.Context, _ runner.Attempt) error { time.Sleep(15 * time.Second); return ctx.Err() },
		}
		e := setup(t, Config{}, slow, "pipeline: slow\ntimezone: UTC\nschedule: \"@every 10s\"\noverlap: allow\ndefaults: {function: record}\ntasks:\n  - {name: a}\n  - {name: b, depends_on: [a]}\n")
		sleep(47 * time.Second)
		e.stop()
		var got []string
		for _, c := range e.rec.snapshot() {
			got = append(got, fmt.Sprintf("%s@%s:+%s", c.task, c.logical.Sub(start), c.at.Sub(start)))
		}
		want := "[slow.a@10s:+10s slow.a@20s:+20s slow.b@10s:+25s slow.a@30s:+30s slow.b@20s:+35s slow.a@40s:+40s slow.b@30s:+45s]"
		if fmt.Sprint(got) != want {
			t.Errorf("executions\n got %v\nwant %s", got, want)
		}
	})
}

func TestStaleTicketIsRecordedAndIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		e := setup(t, Config{}, nil, chain)
		sleep(11 * time.Second)
		a := e.instances(store.InstanceFilter{TaskID: "chain.a", LogicalTo: start.Add(10 * time.Second)})
		if len(a) != 1 || a[0].State != axtype.Success {
			t.Fatalf("a@10s: %+v", a)
		}
		e.eng.completer.results <- outcome{instance: a[0].ID, res: runner.Result{Ticket: "forged", Status: runner.StatusFailed, Error: "late"}}
		sleep(time.Second)
		e.stop()
		acts, _ := e.st.Actions(context.Background(), store.LogFilter{Action: "stale_result"})
		if len(acts) != 1 || acts[0].Ticket != "forged" || acts[0].InstanceID != a[0].ID {
			t.Errorf("actions = %+v", acts)
		}
		after, _ := e.st.Instance(context.Background(), a[0].ID)
		if after.State != axtype.Success || after.Version != a[0].Version {
			t.Errorf("a stale result changed the instance: %+v", after)
		}
	})
}

// TestDatabaseGoneForAWhile: while the store refuses writes nothing is
// dispatched (a dispatch must be recorded first); when it is back the engine
// carries on, and no (task, logical time) runs twice.
func TestDatabaseGoneForAWhile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		// overlap: wait and misfire: fire_all, so that the catch-up after the
		// outage runs every logical time: with skip, a late b may be skipped
		// while the one before runs; with fire_once (the default), the fires
		// more than engine.DefaultMisfireAfter late when the store comes back
		// collapse into one, as the misfire policy says.
		e := setup(t, Config{}, nil, strings.Replace(chain, "schedule:", "overlap: wait\nmisfire: fire_all\nschedule:", 1))
		sleep(12 * time.Second)
		before := len(e.rec.snapshot())
		if _, err := e.st.DB().Exec("PRAGMA query_only = 1"); err != nil { // the one writer connection
			t.Fatal(err)
		}
		sleep(20 * time.Second)
		if got := len(e.rec.snapshot()); got != before {
			t.Errorf("%d executions while the store refused writes", got-before)
		}
		if _, err := e.st.DB().Exec("PRAGMA query_only = 0"); err != nil {
			t.Fatal(err)
		}
		sleep(40 * time.Second)
		e.stop()
		seen := map[string]bool{}
		for _, c := range e.rec.snapshot() {
			k := fmt.Sprintf("%s@%s", c.task, c.logical.Sub(start))
			if seen[k] {
				t.Errorf("%s ran twice", k)
			}
			seen[k] = true
		}
		for _, l := range []time.Duration{10, 20, 30, 40, 50, 60} {
			for _, task := range []string{"chain.a", "chain.b", "chain.c"} {
				if !seen[fmt.Sprintf("%s@%s", task, l*time.Second)] {
					t.Errorf("%s@%ds never ran", task, l)
				}
			}
		}
	})
}

// TestCrossPipelineWaitsForSameLogicalTime: report waits for the billing
// pipeline's settle of the same logical time, and runs once it succeeded.
func TestCrossPipelineWaitsForSameLogicalTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		slowSettle := map[string]func(context.Context, runner.Attempt) error{
			"billing.settle": func(ctx context.Context, _ runner.Attempt) error { time.Sleep(3 * time.Second); return ctx.Err() },
		}
		billing := "pipeline: billing\ntimezone: UTC\nschedule: \"@every 10s\"\ndefaults: {function: record}\ntasks:\n  - {name: settle}\n"
		orders := "pipeline: orders\ntimezone: UTC\nschedule: \"@every 10s\"\ndefaults: {function: record}\ntasks:\n  - {name: sync}\n  - {name: report, depends_on: [sync, billing.settle]}\n"
		e := setup(t, Config{}, slowSettle, billing, orders)
		sleep(25 * time.Second)
		e.stop()
		var got []string
		for _, c := range e.rec.snapshot() {
			got = append(got, fmt.Sprintf("+%02ds %s@%s", int(c.at.Sub(start).Seconds()), c.task, c.logical.Sub(start)))
		}
		slices.Sort(got) // attempts started in the same instant race to the recorder
		// sync runs at the fire; report waits for settle (3 s) of its own logical time.
		want := "[+10s billing.settle@10s +10s orders.sync@10s +13s orders.report@10s +20s billing.settle@20s +20s orders.sync@20s +23s orders.report@20s]"
		if fmt.Sprint(got) != want {
			t.Errorf("executions\n got %v\nwant %s", got, want)
		}
	})
}
