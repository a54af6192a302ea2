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

// TestBreakerRateCutOutlivesARetakenLease: a task whose breaker is open
// dispatches at a tenth of its base rate (R17), and still does after its
// process lost the lease to another and took it back (a new term). The
// breakers are kept across terms, but a new term's dispatcher started with
// no reduced rates: the open breaker's task ran at full rate, and, failing
// on, never closed its breaker nor cut its rate again.
func TestBreakerRateCutOutlivesARetakenLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fail := func(context.Context, runner.Attempt) error { return errors.New("always fails") }
		e := setup(t, Config{BreakerBaseRate: 1}, map[string]func(context.Context, runner.Attempt) error{"br.hot": fail}, `pipeline: br
timezone: UTC
schedule: "@every 1s"
overlap: allow
tasks:
  - {name: hot, function: record, breaker: {window: 1m, min_outcomes: 3, ratio: 0.5}}
`)
		sleep(20 * time.Second)
		if f := e.eng.brk.Factor("br.hot"); f >= 1 {
			t.Fatalf("br.hot's breaker factor %v after 20 failing fires: the test needs it open", f)
		}
		starts := func(from, to time.Time) int {
			hs, err := e.st.History(context.Background(), store.LogFilter{TaskID: "br.hot", Limit: 1 << 20})
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, h := range hs {
				if h.To == axtype.Running && !h.At.Before(from) && h.At.Before(to) {
					n++
				}
			}
			return n
		}
		t0 := time.Now()
		sleep(time.Minute)
		before := starts(t0, time.Now())
		// Another process takes the lease for 20 s; then this one takes it
		// again, for a new term.
		if _, err := e.st.DB().Exec("UPDATE leases SET holder = 'intruder', epoch = 999, expires_at = ? WHERE name = ?",
			time.Now().Add(20*time.Second).UnixMilli(), store.LeaseName); err != nil {
			t.Fatal(err)
		}
		sleep(45 * time.Second)
		if l, _ := e.st.GetLease(context.Background(), ""); l.Epoch <= 999 || l.Holder == "intruder" {
			t.Fatalf("lease %+v: the test needs it taken back", l)
		}
		if f := e.eng.brk.Factor("br.hot"); f >= 1 {
			t.Fatalf("br.hot's breaker closed (factor %v): the test needs it open across the retake", f)
		}
		t1 := time.Now()
		sleep(time.Minute)
		after := starts(t1, time.Now())
		e.stop()
		// 0.1 a second for a minute, and the bucket's burst of one
		if before > 8 || after > 8 {
			t.Errorf("br.hot started %d attempts in the minute before the retake and %d in the minute after; want at most 8 each (a tenth of 1/s, breaker open)", before, after)
		}
		if before == 0 || after == 0 {
			t.Errorf("br.hot started %d and %d attempts: throttled, not stopped", before, after)
		}
	})
}
