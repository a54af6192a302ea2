package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

const layered = `pipeline: daily
timezone: Europe/Berlin
schedule: "30 2 * * *"
defaults: {function: record}
tasks:
  - {name: sync}
  - {name: clean, depends_on: [sync]}
  - {name: enrich, depends_on: [clean]}
  - {name: report, depends_on: [enrich, sync]}
  - {name: audit, depends_on: [sync]}
`

func compileOne(t *testing.T, src string) *dag.Graph {
	t.Helper()
	p, errs := defs.Parse("p.yaml", []byte(src), defs.Options{Now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
	if errs.Err() != nil {
		t.Fatal(errs)
	}
	g, errs := dag.Compile([]*defs.Pipeline{p}, dag.Options{DispatchRate: -1})
	if errs.Err() != nil {
		t.Fatal(errs)
	}
	return g
}

func TestPlanBackfill(t *testing.T) {
	t.Parallel()
	g := compileOne(t, layered)
	berlin, _ := time.LoadLocation("Europe/Berlin")
	from := time.Date(2026, 3, 26, 0, 0, 0, 0, berlin)
	to := time.Date(2026, 4, 1, 23, 59, 59, 0, berlin)
	spec, err := PlanBackfill(g, BackfillParams{Pipeline: "daily", From: from, To: to, Select: "clean+"})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(spec.Tasks, ","); got != "clean,enrich,report" {
		t.Errorf("tasks %s, want clean and everything downstream in dependency order", got)
	}
	var times []string
	for _, at := range spec.Times {
		times = append(times, at.In(berlin).Format(time.RFC3339))
	}
	// 7 days; 02:30 does not exist on 29 March (spring forward): it fires at 03:00.
	want := "[2026-03-26T02:30:00+01:00 2026-03-27T02:30:00+01:00 2026-03-28T02:30:00+01:00 2026-03-29T03:00:00+02:00 2026-03-30T02:30:00+02:00 2026-03-31T02:30:00+02:00 2026-04-01T02:30:00+02:00]"
	if fmt.Sprint(times) != want {
		t.Errorf("times\n got %v\nwant %s", times, want)
	}
	rev, _ := PlanBackfill(g, BackfillParams{Pipeline: "daily", From: from, To: to, Select: "clean+", Reverse: true})
	if !rev.Times[0].Equal(spec.Times[6]) || !rev.Times[6].Equal(spec.Times[0]) {
		t.Errorf("--reverse did not reverse the runs: %v", rev.Times)
	}
	for _, tc := range []struct {
		p    BackfillParams
		want string
	}{
		{BackfillParams{Pipeline: "daily", From: to, To: from}, "--from 2026-04-01T23:59:59+02:00 is after --to 2026-03-26T00:00:00+01:00"},
		{BackfillParams{Pipeline: "daily", From: from, To: from.Add(time.Hour)}, `gives no fire time between`},
		{BackfillParams{Pipeline: "daily", From: from, To: to, Select: "claen+"}, `no task "claen" (did you mean "clean"?)`},
		{BackfillParams{Pipeline: "dialy", From: from, To: to}, `no pipeline "dialy" (did you mean "daily"?)`},
		{BackfillParams{Pipeline: "daily", From: from, To: to, Rerun: "some"}, `--rerun "some": use none, failed or all`},
	} {
		if _, err := PlanBackfill(g, tc.p); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want %q", tc.p, err, tc.want)
		}
	}
}

// startBackfill plans and stores a backfill, as `ax backfill` does.
func (e *env) startBackfill(p BackfillParams) int64 {
	e.t.Helper()
	spec, err := PlanBackfill(e.eng.sched.g, p)
	if err != nil {
		e.t.Fatal(err)
	}
	id, err := CreateBackfill(context.Background(), e.st, e.eng.sched.g, spec, "operator:test", time.Now())
	if err != nil {
		e.t.Fatal(err)
	}
	return id
}

func (e *env) backfill(id int64) store.Backfill {
	e.t.Helper()
	b, err := e.st.Backfills(context.Background(), id)
	if err != nil || len(b) != 1 {
		e.t.Fatalf("backfill %d: %v %v", id, b, err)
	}
	return b[0]
}

func days(start time.Time, n int) (time.Time, time.Time) {
	return start.AddDate(0, 0, -n), start.Add(-time.Second)
}

func TestBackfillFailureOnDayThreeDoesNotStopOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		from, to := days(start, 5)
		day3 := time.Date(1999, 12, 29, 2, 30, 0, 0, time.UTC)
		fns := map[string]func(context.Context, runner.Attempt) error{
			"daily.clean": func(_ context.Context, a runner.Attempt) error {
				if a.LogicalTime.Equal(day3) {
					return fmt.Errorf("bad input for %s: %w", a.LogicalTime.Format(time.DateOnly), runner.ErrPermanent)
				}
				return nil
			},
		}
		e := setup(t, Config{NoSchedules: true}, fns, strings.Replace(layered, "Europe/Berlin", "UTC", 1))
		id := e.startBackfill(BackfillParams{Pipeline: "daily", From: from, To: to, MaxActiveRuns: 2})
		sleep(time.Minute)
		e.stop()
		b := e.backfill(id)
		if b.State != BackfillDone || b.DoneRuns != 5 || b.FailedRuns != 1 || !strings.Contains(b.Error, "1999-12-29T02:30:00Z: clean") {
			t.Fatalf("backfill %+v", b)
		}
		ran := map[string]int{}
		for _, c := range e.rec.snapshot() {
			ran[fmt.Sprintf("%s@%s", c.task, c.logical.Format(time.DateOnly))]++
		}
		for d := 27; d <= 31; d++ {
			date := fmt.Sprintf("1999-12-%02d", d)
			for _, task := range []string{"sync", "clean", "enrich", "report", "audit"} {
				want := 1
				if d == 29 && (task == "enrich" || task == "report") {
					want = 0 // downstream of the failed clean
				}
				if got := ran["daily."+task+"@"+date]; got != want {
					t.Errorf("%s@%s ran %d times, want %d", task, date, got, want)
				}
			}
		}
	})
}

func TestBackfillStopOnFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		from, to := days(start, 5)
		fns := map[string]func(context.Context, runner.Attempt) error{
			"daily.sync": func(_ context.Context, a runner.Attempt) error {
				if a.LogicalTime.Day() == 28 {
					return errors.New("source down")
				}
				return nil
			},
		}
		e := setup(t, Config{NoSchedules: true}, fns, strings.Replace(layered, "Europe/Berlin", "UTC", 1))
		id := e.startBackfill(BackfillParams{Pipeline: "daily", From: from, To: to, StopOnFailure: true})
		sleep(time.Minute)
		e.stop()
		b := e.backfill(id)
		if b.State != BackfillFailed || b.DoneRuns != 2 || b.FailedRuns != 1 || b.TotalRuns != 5 {
			t.Errorf("backfill %+v: want stopped after the second day", b)
		}
		runs, _ := e.st.BackfillRuns(context.Background(), id)
		if len(runs) != 2 {
			t.Errorf("%d runs created, want 2", len(runs))
		}
	})
}

// TestBackfillBesideLiveSchedule: live runs keep firing on time while a
// backfill of the same pipeline runs; no (task, logical time) runs twice.
func TestBackfillBesideLiveSchedule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		slow := map[string]func(context.Context, runner.Attempt) error{
			"live.a": func(context.Context, runner.Attempt) error { time.Sleep(3 * time.Second); return nil },
		}
		e := setup(t, Config{}, slow, "pipeline: live\ntimezone: UTC\nschedule: \"*/10 * * * * *\"\ndefaults: {function: record}\ntasks:\n  - {name: a}\n  - {name: b, depends_on: [a]}\n")
		// Backfill 30 past logical times, and the live ones of the next 30 s
		// (which the live schedule runs: the backfill leaves them alone).
		id := e.startBackfill(BackfillParams{Pipeline: "live", From: start.Add(-300 * time.Second), To: start.Add(30 * time.Second), MaxActiveRuns: 3})
		sleep(2 * time.Minute)
		e.stop()
		seen := map[string]int{}
		for _, c := range e.rec.snapshot() {
			k := fmt.Sprintf("%s@%s", c.task, c.logical.Sub(start))
			seen[k]++
			if seen[k] > 1 {
				t.Errorf("%s ran twice", k)
			}
		}
		for _, in := range e.instances(store.InstanceFilter{TaskID: "live.a", LogicalFrom: start}) {
			if e.eng.resolver.runs.kindOf(context.Background(), in.RunID) != axtype.RunSchedule || in.StartedAt.IsZero() {
				continue
			}
			if late := in.StartedAt.Sub(in.LogicalTime); late > 0 {
				t.Errorf("live fire %s dispatched %s late", in.LogicalTime.Sub(start), late)
			}
		}
		b := e.backfill(id)
		if b.State != BackfillDone || b.FailedRuns != 0 || b.DoneRuns != b.TotalRuns {
			t.Errorf("backfill %+v", b)
		}
		for i := -300; i < 0; i += 10 {
			if seen[fmt.Sprintf("live.b@%s", time.Duration(i)*time.Second)] != 1 {
				t.Errorf("past logical time %ds was not backfilled", i)
			}
		}
	})
}

// TestBackfillerDue is the table of when backfills step: at once after
// results while some are active, and every second to poll the store.
func TestBackfillerDue(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	active := map[int64]*bfState{7: {}}
	for _, tc := range []struct {
		name       string
		b          backfiller
		step, poll bool
		checked    time.Time // bfChecked after
	}{
		{name: "nothing new within the second", b: backfiller{bfChecked: now.Add(-500 * time.Millisecond)},
			checked: now.Add(-500 * time.Millisecond)},
		{name: "results without an active backfill", b: backfiller{bfChecked: now.Add(-500 * time.Millisecond), bfDirty: true},
			checked: now.Add(-500 * time.Millisecond)},
		{name: "results with an active backfill step at once", b: backfiller{backfills: active, bfChecked: now.Add(-500 * time.Millisecond), bfDirty: true},
			step: true, checked: now.Add(-500 * time.Millisecond)},
		{name: "a second passed: poll the store", b: backfiller{bfChecked: now.Add(-time.Second)},
			step: true, poll: true, checked: now},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := tc.b
			step, poll := b.due(now)
			if step != tc.step || poll != tc.poll {
				t.Errorf("due = %v, %v; want %v, %v", step, poll, tc.step, tc.poll)
			}
			if !b.bfChecked.Equal(tc.checked) {
				t.Errorf("checked = %v; want %v", b.bfChecked, tc.checked)
			}
			if step && b.bfDirty {
				t.Errorf("still dirty after stepping")
			}
			if !step && b.bfDirty != tc.b.bfDirty {
				t.Errorf("dirty changed without a step")
			}
		})
	}
}

// fakeBackfillHost and fakeBackfillReader stand in for the other
// components and the store: the backfiller's rules are tested on their own.
type fakeBackfillHost struct {
	over    map[int64][]string // run id → failed tasks, for runs that are over
	created []newRunSpec
	woken   int
	fence   *store.Fence
}

func (h *fakeBackfillHost) newRunWith(_ context.Context, spec newRunSpec, _ time.Time) (*runState, error) {
	h.created = append(h.created, spec)
	return &runState{id: int64(100 + len(h.created)), logical: spec.at}, nil
}

func (h *fakeBackfillHost) runFinished(_ context.Context, id int64) (bool, []string, error) {
	failed, ok := h.over[id]
	return ok, failed, nil
}

func (h *fakeBackfillHost) w() *store.Fence { return h.fence }
func (h *fakeBackfillHost) soon()           { h.woken++ }

type fakeBackfillReader struct{ ins []axtype.Instance }

func (r fakeBackfillReader) Backfills(context.Context, int64) ([]store.Backfill, error) {
	return nil, nil
}
func (r fakeBackfillReader) BackfillRuns(context.Context, int64) ([]axtype.Run, error) {
	return nil, nil
}
func (r fakeBackfillReader) Instances(context.Context, store.InstanceFilter) ([]axtype.Instance, error) {
	return r.ins, nil
}

// TestBackfillerTasksToRun is the rerun policy's table: which selected
// tasks a backfill runs at a logical time, given the instances there
// already. A WAITING one counts as failed when its run is over (blocked
// behind a failure for good) and as active when its run goes on; an active
// one is never run beside itself, under any policy.
func TestBackfillerTasksToRun(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 2, 30, 0, 0, time.UTC)
	in := func(task string, s axtype.State, run int64) axtype.Instance {
		return axtype.Instance{TaskID: "daily." + task, State: s, RunID: run, LogicalTime: at}
	}
	const overRun, liveRun = 1, 2
	have := []axtype.Instance{
		in("sync", axtype.Success, overRun),
		in("clean", axtype.Failed, overRun),
		in("enrich", axtype.Killed, overRun),
		in("report", axtype.Waiting, overRun), // behind the failure, for good
		in("audit", axtype.Running, liveRun),
	}
	gated := append(have[:4:4], in("audit", axtype.Waiting, liveRun)) // its run goes on
	all := []string{"sync", "clean", "enrich", "report", "audit", "fresh"}
	for _, tc := range []struct {
		name  string
		rerun string
		have  []axtype.Instance
		tasks []string
		want  []string
	}{
		{name: "nothing there: every task", rerun: RerunNone, tasks: all, want: all},
		{name: "none fills gaps only", rerun: RerunNone, have: have, tasks: all, want: []string{"fresh"}},
		{name: "failed reruns failed, killed and blocked ones", rerun: RerunFailed, have: have, tasks: all, want: []string{"clean", "enrich", "report", "fresh"}},
		{name: "all reruns succeeded ones too, never a running one", rerun: RerunAll, have: have, tasks: all, want: []string{"sync", "clean", "enrich", "report", "fresh"}},
		{name: "waiting in a run that goes on is active", rerun: RerunAll, have: gated, tasks: []string{"audit", "report"}, want: []string{"report"}},
		{name: "the selection only, in its order", rerun: RerunFailed, have: have, tasks: []string{"report", "sync"}, want: []string{"report"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			host := &fakeBackfillHost{over: map[int64][]string{overRun: {"clean"}}}
			b := newBackfiller(host, fakeBackfillReader{ins: tc.have}, slog.New(slog.DiscardHandler), nil)
			got, err := b.tasksToRun(context.Background(), BackfillSpec{Pipeline: "daily", Tasks: tc.tasks, Rerun: tc.rerun}, at)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("tasksToRun = %v; want %v", got, tc.want)
			}
		})
	}
}

// TestBackfillerStep drives one backfill through the backfiller alone: at
// most MaxActiveRuns runs at once, the next started as one finishes, and,
// under StopOnFailure, none after a failed run; it ends FAILED, naming the
// failed run, once the runs in flight are over. Its progress is stored.
func TestBackfillerStep(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "ax.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	day := func(d int) time.Time { return time.Date(2026, 3, d, 1, 30, 0, 0, time.UTC) } // 02:30 in Berlin
	spec := BackfillSpec{Pipeline: "daily", Tasks: []string{"sync", "clean"}, Times: []time.Time{day(1), day(2), day(3), day(4)},
		MaxActiveRuns: 2, StopOnFailure: true}
	g := compileOne(t, layered)
	id, err := CreateBackfill(ctx, st, g, spec, "ann", now)
	if err != nil {
		t.Fatal(err)
	}
	tasks, _ := buildTasks(g)
	l, err := st.AcquireLease(ctx, store.LeaseParams{Holder: "test", TTL: time.Hour, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	host := &fakeBackfillHost{over: map[int64][]string{}, fence: st.Fence(l.Epoch)}
	gauge := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "runs"}, []string{"backfill", "state"})
	b := newBackfiller(host, st, slog.New(slog.DiscardHandler), gauge)
	b.sched = &inForce{&snapshot{g: g, tasks: tasks}}
	bf := &bfState{rec: store.Backfill{ID: id, Pipeline: "daily", State: BackfillRunning, TotalRuns: 4, Actor: "ann"}, spec: spec,
		active: map[int64]time.Time{}, created: map[int64]bool{}}
	b.backfills[id] = bf
	step := func(wantCreated, wantDone, wantFailed int, wantState string) {
		t.Helper()
		if err := b.step(ctx, bf, now); err != nil {
			t.Fatal(err)
		}
		if len(host.created) != wantCreated || bf.rec.DoneRuns != wantDone || bf.rec.FailedRuns != wantFailed || bf.rec.State != wantState {
			t.Fatalf("after a step: %d runs created, %d done, %d failed, %s; want %d, %d, %d, %s",
				len(host.created), bf.rec.DoneRuns, bf.rec.FailedRuns, bf.rec.State, wantCreated, wantDone, wantFailed, wantState)
		}
		stored, err := st.Backfills(ctx, id)
		if err != nil || len(stored) != 1 || stored[0].DoneRuns != wantDone || stored[0].State != wantState {
			t.Fatalf("stored %+v (%v); want %d done, %s", stored, err, wantDone, wantState)
		}
	}
	step(2, 0, 0, BackfillRunning) // two at once, no more
	if host.created[0].at != day(1) || host.created[1].at != day(2) || host.created[0].key != fmt.Sprintf("backfill/%d/%d", id, day(1).UnixMilli()) {
		t.Fatalf("runs created: %+v", host.created)
	}
	host.over[101] = nil
	step(3, 1, 0, BackfillRunning) // one over: the third starts
	host.over[102] = []string{"clean"}
	step(3, 2, 1, BackfillRunning) // a failure: nothing more starts, the third runs on
	host.over[103] = nil
	step(3, 3, 1, BackfillFailed) // over: failed, the fourth never ran
	if b.backfills[id] != nil {
		t.Error("a finished backfill is still driven")
	}
	if want := "failed runs: 2026-03-02T02:30:00+01:00: clean"; bf.rec.Error != want {
		t.Errorf("error %q; want %q", bf.rec.Error, want)
	}
}
