package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
	"github.com/ax-sched/ax/store/storetest"
)

// executorAPIOn serves the executor endpoints for the example pipelines
// on a new SQLite store, with clock (nil: time.Now).
func executorAPIOn(t *testing.T, clock func() time.Time) (*http.ServeMux, *store.Store) {
	t.Helper()
	st := storetest.SQLite(t)
	g, errs, err := dag.Load([]string{"../examples"}, defs.Options{}, dag.Options{DispatchRate: -1})
	if err != nil || g == nil {
		t.Fatal(err, errs)
	}
	mux := http.NewServeMux()
	(&executorAPI{st: st, g: g, clock: clock}).routes(mux)
	return mux, st
}

func TestExecutorAPI(t *testing.T) {
	t.Parallel()
	mux, st := executorAPIOn(t, nil)
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
		{"/api/v1/executors/register", `{"address":"http://h:1/?","tasks":["sync_orders"]}`, "has a query or fragment"},
		{"/api/v1/executors/register", `{"address":"http://h:1/#","tasks":["sync_orders"]}`, "has a query or fragment"},
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

// Refused results and heartbeats are recorded in the action log, but at
// most refusalsPerMinute a minute per client address: a client sending
// junk is still refused with the reason, and cannot fill the log; another
// address is recorded as before.
func TestRefusalsRecordedUpToABoundPerAddress(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 6, 5, 0, 10, 0, time.UTC) // one minute's window throughout
	mux, st := executorAPIOn(t, func() time.Time { return at })
	call := func(remote, path, body string) (int, string) {
		req := httptest.NewRequest("POST", path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.RemoteAddr = remote
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	const n = 30
	for i := range n {
		path, body, code := "/api/v1/results", fmt.Sprintf(`{"ticket":"junk-%d","status":"success"}`, i), 404
		if i%2 == 1 {
			path, body, code = "/api/v1/executors/heartbeat", `{"address":"http://nobody:1"}`, 404
		}
		got, out := call(fmt.Sprintf("192.0.2.7:%d", 1000+i), path, body)
		if got != code || !strings.Contains(out, "register first") && !strings.Contains(out, "is unknown") {
			t.Fatalf("refusal %d: %d %s", i, got, out)
		}
		if recorded := !strings.Contains(out, "not recorded: more than 20 refusals a minute from this address"); recorded != (i < 20) {
			t.Errorf("refusal %d (from the same address): recorded %v, want %v: %s", i, recorded, i < 20, out)
		}
	}
	if got, out := call("192.0.2.8:1000", "/api/v1/results", `{"ticket":"other","status":"success"}`); got != 404 || strings.Contains(out, "not recorded") {
		t.Errorf("another address: %d %s, want 404 recorded", got, out)
	}
	acts, err := st.Actions(context.Background(), store.LogFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(acts) != 21 {
		t.Errorf("%d refusals recorded, want 20 from 192.0.2.7 and 1 from 192.0.2.8", len(acts))
	}
	// The next minute, the same address is recorded again.
	at = at.Add(time.Minute)
	if got, out := call("192.0.2.7:2000", "/api/v1/results", `{"ticket":"later","status":"success"}`); got != 404 || strings.Contains(out, "not recorded") {
		t.Errorf("the next minute: %d %s, want 404 recorded", got, out)
	}
}

// A body over an executor endpoint's limit is 413, not 400, on every one.
func TestExecutorEndpointsRefuseOversizedBodies(t *testing.T) {
	t.Parallel()
	mux, _ := executorAPIOn(t, nil)
	big := `{"address":"http://h:1","pad":"` + strings.Repeat("x", 2<<20) + `"}`
	for _, path := range []string{"/api/v1/executors/register", "/api/v1/executors/heartbeat", "/api/v1/results"} {
		req := httptest.NewRequest("POST", path, strings.NewReader(big))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		if rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), "too large") {
			t.Errorf("%s with a 2 MiB body: %d %s; want 413 saying it is too large", path, rec.Code, rec.Body)
		}
	}
}

// A result delivered again for a ticket the inbox holds is answered 200 and
// counted, every time; the action log records at most refusalsPerMinute of
// them a minute per client address, so a client that re-posts a stored
// result in a loop cannot flood it.
func TestRepeatedResultsCountedNotLoggedEach(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 6, 5, 0, 10, 0, time.UTC) // one minute's window throughout
	st := storetest.SQLite(t)
	x := storetest.Seed(t, st)["a.x"]
	now := storetest.T0.Add(time.Second)
	ticket := "tk-repeat"
	if _, err := st.Transition(context.Background(), store.TransitionParams{InstanceID: x.ID, Version: x.Version, From: axtype.Scheduled, To: axtype.Running,
		Set: store.Changes{Ticket: &ticket}, Now: now, Actor: "test", Reason: "dispatch"}); err != nil {
		t.Fatal(err)
	}
	a := &executorAPI{st: st, clock: func() time.Time { return at }, repeats: newRepeatsCounter()}
	mux := http.NewServeMux()
	a.routes(mux)
	const n = 100
	for i := range n + 1 {
		req := httptest.NewRequest("POST", "/api/v1/results", strings.NewReader(`{"ticket":"tk-repeat","status":"success"}`))
		req.Header.Set("Content-Type", "application/json")
		req.RemoteAddr = "127.0.0.1:4000"
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		if rec.Code != 200 || (i > 0) != strings.Contains(rec.Body.String(), `"duplicate": true`) {
			t.Fatalf("delivery %d: %d %s", i, rec.Code, rec.Body)
		}
	}
	acts, err := st.Actions(context.Background(), store.LogFilter{Action: "stale_result", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(acts) != refusalsPerMinute {
		t.Errorf("%d repeated deliveries recorded %d stale_result rows, want %d (the per-address bound)", n, len(acts), refusalsPerMinute)
	}
	if got := testutil.ToFloat64(a.repeats); got != n {
		t.Errorf("ax_results_repeated_total = %v, want %d", got, n)
	}
}

// An address registered by a live executor is claimed by a registration
// with another boot id only when the process at that address says it is
// that boot (it restarted), or once the executor has been silent past the
// exclusion time: a forged boot id, or a registration of another
// executor's address, is refused 409 and changes nothing.
func TestRegistrationCannotClaimALiveExecutor(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 6, 5, 0, 0, 0, time.UTC)
	st := storetest.SQLite(t)
	g, errs, err := dag.Load([]string{"../examples"}, defs.Options{}, dag.Options{DispatchRate: -1})
	if err != nil || g == nil {
		t.Fatal(err, errs)
	}
	answers := map[string]string{} // address → the boot id its /status answers with; missing: no answer
	asked := 0
	a := &executorAPI{st: st, g: g, clock: func() time.Time { return at }, whoIs: func(_ context.Context, addr string) (string, error) {
		asked++
		if b, ok := answers[addr]; ok {
			return b, nil
		}
		return "", fmt.Errorf("connection refused")
	}}
	mux := http.NewServeMux()
	a.routes(mux)
	register := func(addr, boot string, tasks ...string) (int, string) {
		body, _ := json.Marshal(map[string]any{"address": addr, "protocol": "http", "tasks": tasks, "boot": boot})
		req := httptest.NewRequest("POST", "/api/v1/executors/register", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	registry := func() string {
		exs, err := st.Executors(context.Background(), "")
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%+v", exs)
	}
	const real, other = "http://127.0.0.1:9090", "http://127.0.0.1:9091"
	answers[real], answers[other] = "boot-1", "boot-9"
	if code, out := register(real, "boot-1", "sync_orders"); code != 200 {
		t.Fatalf("first registration: %d %s", code, out)
	}
	if code, out := register(real, "boot-1", "sync_orders"); code != 200 || asked != 0 {
		t.Fatalf("registration again with the same boot: %d %s (asked the executor %d times; want no need)", code, out, asked)
	}
	before := registry()
	for _, tc := range []struct{ name, addr, boot, want string }{
		{"forged boot id", real, "forged", "answers there as boot boot-1"},
		{"no boot id", real, "", "answers there as boot boot-1"},
		{"another executor's address", real, "boot-9", "answers there as boot boot-1"},
	} {
		code, out := register(tc.addr, tc.boot, "orders_daily.sync_orders")
		if code != http.StatusConflict || !strings.Contains(out, tc.want) {
			t.Errorf("%s: %d %s; want 409 saying %q", tc.name, code, out, tc.want)
		}
		if got := registry(); got != before {
			t.Errorf("%s changed the registry:\n%s\nwant\n%s", tc.name, got, before)
		}
	}
	// It restarted: the process at the address answers with the new boot id.
	answers[real] = "boot-2"
	if code, out := register(real, "boot-2", "sync_orders"); code != 200 {
		t.Fatalf("registration after a restart the executor confirms: %d %s", code, out)
	}
	// Nobody answers at the address: refused while the executor is live,
	// taken once it has been silent past the exclusion time.
	delete(answers, real)
	before = registry()
	if code, out := register(real, "boot-3", "sync_orders"); code != http.StatusConflict || !strings.Contains(out, "connection refused") {
		t.Errorf("unconfirmed claim of a live executor: %d %s; want 409 with the reason", code, out)
	}
	if got := registry(); got != before {
		t.Errorf("the unconfirmed claim changed the registry:\n%s\nwant\n%s", got, before)
	}
	at = at.Add(runner.Silence + time.Second)
	if code, out := register(real, "boot-3", "sync_orders"); code != 200 {
		t.Errorf("claim of an executor silent past the exclusion time: %d %s", code, out)
	}
	if exs, _ := st.Executors(context.Background(), ""); len(exs) != 1 || exs[0].Boot != "boot-3" {
		t.Errorf("registry %+v, want the one executor at boot-3", exs)
	}
}

// timeoutReader fails as a connection's read past its deadline does.
type timeoutReader struct{}

func (timeoutReader) Read([]byte) (int, error) { return 0, os.ErrDeadlineExceeded }

// A body cut by the door's deadline is answered 408 on every executor
// endpoint, and nothing is written: it is not a malformed report.
func TestExecutorEndpointsAnswerACutBody408(t *testing.T) {
	t.Parallel()
	mux, st := executorAPIOn(t, nil)
	for _, path := range []string{"/api/v1/executors/register", "/api/v1/executors/heartbeat", "/api/v1/results"} {
		req := httptest.NewRequest("POST", path, timeoutReader{})
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		if rec.Code != http.StatusRequestTimeout {
			t.Errorf("%s with a body cut by its deadline: %d %s; want 408", path, rec.Code, rec.Body)
		}
	}
	acts, _ := st.Actions(context.Background(), store.LogFilter{})
	exs, _ := st.Executors(context.Background(), "")
	if len(acts) != 0 || len(exs) != 0 {
		t.Errorf("cut bodies wrote %+v and %+v", acts, exs)
	}
}
