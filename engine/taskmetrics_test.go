package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// matching lists the series of name whose labels are exactly want.
func matching(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) []*dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out []*dto.Metric
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
			out = append(out, m)
		}
	}
	return out
}

// series finds the sample of name whose labels are exactly want.
func series(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) *dto.Metric {
	t.Helper()
	if ms := matching(t, reg, name, want); len(ms) > 0 {
		return ms[0]
	}
	t.Fatalf("no series %s%v", name, want)
	return nil
}

// TestMetricsLiveLatencyApartFromBackfills: a backfill of past days beside a
// live schedule leaves ax_dispatch_latency_seconds to the live fires (no
// "latency" of days); the backfill's delays are in ax_dispatch_delay_seconds
// {kind="backfill"}; per-task series count durations, queue waits and
// outcomes by pipeline and task; no label carries an instance id or ticket.
func TestMetricsLiveLatencyApartFromBackfills(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		reg := prometheus.NewRegistry()
		e := setup(t, Config{Registerer: reg}, nil, reloadP, strings.Replace(layered, "Europe/Berlin", "UTC", 1))
		from, to := days(start, 5)
		e.startBackfill(BackfillParams{Pipeline: "daily", From: from, To: to, MaxActiveRuns: 5})
		sleep(35 * time.Second)
		e.stop()
		lat := series(t, reg, "ax_dispatch_latency_seconds", map[string]string{}).GetHistogram()
		if lat.GetSampleCount() != 3 || lat.GetSampleSum() > 1 {
			t.Errorf("ax_dispatch_latency_seconds: %d samples, sum %.3fs; want the 3 live fires of p.a, on time", lat.GetSampleCount(), lat.GetSampleSum())
		}
		bf := series(t, reg, "ax_dispatch_delay_seconds", map[string]string{"kind": "backfill"}).GetHistogram()
		// The roots start days after their logical times; the others when released.
		if bf.GetSampleCount() != 25 || bf.GetSampleSum() < 5*86400 {
			t.Errorf("ax_dispatch_delay_seconds{kind=backfill}: %d samples, sum %.0fs; want 25 (5 days × 5 tasks), the 5 roots days late", bf.GetSampleCount(), bf.GetSampleSum())
		}
		if n := series(t, reg, "ax_task_queue_wait_seconds", map[string]string{"pipeline": "p", "task": "a"}).GetHistogram().GetSampleCount(); n != 3 {
			t.Errorf("queue wait samples of p.a: %d, want 3", n)
		}
		if n := series(t, reg, "ax_task_duration_seconds", map[string]string{"pipeline": "daily", "task": "report"}).GetHistogram().GetSampleCount(); n != 5 {
			t.Errorf("duration samples of daily.report: %d, want 5", n)
		}
		if v := series(t, reg, "ax_task_outcomes_total", map[string]string{"pipeline": "daily", "task": "sync", "outcome": "success"}).GetCounter().GetValue(); v != 5 {
			t.Errorf("ax_task_outcomes_total{daily,sync,success} = %v, want 5", v)
		}
		// Bounded labels: none names or carries an instance, a run or a ticket.
		bad := map[string]bool{}
		for _, in := range e.instances(store.InstanceFilter{}) {
			bad[fmt.Sprint(in.ID)], bad[fmt.Sprint(in.RunID)] = true, true
			if in.Ticket != "" {
				bad[in.Ticket] = true
			}
		}
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				for _, l := range m.GetLabel() {
					switch {
					case l.GetName() == "instance" || l.GetName() == "instance_id" || l.GetName() == "ticket" || l.GetName() == "run":
						t.Errorf("%s has a label %s", mf.GetName(), l.GetName())
					case bad[l.GetValue()] && l.GetName() != "backfill":
						t.Errorf("%s{%s=%q}: an instance id, run id or ticket as a label value", mf.GetName(), l.GetName(), l.GetValue())
					}
				}
			}
		}
	})
}

// TestMetricsWithoutTaskLabels: NoTaskLabels keeps the pipeline label only.
func TestMetricsWithoutTaskLabels(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		e := setup(t, Config{Registerer: reg, NoTaskLabels: true}, nil, chain)
		sleep(25 * time.Second)
		e.stop()
		if v := series(t, reg, "ax_task_outcomes_total", map[string]string{"pipeline": "chain", "outcome": "success"}).GetCounter().GetValue(); v != 6 {
			t.Errorf("ax_task_outcomes_total{chain,success} = %v, want 6 (a, b, c at +10s and +20s)", v)
		}
		if n, err := testutil.GatherAndCount(reg, "ax_task_duration_seconds"); err != nil || n != 1 {
			t.Errorf("ax_task_duration_seconds: %d series, %v; want one for the pipeline", n, err)
		}
	})
}

func TestFireKind(t *testing.T) {
	t.Parallel()
	term := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		a    attempt
		want string
	}{
		{attempt{kind: axtype.RunSchedule, attempt: 1, counted: 1, due: term.Add(time.Minute)}, "live"},
		{attempt{kind: axtype.RunSchedule, attempt: 1, counted: 1, due: term}, "live"},
		{attempt{kind: axtype.RunSchedule, attempt: 1, counted: 1, due: term.Add(-time.Hour)}, "catchup"}, // missed while no scheduler ran
		{attempt{kind: axtype.RunSchedule, attempt: 2, counted: 2, due: term.Add(time.Minute)}, "retry"},
		{attempt{kind: axtype.RunSchedule, attempt: 2, counted: 1, due: term.Add(time.Minute)}, "live"}, // after a give-back: not a retry
		{attempt{kind: axtype.RunManual, attempt: 1, counted: 1, due: term.Add(time.Minute)}, "manual"},
		{attempt{kind: axtype.RunBackfill, attempt: 1, counted: 1, due: term.AddDate(0, -1, 0)}, "backfill"},
		{attempt{kind: axtype.RunBackfill, attempt: 3, counted: 3, due: term}, "backfill"},
	} {
		if got := fireKind(&tc.a, term); got != tc.want {
			t.Errorf("fireKind(%s, attempt %d counted %d, due %s) = %s, want %s", tc.a.kind, tc.a.attempt, tc.a.counted, tc.a.due.Sub(term), got, tc.want)
		}
	}
}

// TestInboxDepthMetric: ax_inbox_depth counts the results stored in the
// inbox and not applied yet, as the primary last read them, and falls back
// to 0 at the read after they are recorded (here as stale: no attempt holds
// their tickets).
func TestInboxDepthMetric(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		reg := prometheus.NewRegistry()
		e := setup(t, Config{Registerer: reg}, nil, "pipeline: h\ntimezone: UTC\nschedule: \"@every 1h\"\ntasks:\n  - {name: a, http: \"http://127.0.0.1:1/dispatch\"}\n")
		sleep(time.Second)
		if v := series(t, reg, "ax_inbox_depth", map[string]string{}).GetGauge().GetValue(); v != 0 {
			t.Fatalf("ax_inbox_depth with an empty inbox = %v", v)
		}
		for i := range 3 {
			ticket := fmt.Sprintf("gone-%d", i)
			if _, err := e.st.ReceiveResult(context.Background(), store.InboxEntry{Ticket: ticket, InstanceID: 999 + int64(i),
				Report: `{"ticket":"` + ticket + `","status":"success"}`, ReceivedBy: "standby", ReceivedAt: time.Now()}); err != nil {
				t.Fatal(err)
			}
		}
		peak := 0.0
		for range 250 { // 2.5 s: the loop reads the inbox on its turns, each second at least
			sleep(10 * time.Millisecond)
			peak = max(peak, series(t, reg, "ax_inbox_depth", map[string]string{}).GetGauge().GetValue())
		}
		last := series(t, reg, "ax_inbox_depth", map[string]string{}).GetGauge().GetValue()
		e.stop()
		if peak != 3 || last != 0 {
			t.Errorf("ax_inbox_depth: peak %v, then %v; want 3 while they wait, 0 once recorded", peak, last)
		}
		for i := range 3 {
			en, err := e.st.InboxEntryOf(context.Background(), fmt.Sprintf("gone-%d", i))
			if err != nil || en.AppliedAt.IsZero() {
				t.Errorf("inbox entry gone-%d: %+v, %v; want it closed", i, en, err)
			}
		}
	})
}

// TestMetricsCatchUpApartFromLive: fires missed while no scheduler ran and
// run late after a restart are counted in ax_dispatch_delay_seconds
// {kind="catchup"}, with their lateness; ax_dispatch_latency_seconds keeps
// only the live fires after the restart, on time.
func TestMetricsCatchUpApartFromLive(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		cfg := Config{MisfireAfter: time.Minute}
		e := setup(t, cfg, nil, "pipeline: m\ntimezone: UTC\nschedule: \"@every 10s\"\ntasks:\n  - {name: a, function: record}\n")
		sleep(39*time.Second + 500*time.Millisecond) // +10s … +30s live
		e.stop()
		sleep(30 * time.Second) // back at +69.5s: +40s, +50s and +60s missed
		reg := prometheus.NewRegistry()
		cfg.Registerer = reg
		e.restart(cfg, 25*time.Second) // +70s, +80s, +90s live
		lat := series(t, reg, "ax_dispatch_latency_seconds", map[string]string{}).GetHistogram()
		if lat.GetSampleCount() != 3 || lat.GetSampleSum() > 1 {
			t.Errorf("ax_dispatch_latency_seconds after the restart: %d samples, sum %.3fs; want the 3 live fires, on time", lat.GetSampleCount(), lat.GetSampleSum())
		}
		cu := series(t, reg, "ax_dispatch_delay_seconds", map[string]string{"kind": "catchup"}).GetHistogram()
		// 29.5 + 19.5 + 9.5 s late.
		if cu.GetSampleCount() != 3 || cu.GetSampleSum() < 58 || cu.GetSampleSum() > 59 {
			t.Errorf("ax_dispatch_delay_seconds{kind=catchup}: %d samples, sum %.3fs; want 3 missed fires, 58.5 s late in all", cu.GetSampleCount(), cu.GetSampleSum())
		}
	})
}

// TestBackfillMetricsOnlyWhileActive: ax_backfill_runs has series for a
// backfill while it runs, none once it ended (done or cancelled), so that
// backfill ids, which grow for ever, are not an unbounded label.
func TestBackfillMetricsOnlyWhileActive(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		reg := prometheus.NewRegistry()
		e := setup(t, Config{Registerer: reg}, map[string]func(context.Context, runner.Attempt) error{
			"daily.sync": func(context.Context, runner.Attempt) error { time.Sleep(2 * time.Second); return nil },
		}, layered)
		from, to := days(start, 5)
		done := e.startBackfill(BackfillParams{Pipeline: "daily", From: from, To: to, MaxActiveRuns: 1})
		cancelled := e.startBackfill(BackfillParams{Pipeline: "daily", From: from.AddDate(0, 0, -10), To: to.AddDate(0, 0, -10), MaxActiveRuns: 1})
		sleep(3 * time.Second)
		for _, id := range []int64{done, cancelled} {
			if v := series(t, reg, "ax_backfill_runs", map[string]string{"backfill": fmt.Sprint(id), "state": "total"}).GetGauge().GetValue(); v != 5 {
				t.Errorf("ax_backfill_runs{backfill=%d,state=total} while it runs = %v, want 5", id, v)
			}
		}
		if _, err := e.do(CancelBackfill{Backfill: cancelled}, By{Actor: "operator:test"}); err != nil {
			t.Fatal(err)
		}
		sleep(2 * time.Minute)
		e.stop()
		if bs, _ := e.st.Backfills(context.Background(), done); len(bs) != 1 || bs[0].State != BackfillDone {
			t.Fatalf("backfill %d: %+v, want done", done, bs)
		}
		for _, id := range []int64{done, cancelled} {
			for _, st := range []string{"done", "failed", "total"} {
				if n := countSeries(t, reg, "ax_backfill_runs", map[string]string{"backfill": fmt.Sprint(id), "state": st}); n != 0 {
					t.Errorf("ax_backfill_runs{backfill=%d,state=%s} still served after the backfill ended", id, st)
				}
			}
		}
	})
}

// A task removed by a reload loses its series, also when an attempt of it
// was running then (its result came after the reload and made the series
// again, for good), and with NoTaskLabels a pipeline removed whole loses
// its pipeline series (they stayed for ever: every renamed or removed
// pipeline added series until a restart).
func TestMetricsOfRemovedTasksGo(t *testing.T) {
	t.Parallel()
	for _, noTask := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoTaskLabels=%v", noTask), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				fns := map[string]func(context.Context, runner.Attempt) error{
					"p.a": func(ctx context.Context, a runner.Attempt) error {
						select {
						case <-time.After(8 * time.Second):
							return nil
						case <-ctx.Done():
							return ctx.Err()
						}
					},
				}
				other := "pipeline: q\ntimezone: UTC\nschedule: \"@every 10s\"\ndefaults: {function: record}\ntasks:\n  - {name: x}\n"
				reg := prometheus.NewRegistry()
				e := setup(t, Config{Registerer: reg, NoTaskLabels: noTask}, fns, reloadP, other)
				sleep(12 * time.Second) // p.a@10s runs until +18s
				if _, err := e.eng.Reload(compile(t, other)); err != nil {
					t.Fatal(err)
				}
				sleep(20 * time.Second) // its result came at +18s
				e.stop()
				if ins := e.instances(store.InstanceFilter{TaskID: "p.a", States: []axtype.State{axtype.Success}}); len(ins) != 1 {
					t.Fatalf("p.a's running attempt: %d succeeded, want its result recorded", len(ins))
				}
				mfs, err := reg.Gather()
				if err != nil {
					t.Fatal(err)
				}
				q := 0
				for _, mf := range mfs {
					if !strings.HasPrefix(mf.GetName(), "ax_task_") {
						continue
					}
					for _, m := range mf.GetMetric() {
						for _, l := range m.GetLabel() {
							switch {
							case l.GetName() == "pipeline" && l.GetValue() == "p":
								t.Errorf("%s%v: a series of the removed pipeline p", mf.GetName(), m.GetLabel())
							case l.GetName() == "pipeline" && l.GetValue() == "q":
								q++
							}
						}
					}
				}
				if q == 0 {
					t.Error("no series of q, which stayed: the test sees nothing")
				}
			})
		})
	}
}
