package engine

import (
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/ax-sched/ax/store"
)

// series finds the sample of name whose labels are exactly want.
func series(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) *dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
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
			return m
		}
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
		{attempt{kind: store.RunSchedule, attempt: 1, due: term.Add(time.Minute)}, "live"},
		{attempt{kind: store.RunSchedule, attempt: 1, due: term}, "live"},
		{attempt{kind: store.RunSchedule, attempt: 1, due: term.Add(-time.Hour)}, "catchup"}, // missed while no scheduler ran
		{attempt{kind: store.RunSchedule, attempt: 2, due: term.Add(time.Minute)}, "retry"},
		{attempt{kind: store.RunManual, attempt: 1, due: term.Add(time.Minute)}, "manual"},
		{attempt{kind: store.RunBackfill, attempt: 1, due: term.AddDate(0, -1, 0)}, "backfill"},
		{attempt{kind: store.RunBackfill, attempt: 3, due: term}, "backfill"},
	} {
		if got := fireKind(&tc.a, term); got != tc.want {
			t.Errorf("fireKind(%s, attempt %d, due %s) = %s, want %s", tc.a.kind, tc.a.attempt, tc.a.due.Sub(term), got, tc.want)
		}
	}
}
