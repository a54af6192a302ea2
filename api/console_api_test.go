package api

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/ax-sched/ax/api/apitest"
	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"
)

// TestActionsFilterByActorAndKind: the action log filters by pipeline,
// task, kind and actor on the server, and by=operator leaves out the
// scheduler's own rows; a malformed or unknown value is a 400 that names
// its parameter, and nothing changes.
func TestActionsFilterByActorAndKind(t *testing.T) {
	t.Parallel()
	e := setupAPI(t, apitest.Opts{})
	if code, body := e.Call("POST", "/api/v1/pipelines/shop/tasks/sync/trigger", `{"downstream": true}`); code != 200 {
		t.Fatalf("trigger: %d %s", code, body)
	}
	e.WaitState("shop.clean", axtype.Success)
	if code, body := e.Call("POST", "/api/v1/pipelines/shop/tasks/clean/pause", `{}`); code != 200 {
		t.Fatalf("pause: %d %s", code, body)
	}
	all := decodeJSON[[]store.Action](t, mustGet(t, e, "/api/v1/actions?limit=1000"))
	var scheduler, operator int
	for _, a := range all {
		if a.Actor == "scheduler" {
			scheduler++
		} else {
			operator++
		}
	}
	if scheduler == 0 || operator < 2 {
		t.Fatalf("actions: %d of the scheduler, %d of operators; want both (%+v)", scheduler, operator, all)
	}
	for _, c := range []struct {
		query string
		want  func(store.Action) bool
		n     int
	}{
		{"by=operator", func(a store.Action) bool { return a.Actor != "scheduler" }, operator},
		{"by=scheduler", func(a store.Action) bool { return a.Actor == "scheduler" }, scheduler},
		{"actor=operator:test&action=pause", func(a store.Action) bool { return a.Actor == "operator:test" && a.Action == "pause" }, 1},
		{"by=operator&task=shop.clean", func(a store.Action) bool { return a.TaskID == "shop.clean" && a.Actor != "scheduler" }, 1},
		{"by=operator&pipeline=shop&action=trigger", func(a store.Action) bool { return a.Action == "trigger" && a.Actor == "operator:test" }, 1},
	} {
		got := decodeJSON[[]store.Action](t, mustGet(t, e, "/api/v1/actions?limit=1000&"+c.query))
		if len(got) != c.n || slices.ContainsFunc(got, func(a store.Action) bool { return !c.want(a) }) {
			t.Errorf("%s: %d rows %+v, want %d that match", c.query, len(got), got, c.n)
		}
	}
	before := operatorState(t, e)
	for _, c := range []struct{ query, want string }{
		{"by=operators", `by="operators": give operator or scheduler (did you mean "operator"?)`},
		{"by=scheduler&actor=operator:api", `by=scheduler with actor="operator:api"`},
		{"action=Pause%3BDROP", `action="Pause;DROP"`},
		{"actor=ann%0Aevil", `actor="ann\nevil"`},
		{"actor=" + strings.Repeat("a", 129), "actor=\"aaaa"},
		{"pipeline=shpo", `pipeline="shpo": no such pipeline (did you mean "shop"?)`},
		{"task=shop.clen", `task="shop.clen": no such task`},
		{"limit=-1", `limit="-1"`},
		{"before=x", `before="x"`},
		{"kind=pause", `unknown query parameter "kind"`},
	} {
		code, body := e.Call("GET", "/api/v1/actions?"+c.query, "")
		if code != 400 || !strings.Contains(decodeJSON[ErrorBody](t, body).Error, c.want) {
			t.Errorf("%s: %d %s; want 400 naming %s", c.query, code, body, c.want)
		}
	}
	if after := operatorState(t, e); after != before {
		t.Errorf("refused reads changed something: %s → %s", before, after)
	}
}

// TestSessionChecksTheToken: GET /api/v1/session names the user of the
// admin token and refuses a wrong one even where reads are open; without
// a token it names nobody; a server asking nobody says so.
func TestSessionChecksTheToken(t *testing.T) {
	t.Parallel()
	e := setupAPI(t, apitest.Opts{Token: "t0ken", OpenReads: true})
	for _, c := range []struct {
		token string
		code  int
		want  string
	}{{"t0ken", 200, `"user": "admin"`}, {"wrong", 401, "wrong bearer token"}, {"", 200, `"needed": true`}} {
		if code, body := e.CallAs("GET", "/api/v1/session", "", c.token); code != c.code || !strings.Contains(body, c.want) {
			t.Errorf("token %q: %d %s; want %d %s", c.token, code, body, c.code, c.want)
		}
	}
	open := setupAPI(t, apitest.Opts{})
	if code, body := open.CallAs("GET", "/api/v1/session", "", ""); code != 200 || !strings.Contains(body, `"needed": false`) {
		t.Errorf("a server without a token: %d %s", code, body)
	}
}

// TestTaskShowsCommandAndRenderedArgv: the task's detail shows its command
// with the templates as written, and the record of its last attempt the
// command as rendered for it; the attempt's log header shows it too.
func TestTaskShowsCommandAndRenderedArgv(t *testing.T) {
	t.Parallel()
	e := setupAPI(t, apitest.Opts{Pipeline: `pipeline: shop
timezone: UTC
schedule: "0 0 1 1 *"
tasks:
  - {name: greet, params: {who: "nobody"}, command: ["echo", "hello {{ .Params.who }} on {{ .LogicalTime.Date }}"]}
`})
	if code, body := e.Call("POST", "/api/v1/pipelines/shop/tasks/greet/trigger", `{"at": "2026-03-01T02:00:00", "params": {"who": "ann"}}`); code != 200 {
		t.Fatalf("trigger: %d %s", code, body)
	}
	in := e.WaitState("shop.greet", axtype.Success)
	d := decodeJSON[TaskDetail](t, mustGet(t, e, "/api/v1/pipelines/shop/tasks/greet"))
	if want := []string{"echo", "hello {{ .Params.who }} on {{ .LogicalTime.Date }}"}; !slices.Equal(d.Runs.Command, want) || d.Runs.Kind != "command" {
		t.Errorf("the task's command: %+v, want %q as written", d.Runs, want)
	}
	want := []string{"echo", "hello ann on 2026-03-01"}
	if d.LastAttempt == nil || d.LastAttempt.InstanceID != in.ID || !slices.Equal(d.LastAttempt.Argv, want) {
		t.Errorf("last attempt: %+v, want instance %d's, run as %q", d.LastAttempt, in.ID, want)
	}
	page := decodeJSON[LogPage](t, mustGet(t, e, fmt.Sprintf("/api/v1/instances/%d/logs", in.ID)))
	if !slices.Equal(page.Argv, want) {
		t.Errorf("log header argv %q, want %q", page.Argv, want)
	}
}

func mustGet(t *testing.T, e *apitest.Env, path string) string {
	t.Helper()
	code, body := e.Call("GET", path, "")
	if code != 200 {
		t.Fatalf("GET %s: %d %s", path, code, body)
	}
	return body
}
