package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// pausedSrc is a pipeline of the group etl: a → b → gate (manual).
const pausedSrc = "pipeline: o\ngroup: etl\ntimezone: UTC\nschedule: \"@yearly\"\ntasks:\n" +
	"  - {name: a, function: record}\n  - {name: b, depends_on: [a], function: record}\n" +
	"  - {name: gate, depends_on: [b], function: record, manual: true}\n"

// count returns how many runs and instances the store holds.
func (e *env) count() (runs, insts int) {
	e.t.Helper()
	rs, err := e.st.RunsPage(context.Background(), store.RunFilter{Limit: 1 << 20})
	if err != nil {
		e.t.Fatal(err)
	}
	return len(rs), len(e.instances(store.InstanceFilter{Limit: 1 << 20}))
}

// A trigger of anything under a pause is refused with the pause's scope and
// reason, and creates nothing; with Hold it creates the run held PAUSED,
// which runs only after the resume.
func TestPauseRefusesTrigger(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := setup(t, Config{}, nil, pausedSrc)
		sleep(time.Second)
		if _, err := e.do(Pause{Scope: store.ScopeGroup, Target: "etl"}, By{Actor: "operator:ann", Reason: "db maintenance"}); err != nil {
			t.Fatal(err)
		}
		runs, insts := e.count()
		for _, tr := range []Trigger{{Target: "o"}, {Target: "o.a"}, {Target: "o.a", Downstream: true}, {Target: "o.gate"}} {
			msg, err := e.do(tr, By{Actor: "operator:bob"})
			var pe *PausedError
			if !errors.As(err, &pe) || !strings.Contains(err.Error(), "group etl paused by operator:ann") ||
				!strings.Contains(err.Error(), "db maintenance") || !strings.Contains(err.Error(), "nothing was created") {
				t.Errorf("trigger %+v under a pause: %q, %v; want it refused naming the pause", tr, msg, err)
			}
		}
		sleep(5 * time.Second)
		if r, i := e.count(); r != runs || i != insts {
			t.Errorf("refused triggers created %d run(s) and %d instance(s)", r-runs, i-insts)
		}
		if n := len(e.rec.snapshot()); n != 0 {
			t.Errorf("%d executions under the pause", n)
		}
		msg, err := e.do(Trigger{Target: "o", Hold: true}, By{Actor: "operator:bob"})
		if err != nil || !strings.Contains(msg, "held PAUSED until") {
			t.Fatalf("held trigger: %q, %v", msg, err)
		}
		sleep(5 * time.Second)
		if got := e.states("o.a", time.Time{}); !strings.HasSuffix(got, ":PAUSED") {
			t.Errorf("held root o.a: %s, want PAUSED", got)
		}
		if n := len(e.rec.snapshot()); n != 0 {
			t.Errorf("%d executions of a held run under the pause", n)
		}
		if _, err := e.do(Resume{Scope: store.ScopeGroup, Target: "etl"}); err != nil {
			t.Fatal(err)
		}
		sleep(5 * time.Second)
		e.stop()
		if got := e.states("o.b", time.Time{}); !strings.HasSuffix(got, ":SUCCESS") {
			t.Errorf("after the resume o.b: %s, want SUCCESS", got)
		}
	})
}

// The approval of a gate, a rerun and the retries of a manual run do not
// release work under a pause: the first two are refused, the retries wait
// PAUSED.
func TestPauseHoldsApprovalRerunAndRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		failB := true
		fns := map[string]func(context.Context, runner.Attempt) error{
			"o.b": func(context.Context, runner.Attempt) error {
				if failB {
					return errors.New("boom")
				}
				return nil
			},
		}
		e := setup(t, Config{}, fns, pausedSrc)
		sleep(time.Second)
		if _, err := e.do(Trigger{Target: "o"}); err != nil {
			t.Fatal(err)
		}
		sleep(5 * time.Second) // a succeeds, b fails, the gate fails behind it
		failed := e.instances(store.InstanceFilter{TaskID: "o.b", States: []axtype.State{axtype.Failed}})
		if len(failed) != 1 {
			t.Fatalf("o.b: %+v", failed)
		}
		if _, err := e.do(Pause{Scope: store.ScopePipeline, Target: "o"}, By{Actor: "operator:ann"}); err != nil {
			t.Fatal(err)
		}
		calls := len(e.rec.snapshot())
		failB = false
		var pe *PausedError
		if msg, err := e.do(Rerun{Instance: failed[0].ID}); !errors.As(err, &pe) || !strings.Contains(err.Error(), "pipeline o paused") {
			t.Errorf("rerun under a pause: %q, %v; want it refused", msg, err)
		}
		if got := e.instances(store.InstanceFilter{TaskID: "o.b"}); len(got) != 1 || got[0].State != axtype.Failed || got[0].Version != failed[0].Version {
			t.Errorf("a refused rerun changed o.b: %+v", got)
		}
		if msg, err := e.do(Rerun{Instance: failed[0].ID, Hold: true}); err != nil || !strings.Contains(msg, "held PAUSED until") {
			t.Errorf("held rerun: %q, %v", msg, err)
		}
		sleep(5 * time.Second)
		if n := len(e.rec.snapshot()); n != calls {
			t.Errorf("%d execution(s) under the pause", n-calls)
		}
		if got := e.instances(store.InstanceFilter{TaskID: "o.b"}); len(got) != 1 || got[0].State != axtype.Paused {
			t.Errorf("held rerun of o.b: %+v, want PAUSED", got)
		}
		if _, err := e.do(Resume{Scope: store.ScopePipeline, Target: "o"}); err != nil {
			t.Fatal(err)
		}
		sleep(5 * time.Second)
		// The gate waits for approval now; approving it under a pause is refused.
		if _, err := e.do(Pause{Scope: store.ScopeTask, Target: "o.gate"}, By{Actor: "operator:ann", Reason: "audit"}); err != nil {
			t.Fatal(err)
		}
		if msg, err := e.do(Trigger{Target: "o.gate"}); !errors.As(err, &pe) || !strings.Contains(err.Error(), "task o.gate paused") {
			t.Errorf("approval under a pause: %q, %v; want it refused", msg, err)
		}
		gate := e.instances(store.InstanceFilter{TaskID: "o.gate"})
		if len(gate) != 1 || gate[0].State != axtype.Waiting || gate[0].ApprovedBy != "" {
			t.Errorf("a refused approval changed the gate: %+v", gate)
		}
		if msg, err := e.do(Trigger{Target: "o.gate", Hold: true}); err != nil || !strings.Contains(msg, "held PAUSED until") {
			t.Errorf("held approval: %q, %v", msg, err)
		}
		sleep(5 * time.Second)
		e.stop()
		if got := e.instances(store.InstanceFilter{TaskID: "o.gate"}); len(got) != 1 || got[0].State != axtype.Paused {
			t.Errorf("held approval of the gate: %+v, want PAUSED", got)
		}
		for _, c := range e.rec.snapshot() {
			if c.task == "o.gate" {
				t.Errorf("the gate ran under its pause")
			}
		}
	})
}

// A manual run's retry waits under a pause that came while its attempt
// ran, as a scheduled run's does.
func TestPauseHoldsManualRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fns := map[string]func(context.Context, runner.Attempt) error{
			"r.a": func(context.Context, runner.Attempt) error { time.Sleep(5 * time.Second); return errors.New("boom") },
		}
		e := setup(t, Config{}, fns, "pipeline: r\ntimezone: UTC\nschedule: \"@yearly\"\ntasks:\n  - {name: a, function: record, retry: {count: 3, interval: 10s}}\n")
		sleep(time.Second)
		if _, err := e.do(Trigger{Target: "r.a"}); err != nil {
			t.Fatal(err)
		}
		sleep(2 * time.Second) // attempt 1 runs until +5 s and fails; its retry is due 10 s later
		if _, err := e.do(Pause{Scope: store.ScopeTask, Target: "r.a"}); err != nil {
			t.Fatal(err)
		}
		sleep(time.Minute)
		e.stop()
		if n := len(e.rec.snapshot()); n != 1 {
			t.Errorf("%d attempts, want 1: the retry ran under the pause", n)
		}
	})
}

// A pause of an unknown scope or target is refused and changes nothing;
// a trigger afterwards runs as before.
func TestPauseUnknownScopeRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := setup(t, Config{}, nil, pausedSrc)
		sleep(time.Second)
		for _, p := range []Pause{{Scope: "galaxy", Target: "etl"}, {Scope: store.ScopeGroup, Target: "nosuch"}} {
			if msg, err := e.do(p); err == nil || !strings.Contains(err.Error(), "galaxy") && !strings.Contains(err.Error(), "no group") {
				t.Errorf("pause %+v: %q, %v; want it refused", p, msg, err)
			}
		}
		if ps, err := e.st.Pauses(context.Background()); err != nil || len(ps) != 0 {
			t.Errorf("pauses after refused pauses: %+v, %v", ps, err)
		}
		if r, i := e.count(); r != 0 || i != 0 {
			t.Errorf("refused pauses left %d run(s), %d instance(s)", r, i)
		}
		if _, err := e.do(Trigger{Target: "o.a"}); err != nil {
			t.Errorf("trigger after refused pauses: %v", err)
		}
		sleep(2 * time.Second)
		e.stop()
		if n := len(e.rec.snapshot()); n != 1 {
			t.Errorf("%d executions, want 1", n)
		}
	})
}

// A backfill of tasks under a pause is refused and stores nothing; with
// Hold it is stored and its instances wait PAUSED until the resume.
func TestPauseRefusesBackfill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		e := setup(t, Config{}, nil, "pipeline: h\ngroup: etl\ntimezone: UTC\nschedule: \"@hourly\"\ntasks:\n  - {name: a, function: record}\n")
		sleep(3*time.Hour + time.Minute)
		if _, err := e.do(Pause{Scope: store.ScopeGroup, Target: "etl"}, By{Actor: "operator:ann", Reason: "audit"}); err != nil {
			t.Fatal(err)
		}
		calls := len(e.rec.snapshot())
		spec, err := PlanBackfill(e.eng.sched.g, BackfillParams{Pipeline: "h", From: start, To: start.Add(3 * time.Hour), Rerun: RerunAll})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		id, err := CreateBackfill(ctx, e.st, e.eng.sched.g, spec, "operator:bob", time.Now())
		var pe *PausedError
		if !errors.As(err, &pe) || !strings.Contains(err.Error(), "h.a is under a pause (group etl paused by operator:ann") {
			t.Errorf("backfill under a pause: %d, %v; want it refused", id, err)
		}
		if bs, err := e.st.Backfills(ctx, 0); err != nil || len(bs) != 0 {
			t.Errorf("a refused backfill stored %+v, %v", bs, err)
		}
		spec.Hold = true
		if _, err := CreateBackfill(ctx, e.st, e.eng.sched.g, spec, "operator:bob", time.Now()); err != nil {
			t.Fatalf("held backfill: %v", err)
		}
		sleep(time.Minute)
		e.stop()
		if n := len(e.rec.snapshot()); n != calls {
			t.Errorf("%d execution(s) under the pause", n-calls)
		}
		held := e.instances(store.InstanceFilter{TaskID: "h.a", States: []axtype.State{axtype.Paused}, Limit: 100})
		if len(held) == 0 {
			t.Errorf("held backfill: no instance PAUSED")
		}
	})
}
