package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ax-sched/ax/api/apitest"
	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/store"
)

// shots collects screenshots by name and saves them, as console-NAME.png,
// in the test's artifact directory.
type shots struct {
	t  *testing.T
	by map[string][]byte
}

func newShots(t *testing.T) *shots {
	s := &shots{t: t, by: map[string][]byte{}}
	t.Cleanup(func() {
		dir := t.ArtifactDir()
		for name, b := range s.by {
			if err := os.WriteFile(filepath.Join(dir, "console-"+name+".png"), b, 0o644); err != nil {
				t.Error(err)
			}
		}
		t.Logf("screenshots in %s", dir)
	})
	return s
}

func (s *shots) take(name string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		b, err := chromedp.FullScreenshot(100)(ctx, tg)
		s.by[name] = b
		return chromedp.Void{}, err
	}
}

// TestConsoleTaskAttemptsInBrowser: after a failed attempt and a rerun
// that succeeds, the Log of the task's row shows the rerun's attempt (its
// output and state), though a newer instance of another run exists; each
// attempt's log has an address of its own that survives a reload; the task
// page shows the command with its templates and the last attempt's command
// as rendered.
func TestConsoleTaskAttemptsInBrowser(t *testing.T) {
	t.Parallel()
	ctx, scriptErrors := browser(t)
	dir := t.TempDir()
	e := setupAPI(t, apitest.Opts{Pipeline: fmt.Sprintf(`pipeline: shop
timezone: UTC
schedule: "0 0 1 1 *"
tasks:
  - {name: flaky, params: {dir: %q}, command: ["sh", "-c", "cat {{ .Params.dir }}/msg; exit $(cat {{ .Params.dir }}/code)"]}
`, dir)})
	say := func(msg, code string) {
		t.Helper()
		apitest.WriteFile(t, filepath.Join(dir, "msg"), msg+"\n")
		apitest.WriteFile(t, filepath.Join(dir, "code"), code+"\n")
	}
	bg := context.Background()
	trigger := func(at string) axtype.Instance {
		t.Helper()
		if code, body := e.Call("POST", "/api/v1/pipelines/shop/tasks/flaky/trigger", fmt.Sprintf(`{"at": %q}`, at)); code != 200 {
			t.Fatalf("trigger: %d %s", code, body)
		}
		var in axtype.Instance
		waitFor(t, func() bool {
			ins, err := e.St.Instances(bg, store.InstanceFilter{TaskID: "shop.flaky", Limit: 1})
			if err == nil && len(ins) == 1 && ins[0].LogicalTime.Format("2006-01-02") == at[:10] && ins[0].State.Terminal() {
				in = ins[0]
				return true
			}
			return false
		})
		return in
	}
	say("attempt one fails", "3")
	first := trigger("2026-03-01T00:00:00")
	if first.State != axtype.Failed {
		t.Fatalf("the first run's instance is %s, want FAILED", first.State)
	}
	say("another run", "0")
	other := trigger("2026-03-02T00:00:00")
	say("the rerun succeeds", "0")
	if code, body := e.Call("POST", fmt.Sprintf("/api/v1/instances/%d/rerun", first.ID), "{}"); code != 200 {
		t.Fatalf("rerun: %d %s", code, body)
	}
	waitFor(t, func() bool {
		in, err := e.St.Instance(bg, first.ID)
		return err == nil && in.State == axtype.Success && in.Attempt == 2
	})
	if other.ID <= first.ID {
		t.Fatalf("instance %d of the second run should be newer than %d", other.ID, first.ID)
	}

	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	shot := newShots(t)
	logOf := func(instance int64, attempt int) string {
		return fmt.Sprintf(`#logview[data-instance="%d"][data-attempt="%d"]`, instance, attempt)
	}
	read := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, textNow(css(sel)))
		if err != nil {
			t.Fatalf("%s: %v (script errors: %v)", sel, err, scriptErrors())
		}
		return s
	}
	// The task row's Log: the latest attempt, of the instance the rerun ran.
	err := chromedp.Do(ctx, chromedp.Navigate(e.Srv.URL+"/#/p/shop"), chromedp.WaitVisible(css(`tr[data-task="flaky"] button[data-log]`)),
		click(css(`tr[data-task="flaky"] button[data-log]`)), chromedp.WaitVisible(css(`#logview`)))
	if err != nil {
		t.Fatalf("the task's log: %v (script errors: %v)", err, scriptErrors())
	}
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](fmt.Sprintf(`!!document.querySelector(%q)`, logOf(first.ID, 2)))); err != nil {
		t.Fatalf("the task row's Log shows %q, want instance %d attempt 2 (the rerun; not instance %d, the newest)", read("#logview strong"), first.ID, other.ID)
	}
	if err := chromedp.Do(ctx, shot.take("log-rerun")); err != nil {
		t.Fatal(err)
	}
	if text := read("#logview pre"); !strings.Contains(text, "the rerun succeeds") || strings.Contains(text, "attempt one fails") || strings.Contains(text, "another run") {
		t.Errorf("the rerun's log shows\n%s\nwant its own output only", text)
	}
	if end, state := read("#logview .end"), read("#logview .pill"); !strings.HasPrefix(end, "success") || state != "SUCCESS" {
		t.Errorf("the rerun's log says it ended %q, the instance %q; want success, SUCCESS", end, state)
	}
	if href := attrNow(t, ctx, "#logview a.permalink", "href"); href != fmt.Sprintf("#/log/%d/2", first.ID) {
		t.Errorf("the attempt's own address: %q", href)
	}

	// The failed attempt, by its own address, again after a reload.
	err = chromedp.Do(ctx, click(css(`#logview a[data-attempt="1"]`)), chromedp.WaitVisible(css(logOf(first.ID, 1))))
	if err != nil {
		t.Fatalf("attempt 1's link: %v (script errors: %v)", err, scriptErrors())
	}
	if hash, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.hash`)); hash != fmt.Sprintf("#/log/%d/1", first.ID) {
		t.Errorf("attempt 1's log is at %q", hash)
	}
	for _, how := range []string{"followed", "reloaded"} {
		if how == "reloaded" {
			if err := chromedp.Do(ctx, chromedp.Reload(), chromedp.WaitVisible(css(logOf(first.ID, 1))), shot.take("log-attempt-1")); err != nil {
				t.Fatalf("reload attempt 1's log: %v (script errors: %v)", err, scriptErrors())
			}
		}
		if text := read("#logview pre"); !strings.Contains(text, "attempt one fails") || strings.Contains(text, "the rerun succeeds") {
			t.Errorf("attempt 1's log (%s) shows\n%s", how, text)
		}
		if end := read("#logview .end"); end != "failed (exit status 3)" {
			t.Errorf("attempt 1's log (%s) says it ended %q", how, end)
		}
	}
	// Without an attempt in the address: the latest.
	if err := chromedp.Do(ctx, chromedp.Navigate(fmt.Sprintf("%s/#/log/%d", e.Srv.URL, first.ID)), chromedp.WaitVisible(css(logOf(first.ID, 2)))); err != nil {
		t.Errorf("the instance's latest log: %v (script errors: %v)", err, scriptErrors())
	}

	// The task page: the command as written, the last attempt's as it ran.
	err = chromedp.Do(ctx, chromedp.Navigate(e.Srv.URL+"/#/t/shop/flaky"), chromedp.WaitVisible(css(`#taskruns #rendered`)), shot.take("task-runs"))
	if err != nil {
		t.Fatalf("task page: %v (script errors: %v)", err, scriptErrors())
	}
	if def := read("#runs-def"); def != `sh -c 'cat {{ .Params.dir }}/msg; exit $(cat {{ .Params.dir }}/code)'` {
		t.Errorf("the task's command shows %q, want its templates as written", def)
	}
	// The param in the script was quoted for the shell ('DIR'), then the
	// argv shown quoted as a whole ('\'' for each quote inside).
	if ran, want := read("#rendered"), fmt.Sprintf(`sh -c 'cat '\''%s'\''/msg; exit $(cat '\''%s'\''/code)'`, dir, dir); ran != want {
		t.Errorf("the last attempt ran %q, want %q", ran, want)
	}
	last := read("#lastattempt")
	if want := fmt.Sprintf("instance %d, attempt 2", first.ID); !strings.Contains(last, want) || !strings.Contains(last, "success") {
		t.Errorf("the last attempt: %q, want %s, success", last, want)
	}
	if errs := scriptErrors(); len(errs) > 0 {
		t.Errorf("the page showed script errors:\n%s", strings.Join(errs, "\n"))
	}
}

// attrNow reads an attribute of the first element sel matches, in one turn
// of the page's script (see textNow).
func attrNow(t *testing.T, ctx context.Context, sel, name string) string {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`(() => { const el = document.querySelector(%q); if (!el) throw new Error("no element matches " + %q); return el.getAttribute(%q) || ""; })()`, sel, sel, name)))
	if err != nil {
		t.Fatalf("%s[%s]: %v", sel, name, err)
	}
	return v
}

// operatorState is what an operator's request could change: runs, pauses,
// operators' actions (not the engine's own bookkeeping, which comes and
// goes with time, such as its schedule plan).
func operatorState(t *testing.T, e *apitest.Env) string {
	t.Helper()
	bg := context.Background()
	ins, err1 := e.St.Instances(bg, store.InstanceFilter{Limit: 1 << 20})
	pauses, err2 := e.St.Pauses(bg)
	acts, err3 := e.St.Actions(bg, store.LogFilter{NotActor: engine.Actor, Limit: 1 << 20})
	bfs, err4 := e.St.Backfills(bg, 0)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%d instances, pauses %+v, %d operator actions, %d backfills", len(ins), pauses, len(acts), len(bfs))
}

// gatePipeline fires once a year (never during a test); its backfills stop
// at the gate of each date.
const gatePipeline = `pipeline: shop
group: etl
timezone: Asia/Shanghai
schedule: "0 2 1 1 *"
tasks:
  - {name: sync, function: noop}
  - {name: approve, depends_on: [sync], manual: true, function: noop}
`

// startGatedBackfill backfills two dates of gatePipeline and waits until
// both runs (two at once) wait at their gate; it returns the backfill's id.
func startGatedBackfill(t *testing.T, e *apitest.Env) int64 {
	t.Helper()
	code, body := e.Call("POST", "/api/v1/backfills", `{"pipeline": "shop", "from": "2024-01-01", "to": "2025-01-01", "max_active_runs": 2}`)
	if code != 200 && code != 201 {
		t.Fatalf("backfill: %d %s", code, body)
	}
	id := decodeJSON[struct{ ID int64 }](t, body).ID
	waitFor(t, func() bool {
		_, b := e.Call("GET", fmt.Sprintf("/api/v1/backfills/%d", id), "")
		return decodeJSON[BackfillView](t, b).Instances.Awaiting == 2
	})
	return id
}

// TestConsoleBackfillsActionsAndLegendInBrowser: the Backfills page shows
// each backfill's range in the pipeline's zone, its selection, state, the
// gates awaiting approval and links to its runs; the Action log shows
// operators' actions by default and filters by kind and actor on the
// server, a refused filter naming its parameter; the grid has a legend
// whose colours are the cells'.
func TestConsoleBackfillsActionsAndLegendInBrowser(t *testing.T) {
	t.Parallel()
	ctx, scriptErrors := browser(t)
	e := setupAPI(t, apitest.Opts{Pipeline: gatePipeline})
	id := startGatedBackfill(t, e)
	bg := context.Background()
	runs, err := e.St.BackfillRuns(bg, id)
	if err != nil || len(runs) != 2 {
		t.Fatalf("the backfill's runs: %+v %v", runs, err)
	}
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	shot := newShots(t)
	row := fmt.Sprintf(`#backfills tr[data-backfill="%d"]`, id)
	err = chromedp.Do(ctx, chromedp.Navigate(e.Srv.URL+"/#/backfills"), chromedp.WaitVisible(css(row+` td.range`)), shot.take("backfills"))
	if err != nil {
		t.Fatalf("backfills page: %v (script errors: %v)", err, scriptErrors())
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, textNow(css(sel)))
		if err != nil {
			t.Fatalf("%s: %v (script errors: %v)", sel, err, scriptErrors())
		}
		return s
	}
	// A server without a token: the header offers no sign-in.
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("signinlink").hidden`)); err != nil {
		t.Errorf("the header offers a sign-in on a server without a token: %v", err)
	}
	if r := text(row + " td.range"); !strings.Contains(r, "2024-01-01 00:00:00 +08:00") || !strings.Contains(r, "2025-01-01") {
		t.Errorf("the backfill's range shows %q, want from 2024-01-01 to 2025-01-01 in the pipeline's zone", r)
	}
	if s := text(row + " td.selection"); s != "all: sync → approve" {
		t.Errorf("the backfill's selection shows %q", s)
	}
	if s := text(row + " td.state"); s != "running" {
		t.Errorf("the backfill's state shows %q", s)
	}
	if s := text(row); !strings.Contains(s, "2 gate(s) awaiting approval") {
		t.Errorf("the backfill's row says nothing of its 2 gates: %q", s)
	}
	links, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](fmt.Sprintf(`[...document.querySelectorAll(%q)].map(a => a.getAttribute("href"))`, row+" td.runs a[data-run]")))
	want := []string{fmt.Sprintf("#/r/%d", runs[0].ID), fmt.Sprintf("#/r/%d", runs[1].ID)}
	if err != nil || !slices.Equal(links, want) {
		t.Errorf("the backfill links to %q (%v), want its runs %q", links, err, want)
	}
	if err := chromedp.Do(ctx, click(css(row+` td.runs a[data-run]`)), chromedp.WaitVisible(css(fmt.Sprintf(`#rungraph[data-run="%d"]`, runs[0].ID)))); err != nil {
		t.Errorf("the backfill's first run link: %v (script errors: %v)", err, scriptErrors())
	}

	// The action log: operators' rows by default; filtered by kind and actor on the server.
	if code, body := e.Call("POST", "/api/v1/pipelines/shop/tasks/sync/trigger", `{"at": "2026-03-01T02:00:00"}`); code != 200 {
		t.Fatalf("trigger: %d %s", code, body)
	}
	e.WaitState("shop.sync", axtype.Success)
	rows := func() []string {
		t.Helper()
		got, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#actions tr[data-action]")].map(r => r.dataset.action)`))
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	expect := func(what string, f store.LogFilter) {
		t.Helper()
		f.Newest, f.Limit = true, 200
		acts, err := e.St.Actions(bg, f)
		if err != nil || len(acts) == 0 {
			t.Fatalf("%s: the store holds %d (%v); the test wants some", what, len(acts), err)
		}
		want := ids(acts, func(a store.Action) int64 { return a.ID })
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](fmt.Sprintf(`[...document.querySelectorAll("#actions tr[data-action]")].map(r => r.dataset.action).join(",") === %q`, strings.Join(want, ",")))); err != nil {
			t.Errorf("%s: the page shows %v, want %v", what, rows(), want)
		}
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(e.Srv.URL+"/#/actions"), chromedp.WaitVisible(css(`#actions`))); err != nil {
		t.Fatalf("action log: %v (script errors: %v)", err, scriptErrors())
	}
	expect("the action log by default", store.LogFilter{NotActor: engine.Actor})
	err = chromedp.Do(ctx, chromedp.SetValue(css(`#actfilter select[name="by"]`), "all"), chromedp.SetValue(css(`#actfilter input[name="action"]`), "dispatch"),
		click(css(`#actfilter button[type="submit"]`)), chromedp.WaitVisible(css(`#actions`)))
	if err != nil {
		t.Fatalf("filter: %v (script errors: %v)", err, scriptErrors())
	}
	expect("the scheduler's dispatches", store.LogFilter{Action: "dispatch"})
	if hash, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.hash`)); hash != "#/actions?action=dispatch&by=all" {
		t.Errorf("the filtered action log is at %q", hash)
	}
	err = chromedp.Do(ctx, chromedp.Navigate(e.Srv.URL+"/#/actions?actor=operator:test&pipeline=shop"), chromedp.WaitVisible(css(`#actions`)), shot.take("actions-filtered"))
	if err != nil {
		t.Fatalf("filter by actor: %v (script errors: %v)", err, scriptErrors())
	}
	expect("operator:test's actions on shop", store.LogFilter{Actor: "operator:test", Pipeline: "shop"})
	err = chromedp.Do(ctx, chromedp.SetValue(css(`#actfilter input[name="task"]`), "shop.syn"), click(css(`#actfilter button[type="submit"]`)),
		chromedp.WaitVisible(css(`#actions-refused`)), shot.take("actions-refused"))
	if err != nil {
		t.Fatalf("a refused filter: %v (script errors: %v)", err, scriptErrors())
	}
	if s := text("#actions-refused"); !strings.Contains(s, `task="shop.syn": no such task (did you mean "shop.sync"?)`) {
		t.Errorf("a refused filter says %q", s)
	}

	// The grid's legend: each state, in the cells' colours.
	err = chromedp.Do(ctx, chromedp.Navigate(e.Srv.URL+"/#/grid/shop"), chromedp.WaitVisible(css(`#legend`)), chromedp.WaitVisible(css(`#grid td.cell[data-state="WAITING"]`)), shot.take("grid-legend"))
	if err != nil {
		t.Fatalf("grid: %v (script errors: %v)", err, scriptErrors())
	}
	states, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#legend .legend[data-state]")].map(l => l.dataset.state + " " + l.textContent)`))
	if wantStates := []string{"WAITING WAITING", "SCHEDULED SCHEDULED", "RUNNING RUNNING", "RETRYING RETRYING", "SUCCESS SUCCESS", "FAILED FAILED",
		"PAUSED PAUSED", "KILLED KILLED", "NONE not in this run"}; err != nil || !slices.Equal(states, wantStates) {
		t.Errorf("the legend: %q (%v), want %q", states, err, wantStates)
	}
	for _, st := range []string{"SUCCESS", "WAITING", "NONE"} {
		colour := func(sel string) string {
			c, err := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`getComputedStyle(document.querySelector(%q)).backgroundColor`, sel)))
			if err != nil {
				t.Fatalf("%s: %v", sel, err)
			}
			return c
		}
		cell, key := colour(fmt.Sprintf(`#grid td.cell[data-state=%q] .sq`, st)), colour(fmt.Sprintf(`#legend .legend[data-state=%q] .sq`, st))
		if cell != key || cell == "rgba(0, 0, 0, 0)" {
			t.Errorf("%s: a cell is %s, its legend %s", st, cell, key)
		}
	}
	if errs := scriptErrors(); len(errs) > 0 {
		t.Errorf("the page showed script errors:\n%s", strings.Join(errs, "\n"))
	}
}

// TestConsoleBackfillApproveInBrowser: one button on the Backfills page
// approves the gate of every date of a backfill. The route it calls,
// POST /api/v1/backfills/{id}/approve, comes with ax backfill approve: the
// test skips while the server has no such route (404 "no endpoint").
func TestConsoleBackfillApproveInBrowser(t *testing.T) {
	t.Parallel()
	e := setupAPI(t, apitest.Opts{Pipeline: gatePipeline})
	if code, body := e.Call("POST", "/api/v1/backfills/999999/approve", "{}"); code == http.StatusNotFound && strings.Contains(body, "no endpoint") {
		t.Skip("POST /api/v1/backfills/{id}/approve answers 404: the route is not in this build")
	}
	ctx, scriptErrors := browser(t)
	id := startGatedBackfill(t, e)
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	shot := newShots(t)
	button := fmt.Sprintf(`#backfills tr[data-backfill="%d"] button[data-op="approve"]`, id)
	err := chromedp.Do(ctx, chromedp.Navigate(e.Srv.URL+"/#/backfills"), chromedp.WaitVisible(css(button)), shot.take("backfill-gates"),
		click(css(button)), chromedp.WaitVisible(css(`#banner.ok`)))
	if err != nil {
		t.Fatalf("approve: %v (script errors: %v)", err, scriptErrors())
	}
	waitFor(t, func() bool {
		ins, err := e.St.Instances(context.Background(), store.InstanceFilter{TaskID: "shop.approve", Limit: 10})
		return err == nil && len(ins) == 2 && !slices.ContainsFunc(ins, func(in axtype.Instance) bool { return in.State != axtype.Success })
	})
	if err := chromedp.Do(ctx, chromedp.Navigate(e.Srv.URL+"/#/"), chromedp.Navigate(e.Srv.URL+"/#/backfills"), chromedp.WaitVisible(css(`#backfills`)), shot.take("backfill-approved")); err != nil {
		t.Fatal(err)
	}
	if errs := scriptErrors(); len(errs) > 0 {
		t.Errorf("the page showed script errors:\n%s", strings.Join(errs, "\n"))
	}
}

// TestConsoleGiveBackLogInBrowser: a command running when its server stops
// is given back and the next server runs it as attempt 2. The task row's
// Log shows attempt 2 with its own output and end; attempt 1, by its own
// address, keeps the interrupted output; neither holds the other's lines.
func TestConsoleGiveBackLogInBrowser(t *testing.T) {
	t.Parallel()
	ctx, scriptErrors := browser(t)
	dir := t.TempDir()
	mark := filepath.Join(dir, "mark")
	g := apitest.Compile(t, fmt.Sprintf(`pipeline: shop
timezone: UTC
schedule: "0 0 1 1 *"
tasks:
  - {name: slow, command: ["sh", "-c", "if [ -e %s ]; then echo second; exit 0; fi; touch %s; echo first; exec sleep 60"], timeout: 5m}
`, mark, mark))
	st := openStore(t, filepath.Join(t.TempDir(), "ax.db"))
	bg := context.Background()
	serve := func(holder string) (*httptest.Server, func()) {
		t.Helper()
		ex, err := apitest.Executors(g, st, nil)
		if err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewRegistry()
		eng, err := engine.New(engine.Config{Holder: holder, Registerer: reg, Grace: time.Millisecond}, st, g, ex)
		if err != nil {
			t.Fatal(err)
		}
		ectx, cancel := context.WithCancel(bg)
		done := make(chan error, 1)
		go func() { done <- eng.Run(ectx) }()
		srv := httptest.NewServer(Handler(Config{Store: st, Graph: g, Engine: eng, Gather: reg, OpWait: 10 * time.Second}))
		var once sync.Once
		stop := func() {
			once.Do(func() {
				srv.Close()
				cancel()
				if err := <-done; err != nil {
					t.Errorf("engine %s: %v", holder, err)
				}
			})
		}
		t.Cleanup(stop)
		waitFor(t, func() bool { return eng.Stats().Leader })
		return srv, stop
	}
	first, stopFirst := serve("first")
	resp, err := http.Post(first.URL+"/api/v1/pipelines/shop/tasks/slow/trigger", "application/json", strings.NewReader("{}"))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("trigger: %v %v", resp, err)
	}
	resp.Body.Close()
	var in axtype.Instance
	waitFor(t, func() bool { // running, its first line stored
		ins, err := st.Instances(bg, store.InstanceFilter{TaskID: "shop.slow", States: []axtype.State{axtype.Running}, Limit: 1})
		if err != nil || len(ins) != 1 {
			return false
		}
		in = ins[0]
		chunks, err := st.LogChunks(bg, in.ID, in.Attempt, 0, 0)
		return err == nil && len(chunks) > 0
	})
	stopFirst() // gives the running attempt back
	second, _ := serve("second")
	waitFor(t, func() bool {
		got, err := st.Instance(bg, in.ID)
		return err == nil && got.State == axtype.Success
	})
	if got, _ := st.Instance(bg, in.ID); got.Attempt != 2 {
		t.Fatalf("instance %d after the give-back: attempt %d, want 2", in.ID, got.Attempt)
	}

	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	shot := newShots(t)
	read := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, textNow(css(sel)))
		if err != nil {
			t.Fatalf("%s: %v (script errors: %v)", sel, err, scriptErrors())
		}
		return s
	}
	latest := fmt.Sprintf(`#logview[data-instance="%d"][data-attempt="2"]`, in.ID)
	err = chromedp.Do(ctx, chromedp.Navigate(second.URL+"/#/p/shop"), chromedp.WaitVisible(css(`tr[data-task="slow"] button[data-log]`)),
		click(css(`tr[data-task="slow"] button[data-log]`)), chromedp.WaitVisible(css(latest)), shot.take("log-giveback"))
	if err != nil {
		t.Fatalf("the task's log: %v (script errors: %v)", err, scriptErrors())
	}
	if text, end := read("#logview pre"), read("#logview .end"); !strings.Contains(text, "stdout| second") || strings.Contains(text, "first") ||
		strings.Contains(read("#logview"), "truncated") || end != "success (exit status 0)" {
		t.Errorf("attempt 2 after the give-back ended %q and shows\n%s", end, text)
	}
	err = chromedp.Do(ctx, click(css(`#logview a[data-attempt="1"]`)), chromedp.WaitVisible(css(fmt.Sprintf(`#logview[data-instance="%d"][data-attempt="1"]`, in.ID))),
		chromedp.Reload(), chromedp.WaitVisible(css(fmt.Sprintf(`#logview[data-instance="%d"][data-attempt="1"]`, in.ID))), shot.take("log-givenback-attempt"))
	if err != nil {
		t.Fatalf("attempt 1's log: %v (script errors: %v)", err, scriptErrors())
	}
	if text := read("#logview pre"); !strings.Contains(text, "stdout| first") || strings.Contains(text, "second") {
		t.Errorf("the given-back attempt 1 shows\n%s", text)
	}
	if errs := scriptErrors(); len(errs) > 0 {
		t.Errorf("the page showed script errors:\n%s", strings.Join(errs, "\n"))
	}
}
