package api

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/ax-sched/ax/api/apitest"
	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/reload"
	"github.com/ax-sched/ax/store"
)

const gridPipeline = apitest.GridPipeline

// TestConsolePagesInBrowser drives the grid, run, task and operations pages
// in headless Chromium: the grid shows the states of three runs; each run
// page colours the graph by that run alone and draws every attempt on a
// time axis; the task page lists the next ten fires in the pipeline's zone
// with its offset; a form with a bad value shows the API's refusal and
// nothing changes; a refused reload is shown with its file:line:col. One
// browser for all of it. Screenshots go to the test's artifact directory.
func TestConsolePagesInBrowser(t *testing.T) {
	t.Parallel()
	ctx, scriptErrors := browser(t)
	e := setupAPI(t, apitest.Opts{Pipeline: gridPipeline, Others: []string{pagerPipeline}})
	shanghai, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		t.Fatal(err)
	}
	runAt := func(at, ok string, onlySync bool) int64 {
		t.Helper()
		path, body := "/api/v1/pipelines/shop/trigger", fmt.Sprintf(`{"at": %q, "params": {"ok": %q}}`, at, ok)
		if onlySync {
			path, body = "/api/v1/pipelines/shop/tasks/sync/trigger", fmt.Sprintf(`{"at": %q}`, at)
		}
		if code, out := e.Call("POST", path, body); code != 200 {
			t.Fatalf("trigger at %s: %d %s", at, code, out)
		}
		var run int64
		waitFor(t, func() bool {
			ins, _ := e.St.Instances(context.Background(), store.InstanceFilter{Pipeline: "shop", Limit: 1000})
			for _, in := range ins {
				if in.LogicalTime.In(shanghai).Format("2006-01-02") == at[:10] && in.State.Terminal() && (onlySync || in.TaskID == "shop.clean") {
					run = in.RunID
					return true
				}
			}
			return false
		})
		return run
	}
	ok := runAt("2026-03-01T02:00:00", "yes", false)
	bad := runAt("2026-03-02T02:00:00", "no", false)
	only := runAt("2026-03-03T02:00:00", "", true)

	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	shots := map[string][]byte{}
	shoot := func(name string) chromedp.Action[chromedp.Void] {
		return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
			b, err := chromedp.FullScreenshot(100)(ctx, tg)
			shots[name] = b
			return chromedp.Void{}, err
		}
	}
	attr := func(sel, name string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.AttributeValue(css(sel), name))
		if err != nil {
			t.Fatalf("%s[%s]: %v (script errors: %v)", sel, name, err, scriptErrors())
		}
		return v.Value
	}

	// Grid: three runs, newest right, each cell its instance's state.
	if err := chromedp.Do(ctx, chromedp.Navigate(e.Srv.URL+"/#/grid/shop"), chromedp.WaitVisible(css(`#grid td.cell[data-run="`+fmt.Sprint(only)+`"]`)), shoot("grid")); err != nil {
		t.Fatalf("grid: %v (script errors: %v)", err, scriptErrors())
	}
	for _, c := range []struct {
		task string
		run  int64
		want string
	}{{"sync", ok, "SUCCESS"}, {"clean", ok, "SUCCESS"}, {"sync", bad, "SUCCESS"}, {"clean", bad, "FAILED"}, {"sync", only, "SUCCESS"}, {"clean", only, "NONE"}} {
		if got := attr(fmt.Sprintf(`#grid tr[data-task=%q] td.cell[data-run="%d"]`, c.task, c.run), "data-state"); got != c.want {
			t.Errorf("grid cell %s of run %d: %s, want %s", c.task, c.run, got, c.want)
		}
	}
	heads, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#grid th[data-run]")].map(h => h.dataset.run)`))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{fmt.Sprint(ok), fmt.Sprint(bad), fmt.Sprint(only)}; strings.Join(heads, ",") != strings.Join(want, ",") {
		t.Errorf("grid columns %v, want %v (oldest left, newest right)", heads, want)
	}

	// Grid paging: 23 runs of pager; the newest 20 first, then back in time
	// to the 3 oldest, and forward again to the newest.
	for d := 1; d <= 23; d++ {
		if code, out := e.Call("POST", "/api/v1/pipelines/pager/trigger", fmt.Sprintf(`{"at": "2025-01-%02dT00:00:00"}`, d)); code != 200 {
			t.Fatalf("trigger pager: %d %s", code, out)
		}
	}
	pagerRuns, err := e.St.Runs(context.Background(), "pager", 100) // newest first
	if err != nil || len(pagerRuns) != 23 {
		t.Fatalf("pager runs: %d, %v", len(pagerRuns), err)
	}
	var newest, oldest []string // oldest left
	for i := len(pagerRuns) - 1; i >= 0; i-- {
		id := fmt.Sprint(pagerRuns[i].ID)
		if i < 20 {
			newest = append(newest, id)
		} else {
			oldest = append(oldest, id)
		}
	}
	gridHeads := func() string {
		t.Helper()
		h, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#grid th[data-run]")].map(h => h.dataset.run)`))
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(h, ",")
	}
	err = chromedp.Do(ctx, chromedp.Navigate(e.Srv.URL+"/#/grid/pager"), chromedp.WaitVisible(css(`#grid th[data-run="`+newest[19]+`"]`)), shoot("grid-newest"))
	if err != nil {
		t.Fatalf("pager grid: %v (script errors: %v)", err, scriptErrors())
	}
	if got := gridHeads(); got != strings.Join(newest, ",") {
		t.Errorf("grid, first page: runs %s, want the newest 20 %s", got, strings.Join(newest, ","))
	}
	err = chromedp.Do(ctx, click(css(`#older`)), chromedp.WaitVisible(css(`#grid th[data-run="`+oldest[0]+`"]`)), shoot("grid-older"))
	if err != nil {
		t.Fatalf("older runs: %v (script errors: %v)", err, scriptErrors())
	}
	if got := gridHeads(); got != strings.Join(oldest, ",") {
		t.Errorf("grid, older page: runs %s, want the 3 oldest %s", got, strings.Join(oldest, ","))
	}
	err = chromedp.Do(ctx, click(css(`#newest`)), chromedp.WaitVisible(css(`#grid th[data-run="`+newest[19]+`"]`)))
	if err != nil {
		t.Fatalf("back to the newest runs: %v (script errors: %v)", err, scriptErrors())
	}

	// Run pages: each graph shows its own run only.
	for _, c := range []struct {
		run         int64
		sync, clean string
		attempts    int
	}{{ok, "SUCCESS", "SUCCESS", 2}, {bad, "SUCCESS", "FAILED", 2}, {only, "SUCCESS", "NONE", 1}} {
		err := chromedp.Do(ctx, chromedp.Navigate(fmt.Sprintf("%s/#/r/%d", e.Srv.URL, c.run)), chromedp.WaitVisible(css(fmt.Sprintf(`#rungraph[data-run="%d"] g.node[data-task="clean"]`, c.run))),
			chromedp.WaitVisible(css(`#gantt`)))
		if err != nil {
			t.Fatalf("run %d: %v (script errors: %v)", c.run, err, scriptErrors())
		}
		if s, cl := attr(`#rungraph g.node[data-task="sync"]`, "data-state"), attr(`#rungraph g.node[data-task="clean"]`, "data-state"); s != c.sync || cl != c.clean {
			t.Errorf("run %d graph: sync %s, clean %s; want %s, %s", c.run, s, cl, c.sync, c.clean)
		}
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#gantt .bar.attempt").length`))
		if err != nil || n != c.attempts {
			t.Errorf("run %d Gantt: %d attempt bars, want %d (%v)", c.run, n, c.attempts, err)
		}
		ticks, _ := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#gantt .tick")].map(t => t.textContent)`))
		if len(ticks) != 6 || !strings.HasSuffix(ticks[0], "+08:00") {
			t.Errorf("run %d time axis ticks %q: want 6, in the pipeline's zone with its offset", c.run, ticks)
		}
		if c.run == bad {
			if err := chromedp.Do(ctx, shoot("run-failed")); err != nil {
				t.Fatal(err)
			}
		}
	}

	// Pipeline page: each task's next fire from its schedule (the yearly
	// fire is far beyond the window of runs created ahead).
	var next string
	err = chromedp.Do(ctx, chromedp.Navigate(e.Srv.URL+"/#/p/shop"), chromedp.WaitVisible(css(`tr[data-task="clean"] td.next`)), shoot("pipeline"))
	if err == nil {
		next, err = chromedp.Run(ctx, textNow(css(`tr[data-task="clean"] td.next`)))
	}
	if err != nil {
		t.Fatalf("pipeline page: %v (script errors: %v)", err, scriptErrors())
	}
	if want := fmt.Sprintf("%d-01-01 00:00:00 +08:00", time.Now().In(shanghai).Year()+1); next != want {
		t.Errorf("pipeline page: next fire of clean %q, want %q (next New Year in Shanghai)", next, want)
	}
	// Its graph is coloured by the latest run (only) alone: clean, FAILED
	// in run bad, has no instance in it.
	if s, cl := attr(`#graph g.node[data-task="sync"]`, "data-state"), attr(`#graph g.node[data-task="clean"]`, "data-state"); s != "SUCCESS" || cl != "NONE" {
		t.Errorf("pipeline graph, coloured by run %d: sync %s, clean %s; want SUCCESS, NONE (clean is not in that run)", only, s, cl)
	}

	// Task page: the next ten fires from the schedule, in the zone with the offset.
	var fires []string
	err = chromedp.Do(ctx, chromedp.Navigate(e.Srv.URL+"/#/t/shop/clean"), chromedp.WaitVisible(css(`#nextfires li`)), shoot("task"))
	if err == nil {
		fires, err = chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#nextfires li")].map(l => l.textContent)`))
	}
	if err != nil {
		t.Fatalf("task page: %v (script errors: %v)", err, scriptErrors())
	}
	if len(fires) != 10 || !strings.HasSuffix(fires[0], "-01-01 00:00:00 +08:00") {
		t.Errorf("next fires: %q, want ten New Years at midnight +08:00", fires)
	}

	// Forms: a bad value shows the API's error, and nothing changes.
	before, _ := e.St.Runs(context.Background(), "shop", 100)
	actsBefore, _ := e.St.Actions(context.Background(), store.LogFilter{Limit: 1000})
	err = chromedp.Do(ctx, chromedp.Navigate(e.Srv.URL+"/#/forms/shop"), chromedp.WaitVisible(css(`#f-limits`)),
		chromedp.SetValue(css(`#f-limits input[name="global"]`), "-5"),
		click(css(`#f-limits button[type="submit"]`)),
		chromedp.WaitVisible(css(`#f-limits .result.error`)),
		chromedp.SetValue(css(`#f-trigger input[name="at"]`), "2026-02-30T02:00:00"),
		click(css(`#f-trigger button[type="submit"]`)),
		chromedp.WaitVisible(css(`#f-trigger .result.error`)))
	if err != nil {
		t.Fatalf("forms: %v (script errors: %v)", err, scriptErrors())
	}
	if got, err := chromedp.Run(ctx, textNow(css(`#f-trigger .result`))); err != nil || !strings.Contains(got, "2026-02-30T02:00:00") {
		t.Errorf("run now with a bad date shows %q, want the API's error naming it (%v)", got, err)
	}
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('#f-trigger input[name="at"]').value = ""`)); err != nil {
		t.Fatal(err)
	}
	err = chromedp.Do(ctx, chromedp.SetValue(css(`#f-trigger input[name="task"]`), "clen"),
		click(css(`#f-trigger button[type="submit"]`)))
	if err == nil {
		_, err = chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelector("#f-trigger .result").textContent.includes("clen")`))
	}
	if err != nil {
		t.Fatalf("forms: %v (script errors: %v)", err, scriptErrors())
	}
	err = chromedp.Do(ctx,
		chromedp.SetValue(css(`#f-backfill input[name="from"]`), "2026-13-01"),
		chromedp.SetValue(css(`#f-backfill input[name="to"]`), "2026-03-05"),
		click(css(`#f-backfill button[data-preview]`)),
		chromedp.WaitVisible(css(`#f-backfill .result.error`)),
		chromedp.SetValue(css(`#f-group input[name="group"]`), "etll"),
		click(css(`#f-group button[data-verb="pause"]`)),
		chromedp.WaitVisible(css(`#f-group .result.error`)),
		shoot("forms-refused"))
	if err != nil {
		t.Fatalf("forms: %v (script errors: %v)", err, scriptErrors())
	}
	for form, want := range map[string]string{"#f-limits": "global", "#f-trigger": `did you mean "clean"`, "#f-backfill": "2026-13-01", "#f-group": `no group "etll" (did you mean "etl"?)`} {
		got, err := chromedp.Run(ctx, textNow(css(form+" .result")))
		if err != nil || !strings.Contains(got, want) {
			t.Errorf("%s shows %q, want the API's error naming %s (%v)", form, got, want, err)
		}
	}
	code, limits := e.Call("GET", "/api/v1/limits", "")
	var l struct{ Global float64 }
	if code != 200 || json.Unmarshal([]byte(limits), &l) != nil || l.Global != 0 {
		t.Errorf("limits after the refused form: %d %s", code, limits)
	}
	if after, _ := e.St.Runs(context.Background(), "shop", 100); len(after) != len(before) {
		t.Errorf("runs: %d before the refused forms, %d after", len(before), len(after))
	}
	if bs, _ := e.St.Backfills(context.Background(), 0); len(bs) != 0 {
		t.Errorf("backfills after a refused preview: %d", len(bs))
	}
	if ps, err := e.St.Pauses(context.Background()); err != nil || len(ps) != 0 {
		t.Errorf("pauses after a refused group form: %+v %v", ps, err)
	}
	if as, err := e.St.Actions(context.Background(), store.LogFilter{Limit: 1000}); err != nil || len(as) != len(actsBefore) {
		t.Errorf("actions: %d before the refused forms, %d after (%v)", len(actsBefore), len(as), err)
	}

	// The group form: pause, then resume, the group etl.
	err = chromedp.Do(ctx, chromedp.SetValue(css(`#f-group input[name="group"]`), "etl"),
		click(css(`#f-group button[data-verb="pause"]`)),
		chromedp.WaitVisible(css(`#f-group .result.ok`)), shoot("forms-group-paused"))
	if err != nil {
		t.Fatalf("pause group: %v (script errors: %v)", err, scriptErrors())
	}
	if ps, err := e.St.Pauses(context.Background()); err != nil || len(ps) != 1 || ps[0].Scope != store.ScopeGroup || ps[0].Name != "etl" {
		t.Errorf("pauses after the group form: %+v %v; want group etl", ps, err)
	}
	err = chromedp.Do(ctx, chromedp.Navigate(e.Srv.URL+"/#/p/shop"), chromedp.WaitVisible(css(`tr[data-task="sync"] td.state .pill.PAUSED`)))
	if err != nil {
		t.Errorf("the pipeline page does not show sync paused with its group: %v", err)
	}
	err = chromedp.Do(ctx, chromedp.Navigate(e.Srv.URL+"/#/forms"), chromedp.WaitVisible(css(`#f-group`)),
		chromedp.SetValue(css(`#f-group input[name="group"]`), "etl"),
		click(css(`#f-group button[data-verb="resume"]`)),
		chromedp.WaitVisible(css(`#f-group .result.ok`)))
	if err != nil {
		t.Fatalf("resume group: %v (script errors: %v)", err, scriptErrors())
	}
	if ps, err := e.St.Pauses(context.Background()); err != nil || len(ps) != 0 {
		t.Errorf("pauses after resuming the group: %+v %v", ps, err)
	}

	// The forms that go through: run now with a logical time and params,
	// a backfill previewed (nothing starts) then started, limits.
	// (From another page first: the forms already shown would take the values, then be drawn again.)
	err = chromedp.Do(ctx, chromedp.Navigate(e.Srv.URL+"/#/p/shop"), chromedp.WaitVisible(css(`#graph`)),
		chromedp.Navigate(e.Srv.URL+"/#/forms/shop"), chromedp.WaitVisible(css(`#f-trigger`)),
		chromedp.SetValue(css(`#f-trigger input[name="at"]`), "2026-03-04T02:00:00"),
		chromedp.SetValue(css(`#f-trigger input[name="params"]`), "ok=yes"),
		click(css(`#f-trigger button[type="submit"]`)),
		chromedp.WaitVisible(css(`#f-trigger .result.ok`)),
		chromedp.SetValue(css(`#f-backfill input[name="from"]`), "2024-06-31"), // refused, then mended
		chromedp.SetValue(css(`#f-backfill input[name="to"]`), "2025-12-31"),
		click(css(`#f-backfill button[data-preview]`)),
		chromedp.WaitVisible(css(`#f-backfill .result.error`)),
		chromedp.SetValue(css(`#f-backfill input[name="from"]`), "2024-06-01"),
		chromedp.SetValue(css(`#f-backfill input[name="to"]`), "2025-12-31"),
		click(css(`#f-backfill button[data-preview]`)))
	var plan string
	if err == nil {
		plan, err = chromedp.Run(ctx, chromedp.Poll[string](`(t => t.startsWith("Plan") && t)(document.querySelector("#f-backfill .result").textContent)`))
	}
	if err != nil {
		t.Fatalf("run now and backfill preview: %v (script errors: %v)", err, scriptErrors())
	}
	if want := "Plan (nothing started): 1 run(s) of sync → clean, rerun none, at most 1 active:\n  2025-01-01 00:00:00 +08:00"; plan != want {
		t.Errorf("backfill preview shows %q, want %q", plan, want)
	}
	if cls := attr(`#f-backfill .result`, "class"); strings.Contains(cls, "error") {
		t.Errorf("the plan is shown as an error (class %q), the refusal before it still colouring it", cls)
	}
	if bs, _ := e.St.Backfills(context.Background(), 0); len(bs) != 0 {
		t.Errorf("backfills after a preview: %d, want none", len(bs))
	}
	err = chromedp.Do(ctx, click(css(`#f-backfill button[type="submit"]`)), chromedp.WaitVisible(css(`#f-backfill .result.ok`)),
		chromedp.SetValue(css(`#f-limits input[name="global"]`), "50"),
		click(css(`#f-limits button[type="submit"]`)),
		chromedp.WaitVisible(css(`#f-limits .result.ok`)), shoot("forms-done"))
	if err != nil {
		t.Fatalf("backfill and limits: %v (script errors: %v)", err, scriptErrors())
	}
	waitFor(t, func() bool { // run now used the logical time (in the pipeline's zone) and the params: clean passes
		ins, _ := e.St.Instances(context.Background(), store.InstanceFilter{TaskID: "shop.clean", States: []axtype.State{axtype.Success}, Limit: 100})
		for _, in := range ins {
			if in.LogicalTime.Equal(time.Date(2026, 3, 4, 2, 0, 0, 0, shanghai)) {
				return true
			}
		}
		return false
	})
	if bs, err := e.St.Backfills(context.Background(), 0); err != nil || len(bs) != 1 || bs[0].TotalRuns != 1 {
		t.Errorf("backfills after the form: %+v %v; want one of one run", bs, err)
	} else if got, _ := chromedp.Run(ctx, textNow(css(`#f-backfill .result`))); !strings.HasPrefix(got, fmt.Sprintf("backfill %d started: 1 run(s) of sync → clean", bs[0].ID)) {
		t.Errorf("the backfill form says %q once started", got)
	}
	if code, body := e.Call("GET", "/api/v1/limits", ""); code != 200 || !strings.Contains(body, `"global": 50`) {
		t.Errorf("limits after the form: %d %s", code, body)
	}

	// Mark, from a run's timeline: clean of run bad, FAILED, marked success.
	cleans, err := e.St.Instances(context.Background(), store.InstanceFilter{RunID: bad, TaskID: "shop.clean", Limit: 10})
	if err != nil || len(cleans) != 1 {
		t.Fatalf("clean of run %d: %+v %v", bad, cleans, err)
	}
	cleanBad := cleans[0]
	// The backfill over and every run over first: a page that changes under
	// the mouse draws its buttons anew (the backfill's run, made after the
	// form's answer, once colours the graph in the middle of the click).
	waitFor(t, func() bool {
		bs, err := e.St.Backfills(context.Background(), 0)
		if err != nil || len(bs) != 1 || bs[0].State == engine.BackfillPending || bs[0].State == engine.BackfillRunning {
			return false
		}
		ins, err := e.St.Instances(context.Background(), store.InstanceFilter{Pipeline: "shop", Limit: 1000})
		return err == nil && !slices.ContainsFunc(ins, func(in axtype.Instance) bool { return !in.State.Terminal() })
	})
	markSel := fmt.Sprintf(`button[data-mark="%d"][data-state="success"]`, cleanBad.ID)
	err = chromedp.Do(ctx, chromedp.Navigate(e.Srv.URL+"/#/p/shop"), chromedp.WaitVisible(css(fmt.Sprintf(`button[data-show="%d"]`, bad))),
		click(css(fmt.Sprintf(`button[data-show="%d"]`, bad))), chromedp.WaitVisible(css(markSel)))
	if err != nil {
		t.Fatalf("the run's timeline: %v (script errors: %v)", err, scriptErrors())
	}
	// The page is drawn again every 3 s. A click that spans a redraw of a
	// page that did not change lands: the button stays the element it was.
	if err := chromedp.Do(ctx, clickAcrossRedraw(css(markSel))); err != nil {
		t.Fatalf("mark: %v (script errors: %v)", err, scriptErrors())
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) { // the mark's request and the engine's loop
		in, err := e.St.Instance(context.Background(), cleanBad.ID)
		if err == nil && in.State == axtype.Success {
			break
		}
		if time.Now().After(deadline) {
			banner, _ := chromedp.Run(ctx, textNow(css(`#banner`)))
			t.Fatalf("clean of run %d is %s (%v) 30 s after the click on its mark button, the banner saying %q: the click was lost", bad, in.State, err, banner)
		}
	}
	// The API's answer stays in the banner (green already, from the limits form).
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("banner").textContent.includes("marked success")`)); err != nil {
		banner, _ := chromedp.Run(ctx, textNow(css(`#banner`)))
		t.Fatalf("the banner after the mark says %q: %v (script errors: %v)", banner, err, scriptErrors())
	}

	// The other pages, for the screenshots (reviewed by eye).
	for _, pg := range []struct{ hash, sel, name string }{
		{"#/", `tr[data-pipeline="shop"]`, "pipelines"}, {"#/actions", "#actions", "actions"}, {"#/backfills", "#backfills", "backfills"},
		{"#/t/shop/clean", "#nextfires li", "task-after"},
	} {
		if err := chromedp.Do(ctx, chromedp.Navigate(e.Srv.URL+"/"+pg.hash), chromedp.WaitVisible(css(pg.sel)), shoot(pg.name)); err != nil {
			t.Errorf("%s: %v (script errors: %v)", pg.hash, err, scriptErrors())
		}
		if pg.name != "actions" {
			continue
		}
		// The action log in each pipeline's zone too.
		for pl, off := range map[string]string{"shop": " +08:00", "pager": " +00:00"} {
			if at, err := chromedp.Run(ctx, textNow(css(fmt.Sprintf(`#actions tr[data-pipeline=%q] td.at`, pl)))); err != nil || !strings.HasSuffix(at, off) {
				t.Errorf("action log: an action of %s at %q, want it in the pipeline's zone (%s) (%v)", pl, at, off, err)
			}
		}
	}

	// Not signed in (reads are open; the operator dismisses the sign-in
	// page) the forms' buttons are disabled, saying why, and nothing changes.
	locked := setupAPI(t, apitest.Opts{Pipeline: gridPipeline, Token: "t0ken", OpenReads: true})
	err = chromedp.Do(ctx, chromedp.Navigate(locked.Srv.URL+"/#/forms"), chromedp.WaitVisible(css(`#f-group`)),
		chromedp.WaitVisible(css(`#f-group button[data-verb="pause"][disabled]`)), shoot("forms-no-token"))
	if err != nil {
		t.Fatalf("forms without the token: %v (script errors: %v)", err, scriptErrors())
	}
	for _, b := range []string{`#f-group button[data-verb="pause"]`, `#f-trigger button[type="submit"]`, `#f-limits button[type="submit"]`} {
		why, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`(b => b.disabled ? b.title : "enabled")(document.querySelector(%q))`, b)))
		want := "needs the operator role: sign in"
		if strings.HasPrefix(b, "#f-limits") {
			want = "needs the admin role: sign in"
		}
		if err != nil || why != want {
			t.Errorf("%s without signing in: %q, want disabled with %q (%v)", b, why, want, err)
		}
	}
	if ps, err := locked.St.Pauses(context.Background()); err != nil || len(ps) != 0 {
		t.Errorf("pauses after a form without the token: %+v %v", ps, err)
	}
	if rs, err := locked.St.Runs(context.Background(), "shop", 100); err != nil || len(rs) != 0 {
		t.Errorf("runs after a form without the token: %d %v", len(rs), err)
	}

	// After a reload refused for an invalid file, the pipelines page says
	// the running set stays and shows the file:line:col messages.
	files := t.TempDir()
	apitest.WriteFile(t, filepath.Join(files, "good.yaml"), gridPipeline)
	apitest.WriteFile(t, filepath.Join(files, "bad.yaml"), "pipeline: bad\ntasks:\n  - {name: z, function: noop, depends_on: [nosuch]}\n")
	rl := reload.New([]string{files}, "", 0, nil, slog.New(slog.DiscardHandler))
	if st := rl.Reload("files changed"); st.OK {
		t.Fatal("the broken set was accepted")
	}
	refused := setupAPI(t, apitest.Opts{Pipeline: gridPipeline, Reload: rl})
	var box string
	err = chromedp.Do(ctx, chromedp.Navigate(refused.Srv.URL+"/#/"), chromedp.WaitVisible(css(`#reload[data-ok="false"]`)), shoot("reload-refused"))
	if err == nil {
		box, err = chromedp.Run(ctx, textNow(css(`#reload`)))
	}
	if err != nil {
		t.Fatalf("refused reload: %v (script errors: %v)", err, scriptErrors())
	}
	if !strings.Contains(box, "running pipelines stay") || !strings.Contains(box, filepath.Join(files, "bad.yaml")+":3:") || !strings.Contains(box, "nosuch") {
		t.Errorf("reload box: %q", box)
	}

	dir := t.ArtifactDir()
	for name, b := range shots {
		if err := os.WriteFile(filepath.Join(dir, "console-"+name+".png"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("screenshots in %s", dir)
	if errs := scriptErrors(); len(errs) > 0 {
		t.Errorf("the page showed script errors:\n%s", strings.Join(errs, "\n"))
	}
}

// pagerPipeline has a run per trigger, to page the grid through.
const pagerPipeline = `pipeline: pager
timezone: UTC
schedule: "0 0 1 1 *"
tasks:
  - {name: one, function: noop}
`

// TestConsoleShowsLogsSafelyAndPagesRuns: the console's log view shows
// output that is not UTF-8 and output that looks like markup as escaped
// text (no element is made of it, no script error), and every list the
// console pages by key (the pipeline page's runs, the task page's instances
// and history, the action log) goes back with its "older" link and forward
// with its "newest" link, each page the rows after the last one shown.
func TestConsoleShowsLogsSafelyAndPagesRuns(t *testing.T) {
	t.Parallel()
	ctx, scriptErrors := browser(t)
	e := setupAPI(t, apitest.Opts{Pipeline: `pipeline: shop
group: etl
timezone: UTC
schedule: "0 0 1 1 *"
tasks:
  - {name: sync, function: noop}
  - {name: talk, command: ["sh", "-c", "printf 'ok\\377<b id=injected>bold</b>\\n'; echo '<img src=x onerror=alert(1)>' >&2"]}
`})
	if code, out := e.Call("POST", "/api/v1/pipelines/shop/tasks/talk/trigger", ""); code != 200 {
		t.Fatalf("trigger talk: %d %s", code, out)
	}
	talk := e.WaitState("shop.talk", axtype.Success)
	for i := range 21 { // 22 runs: a full page of 15 and 7 older; 21 instances of sync: 20 and 1 older
		if code, out := e.Call("POST", "/api/v1/pipelines/shop/tasks/sync/trigger", fmt.Sprintf(`{"at": "2026-02-%02dT00:00:00"}`, i+1)); code != 200 {
			t.Fatalf("trigger sync: %d %s", code, out)
		}
	}
	waitFor(t, func() bool {
		ins, _ := e.St.Instances(context.Background(), store.InstanceFilter{TaskID: "shop.sync", States: []axtype.State{axtype.Success}, Limit: 100})
		return len(ins) == 21
	})
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	var text string
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	err := chromedp.Do(wctx, chromedp.Navigate(e.Srv.URL+"/#/p/shop"), chromedp.WaitVisible(css(`button[data-log]`)),
		click(css(`tr[data-task="talk"] button[data-log]`)), chromedp.WaitVisible(css(`#logview`)))
	if err == nil {
		text, err = chromedp.Run(ctx, textNow(css(`#logview pre`)))
	}
	if err != nil {
		html, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("log").outerHTML + document.getElementById("banner").outerHTML`))
		t.Fatalf("log view: %v (script errors: %v)\n%s", err, scriptErrors(), html)
	}
	for _, want := range []string{`stdout| ok\xff<b id=injected>bold</b>`, `stderr| <img src=x onerror=alert(1)>`} {
		if !strings.Contains(text, want) {
			t.Errorf("log view of instance %d: want %q in\n%s", talk.ID, want, text)
		}
	}
	made, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!!document.getElementById("injected") || !!document.querySelector("#logview img")`))
	if err != nil || made {
		t.Errorf("the output's markup became elements: %v %v", made, err)
	}
	// Runs by key: the first page holds 15 of the 22, the older page the last 7.
	runs := func() []string {
		t.Helper()
		ids, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#runs tr[data-run]")].map(r => r.dataset.run)`))
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	first := runs()
	err = chromedp.Do(ctx, click(css(`#older-runs`)), chromedp.WaitVisible(css(`a[href="#/p/shop"]`)))
	if err != nil {
		t.Fatalf("older runs: %v (script errors: %v)", err, scriptErrors())
	}
	older := runs()
	all, _ := e.St.Runs(context.Background(), "shop", 100)
	if len(all) != 22 || !slices.Equal(first, ids(all[:15], func(r axtype.Run) int64 { return r.ID })) ||
		!slices.Equal(older, ids(all[15:], func(r axtype.Run) int64 { return r.ID })) {
		t.Errorf("runs shown %v then %v; the store holds %d", first, older, len(all))
	}

	// The rows a selector shows, once they are want (the page re-renders
	// after a click): a mismatch names what was shown instead.
	shows := func(what, table, attr string, want []string) {
		t.Helper()
		var (
			got []string
			err error
		)
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			got, err = chromedp.Run(ctx, chromedp.Evaluate[[]string](fmt.Sprintf(`[...document.querySelectorAll("%s tr[%s]")].map(r => r.getAttribute(%q))`, table, attr, attr)))
			if err == nil && slices.Equal(got, want) {
				return
			}
		}
		t.Errorf("%s: shown %v (%v), want %v (script errors: %v)", what, got, err, want, scriptErrors())
	}
	click := func(sel string) {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := chromedp.Do(cctx, click(css(sel))); err != nil {
			t.Fatalf("click %s: %v (script errors: %v)", sel, err, scriptErrors())
		}
	}
	bg := context.Background()
	insAll, err1 := e.St.Instances(bg, store.InstanceFilter{TaskID: "shop.sync", Limit: 1000})
	histAll, err2 := e.St.History(bg, store.LogFilter{TaskID: "shop.sync", Newest: true, Limit: 1000})
	if err1 != nil || err2 != nil || len(insAll) != 21 || len(histAll) <= 30 {
		t.Fatalf("store: %d instances (%v), %d history rows (%v): want 21 and more than 30", len(insAll), err1, len(histAll), err2)
	}
	insID := func(i axtype.Instance) int64 { return i.ID }
	histID := func(h store.HistoryRow) int64 { return h.ID }
	ins1, ins2 := ids(insAll[:20], insID), ids(insAll[20:], insID)
	hist1, hist2 := ids(histAll[:30], histID), ids(histAll[30:min(60, len(histAll))], histID)
	// The task page: instances and history page each by its own cursor.
	if err := chromedp.Do(ctx, chromedp.Navigate(e.Srv.URL+"/#/t/shop/sync"), chromedp.WaitVisible(css(`#taskhistory`))); err != nil {
		t.Fatalf("task page: %v (script errors: %v)", err, scriptErrors())
	}
	shows("task instances, newest", "#taskinstances", "data-instance", ins1)
	shows("task history, newest", "#taskhistory", "data-hist", hist1)
	click(`#older-instances`)
	shows("task instances, older", "#taskinstances", "data-instance", ins2)
	shows("task history while instances page back", "#taskhistory", "data-hist", hist1)
	click(`#older-history`)
	shows("task history, older", "#taskhistory", "data-hist", hist2)
	shows("task instances while history pages back", "#taskinstances", "data-instance", ins2)
	click(`#older-history-newest`)
	shows("task history, newest again", "#taskhistory", "data-hist", hist1)
	click(`#older-instances-newest`)
	shows("task instances, newest again", "#taskinstances", "data-instance", ins1)

	// The action log: 200 a page; 250 more entries make at least two pages.
	for i := range 250 {
		if err := e.St.AppendAction(bg, store.Action{At: time.Now(), Actor: "test", Action: "note", Reason: fmt.Sprint("entry ", i)}); err != nil {
			t.Fatal(err)
		}
	}
	// The page shows operators' actions by default, not the scheduler's rows.
	actAll, err := e.St.Actions(bg, store.LogFilter{Newest: true, NotActor: engine.Actor, Limit: 1000})
	if err != nil || len(actAll) <= 250 {
		t.Fatalf("store: %d actions (%v)", len(actAll), err)
	}
	actID := func(a store.Action) int64 { return a.ID }
	act1, act2 := ids(actAll[:200], actID), ids(actAll[200:min(400, len(actAll))], actID)
	if err := chromedp.Do(ctx, chromedp.Navigate(e.Srv.URL+"/#/actions"), chromedp.WaitVisible(css(`#actions`))); err != nil {
		t.Fatalf("action log: %v (script errors: %v)", err, scriptErrors())
	}
	shows("action log, newest", "#actions", "data-action", act1)
	click(`#older-actions`)
	shows("action log, older", "#actions", "data-action", act2)
	click(`#older-actions-newest`)
	shows("action log, newest again", "#actions", "data-action", act1)
	if errs := scriptErrors(); len(errs) > 0 {
		t.Errorf("the page showed script errors:\n%s", strings.Join(errs, "\n"))
	}
}

// ids maps rows to their ids as the console's data attributes show them.
func ids[T any](rows []T, id func(T) int64) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = fmt.Sprint(id(r))
	}
	return out
}
