package engine

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// TestBreakerFromTheFileTripsAcrossWindows: `breaker:` in the file tunes the
// task's breaker, and a task that fails every attempt trips it after
// min_outcomes failures even though they take longer than its window (one
// fire a minute, a one-minute window: never two outcomes in one window).
// Its neighbour, with the server's defaults (10 outcomes), does not trip.
func TestBreakerFromTheFileTripsAcrossWindows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu     sync.Mutex
			alerts []Alert
		)
		sink := func(a Alert) { mu.Lock(); alerts = append(alerts, a); mu.Unlock() }
		fail := func(context.Context, runner.Attempt) error { return errors.New("always fails") }
		e := setup(t, Config{OnAlert: sink}, map[string]func(context.Context, runner.Attempt) error{"br.tuned": fail, "br.plain": fail}, `pipeline: br
timezone: UTC
schedule: "* * * * *"
tasks:
  - {name: tuned, function: record, breaker: {window: 1m, min_outcomes: 3, ratio: 0.6}}
  - {name: plain, function: record}
`)
		if c := e.eng.brk.TaskConfig("br.tuned"); c.Window != time.Minute || c.MinSamples != 3 || c.Threshold != 0.6 {
			t.Fatalf("br.tuned breaker %+v", c)
		}
		sleep(5*time.Minute + 30*time.Second)
		e.stop()
		mu.Lock()
		defer mu.Unlock()
		var opened []string
		for _, a := range alerts {
			if a.Kind == AlertBreakerOpen {
				opened = append(opened, a.Task+" at "+a.At.Format("15:04:05"))
			}
		}
		failed := e.instances(store.InstanceFilter{TaskID: "br.tuned", States: []axtype.State{axtype.Failed}})
		if len(opened) != 1 || len(failed) < 3 || opened[0] != "br.tuned at "+failed[2].EndedAt.Format("15:04:05") {
			t.Errorf("breaker_open alerts %v; want one, for br.tuned at its third failure (%d failures)", opened, len(failed))
		}
		if f := e.eng.brk.Factor("br.plain"); f != 1 {
			t.Errorf("br.plain breaker factor %v: 5 failures are below the default minimum of 10", f)
		}
	})
}

// TestBreakerSeriesGoesWithItsTask: a task removed by a reload while its
// breaker is open loses its ax_breaker_open series (else a rule on
// ax_breaker_open == 1 would fire for ever for a task that is gone).
func TestBreakerSeriesGoesWithItsTask(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		fail := func(context.Context, runner.Attempt) error { return errors.New("always fails") }
		keep := "pipeline: keep\ntimezone: UTC\nschedule: \"@every 1h\"\ntasks:\n  - {name: x, function: record}\n"
		reg := prometheus.NewRegistry()
		e := setup(t, Config{Registerer: reg}, map[string]func(context.Context, runner.Attempt) error{"br.tuned": fail}, `pipeline: br
timezone: UTC
schedule: "* * * * *"
tasks:
  - {name: tuned, function: record, breaker: {window: 1m, min_outcomes: 3, ratio: 0.6}}
`, keep)
		sleep(3*time.Minute + 30*time.Second)
		if v := series(t, reg, "ax_breaker_open", map[string]string{"task": "br.tuned"}).GetGauge().GetValue(); v != 1 {
			t.Fatalf("ax_breaker_open{task=br.tuned} = %v after three failures, want 1", v)
		}
		if _, err := e.eng.Reload(compile(t, keep)); err != nil {
			t.Fatal(err)
		}
		sleep(2 * time.Second)
		e.stop()
		if n := countSeries(t, reg, "ax_breaker_open", map[string]string{"task": "br.tuned"}); n != 0 {
			t.Error("ax_breaker_open{task=br.tuned} still served after br.tuned was removed")
		}
	})
}
