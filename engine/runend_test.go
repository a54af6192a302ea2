package engine

import (
	"context"
	"errors"
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

// Tests of R40, "runs always end": upstream failure propagates, manual gates
// wait for their upstreams, cross-pipeline waits have a limit.

// byTask returns the instances of run as task -> instance.
func (e *env) byTask(run int64) map[string]axtype.Instance {
	e.t.Helper()
	out := map[string]axtype.Instance{}
	for _, in := range e.instances(store.InstanceFilter{RunID: run}) {
		out[in.TaskID] = in
	}
	return out
}

// callsOf returns when task was executed, relative to start.
func (e *env) callsOf(task string, start time.Time) []time.Duration {
	var out []time.Duration
	for _, c := range e.rec.snapshot() {
		if c.task == task {
			out = append(out, c.at.Sub(start))
		}
	}
	return out
}

const diamondD = `pipeline: d
timezone: UTC
schedule: "@every 1h"
defaults: {function: record}
tasks:
  - {name: a}
  - {name: b, depends_on: [a]}
  - {name: c, depends_on: [a]}
  - {name: d, depends_on: [b, c]}
`

// Defect 3: a FAILED upstream left its downstream WAITING for ever.
func TestFailedUpstreamFailsDiamondInOneTransaction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fns := map[string]func(context.Context, runner.Attempt) error{
			"d.a": func(context.Context, runner.Attempt) error { return errors.New("disk full") },
		}
		e := setup(t, Config{}, fns, diamondD)
		sleep(time.Hour + 2*time.Second)
		e.stop()
		a := e.instances(store.InstanceFilter{TaskID: "d.a"})
		if len(a) != 1 || a[0].State != axtype.Failed {
			t.Fatalf("a: %+v", a)
		}
		run := e.byTask(a[0].RunID)
		for _, id := range []string{"d.b", "d.c", "d.d"} {
			in := run[id]
			if in.State != axtype.Failed || in.Attempt != 0 {
				t.Errorf("%s: %s attempt %d, want FAILED attempt 0", id, in.State, in.Attempt)
			}
			if got := transitionsOf(e, in.ID); got != "WAITING>FAILED" {
				t.Errorf("%s history %s", id, got)
			}
		}
		// The reason names the upstream that failed: a for b and c; b (or c) for d.
		if !strings.Contains(run["d.b"].Error, "upstream d.a failed") || !strings.Contains(run["d.c"].Error, "upstream d.a failed") {
			t.Errorf("b: %q, c: %q", run["d.b"].Error, run["d.c"].Error)
		}
		if !strings.Contains(run["d.d"].Error, "upstream d.b failed") && !strings.Contains(run["d.d"].Error, "upstream d.c failed") {
			t.Errorf("d: %q", run["d.d"].Error)
		}
		// One transaction: a's result and every propagated failure share one instant.
		var at []time.Time
		for _, id := range []string{"d.a", "d.b", "d.c", "d.d"} {
			h, _ := e.st.History(context.Background(), store.LogFilter{InstanceID: run[id].ID})
			at = append(at, h[len(h)-1].At)
		}
		for _, x := range at[1:] {
			if !x.Equal(at[0]) {
				t.Errorf("propagation not with the result: %v", at)
			}
		}
		if len(e.rec.snapshot()) != 1 {
			t.Errorf("calls %v: only a may run", e.rec.snapshot())
		}
	})
}

// gateBehindBuild is a pipeline firing every hour whose manual gate approve
// waits for build, which takes 10 s.
func gateBehindBuild(t *testing.T) *env {
	fns := map[string]func(context.Context, runner.Attempt) error{
		"g.build": func(context.Context, runner.Attempt) error { time.Sleep(10 * time.Second); return nil },
	}
	return setup(t, Config{}, fns, `pipeline: g
timezone: UTC
schedule: "@every 1h"
defaults: {function: record}
tasks:
  - {name: build}
  - {name: approve, depends_on: [build], manual: true}
`)
}

// Defect 1: a released gate started at once while its upstream still ran.
func TestReleasedGateWaitsForRunningUpstream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		e := gateBehindBuild(t)
		sleep(time.Hour + 2*time.Second) // build runs until +1h10s
		msg, err := e.do(Trigger{Target: "g.approve"}, By{Actor: "operator:ann", Reason: "looks good"})
		if err != nil {
			t.Error(err)
		}
		sleep(5 * time.Second)
		if got := e.callsOf("g.approve", start); len(got) != 0 {
			t.Errorf("approve ran at %v while build still ran (%s)", got, msg)
		}
		sleep(10 * time.Second)
		e.stop()
		if got := e.callsOf("g.approve", start); len(got) != 1 || got[0] != time.Hour+10*time.Second {
			t.Errorf("approve ran at %v, want once at 1h0m10s, when build succeeded", got)
		}
	})
}

// Outside finding F12: a second approval of a gate already approved and
// waiting for its upstream found no instance awaiting approval and started
// a run of the gate alone, which ran at once, ahead of the upstream. The
// second approval is answered "already approved" and changes nothing.
func TestSecondApprovalStartsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		e := gateBehindBuild(t)
		sleep(time.Hour + 2*time.Second) // build runs until +1h10s
		if _, err := e.do(Trigger{Target: "g.approve"}, By{Actor: "operator:ann"}); err != nil {
			t.Error(err)
		}
		before := e.instances(store.InstanceFilter{Pipeline: "g"})
		msg, err := e.do(Trigger{Target: "g.approve"}, By{Actor: "operator:bob"})
		if err != nil || !strings.Contains(msg, "already approved by operator:ann") || !strings.Contains(msg, "runs when its upstreams have succeeded") {
			t.Errorf("second approval: %q, %v; want it answered as already approved", msg, err)
		}
		if after := e.instances(store.InstanceFilter{Pipeline: "g"}); len(after) != len(before) {
			t.Errorf("the second approval made instances: %d, were %d", len(after), len(before))
		}
		// Approved, at a logical time given, is the same answer.
		gate := e.instances(store.InstanceFilter{TaskID: "g.approve"})
		if len(gate) != 1 {
			t.Errorf("gate instances %+v, want one", gate)
		} else if msg, err := e.do(Trigger{Target: "g.approve", At: gate[0].LogicalTime}, By{Actor: "operator:bob"}); err != nil || !strings.Contains(msg, "already approved") {
			t.Errorf("second approval at %s: %q, %v", gate[0].LogicalTime, msg, err)
		}
		sleep(15 * time.Second)
		e.stop()
		if got := e.callsOf("g.approve", start); len(got) != 1 || got[0] != time.Hour+10*time.Second {
			t.Errorf("approve ran at %v, want once at 1h0m10s, when build succeeded", got)
		}
		if in := e.instances(store.InstanceFilter{TaskID: "g.approve"}); len(in) != 1 || in[0].ApprovedBy != "operator:ann" {
			t.Errorf("gate instances %+v, want one, approved by operator:ann", in)
		}
	})
}

// Defect 2: triggering a manual task with no waiting instance made a run in
// which it waited for approval again.
func TestTriggerIsTheApproval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		e := setup(t, Config{}, nil, "pipeline: m\ntimezone: UTC\ntasks:\n  - {name: publish, manual: true, function: record}\n")
		if _, err := e.do(Trigger{Target: "m.publish"}, By{Actor: "operator:ann"}); err != nil {
			t.Error(err)
		}
		sleep(time.Second)
		e.stop()
		if got := e.callsOf("m.publish", start); len(got) != 1 || got[0] != 0 {
			t.Errorf("publish ran at %v, want once at once", got)
		}
	})
}

// Defect 5: a run waiting on another pipeline's task that never runs waited
// for ever, silently. The cross-pipeline limit is 24 h by default.
func TestCrossPipelineWaitFailsAtItsDeadline(t *testing.T) {
	if testing.Short() {
		// About 100 s under -race: 25 simulated hours of an idle engine.
		// The race pass has the same deadline path in
		// TestWaitTimeoutFromDefaults (30 minutes); this runs in the
		// non-race pass (go test ./... without -short).
		t.Skip("simulates 25 hours; runs without -short")
	}
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		billing := "pipeline: billing\ntimezone: UTC\ntasks:\n  - {name: settle, function: record}\n" // never scheduled
		orders := "pipeline: orders\ntimezone: UTC\nschedule: \"0 1 * * *\"\ndefaults: {function: record}\ntasks:\n  - {name: sync}\n  - {name: report, depends_on: [sync, billing.settle]}\n  - {name: mail, depends_on: [report]}\n"
		e := setup(t, Config{}, nil, billing, orders)
		deadline := start.Add(time.Hour + 24*time.Hour)
		sleep(deadline.Sub(time.Now()) - time.Second)
		first := func(task string) axtype.Instance {
			in := e.instances(store.InstanceFilter{TaskID: task, LogicalTo: start.Add(time.Hour)})
			if len(in) != 1 {
				t.Errorf("%s: %+v", task, in)
				return axtype.Instance{}
			}
			return in[0]
		}
		if in := first("orders.report"); in.State != axtype.Waiting {
			t.Errorf("a second before its deadline report is %s", in.State)
		}
		sleep(2 * time.Second)
		e.stop()
		r := first("orders.report")
		if r.State != axtype.Failed || r.Error != "upstream billing.settle not done after 24h" {
			t.Errorf("report: %s %q", r.State, r.Error)
		}
		if !r.EndedAt.Equal(deadline) {
			t.Errorf("failed at %s, want at its deadline %s", r.EndedAt.Sub(start), deadline.Sub(start))
		}
		if m := first("orders.mail"); m.State != axtype.Failed || !strings.Contains(m.Error, "upstream orders.report failed") {
			t.Errorf("mail: %s %q", m.State, m.Error)
		}
	})
}

// statusOf sums up a run by the engine's own rule.
func (e *env) statusOf(run int64) RunStatus {
	return StatusOf(e.instances(store.InstanceFilter{RunID: run}), func(task string) bool {
		t := e.eng.sched.g.Task(task)
		return t != nil && t.Manual
	})
}

func TestRerunBringsNeverRunDownstreamBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		broken := true
		fns := map[string]func(context.Context, runner.Attempt) error{
			"d.a": func(context.Context, runner.Attempt) error {
				if broken {
					return errors.New("disk full")
				}
				return nil
			},
		}
		e := setup(t, Config{}, fns, diamondD)
		sleep(time.Hour + 2*time.Second)
		a := e.instances(store.InstanceFilter{TaskID: "d.a"})[0]
		if st := e.statusOf(a.RunID); !st.Over || st.State != RunFailed || fmt.Sprint(st.Failed) != "[d.a d.b d.c d.d]" {
			t.Errorf("after the failure: %+v", st)
		}
		broken = false
		msg, err := e.do(Rerun{Run: a.RunID}, By{Actor: "operator:ann", Reason: "disk cleaned"})
		if err != nil {
			t.Error(err)
		}
		sleep(2 * time.Second)
		e.stop()
		if !strings.Contains(msg, "rerunning 1 instance(s): 1") || !strings.Contains(msg, "3 that never ran wait for their upstreams again") {
			t.Errorf("rerun said %q", msg)
		}
		// a runs again, then b and c, then d: never a downstream before its upstream.
		var got []string
		for _, c := range e.rec.snapshot() {
			got = append(got, fmt.Sprintf("%s+%s", c.task, c.at.Sub(start)))
		}
		slices.Sort(got)
		if want := "[d.a+1h0m0s d.a+1h0m2s d.b+1h0m2s d.c+1h0m2s d.d+1h0m2s]"; fmt.Sprint(got) != want {
			t.Errorf("calls %v, want %s", got, want)
		}
		calls := e.rec.snapshot()
		pos := map[string]int{}
		for i, c := range calls {
			pos[c.task] = i
		}
		if !(pos["d.a"] < pos["d.b"] && pos["d.a"] < pos["d.c"] && pos["d.b"] < pos["d.d"] && pos["d.c"] < pos["d.d"]) {
			t.Errorf("order %v", calls)
		}
		run := e.byTask(a.RunID)
		if got := transitionsOf(e, run["d.d"].ID); got != "WAITING>FAILED>WAITING>SCHEDULED>RUNNING>SUCCESS" {
			t.Errorf("d history %s", got)
		}
		if st := e.statusOf(a.RunID); !st.Over || st.State != RunSuccess {
			t.Errorf("after the rerun: %+v", st)
		}
	})
}

func TestCrossPipelineFailurePropagatesAndRerunBringsItBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		broken := true
		fns := map[string]func(context.Context, runner.Attempt) error{
			"billing.settle": func(context.Context, runner.Attempt) error {
				if broken {
					return errors.New("bank API down")
				}
				return nil
			},
			"orders.sync": func(context.Context, runner.Attempt) error { time.Sleep(5 * time.Second); return nil },
		}
		billing := "pipeline: billing\ntimezone: UTC\nschedule: \"@every 1h\"\ndefaults: {function: record}\ntasks:\n  - {name: settle}\n"
		orders := "pipeline: orders\ntimezone: UTC\nschedule: \"@every 1h\"\ndefaults: {function: record}\ntasks:\n  - {name: sync}\n  - {name: report, depends_on: [sync, billing.settle]}\n  - {name: mail, depends_on: [report]}\n"
		e := setup(t, Config{}, fns, billing, orders)
		sleep(time.Hour + 10*time.Second)
		first := func(task string) axtype.Instance {
			in := e.instances(store.InstanceFilter{TaskID: task})
			if len(in) == 0 {
				return axtype.Instance{}
			}
			return in[0]
		}
		r, m := first("orders.report"), first("orders.mail")
		if r.State != axtype.Failed || r.Error != "upstream billing.settle failed" || r.Attempt != 0 {
			t.Errorf("report: %s %q attempt %d", r.State, r.Error, r.Attempt)
		}
		if m.State != axtype.Failed || m.Error != "upstream orders.report failed" {
			t.Errorf("mail: %s %q", m.State, m.Error)
		}
		broken = false
		if _, err := e.do(Rerun{Target: "billing.settle"}, By{Actor: "operator:ann"}); err != nil {
			t.Error(err)
		}
		sleep(2 * time.Second)
		e.stop()
		if r := first("orders.report"); r.State != axtype.Success {
			t.Errorf("report after the rerun: %s %q", r.State, r.Error)
		}
		if m := first("orders.mail"); m.State != axtype.Success {
			t.Errorf("mail after the rerun: %s %q", m.State, m.Error)
		}
	})
}

// A policy skip fails the downstream of the skipped instance too.
func TestMisfireSkipFailsDownstream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		e := setup(t, Config{}, nil, "pipeline: s\ntimezone: UTC\nschedule: \"@every 1h\"\nmisfire: skip\ndefaults: {function: record}\ntasks:\n  - {name: a}\n  - {name: b, depends_on: [a]}\n")
		if _, err := e.do(Pause{Scope: store.ScopePipeline, Target: "s"}, By{Actor: "operator:ann"}); err != nil {
			t.Error(err)
		}
		sleep(time.Hour + 5*time.Minute)
		if _, err := e.do(Resume{Scope: store.ScopePipeline, Target: "s"}, By{Actor: "operator:ann"}); err != nil {
			t.Error(err)
		}
		sleep(time.Second)
		e.stop()
		a := e.instances(store.InstanceFilter{TaskID: "s.a", LogicalTo: start.Add(time.Hour)})
		b := e.instances(store.InstanceFilter{TaskID: "s.b", LogicalTo: start.Add(time.Hour)})
		if len(a) != 1 || len(b) != 1 || a[0].State != axtype.Failed || !strings.HasPrefix(a[0].Error, "skipped") {
			t.Fatalf("a %+v", a)
		}
		if b[0].State != axtype.Failed || b[0].Error != "upstream s.a was skipped" || b[0].Attempt != 0 {
			t.Errorf("b: %s %q", b[0].State, b[0].Error)
		}
		if len(e.rec.snapshot()) != 0 {
			t.Errorf("calls %v", e.rec.snapshot())
		}
	})
}

const gated = `pipeline: g
timezone: UTC
schedule: "0 2 * * *"
defaults: {function: record}
tasks:
  - {name: build}
  - {name: approve, depends_on: [build], manual: true}
  - {name: publish, depends_on: [approve]}
`

// A backfill never counts a gate nobody approved as done: its run stays
// active, the gate is counted apart, and an approval lets it finish.
func TestBackfillStopsAtGatesUntilApproved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		e := setup(t, Config{}, nil, gated)
		from, to := days(start, 2)
		id := e.startBackfill(BackfillParams{Pipeline: "g", From: from, To: to, MaxActiveRuns: 2})
		sleep(5 * time.Second)
		b := e.backfill(id)
		pr, err := e.st.BackfillProgress(context.Background(), id, []string{"g.approve"})
		if b.State == BackfillDone || b.DoneRuns != 0 || err != nil || pr.Awaiting != 2 || pr.Ended != 2 || pr.Total != 6 {
			t.Errorf("at the gates: %+v, progress %+v %v", b, pr, err)
		}
		for _, day := range []time.Time{from.Add(2 * time.Hour), from.Add(26 * time.Hour)} {
			if msg, err := e.do(Trigger{Target: "g.approve", At: day}, By{Actor: "operator:ann"}); err != nil || !strings.Contains(msg, "it runs now") {
				t.Errorf("approve %s: %q %v", day, msg, err)
			}
		}
		sleep(5 * time.Second)
		e.stop()
		if b := e.backfill(id); b.State != BackfillDone || b.DoneRuns != 2 || b.FailedRuns != 0 {
			t.Errorf("after the approvals: %+v", b)
		}
		if got := len(e.instances(store.InstanceFilter{TaskID: "g.publish", States: []axtype.State{axtype.Success}})); got != 2 {
			t.Errorf("%d publish succeeded, want 2", got)
		}
	})
}

func TestBackfillApproveManualUpFront(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		e := setup(t, Config{}, nil, gated)
		from, to := days(start, 2)
		id := e.startBackfill(BackfillParams{Pipeline: "g", From: from, To: to, MaxActiveRuns: 2, ApproveManual: true})
		sleep(5 * time.Second)
		e.stop()
		if b := e.backfill(id); b.State != BackfillDone || b.DoneRuns != 2 {
			t.Errorf("backfill %+v", b)
		}
		for _, in := range e.instances(store.InstanceFilter{TaskID: "g.approve"}) {
			if in.State != axtype.Success || !strings.Contains(in.ApprovedBy, "--approve-manual, by operator:test") {
				t.Errorf("gate %+v", in)
			}
		}
	})
}

// trigger --at sets the run's logical time; --param values reach the
// executor over the task's params and are stored with the run; a pipeline
// trigger runs every task.
func TestTriggerAtParamsAndPipeline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var seen []string
		fns := map[string]func(context.Context, runner.Attempt) error{
			"p.a": func(_ context.Context, a runner.Attempt) error {
				seen = append(seen, fmt.Sprintf("%s %v", a.LogicalTime.Format(time.RFC3339), a.Params))
				return nil
			},
		}
		e := setup(t, Config{}, fns, "pipeline: p\ntimezone: Asia/Shanghai\ndefaults: {function: record, params: {region: cn, day: x}}\ntasks:\n  - {name: a}\n  - {name: b, depends_on: [a]}\n")
		at := time.Date(1999, 11, 30, 2, 0, 0, 0, time.UTC) // past: it fires now
		msg, err := e.do(Trigger{Target: "p.a", At: at, Params: map[string]string{"day": "20261129"}}, By{Actor: "operator:ann"})
		if err != nil || !strings.Contains(msg, "at logical time 1999-11-30T10:00:00+08:00") {
			t.Errorf("trigger: %q %v", msg, err)
		}
		sleep(time.Second)
		msg, err = e.do(Trigger{Target: "p"}, By{Actor: "operator:ann"})
		if err != nil || !strings.Contains(msg, "for pipeline p (2 task(s))") {
			t.Errorf("pipeline trigger: %q %v", msg, err)
		}
		sleep(time.Second)
		for _, c := range []Trigger{
			{Target: "q"},
			{Target: "p.zz"},
			{Target: "p", Downstream: true},
			{Target: "p.a", Params: map[string]string{"a b": "1"}},
		} {
			if _, err := e.do(c); err == nil {
				t.Errorf("%+v: no error", c)
			}
		}
		e.stop()
		if want := fmt.Sprintf("[1999-11-30T10:00:00+08:00 map[day:20261129 region:cn] %s map[day:x region:cn]]",
			start0(e).In(e.eng.sched.g.Pipeline("p").Location).Format(time.RFC3339)); fmt.Sprint(seen) != want {
			t.Errorf("executions %v\nwant %s", seen, want)
		}
		runs, _ := e.st.Runs(context.Background(), "p", 10)
		if len(runs) != 2 || runs[1].Params != `{"day":"20261129"}` || runs[1].Actor != "operator:ann" || !runs[1].LogicalTime.Equal(at) || runs[0].Params != "" { // newest logical time first
			t.Errorf("runs %+v", runs)
		}
		if b := e.instances(store.InstanceFilter{TaskID: "p.b"}); len(b) != 1 || b[0].State != axtype.Success {
			t.Errorf("b of the pipeline run: %+v", b)
		}
	})
}

// start0 is the logical time of the second run: the pipeline trigger, a
// second after the start of the bubble.
func start0(e *env) time.Time {
	runs, _ := e.st.Runs(context.Background(), "p", 10)
	for _, r := range runs {
		if r.Trigger == "p" {
			return r.LogicalTime
		}
	}
	return time.Time{}
}

// wait_timeout on a task (here from defaults) limits a same-pipeline wait
// too: the downstream of a stuck upstream fails at exactly its deadline.
func TestWaitTimeoutFromDefaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		fns := map[string]func(context.Context, runner.Attempt) error{
			"w.stuck": func(ctx context.Context, _ runner.Attempt) error { <-ctx.Done(); return ctx.Err() },
		}
		e := setup(t, Config{}, fns, "pipeline: w\ntimezone: UTC\nschedule: \"0 1 * * *\"\ndefaults: {function: record, wait_timeout: 30m, timeout: 2h}\ntasks:\n  - {name: stuck}\n  - {name: next, depends_on: [stuck]}\n")
		deadline := start.Add(time.Hour + 30*time.Minute)
		sleep(deadline.Sub(time.Now()) - time.Second)
		next := func() axtype.Instance { return e.instances(store.InstanceFilter{TaskID: "w.next"})[0] }
		if n := next(); n.State != axtype.Waiting {
			t.Errorf("a second before the deadline: %s %q", n.State, n.Error)
		}
		sleep(2 * time.Second)
		n := next()
		if n.State != axtype.Failed || n.Error != "upstream w.stuck not done after 30m" || !n.EndedAt.Equal(deadline) {
			t.Errorf("after the deadline: %s %q at %s", n.State, n.Error, n.EndedAt.Sub(start))
		}
		if s := e.instances(store.InstanceFilter{TaskID: "w.stuck"})[0]; s.State != axtype.Running {
			t.Errorf("the upstream is %s; it keeps running until its own timeout", s.State)
		}
		e.stop()
	})
}

// A rerun of an instance that never ran because its upstream failed, while
// that upstream is still failed and not rerun with it, is refused naming the
// upstream, and changes nothing. Before, it was accepted ("1 that never ran
// wait for their upstreams again") and the instance failed again at once:
// two history rows and an action for nothing.
func TestRerunOfANeverRunInstanceBehindAFailedUpstreamIsRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fns := map[string]func(context.Context, runner.Attempt) error{
			"d.a": func(context.Context, runner.Attempt) error { return errors.New("disk full") },
		}
		e := setup(t, Config{}, fns, diamondD)
		sleep(time.Hour + 2*time.Second)
		a := e.instances(store.InstanceFilter{TaskID: "d.a"})[0]
		b := e.byTask(a.RunID)["d.b"]
		before := transitionsOf(e, b.ID)
		for _, r := range []Rerun{{Instance: b.ID}, {Target: "d.b"}} {
			_, err := e.do(r, By{Actor: "operator:ann"})
			if err == nil || !strings.Contains(err.Error(), "its upstream d.a is FAILED") || !strings.Contains(err.Error(), fmt.Sprintf("ax rerun %d --instance", a.ID)) {
				t.Errorf("rerun %+v: %v; want a refusal naming upstream d.a and how to rerun it", r, err)
			}
		}
		sleep(2 * time.Second)
		e.stop()
		if got := transitionsOf(e, b.ID); got != before {
			t.Errorf("d.b history %s, was %s: a refused rerun changed it", got, before)
		}
		if n := len(e.actions("rerun")); n != 0 {
			t.Errorf("%d rerun action(s) written by refused reruns", n)
		}
	})
}
