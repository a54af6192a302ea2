package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// flaky fails its first call and succeeds after.
func flaky() map[string]func(context.Context, runner.Attempt) error {
	var mu sync.Mutex
	calls := 0
	return map[string]func(context.Context, runner.Attempt) error{"m.a": func(context.Context, runner.Attempt) error {
		mu.Lock()
		defer mu.Unlock()
		if calls++; calls == 1 {
			return errors.New("first call fails")
		}
		return nil
	}}
}

// histogramCount returns the sample count of a histogram family in reg.
func histogramCount(t *testing.T, reg *prometheus.Registry, name string) uint64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetHistogram().GetSampleCount()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func TestMetricsCountDispatchesResultsRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		e := setup(t, Config{Registerer: reg}, flaky(), `pipeline: m
timezone: UTC
schedule: "0 0 1 6 *"
tasks:
  - {name: a, function: record, retry: {count: 2, interval: 1s}}
`)
		if _, err := e.do(Trigger{Target: "m.a"}); err != nil {
			t.Fatal(err)
		}
		sleep(5 * time.Second)
		if got := testutil.ToFloat64(e.eng.m.leader); got != 1 {
			t.Errorf("ax_leader = %v, want 1 on the primary", got)
		}
		e.stop()
		for name, want := range map[string]float64{"ax_dispatches_total": 2, "ax_retries_total": 1, "ax_timeouts_total": 0} {
			var c prometheus.Collector
			switch name {
			case "ax_dispatches_total":
				c = e.eng.m.dispatches
			case "ax_retries_total":
				c = e.eng.m.retries
			default:
				c = e.eng.m.timeouts
			}
			if got := testutil.ToFloat64(c); got != want {
				t.Errorf("%s = %v, want %v", name, got, want)
			}
		}
		for status, want := range map[string]float64{"failed": 1, "success": 1} {
			if got := testutil.ToFloat64(e.eng.m.results.WithLabelValues(status)); got != want {
				t.Errorf("ax_results_total{status=%q} = %v, want %v", status, got, want)
			}
		}
		// A run-now and its retry are no live schedule fires: their delays
		// have a metric of their own.
		if n := histogramCount(t, reg, "ax_dispatch_latency_seconds"); n != 0 {
			t.Errorf("ax_dispatch_latency_seconds has %d samples, want none (no live fire)", n)
		}
		for _, kind := range []string{"manual", "retry"} {
			if n := series(t, reg, "ax_dispatch_delay_seconds", map[string]string{"kind": kind}).GetHistogram().GetSampleCount(); n != 1 {
				t.Errorf("ax_dispatch_delay_seconds{kind=%q}: %d samples, want 1", kind, n)
			}
		}
		// Registered on the registry given, and only there.
		if n, err := testutil.GatherAndCount(reg, "ax_dispatches_total"); err != nil || n != 1 {
			t.Errorf("ax_dispatches_total on the registry: %d series, %v", n, err)
		}
	})
}

func TestTimeoutMetricAndTaskFailedAlert(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var alerts []Alert
		sink := func(a Alert) { mu.Lock(); alerts = append(alerts, a); mu.Unlock() }
		release := make(chan struct{})
		hang := map[string]func(context.Context, runner.Attempt) error{"m.a": func(ctx context.Context, _ runner.Attempt) error {
			<-release // ignores its context: only the scheduler's timeout ends it
			return nil
		}}
		e := setup(t, Config{OnAlert: sink, Grace: time.Millisecond}, hang, `pipeline: m
timezone: UTC
schedule: "0 0 1 6 *"
tasks:
  - {name: a, function: record, timeout: 2s}
`)
		if _, err := e.do(Trigger{Target: "m.a"}); err != nil {
			t.Fatal(err)
		}
		sleep(5 * time.Second)
		e.cancel()
		<-e.done       // the shutdown stops waiting for the function (abandonAfter)
		close(release) // and it returns: its result is dropped
		synctest.Wait()
		if got := testutil.ToFloat64(e.eng.m.timeouts); got != 1 {
			t.Errorf("ax_timeouts_total = %v, want 1", got)
		}
		if got := testutil.ToFloat64(e.eng.m.alerts.WithLabelValues(AlertTaskFailed)); got != 1 {
			t.Errorf("ax_alerts_total{kind=task_failed} = %v, want 1", got)
		}
		mu.Lock()
		defer mu.Unlock()
		var kinds []string
		for _, a := range alerts {
			kinds = append(kinds, a.Kind)
			if a.Kind == AlertTaskFailed && (a.Task != "m.a" || !strings.Contains(a.Message, "timeout") || a.Ticket == "" || a.Scheduler != "test") {
				t.Errorf("task_failed alert: %+v", a)
			}
		}
		// The first scheduler on a store is no change of leader: no alert.
		if strings.Join(kinds, " ") != "task_failed" {
			t.Errorf("alerts sent to the sink: %v, want task_failed only", kinds)
		}
		if acts := e.actions(AlertLeaderChange); len(acts) != 0 {
			t.Errorf("leader_change actions on the first start: %+v", acts)
		}
	})
}

func TestExplain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		e := setup(t, Config{}, nil, `pipeline: x
timezone: UTC
schedule: "@every 10s"
tasks:
  - {name: a, function: record}
  - {name: b, depends_on: [a], function: record}
`, `pipeline: z
timezone: UTC
schedule: "0 0 1 6 *"
tasks:
  - {name: c, function: record, retry: {count: 0}}
`)
		sleep(11 * time.Second) // the 10 s run went out
		ctx := context.Background()
		x, err := e.eng.Explain(ctx, "x.a")
		if err != nil {
			t.Fatal(err)
		}
		if !x.Live || len(x.LastFires) != 1 || !x.LastFires[0].Due.Equal(start.Add(10*time.Second)) || x.LastFires[0].Late != 0 {
			t.Errorf("explain a: live %v, last fires %+v; want one, due at +10s, on time", x.Live, x.LastFires)
		}
		if len(x.NextFires) != 10 || !x.NextFires[0].Equal(start.Add(20*time.Second)) {
			t.Errorf("next fires %v, want ten from +20s", x.NextFires)
		}
		if _, err := e.do(Pause{Scope: store.ScopeTask, Target: "x.a"}, By{Actor: "operator:ann", Reason: "db migration"}); err != nil {
			t.Fatal(err)
		}
		sleep(10 * time.Second) // the 20 s fire is held by the pause
		x, _ = e.eng.Explain(ctx, "x.a")
		if !strings.Contains(x.Verdict, "paused by operator:ann") {
			t.Errorf("explain paused a: verdict %q", x.Verdict)
		}
		x, _ = e.eng.Explain(ctx, "x.b")
		if !strings.Contains(x.Verdict, "waiting for upstream x.a (PAUSED)") {
			t.Errorf("explain b behind a paused a: verdict %q; findings %+v", x.Verdict, x.Findings)
		}
		// c failed without retries.
		e.rec.fn = map[string]func(context.Context, runner.Attempt) error{"z.c": func(context.Context, runner.Attempt) error { return errors.New("boom") }}
		if _, err := e.do(Trigger{Target: "z.c"}); err != nil {
			t.Fatal(err)
		}
		sleep(2 * time.Second)
		x, _ = e.eng.Explain(ctx, "z.c")
		if !strings.Contains(x.Verdict, "retry.count is 0") || !strings.Contains(x.Verdict, "boom") {
			t.Errorf("explain c: verdict %q", x.Verdict)
		}
		if _, err := e.eng.Explain(ctx, "z.cc"); err == nil || !strings.Contains(err.Error(), `did you mean "z.c"`) {
			t.Errorf("explain of an unknown task: %v", err)
		}
		e.stop()
	})
}

func TestLimitsAtRunTimeSurviveARestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := "pipeline: l\ngroup: etl\ntimezone: UTC\nschedule: \"0 0 1 6 *\"\ntasks:\n  - {name: a, function: record}\n"
		cfg := Config{DispatchRate: 50, MaxRunning: 8}
		e := setup(t, cfg, nil, src)
		for _, bad := range []struct {
			op   Request
			want string
		}{
			{SetLimits{Global: ptr(-1.0)}, "global rate -1: give a rate per second from 0 (unlimited) to 1000000"},
			{SetLimits{Global: ptr(math.Inf(1))}, "global rate +Inf: give a rate per second from 0"},
			{SetLimits{Global: ptr(math.NaN())}, "global rate NaN: give a rate per second from 0"},
			{SetLimits{Global: ptr(2e6)}, "global rate 2e+06: give a rate per second from 0 (unlimited) to 1000000"},
			// a positive rate so small that nothing would ever be dispatched again
			{SetLimits{Global: ptr(1e-300)}, "global rate 1e-300: give a rate per second from 0 (unlimited) to 1000000, and when not 0 at least 0.001"},
			{SetLimits{Groups: map[string]float64{"etl": 1e-9}}, "group etl rate 1e-09: give a rate per second from 0 (unlimited) to 1000000, and when not 0 at least 0.001"},
			{SetLimits{Groups: map[string]float64{"elt": 2}}, `no group "elt" (did you mean "etl"?)`},
			{SetLimits{Groups: map[string]float64{"etl": -3}}, "group etl rate -3"},
			{SetLimits{MaxRunning: ptr(-1)}, "max_running -1: give a number of attempts from 0 (unlimited) to 1000000"},
			{SetLimits{MaxRunning: ptr(5_000_000)}, "max_running 5000000: give a number of attempts"},
			{SetLimits{GroupMaxRunning: map[string]int{"elt": 2}}, `no group "elt" (did you mean "etl"?)`},
			{SetLimits{GroupMaxRunning: map[string]int{"etl": -2}}, "group etl max_running -2"},
			// one good value beside a bad one: nothing of it applies
			{SetLimits{Global: ptr(7.0), MaxRunning: ptr(-1)}, "max_running -1"},
			{SetLimits{}, "give global, groups, max_running or group_max_running"},
		} {
			if _, err := e.do(bad.op); err == nil || !strings.Contains(err.Error(), bad.want) {
				t.Errorf("%+v: %v, want %q", bad.op, err, bad.want)
			}
		}
		if got := e.eng.Stats().Limits; got.Global != 50 || got.MaxRunning != 8 || len(got.GroupMaxRunning) != 0 {
			t.Fatalf("after refused changes: %+v, want the configured global 50, max running 8", got)
		}
		if a := e.actions("limits"); len(a) != 0 {
			t.Errorf("refused changes wrote %d action row(s)", len(a))
		}
		msg, err := e.do(SetLimits{Global: ptr(5.0), Groups: map[string]float64{"etl": 2}, MaxRunning: ptr(4), GroupMaxRunning: map[string]int{"etl": 3}})
		if err != nil || msg != "limits now global 5/s, group etl 2/s, max running 4 local, group etl max running 3" {
			t.Fatalf("set limits: %q %v", msg, err)
		}
		e.stop()
		l := e.restart(cfg, time.Second).Stats().Limits
		if l.Global != 5 || l.Groups["etl"] != 2 || l.MaxRunning != 4 || l.GroupMaxRunning["etl"] != 3 {
			t.Errorf("after a restart: %+v, want the stored global 5, etl 2, max running 4, etl max running 3", l)
		}
	})
}

func TestCancelBackfill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		slow := map[string]func(context.Context, runner.Attempt) error{"y.a": func(context.Context, runner.Attempt) error {
			time.Sleep(10 * time.Second)
			return nil
		}}
		e := setup(t, Config{}, slow, yearly)
		id := e.startBackfill(BackfillParams{Pipeline: "y", From: start.AddDate(-5, 0, 0), To: start})
		sleep(3 * time.Second) // the first run is in flight
		msg, err := e.do(CancelBackfill{Backfill: id}, By{Actor: "operator:bo"})
		if err != nil || !strings.Contains(msg, "cancelled at 0/5 runs; 1 run(s) in flight finish") {
			t.Fatalf("cancel: %q %v", msg, err)
		}
		sleep(60 * time.Second)
		for _, bad := range []struct {
			id   int64
			want string
		}{{id, "is cancelled already"}, {999, "no backfill 999"}} {
			if _, err := e.do(CancelBackfill{Backfill: bad.id}); err == nil || !strings.Contains(err.Error(), bad.want) {
				t.Errorf("cancel %d: %v, want %q", bad.id, err, bad.want)
			}
		}
		e.stop()
		if b := e.backfill(id); b.State != BackfillCancelled || !strings.Contains(b.Error, "cancelled by operator:bo") {
			t.Errorf("backfill after cancel: %+v", b)
		}
		years := map[int]bool{}
		for _, c := range e.rec.snapshot() {
			years[c.logical.Year()] = true
		}
		if len(years) != 1 {
			t.Errorf("runs executed after the cancel: logical years %v, want only the one in flight", years)
		}
	})
}

// TestUnreadableStoredLimitsLeaveTheConfiguredOnes: a stored limits value
// that cannot be read is reported and ignored; the configured rate applies.
func TestUnreadableStoredLimitsLeaveTheConfiguredOnes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := setup(t, Config{DispatchRate: 50}, nil, "pipeline: l\ntimezone: UTC\nschedule: \"0 0 1 6 *\"\ntasks:\n  - {name: a, function: record}\n")
		e.stop()
		if err := e.st.SetSetting(context.Background(), limitsSetting, "{not json", time.Now()); err != nil {
			t.Fatal(err)
		}
		if _, _, err := StoredLimits(context.Background(), e.st); !errors.Is(err, ErrBadStoredLimits) || !strings.Contains(err.Error(), "{not json") {
			t.Errorf("StoredLimits: %v, want ErrBadStoredLimits naming the value", err)
		}
		if l := e.restart(Config{DispatchRate: 50}, time.Second).Stats().Limits; l.Global != 50 {
			t.Errorf("limits after an unreadable stored value: %+v, want the configured global 50", l)
		}
	})
}

// Explain's findings give their times in the pipeline's zone with the
// offset, like the rest of the explanation, the console and the CLI; they
// were RFC 3339 in UTC ("scheduled for 2026-…Z", "paused … at …Z") beside
// next fires and dispatches printed in the zone.
func TestExplainTimesInThePipelineZone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := setup(t, Config{}, nil, `pipeline: sh
timezone: Asia/Shanghai
schedule: "@every 10s"
tasks:
  - {name: a, function: record}
`)
		sleep(time.Second)
		ctx := context.Background()
		shanghai, err := time.LoadLocation("Asia/Shanghai")
		if err != nil {
			t.Fatal(err)
		}
		x, err := e.eng.Explain(ctx, "sh.a")
		if err != nil {
			t.Fatal(err)
		}
		details := func(x Explanation) string {
			var d []string
			for _, f := range x.Findings {
				d = append(d, f.Detail)
			}
			return strings.Join(d, "; ")
		}
		want := "scheduled for " + x.Latest.NextFireAt.In(shanghai).Format("2006-01-02T15:04:05") + "+08:00"
		if !strings.Contains(details(x), want) {
			t.Errorf("explain of a scheduled task: %q, want it to say %q", details(x), want)
		}
		x, _ = e.eng.ExplainUTC(ctx, "sh.a")
		if want := "scheduled for " + x.Latest.NextFireAt.UTC().Format(time.RFC3339); !strings.Contains(details(x), want) {
			t.Errorf("explain --utc of a scheduled task: %q, want it to say %q", details(x), want)
		}
		if _, err := e.do(Pause{Scope: store.ScopeTask, Target: "sh.a"}, By{Actor: "operator:ann", Reason: "db migration"}); err != nil {
			t.Fatal(err)
		}
		x, _ = e.eng.Explain(ctx, "sh.a")
		if !strings.Contains(x.Verdict, "paused by operator:ann at ") || !strings.Contains(x.Verdict, "+08:00") || strings.Contains(x.Verdict, "Z:") {
			t.Errorf("explain of a paused task: %q, want the pause's time in +08:00", x.Verdict)
		}
		e.stop()
	})
}

// unsafeText reports the first control character (but tab) or byte that
// is not UTF-8 in s, or -1.
func unsafeText(s string) int {
	for i, r := range s {
		if r == utf8.RuneError || (r < 0x20 && r != '\t') || r == 0x7f {
			return i
		}
	}
	return -1
}

// A task whose error carries terminal escapes and bytes that are not
// UTF-8 (a command's last stderr line, an executor's message) has them
// escaped (\xNN) wherever the error is kept and shown: the instance, its
// history and actions (an alert's message is the failure's reason), the
// attempt record. They were
// stored raw, and ax history, status and explain wrote them to the
// operator's terminal (clearing it, retitling it).
func TestResultErrorsAreSafeText(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const raw = "boom \x1b[2J\x1b]0;pwned\x07 \xff\\n"
		const want = `boom \x1b[2J\x1b]0;pwned\x07 \xff\n` // the backslash of \n was in the text
		e := setup(t, Config{}, map[string]func(context.Context, runner.Attempt) error{
			"u.a": func(context.Context, runner.Attempt) error { return errors.New(raw) },
		}, "pipeline: u\ntimezone: UTC\nschedule: \"0 0 1 6 *\"\ntasks:\n  - {name: a, function: record}\n")
		if _, err := e.do(Trigger{Target: "u.a"}); err != nil {
			t.Fatal(err)
		}
		sleep(3 * time.Second)
		ins := e.instances(store.InstanceFilter{TaskID: "u.a"})
		if len(ins) != 1 || ins[0].State != axtype.Failed || ins[0].Error != want {
			t.Fatalf("instance: %+v; want FAILED with error %q", ins, want)
		}
		ctx := context.Background()
		recs, err := e.st.Attempts(ctx, ins[0].ID)
		if err != nil || len(recs) != 1 || recs[0].Error != want {
			t.Errorf("attempt records: %+v %v; want one with error %q", recs, err, want)
		}
		texts := []string{}
		for _, h := range e.history("u.a") {
			texts = append(texts, h.Reason)
		}
		acts, err := e.st.Actions(ctx, store.LogFilter{TaskID: "u.a", Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range acts {
			texts = append(texts, a.Reason, a.Detail)
		}
		for _, s := range texts {
			if i := unsafeText(s); i >= 0 {
				t.Errorf("history or action text with an unsafe byte at %d: %q", i, s)
			}
		}
		// An HTTP executor's report goes through the inbox the same way.
		if got := reportResult(runner.Report{Ticket: "t", Status: runner.StatusFailed, Error: raw}).Error; got != want {
			t.Errorf("an executor's report: error %q, want %q", got, want)
		}
		e.stop()
	})
}

// A cancelled backfill resumed by the resume_backfill request (the one way
// `ax backfill resume` reaches the engine) goes on from where it stopped:
// every logical time runs once, the one in flight at the cancel is not run
// again; the request is in the action log; resuming a done or unknown
// backfill is refused with nothing changed.
func TestResumeBackfill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		slow := map[string]func(context.Context, runner.Attempt) error{"y.a": func(context.Context, runner.Attempt) error {
			time.Sleep(10 * time.Second)
			return nil
		}}
		e := setup(t, Config{}, slow, yearly)
		id := e.startBackfill(BackfillParams{Pipeline: "y", From: start.AddDate(-5, 0, 0), To: start})
		sleep(3 * time.Second)
		if _, err := e.do(CancelBackfill{Backfill: id}); err != nil {
			t.Fatal(err)
		}
		sleep(30 * time.Second)
		msg, err := e.do(ResumeBackfill{Backfill: id}, By{Actor: "operator:bo"})
		if err != nil || msg != fmt.Sprintf("backfill %d resumed (was cancelled at 0/5 runs)", id) {
			t.Fatalf("resume: %q %v", msg, err)
		}
		if msg, err := e.do(ResumeBackfill{Backfill: id}); err != nil || !strings.Contains(msg, "already") {
			t.Errorf("resume again: %q %v, want a no-op", msg, err)
		}
		sleep(2 * time.Minute)
		if b := e.backfill(id); b.State != BackfillDone || b.DoneRuns != 5 {
			t.Fatalf("backfill after the resume: %+v", b)
		}
		before := e.backfill(id)
		for _, bad := range []struct {
			id   int64
			want string
		}{{id, "is done already"}, {999, "no backfill 999"}} {
			if _, err := e.do(ResumeBackfill{Backfill: bad.id}); err == nil || !strings.Contains(err.Error(), bad.want) {
				t.Errorf("resume %d: %v, want %q", bad.id, err, bad.want)
			}
		}
		if after := e.backfill(id); after != before {
			t.Errorf("a refused resume changed the backfill: %+v → %+v", before, after)
		}
		acts := e.actions(OpResumeBackfill)
		if len(acts) != 2 || acts[0].Actor != "operator:bo" {
			t.Errorf("action log: %+v, want the two applied resumes (refused ones write nothing)", acts)
		}
		e.stop()
		runs := map[string]int{}
		for _, c := range e.rec.snapshot() {
			runs[fmt.Sprintf("%s %d", c.task, c.logical.Year())]++
		}
		if len(runs) != 15 {
			t.Errorf("executions per task and logical year %v, want each of 3 tasks × 5 years once", runs)
		}
		for k, n := range runs {
			if n != 1 {
				t.Errorf("%s executed %d times", k, n)
			}
		}
	})
}

// TestLiftedLimitsStayLiftedAfterARestart: a cap or rate an operator lifts
// (0) at run time stays lifted after a restart. The stored cap of 0 was read
// as "none stored", so the configured --max-running came back, and a lifted
// group cap or rate (absent from what was stored) came back from the flags.
func TestLiftedLimitsStayLiftedAfterARestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := "pipeline: l\ngroup: etl\ntimezone: UTC\nschedule: \"0 0 1 6 *\"\ntasks:\n  - {name: a, function: record}\n"
		cfg := Config{DispatchRate: 50, GroupRates: map[string]float64{"etl": 4}, MaxRunning: 8, GroupMaxRunning: map[string]int{"etl": 3}}
		e := setup(t, cfg, nil, src)
		if got := e.eng.Stats().Limits; got.Global != 50 || got.Groups["etl"] != 4 || got.MaxRunning != 8 || got.GroupMaxRunning["etl"] != 3 {
			t.Fatalf("configured limits: %+v", got)
		}
		msg, err := e.do(SetLimits{Global: ptr(0.0), Groups: map[string]float64{"etl": 0}, MaxRunning: ptr(0), GroupMaxRunning: map[string]int{"etl": 0}})
		if err != nil || msg != "limits now global unlimited, max running unlimited local" {
			t.Fatalf("lift every limit: %q %v", msg, err)
		}
		if cfg.GroupMaxRunning["etl"] != 3 {
			t.Errorf("the lift wrote through into the caller's Config: group_max_running %v", cfg.GroupMaxRunning)
		}
		e.stop()
		l := e.restart(cfg, time.Second).Stats().Limits
		if l.Global != 0 || len(l.Groups) != 0 || l.MaxRunning != 0 || len(l.GroupMaxRunning) != 0 {
			t.Errorf("after a restart: %+v, want every limit still lifted", l)
		}
	})
}

// TestLimitsStoredBeforeCapsKeepTheConfiguredCaps: a value stored by a
// version that knew only rates ({"global": 5}) sets the rate and leaves the
// configured caps alone: it says nothing of them.
func TestLimitsStoredBeforeCapsKeepTheConfiguredCaps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		src := "pipeline: l\ngroup: etl\ntimezone: UTC\nschedule: \"0 0 1 6 *\"\ntasks:\n  - {name: a, function: record}\n"
		cfg := Config{DispatchRate: 50, GroupRates: map[string]float64{"etl": 4}, MaxRunning: 8, GroupMaxRunning: map[string]int{"etl": 3}}
		e := setup(t, cfg, nil, src)
		e.stop()
		if err := e.st.SetSetting(context.Background(), limitsSetting, `{"global":5}`, time.Now()); err != nil {
			t.Fatal(err)
		}
		l := e.restart(cfg, time.Second).Stats().Limits
		if l.Global != 5 || l.Groups["etl"] != 4 || l.MaxRunning != 8 || l.GroupMaxRunning["etl"] != 3 {
			t.Errorf("after a restart on a rates-only stored value: %+v, want global 5 and the configured etl 4/s, max running 8, etl max running 3", l)
		}
	})
}

// With runs created ahead (a pipeline schedule), the newest instance of a
// task is one waiting for a fire to come; explain judges the oldest due one
// still not started, which is what holds the task back: here the token
// bucket, at a rate of one dispatch in 1,000 s. Before, it explained the
// newest ("nothing holds it back", in the wheel) while fires piled up.
func TestExplainJudgesTheOldestDueInstance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := setup(t, Config{DispatchRate: MinRate}, nil, `pipeline: x
timezone: UTC
schedule: "@every 10s"
tasks:
  - {name: a, function: record}
`)
		sleep(45 * time.Second) // four fires; the bucket lets one or two go
		x, err := e.eng.Explain(context.Background(), "x.a")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(x.Verdict, "held back by the token bucket") || x.Latest == nil || x.Latest.NextFireAt.After(time.Now()) {
			t.Errorf("verdict %q on instance %+v; want the oldest due instance, held back by the token bucket", x.Verdict, x.Latest)
		}
		e.stop()
	})
}

// lockedBuffer is a bytes.Buffer safe for the engine's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestAlertLogLine: an alert's log line in JSON has one msg (the event,
// "alert") and carries the run of the instance it is about, as every line
// about an instance does.
func TestAlertLogLine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf lockedBuffer
		log := slog.New(slog.NewJSONHandler(&buf, nil))
		fail := map[string]func(context.Context, runner.Attempt) error{"m.a": func(context.Context, runner.Attempt) error {
			return errors.New("boom")
		}}
		e := setup(t, Config{Logger: log}, fail, "pipeline: m\ntimezone: UTC\nschedule: \"0 0 1 6 *\"\ntasks:\n  - {name: a, function: record}\n")
		if _, err := e.do(Trigger{Target: "m.a"}); err != nil {
			t.Fatal(err)
		}
		sleep(5 * time.Second)
		e.cancel()
		<-e.done
		found := false
		for line := range strings.SplitSeq(buf.String(), "\n") {
			if !strings.Contains(line, `"msg":"alert"`) {
				continue
			}
			found = true
			if n := strings.Count(line, `"msg":`); n != 1 {
				t.Errorf("alert line has %d msg keys: %s", n, line)
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatal(err)
			}
			if run, _ := m["run"].(float64); run < 1 || m["kind"] != AlertTaskFailed || !strings.Contains(fmt.Sprint(m["message"]), "boom") {
				t.Errorf("alert line lacks its run, kind or message: %s", line)
			}
		}
		if !found {
			t.Fatalf("no alert line in:\n%s", buf.String())
		}
	})
}

// TestStoreRecoveredOnlyAfterAWrite: while the database is down (here:
// closed, so that reads fail too), a turn that writes nothing (the lease
// lost, nothing to do) does not make the store "recovered".
func TestStoreRecoveredOnlyAfterAWrite(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf lockedBuffer
		log := slog.New(slog.NewJSONHandler(&buf, nil))
		e := setup(t, Config{Logger: log}, nil, "pipeline: m\ntimezone: UTC\nschedule: \"@every 1s\"\ntasks:\n  - {name: a, function: record}\n")
		sleep(3 * time.Second)
		e.st.Close()
		sleep(120 * time.Second)
		e.cancel()
		<-e.done
		got := buf.String()
		if !strings.Contains(got, `"msg":"store_error"`) {
			t.Fatalf("no store_error while the database was closed:\n%s", got)
		}
		if strings.Contains(got, `"msg":"store_recovered"`) {
			t.Errorf("store_recovered logged while the database was closed:\n%s", got)
		}
	})
}

// TestStoreRecoveredWhenAWriteSucceeds: after store errors, a turn logs
// store_recovered (and forgets the failures) only once a write has
// committed since the last error.
func TestStoreRecoveredWhenAWriteSucceeds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var buf lockedBuffer
		e := setup(t, Config{Logger: slog.New(slog.NewJSONHandler(&buf, nil))}, nil, "pipeline: m\ntimezone: UTC\ntasks:\n  - {name: a, function: record}\n")
		sleep(time.Second)
		e.cancel()
		<-e.done // the loop is over: its turns are the test's now
		ctx := context.Background()
		e.eng.failures, e.eng.commitsAtError, e.eng.retryAt = 2, e.st.Commits(), time.Time{}
		e.eng.turn(ctx, false)
		if strings.Contains(buf.String(), "store_recovered") || e.eng.failures != 2 {
			t.Fatalf("a turn that wrote nothing: failures %d, log:\n%s", e.eng.failures, buf.String())
		}
		if err := e.st.SetSetting(ctx, "probe", "1", time.Now()); err != nil {
			t.Fatal(err)
		}
		e.eng.turn(ctx, false)
		if !strings.Contains(buf.String(), `"msg":"store_recovered","after_failures":2`) || e.eng.failures != 0 {
			t.Errorf("after a write: failures %d, log:\n%s", e.eng.failures, buf.String())
		}
	})
}
