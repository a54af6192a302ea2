package engine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// gauge counts attempts running at once and keeps the peak.
type gauge struct {
	mu        sync.Mutex
	now, peak int
	order     []string
}

func (g *gauge) run(d time.Duration) func(context.Context, runner.Attempt) error {
	return func(ctx context.Context, a runner.Attempt) error {
		g.mu.Lock()
		g.now++
		g.peak = max(g.peak, g.now)
		g.order = append(g.order, a.Task)
		g.mu.Unlock()
		time.Sleep(d)
		g.mu.Lock()
		g.now--
		g.mu.Unlock()
		return nil
	}
}

// With --max-running 3, ten 10-second attempts due together run three at
// a time, in priority order, and none times out while it waits (its 15 s
// timeout starts when it starts, although the last waits 30 s).
func TestMaxRunningHoldsWorkInPriorityOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 10
		g := &gauge{}
		fns := map[string]func(context.Context, runner.Attempt) error{}
		for i := range n {
			fns[taskName(i)] = g.run(10 * time.Second)
		}
		src := strings.Replace(priorities(n, "@every 1h"), "defaults: {function: record}", "defaults: {function: record, timeout: 15s}", 1)
		e := setup(t, Config{MaxRunning: 3}, fns, src)
		sleep(time.Hour + 5*time.Second)
		x, err := e.eng.Explain(context.Background(), "burst.t00004") // priority 5: waits
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(x.Verdict+findings(x), "held: the server has 3 of 3 local attempts running (--max-running)") {
			t.Errorf("explain while capped: %s\n%s", x.Verdict, findings(x))
		}
		sleep(40 * time.Second)
		e.stop()
		if g.peak != 3 {
			t.Errorf("peak %d attempts at once, want 3", g.peak)
		}
		for _, in := range e.instances(store.InstanceFilter{Pipeline: "burst", States: []axtype.State{axtype.Success, axtype.Failed, axtype.Retrying, axtype.Running}}) {
			if in.State != axtype.Success || in.Attempt != 1 {
				t.Errorf("%s: %s attempt %d (%s); want SUCCESS at the first attempt", in.TaskID, in.State, in.Attempt, in.Error)
			}
		}
		// Dispatched in priority order (1 first), whatever the cap let out when.
		prio, _ := dispatchOrder(t, e, n)
		if len(prio) != n || !slices.IsSorted(prio) {
			t.Errorf("dispatch priorities %v, want %d in order", prio, n)
		}
	})
}

func findings(x Explanation) string {
	var b strings.Builder
	for _, f := range x.Findings {
		b.WriteString(f.Check + ": " + f.Detail + "\n")
	}
	return b.String()
}

// A task's max_running (here from the pipeline's defaults) and a group cap
// set at run time bound their attempts; raising the cap lets the waiting
// ones out at once.
func TestTaskAndGroupMaxRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &gauge{}
		fns := map[string]func(context.Context, runner.Attempt) error{}
		for i := range 6 {
			fns[taskName(i)] = g.run(10 * time.Second)
		}
		src := strings.Replace(priorities(6, "@every 1h"), "defaults: {function: record}", "group: etl\ndefaults: {function: record}", 1)
		e := setup(t, Config{MaxRunning: -1}, fns, src)
		if _, err := e.do(SetLimits{GroupMaxRunning: map[string]int{"etl": 2}}); err != nil {
			t.Fatal(err)
		}
		sleep(time.Hour + 5*time.Second)
		x, err := e.eng.Explain(context.Background(), "burst.t00004")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(findings(x), "held: group etl has 2 of 2 running") {
			t.Errorf("explain: %s\n%s", x.Verdict, findings(x))
		}
		if _, err := e.do(SetLimits{GroupMaxRunning: map[string]int{"etl": 4}}); err != nil {
			t.Fatal(err)
		}
		sleep(time.Second)
		g.mu.Lock()
		now := g.now
		g.mu.Unlock()
		if now != 4 {
			t.Errorf("after raising the group cap to 4: %d running", now)
		}
		sleep(30 * time.Second)
		e.stop()
		if g.peak != 4 {
			t.Errorf("peak %d, want 4", g.peak)
		}
	})
}

func TestTaskMaxRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &gauge{}
		src := "pipeline: m\ntimezone: UTC\nschedule: \"@every 1s\"\ndefaults: {max_running: 2, overlap: allow}\ntasks:\n  - {name: a, function: record}\n"
		e := setup(t, Config{MaxRunning: -1}, map[string]func(context.Context, runner.Attempt) error{"m.a": g.run(5 * time.Second)}, src)
		sleep(20 * time.Second)
		e.stop()
		if g.peak != 2 {
			t.Errorf("peak %d attempts of a task with max_running 2", g.peak)
		}
	})
}

// With --max-running 4 and every commit taking 50 ms, 200 attempts due
// together that end at once all start within a second of their fire time:
// dispatch records them a batch at a time beyond the cap, and each starts
// in the start queue the moment a slot frees, with no commit between one
// attempt's end and the next one's start. (When every start waited for
// its own dispatch commit, four at a time, the last started 5 s late.)
func TestStartQueueDrainsWithoutACommitPerStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 200
		var (
			mu     sync.Mutex
			starts []time.Time
		)
		fns := map[string]func(context.Context, runner.Attempt) error{}
		for i := range n {
			fns[taskName(i)] = func(context.Context, runner.Attempt) error {
				mu.Lock()
				starts = append(starts, time.Now())
				mu.Unlock()
				return nil
			}
		}
		e := setup(t, Config{MaxRunning: 4}, fns, priorities(n, "@every 1h"))
		store.SetFault(e.st, func(what string) error {
			if what == "transition batch" {
				time.Sleep(50 * time.Millisecond) // a slow database: every commit of dispatches and results costs 50 ms
			}
			return nil
		})
		fire := time.Now().Truncate(time.Hour).Add(time.Hour)
		sleep(time.Until(fire) + 30*time.Second)
		e.stop()
		mu.Lock()
		defer mu.Unlock()
		if len(starts) != n {
			t.Fatalf("%d attempts started, want %d", len(starts), n)
		}
		last := slices.MaxFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
		if late := last.Sub(fire); late > time.Second {
			t.Errorf("the last of %d attempts started %s after the fire time, want within 1 s (a commit per cap's worth of starts)", n, late)
		}
		t.Logf("the last of %d attempts started %s after the fire time", n, last.Sub(fire))
		for _, in := range e.instances(store.InstanceFilter{Pipeline: "burst"}) {
			if in.State != axtype.Success || in.Attempt != 1 {
				t.Errorf("%s: %s attempt %d (%s); want SUCCESS at the first attempt", in.TaskID, in.State, in.Attempt, in.Error)
			}
		}
	})
}

// An attempt recorded RUNNING that waits in the start queue for a slot is
// explained as such, can be killed without ever starting, and is given
// back at shutdown through the result path (RETRYING, the attempt not
// counted, the reason saying it never started) before the lease goes.
func TestStartQueueExplainKillAndGiveBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		ran := map[string]bool{}
		fns := map[string]func(context.Context, runner.Attempt) error{}
		for i := range 4 {
			fns[taskName(i)] = func(ctx context.Context, a runner.Attempt) error {
				mu.Lock()
				ran[a.Task] = true
				mu.Unlock()
				<-ctx.Done()
				return context.Cause(ctx)
			}
		}
		// --max-running 1: t00000 (priority 1) runs; t00001 and t00002 are
		// recorded and wait in the start queue (ahead of the cap by the cap,
		// here 1, plus nothing started yet)… the rest waits unrecorded.
		// The running one has a 2 h timeout; those waiting, 5 minutes.
		src := strings.Replace(priorities(4, "@every 1h"), "defaults: {function: record}", "defaults: {function: record, timeout: 5m}", 1)
		src = strings.Replace(src, "{name: t00000, priority: 1}", "{name: t00000, priority: 1, timeout: 2h}", 1)
		e := setup(t, Config{MaxRunning: 1, Grace: 2 * time.Second}, fns, src)
		sleep(time.Hour + 5*time.Second)
		queued := e.instances(store.InstanceFilter{TaskID: "burst.t00001"})
		if len(queued) != 1 || queued[0].State != axtype.Running {
			t.Fatalf("burst.t00001: %+v; want one instance RUNNING (recorded, in the start queue)", queued)
		}
		x, err := e.eng.Explain(context.Background(), "burst.t00001")
		if err != nil {
			t.Fatal(err)
		}
		if f := findings(x); !strings.Contains(f, "waiting in the start queue for a slot: the server has 1 of 1 local attempts running (--max-running) and 1 waiting to start") ||
			!strings.Contains(f, "its timeout starts when it starts") {
			t.Errorf("explain of an attempt in the start queue:\n%s", f)
		}
		sleep(20 * time.Minute) // four times its timeout, which has not started: it still waits
		if in := e.instances(store.InstanceFilter{TaskID: "burst.t00001"}); in[0].State != axtype.Running {
			t.Errorf("after 20 minutes in the start queue: %s (%s); want still RUNNING, waiting (its timeout starts when it starts)", in[0].State, in[0].Error)
		}
		if _, err := e.do(Kill{Instance: queued[0].ID}, By{Actor: "operator:test"}); err != nil {
			t.Fatal(err)
		}
		sleep(time.Second)
		if in := e.instances(store.InstanceFilter{TaskID: "burst.t00001"}); in[0].State != axtype.Killed {
			t.Errorf("killed while in the start queue: %s (%s); want KILLED", in[0].State, in[0].Error)
		}
		e.stop()
		mu.Lock()
		defer mu.Unlock()
		if ran["t00001"] {
			t.Error("the attempt killed in the start queue ran")
		}
		for _, task := range []string{"burst.t00000", "burst.t00002"} {
			in := e.instances(store.InstanceFilter{TaskID: task})
			if len(in) != 1 || in[0].State != axtype.Retrying || in[0].Attempt != 1 || in[0].Counted != 0 {
				t.Errorf("%s after shutdown: %+v; want RETRYING after attempt 1, not counted (given back)", task, in)
				continue
			}
			h := e.history(task)
			last := h[len(h)-1]
			want := "interrupted by shutdown: given back after the grace period"
			if task == "burst.t00002" {
				want = "interrupted by shutdown: it waited in the start queue for a slot (--max-running) and never started"
			}
			if last.From != axtype.Running || last.To != axtype.Retrying || !strings.Contains(last.Reason, want) {
				t.Errorf("%s: last history %s>%s %q; want RUNNING>RETRYING %q", task, last.From, last.To, last.Reason, want)
			}
		}
		if ran["t00002"] {
			t.Error("the attempt given back from the start queue ran")
		}
	})
}

// TestPoolMetrics: ax_pool_running and ax_pool_max_running give each cap's
// occupancy (local --max-running, a group's cap) and ax_pool_waiting what
// they hold back; a group whose cap is lifted loses both series instead of
// showing its last count for ever.
func TestPoolMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := &gauge{}
		fns := map[string]func(context.Context, runner.Attempt) error{}
		for i := range 6 {
			fns[taskName(i)] = g.run(10 * time.Second)
		}
		src := strings.Replace(priorities(6, "@every 1h"), "defaults: {function: record}", "group: etl\ndefaults: {function: record}", 1)
		reg := prometheus.NewRegistry()
		e := setup(t, Config{MaxRunning: 3, Registerer: reg}, fns, src)
		if _, err := e.do(SetLimits{GroupMaxRunning: map[string]int{"etl": 2}}); err != nil {
			t.Fatal(err)
		}
		sleep(time.Hour + 5*time.Second)
		gauge := func(name, scope string) float64 {
			t.Helper()
			labels := map[string]string{}
			if scope != "" {
				labels["scope"] = scope
			}
			return series(t, reg, name, labels).GetGauge().GetValue()
		}
		for _, c := range []struct {
			name, scope string
			want        float64
		}{
			{"ax_pool_running", "group:etl", 2}, {"ax_pool_max_running", "group:etl", 2},
			{"ax_pool_running", "local", 2}, {"ax_pool_max_running", "local", 3},
			{"ax_pool_waiting", "", 4},
		} {
			if got := gauge(c.name, c.scope); got != c.want {
				t.Errorf("%s{scope=%q} = %v, want %v", c.name, c.scope, got, c.want)
			}
		}
		if _, err := e.do(SetLimits{GroupMaxRunning: map[string]int{"etl": 0}}); err != nil { // lifted
			t.Fatal(err)
		}
		sleep(time.Second)
		if got := gauge("ax_pool_running", "local"); got != 3 {
			t.Errorf("ax_pool_running{local} with the group cap lifted = %v, want 3 (the local cap)", got)
		}
		for _, name := range []string{"ax_pool_running", "ax_pool_max_running"} {
			if n := countSeries(t, reg, name, map[string]string{"scope": "group:etl"}); n != 0 {
				t.Errorf("%s{scope=group:etl} still shown after its cap was lifted", name)
			}
		}
		sleep(40 * time.Second)
		e.stop()
		if got := gauge("ax_pool_running", "local"); got != 0 {
			t.Errorf("ax_pool_running{local} once all ended = %v, want 0", got)
		}
	})
}

// countSeries counts the series of name whose labels are exactly want.
func countSeries(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) int {
	t.Helper()
	return len(matching(t, reg, name, want))
}

// An attempt waiting in the start queue when the lease is lost and taken
// again (its renewals failed past the TTL, nobody else took it) starts
// under the new epoch once a slot frees: the term goes on.
func TestStartQueueSurvivesALeaseRetaken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fns := map[string]func(context.Context, runner.Attempt) error{
			taskName(0): func(context.Context, runner.Attempt) error { time.Sleep(2 * time.Minute); return nil },
			taskName(1): func(context.Context, runner.Attempt) error { return nil },
		}
		e := setup(t, Config{MaxRunning: 1}, fns, priorities(2, "@every 1h"))
		l0, err := e.st.GetLease(context.Background(), "")
		if err != nil {
			t.Fatal(err)
		}
		sleep(time.Hour + 10*time.Second) // t00000 runs, t00001 waits for its slot
		var failing atomic.Bool
		failing.Store(true)
		store.SetFault(e.st, func(what string) error {
			if what == "renew lease" && failing.Load() {
				return errors.New("the database is away")
			}
			return nil
		})
		sleep(30 * time.Second) // past the 15 s TTL: the lease expires
		failing.Store(false)
		sleep(5 * time.Minute) // taken again; t00000 ends at 2 min, and t00001 must start
		e.stop()
		l, err := e.st.GetLease(context.Background(), "")
		if err != nil {
			t.Fatal(err)
		}
		if l.Epoch == l0.Epoch {
			t.Fatalf("epoch %d: the lease was never lost and taken again; the test needs it", l.Epoch)
		}
		ins := e.instances(store.InstanceFilter{Pipeline: "burst", LogicalTo: time.Now().Add(-5 * time.Minute), ByLogicalTime: true})
		if len(ins) != 2 {
			t.Fatalf("%d instances of the 01:00 run, want 2", len(ins))
		}
		for _, in := range ins {
			if in.State != axtype.Success {
				t.Errorf("%s: %s (%s); want SUCCESS after the lease was taken again", in.TaskID, in.State, in.Error)
			}
		}
	})
}

// The pool reads its clock before it takes its lock, never under it (found
// by the simulator, seeds 10 and 11 of 40 hung: a crashed engine's clock
// blocks for good, and an attempt of that process, ending, held the pool's
// mutex inside the clock while the process's other goroutines waited for
// the mutex; a goroutine waiting on a mutex is not durably blocked, so the
// synctest bubble never idled and simulated time stopped). An injected
// clock may block; nothing must wait for the lock behind it.
func TestPoolReadsItsClockOutsideItsLock(t *testing.T) {
	t.Parallel()
	var block atomic.Bool
	entered, thaw := make(chan struct{}, 1), make(chan struct{})
	clock := func() time.Time {
		if block.Load() {
			entered <- struct{}{}
			<-thaw
		}
		return time.Unix(1000, 0)
	}
	p := newPool(Pools{MaxRunning: 1}, clock)
	p.enqueue(1, 0, 1) // granted at once
	second := p.enqueue(1, 0, 2)
	block.Store(true)
	done := make(chan struct{})
	go func() { p.release(); close(done) }() // hands the slot to the second
	<-entered
	if !p.mu.TryLock() {
		t.Error("the pool's lock is held while its clock blocks")
	} else {
		p.mu.Unlock()
	}
	block.Store(false)
	close(thaw)
	<-done
	select {
	case <-second.ready:
	default:
		t.Error("the second attempt was not granted the slot released")
	}
}
