package engine

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

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
		for _, in := range e.instances(store.InstanceFilter{Pipeline: "burst", States: []store.State{store.Success, store.Failed, store.Retrying, store.Running}}) {
			if in.State != store.Success || in.Attempt != 1 {
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
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			if len(m.GetLabel()) != len(want) {
				continue
			}
			for _, l := range m.GetLabel() {
				if want[l.GetName()] != l.GetValue() {
					continue next
				}
			}
			n++
		}
	}
	return n
}
