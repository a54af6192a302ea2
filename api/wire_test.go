package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/api/apitest"
	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// webPipeline has a task that an executor registers for.
const webPipeline = "pipeline: web\ntimezone: UTC\ntasks:\n  - {name: pull, http: \"http://127.0.0.1:1/dispatch\"}\n"

// roundTrip calls the API through the Client and decodes the answer into a
// T, refusing fields T does not have; T encoded again must be the JSON the
// server sent. So the CLI reads every field the server writes, with the
// server's own types.
func roundTrip[T any](t *testing.T, c *Client, method, path string, body any) T {
	t.Helper()
	raw, err := c.Call(context.Background(), method, path, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	var v T
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s %s: the answer does not decode into %T: %v\n%s", method, path, v, err, raw)
	}
	again, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var want, got any
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(again, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(want, got) {
		t.Errorf("%s %s: %T loses or changes what the server sent\nserver: %s\nagain:  %s", method, path, v, raw, again)
	}
	return v
}

// TestWireTypesRoundTrip sends a request to every route of the admin API
// (and the executor endpoints' registration) through the Client, and
// decodes each answer into the type the server encodes it from.
func TestWireTypesRoundTrip(t *testing.T) {
	t.Parallel()
	e := setupAPI(t, apitest.Opts{Others: []string{webPipeline}, Retain: 30 * 24 * time.Hour,
		Executors: func(g *dag.Graph, st *store.Store, alert func(engine.Alert)) (engine.Executors, error) {
			ex, err := apitest.Executors(g, st, alert)
			// Never dispatched to: web.pull is only registered for.
			ex[defs.ExecHTTP] = runner.NewRouted(runner.RoutedConfig{Client: http.DefaultClient, URL: func(runner.Attempt) (string, error) { return "", errors.New("no dispatch here") }})
			return ex, err
		}})
	c := NewClient(e.Srv.URL, "", "operator:test")
	seen := map[string]bool{}
	// call names the route it exercises, so that a route left out fails.
	call := func(method, pattern, path string) string {
		seen[method+" "+pattern] = true
		return path
	}
	get := func(pattern, path string) string { return call("GET", pattern, path) }
	post := func(pattern, path string) string { return call("POST", pattern, path) }

	reg := roundTrip[Registered](t, c, "POST", "/api/v1/executors/register", map[string]any{"address": "http://10.0.0.5:9090", "tasks": []string{"web.pull"}})
	if fmt.Sprint(reg.Registered) != "[web.pull]" {
		t.Errorf("registered %v", reg.Registered)
	}
	res := roundTrip[Result](t, c, "POST", post("/api/v1/pipelines/{pipeline}/trigger", "/api/v1/pipelines/shop/trigger"), map[string]any{"reason": "wire"})
	if !strings.Contains(res.Result, "shop") {
		t.Errorf("trigger: %+v", res)
	}
	clean := e.WaitState("shop.clean", axtype.Success)
	ctx := context.Background()
	if err := e.St.AppendAction(ctx, store.Action{At: time.Now(), Actor: "test", Action: "note"}); err != nil {
		t.Fatal(err)
	}

	if a := roundTrip[Session](t, c, "GET", get("/api/v1/session", "/api/v1/session"), nil); a.Needed || a.User != "" {
		t.Errorf("session on a server without a token: %+v", a)
	}
	st := roundTrip[Status](t, c, "GET", get("/api/v1/status", "/api/v1/status"), nil)
	if st.Role != "primary" || st.Lease == nil || st.Loop == nil {
		t.Errorf("status %+v", st)
	}
	if ps := roundTrip[[]PipelineItem](t, c, "GET", get("/api/v1/pipelines", "/api/v1/pipelines"), nil); len(ps) != 2 {
		t.Errorf("pipelines %+v", ps)
	}
	if p := roundTrip[Pipeline](t, c, "GET", get("/api/v1/pipelines/{pipeline}", "/api/v1/pipelines/shop"), nil); len(p.Tasks) != 3 || len(p.Edges) != 1 || p.Latest == nil {
		t.Errorf("pipeline %+v", p)
	}
	if rs := roundTrip[[]RunView](t, c, "GET", get("/api/v1/pipelines/{pipeline}/runs", "/api/v1/pipelines/shop/runs"), nil); len(rs) != 1 || rs[0].ID != clean.RunID {
		t.Errorf("runs %+v", rs)
	}
	if rd := roundTrip[RunDetail](t, c, "GET", get("/api/v1/runs/{run}", fmt.Sprintf("/api/v1/runs/%d", clean.RunID)), nil); len(rd.Instances) != 3 {
		t.Errorf("run %+v", rd)
	}
	if td := roundTrip[TaskDetail](t, c, "GET", get("/api/v1/pipelines/{pipeline}/tasks/{task}", "/api/v1/pipelines/shop/tasks/clean"), nil); td.Task.ID != "shop.clean" {
		t.Errorf("task %+v", td)
	}
	roundTrip[engine.Explanation](t, c, "GET", get("/api/v1/pipelines/{pipeline}/tasks/{task}/explain", "/api/v1/pipelines/shop/tasks/clean/explain"), nil)
	if ins := roundTrip[[]axtype.Instance](t, c, "GET", get("/api/v1/instances", "/api/v1/instances"), nil); len(ins) < 3 {
		t.Errorf("instances %+v", ins)
	}
	roundTrip[LogPage](t, c, "GET", get("/api/v1/instances/{id}/logs", fmt.Sprintf("/api/v1/instances/%d/logs", clean.ID)), nil)
	if hs := roundTrip[[]store.HistoryRow](t, c, "GET", get("/api/v1/history", "/api/v1/history"), nil); len(hs) == 0 {
		t.Error("no history")
	}
	if as := roundTrip[[]store.Action](t, c, "GET", get("/api/v1/actions", "/api/v1/actions"), nil); len(as) == 0 {
		t.Error("no actions")
	}
	roundTrip[PruneReport](t, c, "GET", get("/api/v1/prune", "/api/v1/prune"), nil)
	roundTrip[PruneReport](t, c, "POST", post("/api/v1/prune", "/api/v1/prune"), struct{}{})
	if xs := roundTrip[[]ExecutorView](t, c, "GET", get("/api/v1/executors", "/api/v1/executors"), nil); len(xs) != 1 || !xs[0].Live {
		t.Errorf("executors %+v", xs)
	}
	roundTrip[LimitsView](t, c, "GET", get("/api/v1/limits", "/api/v1/limits"), nil)
	roundTrip[Result](t, c, "PUT", call("PUT", "/api/v1/limits", "/api/v1/limits"), map[string]any{"global": 50})
	roundTrip[ReloadView](t, c, "GET", get("/api/v1/reload", "/api/v1/reload"), nil)

	from := "2025-01-01" // a fire time of the yearly schedule, in the past
	plan := roundTrip[BackfillPlan](t, c, "POST", post("/api/v1/backfills", "/api/v1/backfills"), BackfillRequest{Pipeline: "shop", From: from, To: from, Select: "sync"})
	if plan.ID == 0 {
		t.Fatalf("backfill %+v", plan)
	}
	if bs := roundTrip[[]BackfillView](t, c, "GET", get("/api/v1/backfills", "/api/v1/backfills"), nil); len(bs) != 1 {
		t.Errorf("backfills %+v", bs)
	}
	roundTrip[BackfillView](t, c, "GET", get("/api/v1/backfills/{id}", fmt.Sprintf("/api/v1/backfills/%d", plan.ID)), nil)
	waitFor(t, func() bool {
		bs, err := e.St.Backfills(ctx, plan.ID)
		return err == nil && len(bs) == 1 && bs[0].State != engine.BackfillPending && bs[0].State != engine.BackfillRunning
	})
	// Done: resume, cancel and approve are refused (409), with the message of an ErrorBody.
	for _, verb := range []string{"resume", "cancel", "approve"} {
		_, err := c.Call(ctx, "POST", post("/api/v1/backfills/{id}/"+verb, fmt.Sprintf("/api/v1/backfills/%d/%s", plan.ID, verb)), struct{}{})
		if se := (*StatusError)(nil); !errors.As(err, &se) || se.Code != http.StatusConflict || !strings.Contains(se.Msg, "done") {
			t.Errorf("%s of a done backfill: %v", verb, err)
		}
	}

	// The writes answer what the scheduler did, each as a Result.
	for _, w := range []struct{ pattern, path string }{
		{"/api/v1/pipelines/{pipeline}/tasks/{task}/pause", "/api/v1/pipelines/shop/tasks/sync/pause"},
		{"/api/v1/pipelines/{pipeline}/tasks/{task}/resume", "/api/v1/pipelines/shop/tasks/sync/resume"},
		{"/api/v1/pipelines/{pipeline}/pause", "/api/v1/pipelines/shop/pause"},
		{"/api/v1/pipelines/{pipeline}/resume", "/api/v1/pipelines/shop/resume"},
		{"/api/v1/groups/{group}/pause", "/api/v1/groups/etl/pause"},
		{"/api/v1/groups/{group}/resume", "/api/v1/groups/etl/resume"},
		{"/api/v1/instances/{id}/rerun", fmt.Sprintf("/api/v1/instances/%d/rerun", clean.ID)},
	} {
		if r := roundTrip[Result](t, c, "POST", post(w.pattern, w.path), map[string]any{}); r.Result == "" {
			t.Errorf("%s: no result", w.path)
		}
	}
	e.WaitState("shop.clean", axtype.Success)

	// The slow task runs until killed; a killed one is rerun, then marked.
	roundTrip[Result](t, c, "POST", post("/api/v1/pipelines/{pipeline}/tasks/{task}/trigger", "/api/v1/pipelines/shop/tasks/slow/trigger"), map[string]any{})
	slow := e.WaitState("shop.slow", axtype.Running)
	killOne := fmt.Sprintf("/api/v1/instances/%d/kill", slow.ID)
	roundTrip[Result](t, c, "POST", post("/api/v1/instances/{id}/kill", killOne), map[string]any{})
	e.WaitState("shop.slow", axtype.Killed)
	roundTrip[Result](t, c, "POST", post("/api/v1/pipelines/{pipeline}/tasks/{task}/rerun", "/api/v1/pipelines/shop/tasks/slow/rerun"), map[string]any{})
	e.WaitState("shop.slow", axtype.Running)
	roundTrip[Result](t, c, "POST", post("/api/v1/pipelines/{pipeline}/tasks/{task}/kill", "/api/v1/pipelines/shop/tasks/slow/kill"), map[string]any{})
	e.WaitState("shop.slow", axtype.Killed)
	roundTrip[Result](t, c, "POST", post("/api/v1/runs/{run}/rerun", fmt.Sprintf("/api/v1/runs/%d/rerun", slow.RunID)), map[string]any{})
	e.WaitState("shop.slow", axtype.Running)
	roundTrip[Result](t, c, "POST", killOne, map[string]any{})
	e.WaitState("shop.slow", axtype.Killed)
	roundTrip[Result](t, c, "POST", post("/api/v1/pipelines/{pipeline}/tasks/{task}/mark", "/api/v1/pipelines/shop/tasks/slow/mark"), map[string]any{"state": "failed", "run": slow.RunID})
	roundTrip[Result](t, c, "POST", post("/api/v1/instances/{id}/mark", fmt.Sprintf("/api/v1/instances/%d/mark", slow.ID)), map[string]any{"state": "success"})
	roundTrip[Result](t, c, "POST", post("/api/v1/pipelines/{pipeline}/tasks/{task}/trigger", "/api/v1/pipelines/shop/tasks/slow/trigger"), map[string]any{})
	slow = e.WaitState("shop.slow", axtype.Running)
	roundTrip[Result](t, c, "POST", post("/api/v1/runs/{run}/cancel", fmt.Sprintf("/api/v1/runs/%d/cancel", slow.RunID)), map[string]any{})

	// A refusal is an ErrorBody, which the Client turns into a StatusError.
	code, raw := e.Call("GET", "/api/v1/pipelines/shoop", "")
	if eb := apitest.DecodeJSON[ErrorBody](t, raw); code != http.StatusNotFound || !strings.Contains(eb.Error, `no pipeline "shoop"`) {
		t.Errorf("GET /api/v1/pipelines/shoop: %d %s", code, raw)
	}
	if _, err := c.Call(ctx, "GET", "/api/v1/pipelines/shoop", nil); !IsNotFound(err) || !strings.Contains(err.Error(), `no pipeline "shoop"`) {
		t.Errorf("the Client's error: %v", err)
	}
	code, raw = e.Call("GET", "/readyz", "")
	if r := apitest.DecodeJSON[Ready](t, raw); code != http.StatusOK || !r.Ready || r.Role != "primary" {
		t.Errorf("readyz: %d %s", code, raw)
	}
	for _, rt := range adminRoutes() {
		// Signing in and out needs a server that asks for it: TestSessionCookie.
		if !seen[rt.method+" "+rt.path] && !(rt.path == "/api/v1/session" && rt.method != "GET") {
			t.Errorf("%s %s: no round trip of its answer here", rt.method, rt.path)
		}
	}
}
