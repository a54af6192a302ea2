package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestHeartbeatPoolShown: the pool figures of an SDK executor's heartbeat
// are in GET /api/v1/executors (what ax executors and the console show);
// a malformed pool is refused and changes nothing; a heartbeat without one
// (an executor not built on an SDK) shows none.
func TestHeartbeatPoolShown(t *testing.T) {
	t.Parallel()
	mux, st := executorAPIOn(t, nil)
	board := &pools{}
	(&executorAPI{st: st, pools: board}).heartbeatOnly(mux)
	adm := &admin{st: st, pools: board, now: time.Now}
	post := func(path, body string) int {
		req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, req)
		return w.Code
	}
	pool := func() string {
		v, err := adm.executors(httptest.NewRequest(http.MethodGet, "/api/v1/executors", nil))
		if err != nil {
			t.Fatal(err)
		}
		exs := v.([]ExecutorView)
		if len(exs) != 1 || exs[0].Pool == nil {
			return "none"
		}
		return exs[0].Pool.String()
	}
	if code := post("/api/v1/executors/register", `{"address":"http://10.0.0.5:9090","protocol":"http","tasks":["sync_orders"]}`); code != 200 {
		t.Fatalf("register: %d", code)
	}
	if got := pool(); got != "none" {
		t.Errorf("pool before a heartbeat: %s", got)
	}
	if code := post("/api/v1/executors/heartbeat/pool", `{"address":"http://10.0.0.5:9090","pool":{"workers":4,"active":3,"max":8,"queued":2,"queue":300,"refused":7}}`); code != 204 {
		t.Fatalf("heartbeat: %d", code)
	}
	if got, want := pool(), "3/8 busy, 2/300 queued, 7 refused"; got != want {
		t.Errorf("pool %q, want %q", got, want)
	}
	if code := post("/api/v1/executors/heartbeat/pool", `{"address":"http://10.0.0.5:9090","pool":{"active":"many"}}`); code != 400 {
		t.Errorf("malformed pool: %d, want 400", code)
	}
	if got, want := pool(), "3/8 busy, 2/300 queued, 7 refused"; got != want {
		t.Errorf("pool after a malformed heartbeat %q, want it unchanged %q", got, want)
	}
	if code := post("/api/v1/executors/heartbeat/pool", `{"address":"http://10.0.0.5:9090"}`); code != 204 {
		t.Fatalf("heartbeat without a pool: %d", code)
	}
	if got := pool(); got != "none" {
		t.Errorf("pool after a heartbeat without one: %s, want none", got)
	}
}

// heartbeatOnly serves a's heartbeat at a path of its own, beside the
// routes of another executorAPI on mux.
func (a *executorAPI) heartbeatOnly(mux *http.ServeMux) {
	mux.HandleFunc("POST /api/v1/executors/heartbeat/pool", a.heartbeat)
}
