package engine

import (
	"context"
	"errors"
	"strings"
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
		if c := e.eng.dispatcher.brk.TaskConfig("br.tuned"); c.Window != time.Minute || c.MinSamples != 3 || c.Threshold != 0.6 {
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
		if f := e.eng.dispatcher.brk.Factor("br.plain"); f != 1 {
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
// dispatches a tenth, rounded up, of what it did in the window before it
// opened (R17; here 1 a minute), and still does after its
// process lost the lease to another and took it back (a new term). The
// breakers are kept across terms, but a new term's dispatcher started with
// no reduced rates: the open breaker's task ran at full rate, and, failing
// on, never closed its breaker nor cut its rate again.
func TestBreakerRateCutOutlivesARetakenLease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := hotBreaker(t)
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
		if f := e.eng.dispatcher.brk.Factor("br.hot"); f >= 1 {
			t.Fatalf("br.hot's breaker closed (factor %v): the test needs it open across the retake", f)
		}
		t1 := time.Now()
		sleep(time.Minute)
		after := starts(t1, time.Now())
		e.stop()
		// 3 dispatches in the minute before it opened: 1 a minute while open
		if before > 1 || after > 1 {
			t.Errorf("br.hot started %d attempts in the minute before the retake and %d in the minute after; want at most 1 each (a tenth of 3, rounded up, breaker open)", before, after)
		}
		if before == 0 || after == 0 {
			t.Errorf("br.hot started %d and %d attempts: throttled, not stopped", before, after)
		}
	})
}

// TestBreakerCutsTheTasksOwnRate: an open breaker cuts a task to a tenth
// (rounded up) of the dispatches it made in the window before it opened,
// however slowly it fires: a task every 2 s that always fails opened its
// breaker after 10 dispatches in the window, so it may dispatch once in
// the next five minutes. Fires beyond the cut follow the overlap policy:
// skip fails them with the reason, wait keeps them queued. ax explain gives
// the numbers.
func TestBreakerCutsTheTasksOwnRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fail := func(context.Context, runner.Attempt) error { return errors.New("always fails") }
		e := setup(t, Config{}, map[string]func(context.Context, runner.Attempt) error{"brk.bad": fail, "brk.waits": fail}, `pipeline: brk
timezone: UTC
schedule: "@every 2s"
tasks:
  - {name: bad, function: record}
  - {name: waits, function: record, overlap: wait}
`)
		sleep(time.Minute)
		x, err := e.eng.Explain(context.Background(), "brk.bad")
		if err != nil {
			t.Fatal(err)
		}
		found := ""
		for _, f := range x.Findings {
			if f.Check == "breaker" {
				found = f.Detail
			}
		}
		if !strings.Contains(found, "breaker open: 1 dispatch(es) allowed per 5m0s, was 10") {
			t.Errorf("explain's breaker finding %q; want the cut with its numbers", found)
		}
		sleep(10 * time.Minute)
		e.stop()
		for _, task := range []string{"brk.bad", "brk.waits"} {
			opened := e.actionsOf(task, AlertBreakerOpen)
			if len(opened) != 1 {
				t.Fatalf("%s: %d breaker_open alerts, want 1", task, len(opened))
			}
			at := opened[0].At
			starts := e.dispatchesOf(task)
			before, after, later := 0, 0, 0
			for _, s := range starts {
				switch {
				case s.After(at.Add(-5*time.Minute)) && !s.After(at):
					before++
				case s.After(at) && !s.After(at.Add(5*time.Minute)):
					after++
				case s.After(at.Add(5*time.Minute)) && !s.After(at.Add(10*time.Minute)):
					later++
				}
			}
			if before != 10 || after != 1 || later != 1 {
				t.Errorf("%s dispatched %d times in the window before its breaker opened, %d and %d in the two windows after; want 10, then 1 and 1 (a tenth, rounded up)",
					task, before, after, later)
			}
		}
		skipped := e.instances(store.InstanceFilter{TaskID: "brk.bad", States: []axtype.State{axtype.Failed}, Limit: 1 << 20})
		cut := 0
		for _, in := range skipped {
			if strings.Contains(in.Error, "breaker open") {
				cut++
			}
		}
		if cut < 100 {
			t.Errorf("brk.bad: %d fires skipped by the cut, want every fire beyond it (overlap: skip)", cut)
		}
		due := 0
		for _, in := range e.instances(store.InstanceFilter{TaskID: "brk.waits", States: []axtype.State{axtype.Scheduled}, Limit: 1 << 20}) {
			if in.NextFireAt.Before(time.Now().Add(-time.Minute)) {
				due++
			}
		}
		if n := due; n < 100 {
			t.Errorf("brk.waits: %d fires queued behind the cut, want every fire beyond it (overlap: wait)", n)
		}
	})
}

// actionsOf returns task's actions of kind, oldest first.
func (e *env) actionsOf(task, kind string) []store.Action {
	e.t.Helper()
	a, err := e.st.Actions(context.Background(), store.LogFilter{TaskID: task, Action: kind, Limit: 1 << 20})
	if err != nil {
		e.t.Fatal(err)
	}
	return a
}

// dispatchesOf returns when task's attempts were dispatched (moved to RUNNING).
func (e *env) dispatchesOf(task string) []time.Time {
	e.t.Helper()
	hs, err := e.st.History(context.Background(), store.LogFilter{TaskID: task, Limit: 1 << 20})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []time.Time
	for _, h := range hs {
		if h.To == axtype.Running {
			out = append(out, h.At)
		}
	}
	return out
}

// TestBreakerCutMeasuresDispatchesMade: the cut of an open breaker is a
// tenth of the dispatches the task made in the window before, not of those
// planned: a dispatch whose transaction failed (the database away for
// every other commit) was counted all the same, and the task was allowed
// more than a tenth of what it made (the simulator's seed 1279: 15
// dispatches after 139, against a cut of 14).
func TestBreakerCutMeasuresDispatchesMade(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu     sync.Mutex
			opened []Alert
		)
		sink := func(a Alert) {
			if a.Kind == AlertBreakerOpen {
				mu.Lock()
				opened = append(opened, a)
				mu.Unlock()
			}
		}
		fail := func(context.Context, runner.Attempt) error { return errors.New("always fails") }
		e := setup(t, Config{OnAlert: sink}, map[string]func(context.Context, runner.Attempt) error{"br.hot": fail}, `pipeline: br
timezone: UTC
schedule: "@every 1s"
overlap: allow
tasks:
  - {name: hot, function: record, breaker: {window: 1m, min_outcomes: 40, ratio: 0.5}}
`)
		var n sync.Mutex
		commits := 0
		store.SetFault(e.st, func(what string) error {
			n.Lock()
			defer n.Unlock()
			if what != "transition batch" {
				return nil
			}
			commits++
			if commits%2 == 0 {
				return errors.New("the database is away")
			}
			return nil
		})
		sleep(2 * time.Minute)
		mu.Lock()
		if len(opened) == 0 {
			mu.Unlock()
			t.Fatal("br.hot's breaker never opened: the test needs it open")
		}
		at := opened[0].At
		mu.Unlock()
		store.SetFault(e.st, nil)
		cut, ok := e.eng.dispatcher.brk.CutOf("br.hot", time.Now())
		e.stop()
		if !ok {
			t.Fatal("br.hot's breaker closed again: the test needs it open")
		}
		acts, err := e.st.Actions(context.Background(), store.LogFilter{TaskID: "br.hot", Action: "dispatch", Limit: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		made := 0
		for _, a := range acts {
			if a.At.After(at.Add(-time.Minute)) && !a.At.After(at) {
				made++
			}
		}
		if made == 0 || cut.Was > made {
			t.Errorf("breaker open at %s measured %d dispatches in the minute before; %d were made (recorded)", at.Format("15:04:05"), cut.Was, made)
		}
	})
}

// TestBreakerKeptAcrossTermsIsSaidAgain: a process that leads again keeps
// its open breakers (they live in its memory), and says so in the action
// log at the start of its new term: the log's last word on the task is the
// cut in force. Another primary may have opened and closed its own
// breaker for the task meanwhile; the log then said closed while the
// returning process cut the task (the simulator's seed 1260, I4: fires
// held by a cut the checks could not see).
func TestBreakerKeptAcrossTermsIsSaidAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := hotBreaker(t)
		// Another process takes the lease for 20 s, and writes that the
		// task's breaker closed; then this one takes it again.
		if _, err := e.st.DB().Exec("UPDATE leases SET holder = 'intruder', epoch = 999, expires_at = ? WHERE name = ?",
			time.Now().Add(20*time.Second).UnixMilli(), store.LeaseName); err != nil {
			t.Fatal(err)
		}
		if err := e.st.AppendAction(context.Background(), store.Action{At: time.Now(), Actor: Actor, Action: AlertBreakerClosed, Pipeline: "br", TaskID: "br.hot",
			Reason: "the intruder's own breaker closed"}); err != nil {
			t.Fatal(err)
		}
		sleep(45 * time.Second)
		e.stop()
		if l, _ := e.st.GetLease(context.Background(), ""); l.Epoch <= 999 {
			t.Fatalf("lease %+v: the test needs it taken back", l)
		}
		var last store.Action
		for _, kind := range []string{AlertBreakerOpen, AlertBreakerClosed} {
			as, err := e.st.Actions(context.Background(), store.LogFilter{TaskID: "br.hot", Action: kind, Limit: 1 << 20})
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range as {
				if a.ID > last.ID {
					last = a
				}
			}
		}
		if last.Action != AlertBreakerOpen || !strings.Contains(last.Reason+last.Detail, "last term") {
			t.Errorf("the action log's last word on br.hot's breaker after the retake is %s (%q %q); want breaker_open, said again by the returning process",
				last.Action, last.Reason, last.Detail)
		}
	})
}

// hotBreaker starts an engine whose task br.hot fires every second and
// always fails, and returns it 20 s later with br.hot's breaker open.
func hotBreaker(t *testing.T) *env {
	t.Helper()
	fail := func(context.Context, runner.Attempt) error { return errors.New("always fails") }
	e := setup(t, Config{}, map[string]func(context.Context, runner.Attempt) error{"br.hot": fail}, `pipeline: br
timezone: UTC
schedule: "@every 1s"
overlap: allow
tasks:
  - {name: hot, function: record, breaker: {window: 1m, min_outcomes: 3, ratio: 0.5}}
`)
	sleep(20 * time.Second)
	if f := e.eng.dispatcher.brk.Factor("br.hot"); f >= 1 {
		t.Fatalf("br.hot's breaker factor %v after 20 failing fires: the test needs it open", f)
	}
	return e
}
