package api

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ax-sched/ax/api/apitest"
	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"
)

// reasonsPipeline: publish waits on report and load; nothing fires on its
// own during a test (runs come from makeRun).
const reasonsPipeline = `pipeline: rp
timezone: UTC
schedule: "0 0 1 1 *"
tasks:
  - {name: report, function: noop}
  - {name: load, function: noop}
  - {name: publish, depends_on: [report, load], function: noop}
`

// makeRun creates a run of rp at logical time at, created at created, as
// the scheduler does: report and load SCHEDULED, publish WAITING with the
// reason written at creation.
func makeRun(t *testing.T, st *store.Store, at, created time.Time) map[string]axtype.Instance {
	t.Helper()
	_, ins, err := st.CreateRun(context.Background(), store.CreateRunParams{Pipeline: "rp", Trigger: "rp", Kind: axtype.RunManual, LogicalTime: at,
		Actor: "test", Now: created, Instances: []store.NewInstance{
			{TaskID: "rp.report", State: axtype.Scheduled, NextFireAt: at},
			{TaskID: "rp.load", State: axtype.Scheduled, NextFireAt: at},
			{TaskID: "rp.publish", State: axtype.Waiting, Reason: "waiting for upstream rp.load, rp.report"}}})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]axtype.Instance{}
	for _, in := range ins {
		out[in.TaskID] = in
	}
	return out
}

// moveTo moves instance in along states (each a legal step), the last
// with error text why.
func moveTo(t *testing.T, st *store.Store, in axtype.Instance, why string, states ...axtype.State) {
	t.Helper()
	ctx := context.Background()
	for i, to := range states {
		cur, err := st.Instance(ctx, in.ID)
		if err != nil {
			t.Fatal(err)
		}
		p := store.TransitionParams{InstanceID: in.ID, Version: cur.Version, From: cur.State, To: to, Now: time.Now(), Actor: "test"}
		if i == len(states)-1 && why != "" {
			p.Set.Error = &why
		}
		if _, err := st.Transition(ctx, p); err != nil {
			t.Fatalf("%s %s → %s: %v", in.TaskID, cur.State, to, err)
		}
	}
}

// What a waiting instance waits on is judged when asked: after report
// succeeded, publish waits for load alone, whatever was written when the
// run was created.
func TestRunsAPIWaitingReasonIsLive(t *testing.T) {
	e := setupAPI(t, apitest.Opts{Standby: true, Pipeline: reasonsPipeline})
	at := time.Date(2025, 3, 1, 2, 0, 0, 0, time.UTC)
	run := makeRun(t, e.St, at, at)
	moveTo(t, e.St, run["rp.report"], "", axtype.Running, axtype.Success)
	moveTo(t, e.St, run["rp.load"], "", axtype.Running)

	code, body := e.Call("GET", fmt.Sprintf("/api/v1/runs/%d", run["rp.report"].RunID), "")
	if code != 200 {
		t.Fatalf("run: %d %s", code, body)
	}
	d := decodeJSON[RunDetail](t, body)
	if got, want := d.Run.Waiting["rp.publish"], "waiting for upstream rp.load (RUNNING)"; got != want {
		t.Errorf("run detail: publish waits on %q, want %q", got, want)
	}
	for _, in := range d.Instances {
		if in.TaskID == "rp.publish" && in.Reason != "waiting for upstream rp.load (RUNNING)" {
			t.Errorf("run detail: instance publish has reason %q, want the run's judgement", in.Reason)
		}
	}
	code, body = e.Call("GET", "/api/v1/pipelines/rp/runs?recent=true&limit=1", "")
	if code != 200 {
		t.Fatalf("runs: %d %s", code, body)
	}
	if rs := decodeJSON[[]RunView](t, body); len(rs) != 1 || rs[0].Waiting["rp.publish"] != "waiting for upstream rp.load (RUNNING)" {
		t.Errorf("runs: %+v, want publish waiting for upstream rp.load (RUNNING)", rs)
	}

	// load succeeds too: publish is released at the next check, and says so.
	moveTo(t, e.St, run["rp.load"], "", axtype.Success)
	_, body = e.Call("GET", fmt.Sprintf("/api/v1/runs/%d", run["rp.report"].RunID), "")
	if got := decodeJSON[RunDetail](t, body).Run.Waiting["rp.publish"]; !strings.Contains(got, "every upstream succeeded") {
		t.Errorf("with both upstreams done publish waits on %q, want every upstream succeeded", got)
	}
}

// A run that ended failed names the failures that ended it (report, with
// its error), not the downstream that failed because of them.
func TestRunsAPINamesRootFailures(t *testing.T) {
	e := setupAPI(t, apitest.Opts{Standby: true, Pipeline: reasonsPipeline})
	at := time.Date(2025, 3, 1, 2, 0, 0, 0, time.UTC)
	run := makeRun(t, e.St, at, at)
	moveTo(t, e.St, run["rp.report"], "FAILED after 1 attempt(s): exit status 1: disk full", axtype.Running, axtype.Failed)
	moveTo(t, e.St, run["rp.load"], "", axtype.Running, axtype.Success)
	moveTo(t, e.St, run["rp.publish"], "upstream rp.report failed", axtype.Failed)

	_, body := e.Call("GET", fmt.Sprintf("/api/v1/runs/%d", run["rp.report"].RunID), "")
	v := decodeJSON[RunDetail](t, body).Run
	if v.State != "failed" || len(v.Failures) != 1 || v.Failures[0].Task != "rp.report" || v.Failures[0].Error != "FAILED after 1 attempt(s): exit status 1: disk full" {
		t.Errorf("run: state %s, failures %+v; want failed, with rp.report and its error alone", v.State, v.Failures)
	}
}

// The first page of runs is by when they happened: a run triggered now for
// an older date comes before one whose logical time is later but which
// happened before it; and the home page shows a recent failure although the
// latest run succeeded.
func TestRecentRunsByWhenTheyHappened(t *testing.T) {
	e := setupAPI(t, apitest.Opts{Standby: true, Pipeline: reasonsPipeline})
	mar, jan := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	failed := makeRun(t, e.St, mar.Add(-24*time.Hour), mar.Add(-24*time.Hour))
	moveTo(t, e.St, failed["rp.report"], "exit status 2", axtype.Running, axtype.Failed)
	moveTo(t, e.St, failed["rp.load"], "", axtype.Running, axtype.Success)
	moveTo(t, e.St, failed["rp.publish"], "upstream rp.report failed", axtype.Failed)
	later := makeRun(t, e.St, mar, mar)
	older := makeRun(t, e.St, jan, mar.Add(time.Hour)) // triggered on 1 March for 1 January
	for _, run := range []map[string]axtype.Instance{later, older} {
		for _, id := range []string{"rp.report", "rp.load"} {
			moveTo(t, e.St, run[id], "", axtype.Running, axtype.Success)
		}
		moveTo(t, e.St, run["rp.publish"], "", axtype.Scheduled, axtype.Running, axtype.Success)
	}

	_, body := e.Call("GET", "/api/v1/pipelines/rp/runs?recent=true&limit=1", "")
	if rs := decodeJSON[[]RunView](t, body); len(rs) != 1 || rs[0].ID != older["rp.report"].RunID {
		t.Errorf("recent runs, limit 1: %+v; want run %d (triggered last, for 1 January)", rs, older["rp.report"].RunID)
	}
	_, body = e.Call("GET", "/api/v1/pipelines", "")
	ps := decodeJSON[[]PipelineItem](t, body)
	if len(ps) != 1 || ps[0].Latest == nil || ps[0].Latest.ID != older["rp.report"].RunID {
		t.Fatalf("pipelines: %+v; want the latest run %d", ps, older["rp.report"].RunID)
	}
	if rf := ps[0].RecentFailure; rf == nil || rf.ID != failed["rp.report"].RunID || len(rf.Failures) != 1 || rf.Failures[0].Error != "exit status 2" {
		t.Errorf("recent failure: %+v; want run %d, rp.report: exit status 2", rf, failed["rp.report"].RunID)
	}
}

// TestConsoleHomeShowsRecentFailureInBrowser: the home page marks a
// pipeline whose latest run succeeded but an earlier one failed, with the
// task and error that ended it.
func TestConsoleHomeShowsRecentFailureInBrowser(t *testing.T) {
	t.Parallel()
	ctx, scriptErrors := browser(t)
	e := setupAPI(t, apitest.Opts{Standby: true, Pipeline: reasonsPipeline})
	at := time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC)
	failed := makeRun(t, e.St, at, at)
	moveTo(t, e.St, failed["rp.report"], "exit status 2", axtype.Running, axtype.Failed)
	moveTo(t, e.St, failed["rp.load"], "", axtype.Running, axtype.Success)
	moveTo(t, e.St, failed["rp.publish"], "upstream rp.report failed", axtype.Failed)
	ok := makeRun(t, e.St, at.Add(24*time.Hour), at.Add(24*time.Hour))
	for _, id := range []string{"rp.report", "rp.load"} {
		moveTo(t, e.St, ok[id], "", axtype.Running, axtype.Success)
	}
	moveTo(t, e.St, ok["rp.publish"], "", axtype.Scheduled, axtype.Running, axtype.Success)

	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	var cell string
	err := chromedp.Do(ctx, chromedp.Navigate(e.Srv.URL+"/#/"), chromedp.WaitVisible(css(`tr[data-pipeline="rp"] td.failure .pill.FAILED`)))
	if err == nil {
		cell, err = chromedp.Run(ctx, textNow(css(`tr[data-pipeline="rp"] td.failure`)))
	}
	var shot []byte
	if err == nil {
		shot, err = chromedp.Run(ctx, chromedp.FullScreenshot(100))
	}
	if err != nil {
		t.Fatalf("browser: %v (script errors: %v)", err, scriptErrors())
	}
	if want := fmt.Sprintf("run %d", failed["rp.report"].RunID); !strings.Contains(cell, want) || !strings.Contains(cell, "rp.report: exit status 2") {
		t.Errorf("recent failure cell: %q, want %s and rp.report: exit status 2", cell, want)
	}
	path := filepath.Join(t.ArtifactDir(), "console-recent-failure.png")
	if err := os.WriteFile(path, shot, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s (%d bytes)", path, len(shot))

	// The failed run's page names what ended it.
	var ended string
	err = chromedp.Do(ctx, chromedp.Navigate(fmt.Sprintf("%s/#/r/%d", e.Srv.URL, failed["rp.report"].RunID)), chromedp.WaitVisible(css(`#failures`)))
	if err == nil {
		ended, err = chromedp.Run(ctx, textNow(css(`#failures`)))
	}
	if err != nil || !strings.Contains(ended, "rp.report") || !strings.Contains(ended, "exit status 2") || strings.Contains(ended, "rp.publish") {
		t.Errorf("failed run page: %q (%v), want rp.report and exit status 2 alone", ended, err)
	}

	// A run still going: its page says what publish waits on now, not what
	// was written when the run was created.
	going := makeRun(t, e.St, at.Add(-24*time.Hour), at.Add(48*time.Hour))
	moveTo(t, e.St, going["rp.report"], "", axtype.Running, axtype.Success)
	moveTo(t, e.St, going["rp.load"], "", axtype.Running)
	var notOver string
	err = chromedp.Do(ctx, chromedp.Navigate(fmt.Sprintf("%s/#/r/%d", e.Srv.URL, going["rp.report"].RunID)), chromedp.WaitVisible(css(`#notover`)))
	if err == nil {
		notOver, err = chromedp.Run(ctx, textNow(css(`#notover`)))
	}
	if err != nil || !strings.Contains(notOver, "rp.publish is WAITING: waiting for upstream rp.load (RUNNING)") {
		t.Errorf("run page, why it is not over: %q (%v), want publish waiting for upstream rp.load (RUNNING)", notOver, err)
	}
	if errs := scriptErrors(); len(errs) > 0 {
		t.Errorf("the page showed script errors:\n%s", strings.Join(errs, "\n"))
	}
}

// An operator's run deferred to a time to come is on the first page of
// runs (ax status lists it), though its logical time has not come.
func TestRecentRunsListDeferredRuns(t *testing.T) {
	e := setupAPI(t, apitest.Opts{Standby: true, Pipeline: reasonsPipeline})
	now := time.Now().UTC()
	deferred := makeRun(t, e.St, now.Add(time.Hour), now)
	past := makeRun(t, e.St, now.Add(-time.Hour), now.Add(-time.Hour))
	_, body := e.Call("GET", "/api/v1/pipelines/rp/runs?recent=true&limit=5", "")
	rs := decodeJSON[[]RunView](t, body)
	if len(rs) != 2 || rs[0].ID != deferred["rp.report"].RunID || rs[1].ID != past["rp.report"].RunID {
		t.Errorf("recent runs: %+v; want the deferred run %d, then run %d", rs, deferred["rp.report"].RunID, past["rp.report"].RunID)
	}
}
