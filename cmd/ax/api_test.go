package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/runner/executor"
	"github.com/ax-sched/ax/store"
	"github.com/ax-sched/ax/store/storetest"
)

func TestExecutorAPI(t *testing.T) {
	t.Parallel()
	st := storetest.SQLite(t)
	g, errs, err := dag.Load([]string{"../../examples"}, defs.Options{}, dag.Options{DispatchRate: -1})
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
		{"/api/v1/executors/heartbeat", `{}`, "malformed heartbeat"},
		{"/api/v1/executors/heartbeat", `{"address":"http://nobody:1"}`, "is not registered: register first"},
	} {
		code, out := post(tc.path, tc.body)
		if code/100 != 4 || !strings.Contains(out, tc.want) {
			t.Errorf("%s %s: %d %s, want 4xx %q", tc.path, tc.body, code, out, tc.want)
		}
	}
	if exs, _ := st.Executors(context.Background(), ""); len(exs) != 1 {
		t.Errorf("bad requests changed the registry: %+v", exs)
	}
}

// TestServerRoutesToRegisteredExecutor: an SDK executor registers with a
// real ax server; the http task, whose own URL is dead, runs on it.
func TestServerRoutesToRegisteredExecutor(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	apiAddr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	src := "pipeline: routed\ntimezone: UTC\nschedule: \"@every 1s\"\ntasks:\n  - {name: pull, http: \"http://127.0.0.1:1/dispatch\"}\n"
	if err := os.WriteFile(filepath.Join(dir, "routed.yaml"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "ax.db")
	srv := startServer(t, db, dir, "--listen", apiAddr)
	calls := make(chan string, 100)
	exsrv := httptest.NewUnstartedServer(nil)
	x, err := executor.New(executor.Config{Address: "http://" + exsrv.Listener.Addr().String(), Scheduler: "http://" + apiAddr,
		Heartbeat: 500 * time.Millisecond, Client: http.DefaultClient},
		map[string]runner.Func{"pull": func(_ context.Context, a runner.Attempt) error { calls <- a.Ticket; return nil }})
	if err != nil {
		t.Fatal(err)
	}
	exsrv.Config.Handler = x.Handler()
	exsrv.Start()
	defer exsrv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go x.Run(ctx)
	st := openStore(t, db)
	waitFor(t, func() bool {
		ins, _ := st.Instances(context.Background(), store.InstanceFilter{TaskID: "routed.pull", States: []store.State{store.Success}})
		return len(ins) >= 3
	})
	srv.stop(t)
	if len(calls) < 3 {
		t.Errorf("the registered executor ran %d attempts", len(calls))
	}
}
