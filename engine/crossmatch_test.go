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
	"github.com/ax-sched/ax/store"
)

// crossPipelines: billing runs only when triggered; orders.report waits on
// it by the default rule (its own schedule interval), ledger's tasks by
// exact, latest and exact a day back.
var crossPipelines = []string{
	"pipeline: billing\ntimezone: UTC\ntasks:\n  - {name: load, function: record}\n",
	"pipeline: orders\ntimezone: UTC\nschedule: \"0 2 * * *\"\ndefaults: {function: record}\ntasks:\n  - {name: report, depends_on: [billing.load]}\n",
	"pipeline: ledger\ntimezone: UTC\nschedule: \"0 2 * * *\"\ndefaults: {function: record}\ntasks:\n" +
		"  - {name: ex, depends_on: [{task: billing.load, match: exact}]}\n" +
		"  - {name: la, depends_on: [{task: billing.load, match: latest}]}\n" +
		"  - {name: back, depends_on: [{task: billing.load, match: exact, offset: -1d}]}\n",
}

func utcAt(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// ran lists "task@logical" of the executions recorded, sorted.
func (e *env) ran() []string {
	var got []string
	for _, c := range e.rec.snapshot() {
		got = append(got, c.task+"@"+c.logical.Format(time.RFC3339))
	}
	slices.Sort(got)
	return got
}

// TestCrossMatchNeverAnOlderInterval: with billing's only run on 12-05, a
// run of orders for 12-06 waits (it ran at once on the 12-05 run: "the
// latest at or before"), its reason and ax explain name the interval it
// waits for, and a billing run inside it releases it, named as matched.
// exact waits for the same time, latest takes the older run, and an offset
// of -1d matches the day before exactly.
func TestCrossMatchNeverAnOlderInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := setup(t, Config{}, nil, crossPipelines...)
		trigger := func(target, at string) {
			t.Helper()
			if _, err := e.do(Trigger{Target: target, At: utcAt(t, at)}); err != nil {
				t.Fatalf("trigger %s --at %s: %v", target, at, err)
			}
			sleep(2 * time.Second)
		}
		instance := func(task string) axtype.Instance {
			t.Helper()
			ins := e.instances(store.InstanceFilter{TaskID: task})
			if len(ins) != 1 {
				t.Fatalf("%s: %d instances, want 1", task, len(ins))
			}
			return ins[0]
		}
		trigger("billing", "1999-12-05T02:00:00Z")
		trigger("orders", "1999-12-06T02:00:00Z")
		trigger("ledger", "1999-12-06T02:00:00Z")
		sleep(30 * time.Second) // a top-up re-reads the waits on other pipelines
		want := []string{"billing.load@1999-12-05T02:00:00Z", "ledger.back@1999-12-06T02:00:00Z", "ledger.la@1999-12-06T02:00:00Z"}
		if got := e.ran(); !slices.Equal(got, want) {
			t.Errorf("with billing's 12-05 run only, ran\n %v\nwant %v", got, want)
		}
		report := instance("orders.report")
		wantWhy := "waiting for upstream billing.load (waits for a run in (1999-12-05T02:00:00Z, 1999-12-06T02:00:00Z])"
		if report.State != axtype.Waiting || !strings.HasPrefix(report.Reason, wantWhy) {
			t.Errorf("orders.report: %s %q, want WAITING %q", report.State, report.Reason, wantWhy)
		}
		if ex := instance("ledger.ex"); ex.State != axtype.Waiting || !strings.Contains(ex.Reason, "billing.load (waits for the run of 1999-12-06T02:00:00Z)") {
			t.Errorf("ledger.ex: %s %q, want it waiting for the run of 12-06 02:00", ex.State, ex.Reason)
		}
		x, err := e.eng.ExplainUTC(context.Background(), "orders.report")
		if err != nil {
			t.Fatal(err)
		}
		if f := fmt.Sprintf("%+v", x.Findings); !strings.Contains(f, "Check:cross Blocks:true Detail:billing.load: no run yet: waits for a run in (1999-12-05T02:00:00Z, 1999-12-06T02:00:00Z]") {
			t.Errorf("explain orders.report: %s", f)
		}
		// ax status and the runs API judge the wait now, by the same window
		// (the run's schedule interval in its zone), not a day's midnight.
		waits, err := WaitReasons(context.Background(), e.st, e.eng.Graph(), axtype.RunManual,
			e.instances(store.InstanceFilter{RunID: report.RunID}), time.Now())
		if wantNow := "waiting for upstream billing.load (no run yet: waits for a run in (1999-12-05T02:00:00Z, 1999-12-06T02:00:00Z])"; err != nil || !strings.HasPrefix(waits["orders.report"], wantNow) {
			t.Errorf("waiting reason of orders.report judged now: %q (%v), want %q", waits["orders.report"], err, wantNow)
		}

		trigger("billing", "1999-12-06T01:00:00Z") // inside the interval: report runs; exact still waits
		if got := e.ran(); !slices.Contains(got, "orders.report@1999-12-06T02:00:00Z") || slices.Contains(got, "ledger.ex@1999-12-06T02:00:00Z") {
			t.Errorf("after billing's 12-06 01:00 run, ran %v; want orders.report and not ledger.ex", got)
		}
		trigger("billing", "1999-12-06T02:00:00Z")
		if got := e.ran(); !slices.Contains(got, "ledger.ex@1999-12-06T02:00:00Z") {
			t.Errorf("after billing's 12-06 02:00 run, ran %v; want ledger.ex", got)
		}
		x, err = e.eng.ExplainUTC(context.Background(), "orders.report")
		if err != nil {
			t.Fatal(err)
		}
		if f := fmt.Sprintf("%+v", x.Findings); !strings.Contains(f, "Check:cross Blocks:false Detail:released on billing.load: matched run 4 of 1999-12-06T01:00:00Z") {
			t.Errorf("explain orders.report once it ran: %s", f)
		}
		e.stop()
	})
}

// TestBackfillWaitCross: a backfill counted other pipelines' tasks as done,
// with no way to say otherwise. With WaitCross its runs wait for them by
// the same rule as scheduled runs, and its plan lists what they wait for;
// without it they still count as done.
func TestBackfillWaitCross(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := setup(t, Config{}, nil, crossPipelines[0], crossPipelines[1])
		if _, err := e.do(Trigger{Target: "billing", At: utcAt(t, "1999-12-04T02:00:00Z")}); err != nil {
			t.Fatal(err)
		}
		sleep(2 * time.Second)
		p := BackfillParams{Pipeline: "orders", From: utcAt(t, "1999-12-04T00:00:00Z"), To: utcAt(t, "1999-12-05T23:59:59Z"), MaxActiveRuns: 2, WaitCross: true}
		spec, err := PlanBackfill(e.eng.sched.g, p)
		if err != nil {
			t.Fatal(err)
		}
		wantWaits := "[{1999-12-04 02:00:00 +0000 UTC report billing.load a run in (1999-12-03T02:00:00Z, 1999-12-04T02:00:00Z]} " +
			"{1999-12-05 02:00:00 +0000 UTC report billing.load a run in (1999-12-04T02:00:00Z, 1999-12-05T02:00:00Z]}]"
		if got := fmt.Sprint(spec.Waits); got != wantWaits {
			t.Errorf("plan waits\n got %s\nwant %s", got, wantWaits)
		}
		e.startBackfill(p)
		sleep(40 * time.Second)
		want := []string{"billing.load@1999-12-04T02:00:00Z", "orders.report@1999-12-04T02:00:00Z"}
		if got := e.ran(); !slices.Equal(got, want) {
			t.Errorf("backfill --wait-cross ran\n %v\nwant %v (12-05 waits: billing has no run in its interval)", got, want)
		}
		ins := e.instances(store.InstanceFilter{TaskID: "orders.report", LogicalFrom: utcAt(t, "1999-12-05T02:00:00Z")})
		if len(ins) != 1 || ins[0].State != axtype.Waiting || !strings.Contains(ins[0].Reason, "billing.load (waits for a run in (1999-12-04T02:00:00Z, 1999-12-05T02:00:00Z])") {
			t.Errorf("report of 12-05: %+v", ins)
		}
		p.WaitCross, p.From, p.To = false, utcAt(t, "1999-12-06T00:00:00Z"), utcAt(t, "1999-12-06T23:59:59Z")
		if spec, err := PlanBackfill(e.eng.sched.g, p); err != nil || spec.Waits != nil {
			t.Fatalf("plan without WaitCross: %v, waits %v", err, spec.Waits)
		}
		e.startBackfill(p)
		sleep(40 * time.Second)
		e.stop()
		if got := e.ran(); !slices.Contains(got, "orders.report@1999-12-06T02:00:00Z") {
			t.Errorf("a backfill without WaitCross waited for billing: ran %v", got)
		}
	})
}
