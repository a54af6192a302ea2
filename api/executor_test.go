package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/store"
	"github.com/ax-sched/ax/store/storetest"
)

func TestExecutorAPI(t *testing.T) {
	t.Parallel()
	st := storetest.SQLite(t)
	g, errs, err := dag.Load([]string{"../examples"}, defs.Options{}, dag.Options{DispatchRate: -1})
	if err != nil || g == nil {
		t.Fatal(err, errs)
	}
	mux := http.NewServeMux()
	(&executorAPI{st: st, g: g}).routes(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	post := func(path, body string) (int, string) {
		resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&m)
		return resp.StatusCode, fmt.Sprint(m)
	}
	reg := `{"address":"http://10.0.0.5:9090","protocol":"http","tasks":["sync_orders"]}`
	for range 2 { // a restart registers again: still one executor
		if code, out := post("/api/v1/executors/register", reg); code != 200 || !strings.Contains(out, "orders_daily.sync_orders") {
			t.Fatalf("register: %d %s", code, out)
		}
	}
	exs, _ := st.Executors(context.Background(), "")
	if len(exs) != 1 || fmt.Sprint(exs[0].Tasks) != "[orders_daily.sync_orders]" {
		t.Errorf("executors %+v", exs)
	}
	if code, _ := post("/api/v1/executors/heartbeat", `{"address":"http://10.0.0.5:9090"}`); code != 204 {
		t.Errorf("heartbeat: %d", code)
	}
	for _, tc := range []struct{ path, body, want string }{
		{"/api/v1/executors/register", `{bad`, "malformed registration"},
		{"/api/v1/executors/register", `{"address":"10.0.0.5","tasks":["sync_orders"]}`, "is not a URL"},
		{"/api/v1/executors/register", `{"address":"http://h:1","tasks":["nosuch"]}`, "no http task named nosuch"},
		{"/api/v1/executors/register", `{"address":"http://h:1","tasks":[],"extra":1}`, `unknown field "extra"`},
		{"/api/v1/executors/register", `{"address":"http://h:1","tasks":[]}`, "names no tasks: list the tasks it runs"},
		{"/api/v1/executors/register", `{"address":"http://h:1"}`, "names no tasks"},
		{"/api/v1/executors/register", `{"address":"http://ops:s3cret@h:1","tasks":["sync_orders"]}`, "carries credentials: register the address alone"},
		{"/api/v1/executors/register", `{"address":"http://h:1/?token=abc","tasks":["sync_orders"]}`, "has a query or fragment"},
		// A bad address with credentials is refused without repeating them.
		{"/api/v1/executors/register", `{"address":"ftp://ops:s3cret@h:1","tasks":["sync_orders"]}`, `address "ftp://ops:xxxxx@h:1" is not a URL`},
		{"/api/v1/executors/register", `{"address":"http://ops:s3cret@h:1:2:3/%zz","tasks":["sync_orders"]}`, "not repeated here: it may carry credentials"},
		{"/api/v1/executors/heartbeat", `{}`, "malformed heartbeat"},
		{"/api/v1/executors/heartbeat", `{"address":"http://nobody:1"}`, "is not registered: register first"},
	} {
		code, out := post(tc.path, tc.body)
		if code/100 != 4 || !strings.Contains(out, tc.want) {
			t.Errorf("%s %s: %d %s, want 4xx %q", tc.path, tc.body, code, out, tc.want)
		}
		if strings.Contains(out, "s3cret") {
			t.Errorf("%s %s: the answer repeats the credentials: %s", tc.path, tc.body, out)
		}
	}
	if exs, _ := st.Executors(context.Background(), ""); len(exs) != 1 {
		t.Errorf("bad requests changed the registry: %+v", exs)
	}
	// Malformed requests are answered only; a heartbeat of an executor that
	// is not registered is recorded with its reason.
	acts, _ := st.Actions(context.Background(), store.LogFilter{})
	if len(acts) != 1 || acts[0].Action != "refused_heartbeat" || !strings.Contains(acts[0].Reason, "executor http://nobody:1 is not registered") {
		t.Errorf("refused requests recorded %+v, want one refused_heartbeat", acts)
	}
}

// TestServerRoutesToRegisteredExecutor: a task whose own URL is dead runs on
// the SDK executor registered for it, the two sharing AX_EXECUTOR_TOKEN for
// registration, heartbeats, dispatches and results.
