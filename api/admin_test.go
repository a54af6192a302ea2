package api

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/api/apitest"
	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"
)

// badRequests are, for every endpoint, requests that must get a 4xx with a
// message naming the problem, and change nothing.
var badRequests = []struct {
	method, path, body string
	code               int
	want               string
}{
	{"GET", "/api/v1/status?verbose=1", "", 400, `unknown query parameter "verbose"`},
	{"GET", "/api/v1/pipelines?x=1", "", 400, `unknown query parameter "x"`},
	{"GET", "/api/v1/pipelines/shoop", "", 404, `no pipeline "shoop" (did you mean "shop"?)`},
	{"GET", "/api/v1/pipelines/shop/runs?state=done", "", 400, `state="done": use waiting, running, awaiting approval, success or failed`},
	{"GET", "/api/v1/pipelines/shop/runs?limit=0", "", 400, "limit=\"0\": give a whole number from 1 to 1000"},
	{"GET", "/api/v1/pipelines/shop/runs?sate=running", "", 400, `unknown query parameter "sate" (did you mean "state"?)`},
	{"GET", "/api/v1/pipelines/shop/runs?from=yesterday", "", 400, `from: "yesterday" is not a date`},
	{"GET", "/api/v1/pipelines/shop/runs?before=99999", "", 404, "before=99999: no run 99999 of pipeline shop (pass the id of the last run of the previous page)"},
	{"GET", "/api/v1/pipelines/shop/runs?before=0", "", 400, `before="0": give a whole number from 1`},
	{"GET", "/api/v1/backfills?before=x", "", 400, `before="x": give a whole number from 1`},
	{"GET", "/api/v1/pipelines/shop/runs?recent=true&before=1", "", 400, "recent=true is the first page as ax status shows it: leave out before, from and to"},
	{"GET", "/api/v1/runs/abc", "", 400, `run "abc": give a positive number`},
	{"GET", "/api/v1/runs/99999", "", 404, "no run 99999"},
	{"GET", "/api/v1/pipelines/shop/tasks/synk", "", 404, `pipeline shop has no task "synk" (did you mean "sync"?)`},
	{"GET", "/api/v1/pipelines/shop/tasks/synk/explain", "", 404, `no task "synk"`},
	{"POST", "/api/v1/pipelines/shop/tasks/synk/pause", "", 404, `no task "synk" (did you mean "sync"?)`},
	{"POST", "/api/v1/pipelines/shop/tasks/sync/pause", "{", 400, "malformed request body"},
	{"POST", "/api/v1/pipelines/shop/tasks/sync/pause", `{"reasn": "x"}`, 400, `unknown field "reasn"`},
	{"POST", "/api/v1/pipelines/shop/tasks/sync/pause", `{"reason": 5}`, 400, "cannot unmarshal number"},
	{"POST", "/api/v1/pipelines/shop/tasks/sync/pause", `{"reason": "` + strings.Repeat("x", maxBody) + `"}`, 413, "request body over 65536 bytes"},
	{"POST", "/api/v1/pipelines/shop/tasks/sync/pause", `{"downstream": true}`, 400, "downstream applies to trigger only"},
	{"POST", "/api/v1/pipelines/shop/tasks/sync/resume", "", 409, "is not paused"},
	{"POST", "/api/v1/pipelines/shop/tasks/sync/kill", "", 409, "kill refused"},
	{"POST", "/api/v1/pipelines/shop/tasks/sync/rerun", "", 409, "rerun refused"},
	{"POST", "/api/v1/pipelines/shop/tasks/sync/trigger", `{"downstream": "yes"}`, 400, "cannot unmarshal string"},
	{"POST", "/api/v1/pipelines/shopp/pause", "", 404, `no pipeline "shopp" (did you mean "shop"?)`},
	{"POST", "/api/v1/pipelines/shop/resume", "", 409, "resume refused"},
	{"POST", "/api/v1/groups/elt/pause", "", 404, `no group "elt" (did you mean "etl"?)`},
	{"POST", "/api/v1/groups/etl/resume", "", 409, "resume refused"},
	{"GET", "/api/v1/instances?state=DONE", "", 400, `state="DONE": not a state`},
	{"GET", "/api/v1/instances?task=shop.nope", "", 400, `task="shop.nope": no such task`},
	{"GET", "/api/v1/instances?pipeline=nope", "", 400, `pipeline="nope": no such pipeline`},
	{"GET", "/api/v1/instances?task=shop.sync&order=newest", "", 400, `order="newest": give id (newest first, the default) or started`},
	{"GET", "/api/v1/instances?order=started", "", 400, "order=started: give task= and no before="},
	{"GET", "/api/v1/instances?task=shop.sync&order=started&before=5", "", 400, "order=started: give task= and no before="},
	{"POST", "/api/v1/instances/abc/kill", "", 400, `id "abc": give a positive number`},
	{"POST", "/api/v1/instances/99999/kill", "", 404, "no instance 99999"},
	{"POST", "/api/v1/instances/99999/rerun", "", 404, "no instance 99999"},
	{"POST", "/api/v1/runs/99999/rerun", "", 404, "no run 99999"},
	{"GET", "/api/v1/history?limit=5000", "", 400, "give a whole number from 1 to 1000"},
	{"GET", "/api/v1/history?newest=maybe", "", 400, `newest="maybe": give true or false`},
	{"GET", "/api/v1/actions?task=shop.nope", "", 400, "no such task"},
	{"GET", "/api/v1/executors?all=1", "", 400, `unknown query parameter "all"`},
	{"GET", "/api/v1/limits?x=1", "", 400, "unknown query parameter"},
	{"PUT", "/api/v1/limits", `{}`, 400, `give {"global": N}`},
	{"PUT", "/api/v1/limits", `{"global": -1}`, 400, "global rate -1: give a rate per second from 0 (unlimited) to 1000000"},
	{"PUT", "/api/v1/limits", `{"global": 1e300}`, 400, "give a rate per second from 0 (unlimited) to 1000000"},
	{"PUT", "/api/v1/limits", `{"global": 1e999}`, 400, "cannot unmarshal number 1e999"},
	{"PUT", "/api/v1/limits", `{"max_running": -5}`, 400, "max_running -5: give a number of attempts from 0 (unlimited) to 1000000"},
	{"PUT", "/api/v1/limits", `{"max_running": 99999999}`, 400, "max_running 99999999: give a number of attempts"},
	{"PUT", "/api/v1/limits", `{"max_running": 2.5}`, 400, "cannot unmarshal number 2.5"},
	{"PUT", "/api/v1/limits", `{"group_max_running": {"elt": 3}}`, 400, `no group "elt" (did you mean "etl"?)`},
	{"PUT", "/api/v1/limits", `{"global": 5, "max_running": -1}`, 400, "max_running -1"},
	{"PUT", "/api/v1/limits", `{"global": "fast"}`, 400, "cannot unmarshal string"},
	{"PUT", "/api/v1/limits", `{"groups": {"elt": 3}}`, 400, `no group "elt" (did you mean "etl"?)`},
	{"GET", "/api/v1/backfills?limit=x", "", 400, "give a whole number"},
	{"POST", "/api/v1/backfills", `{"pipeline": "shop"}`, 400, `give "pipeline", "from" and "to"`},
	{"POST", "/api/v1/backfills", `{"pipeline": "shoop", "from": "2026-01-01", "to": "2026-01-05"}`, 404, `no pipeline "shoop" (did you mean "shop"?)`},
	{"POST", "/api/v1/backfills", `{"pipeline": "shop", "from": "Jan 1", "to": "2026-01-05"}`, 400, `from: "Jan 1" is not a date`},
	{"POST", "/api/v1/backfills", `{"pipeline": "shop", "from": "2025-01-01", "to": "2026-12-31", "select": "sink"}`, 400, `"sink"`},
	{"POST", "/api/v1/backfills", `{"pipeline": "shop", "from": "2025-01-01", "to": "2026-12-31", "rerun": "some"}`, 400, `--rerun "some"`},
	{"GET", "/api/v1/backfills/x", "", 400, "give a positive number"},
	{"GET", "/api/v1/backfills/99999", "", 404, "no backfill 99999"},
	{"POST", "/api/v1/backfills/99999/cancel", "", 404, "no backfill 99999"},
	{"GET", "/api/v1/nothing", "", 404, "no endpoint GET /api/v1/nothing"},
	{"GET", "/api/v1/pipelines/shop/tasks/sync/pause", "", 405, "use POST"},
	{"DELETE", "/api/v1/pipelines/shop", "", 405, "DELETE /api/v1/pipelines/shop: use GET"},
}

// A web page the operator opens cannot drive the API: a form's text/plain
// POST, a fetch from a foreign Origin and a request by a rebound name (DNS
// rebinding) are refused with the rule and the fix, and change nothing.
func TestCSRFRefusedAndNothingChanges(t *testing.T) {
	t.Parallel()
	e := setupAPI(t, apitest.Opts{})
	before := e.State()
	for _, tc := range []struct {
		name   string
		header map[string]string
		host   string
		code   int
		want   string
	}{
		{"form post", map[string]string{"Content-Type": "text/plain"}, "", 415, "needs Content-Type: application/json"},
		{"no content type", nil, "", 415, "needs Content-Type: application/json"},
		{"foreign origin", map[string]string{"Content-Type": "application/json", "Origin": "https://evil.example"}, "", 403, "is foreign"},
		{"rebound host", map[string]string{"Content-Type": "application/json"}, "evil.example:8080", 403, "DNS rebinding"},
	} {
		for _, path := range []string{"/api/v1/pipelines/shop/pause", "/api/v1/pipelines/shop/tasks/sync/trigger", "/api/v1/executors/register"} {
			req, err := http.NewRequest("POST", e.Srv.URL+path, strings.NewReader(`{"reason": "csrf"}`))
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			if tc.host != "" {
				req.Host = tc.host
			}
			resp, err := e.Srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			msg := decodeJSON[map[string]string](t, string(body))["error"]
			if resp.StatusCode != tc.code || !strings.Contains(msg, tc.want) {
				t.Errorf("%s %s: %d %s; want %d with %q", tc.name, path, resp.StatusCode, body, tc.code, tc.want)
			}
		}
	}
	if after := e.State(); after != before {
		t.Errorf("refused requests changed the store:\nbefore %s\nafter  %s", before, after)
	}
}

func TestAPIBadRequestsChangeNothing(t *testing.T) {
	t.Parallel()
	e := setupAPI(t, apitest.Opts{})
	before := e.State()
	for _, tc := range badRequests {
		code, body := e.Call(tc.method, tc.path, tc.body)
		msg := decodeJSON[map[string]string](t, body)["error"]
		if code != tc.code || msg == "" || !strings.Contains(msg, tc.want) {
			t.Errorf("%s %s %.60s: %d %s\nwant %d with %q", tc.method, tc.path, tc.body, code, body, tc.code, tc.want)
		}
		if after := e.State(); after != before {
			t.Fatalf("%s %s changed the store:\nbefore %s\nafter  %s", tc.method, tc.path, before, after)
		}
	}
}

func TestAPIEndpoints(t *testing.T) {
	t.Parallel()
	e := setupAPI(t, apitest.Opts{})
	ok := func(method, path, body string, want ...string) string {
		t.Helper()
		code, got := e.Call(method, path, body)
		if code/100 != 2 {
			t.Fatalf("%s %s: %d %s", method, path, code, got)
		}
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("%s %s: want %q in\n%s", method, path, w, got)
			}
		}
		return got
	}
	ok("GET", "/api/v1/status", "", `"role": "primary"`, `"holder": "api-test"`)
	ok("GET", "/api/v1/pipelines", "", `"name": "shop"`, `"tasks": 3`)
	// Run now with the downstream: sync then clean succeed in a run of their own.
	ok("POST", "/api/v1/pipelines/shop/tasks/sync/trigger", `{"downstream": true, "reason": "test"}`, "started for shop.sync (2 task(s))")
	e.WaitState("shop.clean", axtype.Success)
	ok("POST", "/api/v1/pipelines/shop/tasks/slow/trigger", "", "started for shop.slow (1 task(s))")
	slow := e.WaitState("shop.slow", axtype.Running)
	p := decodeJSON[struct {
		Tasks     []TaskView `json:"tasks"`
		Layers    [][]string `json:"layers"`
		Edges     []struct{ From, To string }
		LatestRun *RunView `json:"latest_run"`
	}](t, ok("GET", "/api/v1/pipelines/shop", ""))
	if len(p.Tasks) != 3 || p.Tasks[0].State != axtype.Success || fmt.Sprint(p.Layers) != "[[slow sync] [clean]]" || len(p.Edges) != 1 || p.LatestRun == nil {
		t.Errorf("pipeline: %+v", p)
	}
	runs := decodeJSON[[]RunView](t, ok("GET", "/api/v1/pipelines/shop/runs?state=success&limit=10", ""))
	if len(runs) != 1 || runs[0].Counts[axtype.Success] != 2 {
		t.Fatalf("succeeded runs: %+v", runs)
	}
	running := decodeJSON[[]RunView](t, ok("GET", "/api/v1/pipelines/shop/runs?state=running", ""))
	if len(running) != 1 || running[0].Counts[axtype.Running] != 1 || running[0].ID == runs[0].ID {
		t.Fatalf("running runs (slow): %+v", running)
	}
	// Paged by key: the page after the running run holds the succeeded one.
	if next := decodeJSON[[]RunView](t, ok("GET", fmt.Sprintf("/api/v1/pipelines/shop/runs?limit=1&before=%d", running[0].ID), "")); len(next) != 1 || next[0].ID != runs[0].ID {
		t.Fatalf("the page before run %d: %+v, want run %d", running[0].ID, next, runs[0].ID)
	}
	ok("GET", fmt.Sprintf("/api/v1/runs/%d", runs[0].ID), "", `"instances"`, `"shop.clean"`)
	task := ok("GET", "/api/v1/pipelines/shop/tasks/sync", "", `"success_count": 1`, `"next_fires"`, `"last_fires"`, `"due"`)
	if !strings.Contains(task, `"state": "SUCCESS"`) {
		t.Errorf("task: %s", task)
	}
	ok("GET", "/api/v1/pipelines/shop/tasks/slow/explain", "", `"verdict"`, "running since")
	ok("GET", "/api/v1/instances?pipeline=shop&state=SUCCESS", "", `"shop.sync"`, `"shop.clean"`)
	ok("GET", "/api/v1/history?task=shop.sync&newest=true&limit=2", "", `"to": "SUCCESS"`)
	ok("GET", "/api/v1/actions?task=shop.sync&action=dispatch", "", `"action": "dispatch"`)
	// Kill the slow command through its instance, then rerun it.
	ok("POST", fmt.Sprintf("/api/v1/instances/%d/kill", slow.ID), "", "kill sent to 1 instance(s)")
	e.WaitState("shop.slow", axtype.Killed)
	ok("POST", "/api/v1/pipelines/shop/tasks/slow/rerun", "", "rerun")
	e.WaitState("shop.slow", axtype.Running)
	ok("POST", "/api/v1/pipelines/shop/tasks/slow/kill", "", "kill sent to 1 instance(s)")
	e.WaitState("shop.slow", axtype.Killed)
	ok("POST", fmt.Sprintf("/api/v1/runs/%d/rerun", running[0].ID), "", "rerun")
	e.WaitState("shop.slow", axtype.Running)
	ok("POST", "/api/v1/pipelines/shop/tasks/slow/kill", "", "kill sent to 1 instance(s)")
	// The kill lands asynchronously; wait for it so that the dry run's
	// before/after comparison below sees no other change.
	e.WaitState("shop.slow", axtype.Killed)
	// Pause and resume a task, the pipeline and the group.
	ok("POST", "/api/v1/pipelines/shop/tasks/sync/pause", `{"reason": "maintenance"}`, "paused task shop.sync")
	ok("POST", "/api/v1/pipelines/shop/tasks/sync/resume", "", "resumed task shop.sync")
	ok("POST", "/api/v1/pipelines/shop/pause", "", "paused pipeline shop")
	ok("GET", "/api/v1/pipelines", "", `"paused"`)
	ok("POST", "/api/v1/pipelines/shop/resume", "", "resumed pipeline shop")
	ok("POST", "/api/v1/groups/etl/pause", "", "paused group etl")
	ok("POST", "/api/v1/groups/etl/resume", "", "resumed group etl")
	// Limits.
	ok("PUT", "/api/v1/limits", `{"global": 40, "groups": {"etl": 5}, "reason": "night"}`, "limits now global 40/s, group etl 5/s")
	ok("GET", "/api/v1/limits", "", `"global": 40`, `"etl": 5`)
	// Backfills: a dry run stores nothing; a real one is created and cancelled.
	before := e.State()
	ok("POST", "/api/v1/backfills", `{"pipeline": "shop", "from": "2020-01-01", "to": "2025-12-31", "dry_run": true}`, `"plan"`, `"2025-01-01T00:00:00Z"`)
	if e.State() != before {
		t.Error("a dry-run backfill changed the store")
	}
	created := decodeJSON[struct{ ID int64 }](t, ok("POST", "/api/v1/backfills", `{"pipeline": "shop", "from": "2020-01-01", "to": "2025-12-31", "select": "sync+"}`))
	ok("GET", fmt.Sprintf("/api/v1/backfills/%d", created.ID), "", `"total_runs": 6`, `"select": "sync+"`)
	ok("GET", "/api/v1/backfills", "", fmt.Sprintf(`"id": %d`, created.ID))
	ok("POST", fmt.Sprintf("/api/v1/backfills/%d/cancel", created.ID), "", "cancelled")
	if code, body := e.Call("POST", fmt.Sprintf("/api/v1/backfills/%d/cancel", created.ID), ""); code != 409 || !strings.Contains(body, "cancelled already") {
		t.Errorf("second cancel: %d %s", code, body)
	}
	// Executors: one registered (a registration must name its tasks, and shop
	// has no http task: recorded in the store as the executor API would),
	// listed with its state.
	if err := e.St.RegisterExecutor(context.Background(), store.RegisterParams{Address: "http://127.0.0.1:1", Protocol: "http", Tasks: []string{"shop.sync"}, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	ok("GET", "/api/v1/executors", "", `"address": "http://127.0.0.1:1"`, `"live": true`)
	// Every operation is in the action log with the actor the API was told.
	acts := decodeJSON[[]store.Action](t, ok("GET", "/api/v1/actions?action=pause&newest=true", ""))
	if len(acts) < 3 || acts[0].Actor != "operator:test" {
		t.Errorf("pause actions: %+v", acts)
	}
	// Metrics and readiness.
	ok("GET", "/metrics", "", "ax_dispatches_total", "ax_results_total{status=\"success\"}", "ax_dispatch_latency_seconds_bucket", `ax_executors{state="live"} 1`)
	ok("GET", "/readyz", "", `"role": "primary"`)
	ok("GET", "/healthz", "")
	ok("GET", "/", "", "<title>ax console</title>")
}

func TestAPIAccessToken(t *testing.T) {
	t.Parallel()
	e := setupAPI(t, apitest.Opts{Token: "s3cret"})
	before := e.State()
	for _, tok := range []string{"", "wrong"} {
		code, body := e.CallAs("POST", "/api/v1/pipelines/shop/tasks/sync/pause", "", tok)
		if code != 401 || !strings.Contains(strings.ToLower(body), "bearer token") {
			t.Errorf("write with token %q: %d %s", tok, code, body)
		}
		if code, _ := e.CallAs("GET", "/api/v1/pipelines", "", tok); code != 401 {
			t.Errorf("read with token %q: %d, want 401 (reads are not opened)", tok, code)
		}
		if code, _ := e.CallAs("GET", "/metrics", "", tok); code != 401 {
			t.Errorf("metrics with token %q: %d, want 401", tok, code)
		}
	}
	if e.State() != before {
		t.Fatal("a refused write changed the store")
	}
	if code, body := e.Call("POST", "/api/v1/pipelines/shop/tasks/sync/pause", ""); code != 200 {
		t.Fatalf("write with the token: %d %s", code, body)
	}
	if e.State() == before {
		t.Error("an accepted pause changed nothing")
	}
	// The console page itself loads without the token; its API calls carry it.
	if code, _ := e.CallAs("GET", "/", "", ""); code != 200 {
		t.Errorf("console page: %d", code)
	}

	open := setupAPI(t, apitest.Opts{Token: "s3cret", OpenReads: true})
	if code, _ := open.CallAs("GET", "/api/v1/pipelines", "", ""); code != 200 {
		t.Errorf("open reads: %d, want 200 without a token", code)
	}
	if code, _ := open.CallAs("PUT", "/api/v1/limits", `{"global": 1}`, ""); code != 401 {
		t.Errorf("write with open reads and no token: %d, want 401", code)
	}
}

func TestAPIStandbyRefusesWrites(t *testing.T) {
	t.Parallel()
	e := setupAPI(t, apitest.Opts{Standby: true})
	ctx := context.Background()
	now := time.Now()
	if _, err := e.St.AcquireLease(ctx, store.LeaseParams{Holder: "host-a:42", TTL: time.Minute, Now: now}); err != nil {
		t.Fatal(err)
	}
	if err := e.St.SetSetting(ctx, PrimarySetting, "http://10.0.0.7:8080", now); err != nil {
		t.Fatal(err)
	}
	before := e.State()
	code, body := e.Call("POST", "/api/v1/pipelines/shop/tasks/sync/pause", "")
	if code != 503 || !strings.Contains(body, "standby") || !strings.Contains(body, `"primary": "http://10.0.0.7:8080"`) || !strings.Contains(body, "host-a:42") {
		t.Errorf("write on a standby: %d %s", code, body)
	}
	if e.State() != before {
		t.Error("a write refused by the standby changed the store")
	}
	if code, body := e.Call("GET", "/api/v1/pipelines/shop", ""); code != 200 {
		t.Errorf("read on a standby: %d %s", code, body)
	}
	if code, body := e.Call("GET", "/readyz", ""); code != 200 || !strings.Contains(body, `"role": "standby"`) {
		t.Errorf("readyz on a standby: %d %s", code, body)
	}
}

// TestAPIDocMatchesRoutes: the API reference (docs/api.md) is generated from the
// route table; refresh it with go test ./api -run TestAPIDoc -update.
func TestAPIDocMatchesRoutes(t *testing.T) {
	t.Parallel()
	const begin, end = "<!-- api:begin -->\n", "<!-- api:end -->"
	raw, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	i, j := strings.Index(readme, begin), strings.Index(readme, end)
	if i < 0 || j < i {
		t.Fatalf("docs/api.md has no %q … %q section", strings.TrimSpace(begin), end)
	}
	want := apiDoc()
	if got := readme[i+len(begin) : j]; got != want {
		if *update {
			if err := os.WriteFile("../docs/api.md", []byte(readme[:i+len(begin)]+want+readme[j:]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Errorf("docs/api.md is out of date: run go test ./api -run TestAPIDoc -update\ngot:\n%s\nwant:\n%s", got, want)
	}
	// Every documented route is served: none answers with the catch-all 404.
	e := setupAPI(t, apitest.Opts{Standby: true})
	for _, rt := range adminRoutes() {
		path := strings.NewReplacer("{pipeline}", "shop", "{task}", "sync", "{group}", "etl", "{run}", "1", "{id}", "1").Replace(rt.path)
		code, body := e.Call(rt.method, path, "")
		if strings.Contains(body, "no endpoint") || code == http.StatusMethodNotAllowed {
			t.Errorf("%s %s: %d %s", rt.method, rt.path, code, body)
		}
	}
}

// TestExecutorToken: with AX_EXECUTOR_TOKEN set, registering, heartbeats and
// results need it; without it nothing is registered.
func TestExecutorToken(t *testing.T) {
	t.Parallel()
	e := setupAPI(t, apitest.Opts{ExecToken: "x-tok", Token: "admin-tok"})
	reg := `{"address": "http://127.0.0.1:1", "tasks": ["sync"]}`
	for _, path := range []string{"/api/v1/executors/register", "/api/v1/executors/heartbeat", "/api/v1/results"} {
		for _, tok := range []string{"", "admin-tok"} { // the admin token is not an executor's
			code, body := e.CallAs("POST", path, reg, tok)
			if code != 401 || !strings.Contains(body, "AX_EXECUTOR_TOKEN") {
				t.Errorf("POST %s with token %q: %d %s, want 401", path, tok, code, body)
			}
		}
	}
	if acts, _ := e.St.Actions(context.Background(), store.LogFilter{}); len(acts) != 0 {
		t.Errorf("refused executor requests wrote to the action log: %+v", acts)
	}
	reg = `{"address": "http://127.0.0.1:1", "tasks": []}`
	if exs, _ := e.St.Executors(context.Background(), ""); len(exs) != 0 {
		t.Fatalf("executors registered without the token: %+v", exs)
	}
	// With the token the request passes the door and reaches the
	// registration rules (this one names no tasks, so it is refused by them).
	if code, body := e.CallAs("POST", "/api/v1/executors/register", reg, "x-tok"); code != 400 || !strings.Contains(body, "names no tasks") {
		t.Errorf("register with the executor token: %d %s", code, body)
	}
}

// TestReadyzFailsWhenTheStoreFileIsDeleted: a store file deleted under a
// running server makes /readyz answer 503 naming the file, so that a load
// balancer or supervisor stops sending work to it.
func TestReadyzFailsWhenTheStoreFileIsDeleted(t *testing.T) {
	t.Parallel()
	e := setupAPI(t, apitest.Opts{})
	if code, body := e.Call("GET", "/readyz", ""); code != 200 {
		t.Fatalf("readyz before: %d %s", code, body)
	}
	if err := os.Remove(e.Path); err != nil {
		t.Fatal(err)
	}
	code, body := e.Call("GET", "/readyz", "")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "deleted") || !strings.Contains(body, `"ready": false`) {
		t.Errorf("readyz with the store file deleted: %d %s; want 503 saying it was deleted", code, body)
	}
}
