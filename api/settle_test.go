package api

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/ax-sched/ax/api/apitest"
	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"
)

const nyPipeline = `pipeline: ny
timezone: America/New_York
schedule: "0 0 1 1 *"
tasks:
  - {name: sync, function: noop, params: {region: cn}}
  - {name: clean, depends_on: [sync], function: noop}
  - {name: slow, command: ["sleep", "30"], timeout: 1m}
`

// Trigger, mark and cancel over the API: bad input is a 4xx with the
// reason, and nothing changes.
func TestAPISettleVerbsBadInput(t *testing.T) {
	t.Parallel()
	e := setupAPI(t, apitest.Opts{Pipeline: nyPipeline})
	// A run to aim at: sync and clean of a pipeline trigger, at a known time.
	code, body := e.Call("POST", "/api/v1/pipelines/ny/trigger", `{"at": "2026-03-01T02:00:00", "params": {"region": "us"}, "reason": "test"}`)
	if code != 200 || !strings.Contains(body, "for pipeline ny (3 task(s)) at logical time 2026-03-01T02:00:00-05:00") {
		t.Fatalf("pipeline trigger: %d %s", code, body)
	}
	sync := e.WaitState("ny.sync", axtype.Success)
	e.WaitState("ny.clean", axtype.Success)
	runs, _ := e.St.Runs(context.Background(), "ny", 10)
	if len(runs) != 1 || runs[0].Params != `{"region":"us"}` || runs[0].Kind != axtype.RunManual {
		t.Errorf("run %+v", runs)
	}
	slow := e.WaitState("ny.slow", axtype.Running)
	before := e.State()
	for _, tc := range []struct {
		method, path, body string
		code               int
		want               string
	}{
		{"POST", "/api/v1/pipelines/nyx/trigger", `{}`, 404, `no pipeline "nyx" (did you mean "ny"?)`},
		{"POST", "/api/v1/pipelines/ny/tasks/snyc/trigger", `{}`, 404, `has no task "snyc" (did you mean "sync"?)`},
		{"POST", "/api/v1/pipelines/ny/trigger", `{"at": "yesterday"}`, 400, `"yesterday" is not a logical time`},
		{"POST", "/api/v1/pipelines/ny/trigger", `{"at": "2026-03-08T02:30:00"}`, 400, `does not occur in America/New_York`},
		{"POST", "/api/v1/pipelines/ny/trigger", `{"at": "2026-11-01T01:30:00"}`, 400, `occurs twice in America/New_York (daylight saving ends): add the offset, 2026-11-01T01:30:00-04:00 or 2026-11-01T01:30:00-05:00`},
		{"POST", "/api/v1/pipelines/ny/trigger", `{"at": "2026-03-02"}`, 400, `"2026-03-02": the schedule "0 0 1 1 *" does not fire on that date in America/New_York: give a date-time, or a date it fires on (next: 2027-01-01)`},
		{"POST", "/api/v1/pipelines/ny/tasks/sync/trigger", `{"at": "2026-03-02"}`, 400, `does not fire on that date`},
		{"POST", "/api/v1/pipelines/ny/tasks/sync/mark", `{"state": "success", "at": "2026-03-02"}`, 400, `does not fire on that date`},
		{"POST", "/api/v1/pipelines/ny/tasks/sync/trigger", `{"params": {"a b": "x"}}`, 400, `param name "a b"`},
		{"POST", "/api/v1/pipelines/ny/trigger", `{"params": ["x"]}`, 400, ``},
		{"POST", "/api/v1/pipelines/ny/trigger", `{"downstream": true}`, 400, `downstream applies to a task`},
		{"POST", "/api/v1/pipelines/ny/tasks/sync/mark", `{"state": "done", "run": 1}`, 400, `state "done": give success or failed`},
		{"POST", "/api/v1/pipelines/ny/tasks/sync/mark", `{"state": "success"}`, 400, `give run (a run id) or at`},
		{"POST", "/api/v1/pipelines/ny/tasks/sync/mark", `{"state": "success", "run": 99}`, 404, `no run 99`},
		{"POST", "/api/v1/pipelines/ny/tasks/sync/mark", `{"state": "success", "at": "2026-03-08T02:30:00"}`, 400, `does not occur`},
		{"POST", "/api/v1/pipelines/ny/tasks/sync/mark", `{"state": "success", "at": "2026-03-02T02:00:00"}`, 400, `ny.sync has no instance at`},
		{"POST", "/api/v1/pipelines/ny/tasks/sync/mark", `{"state": "failed", "run": 1}`, 409, `succeeded: its downstream may have run on it`},
		{"POST", fmt.Sprintf("/api/v1/instances/%d/mark", sync.ID), `{"state": "success"}`, 409, `is SUCCESS already`},
		{"POST", fmt.Sprintf("/api/v1/instances/%d/mark", slow.ID), `{"state": "failed"}`, 409, `is RUNNING: it may still run; kill it first`},
		{"POST", "/api/v1/instances/999/mark", `{"state": "failed"}`, 404, `no instance 999`},
		{"POST", fmt.Sprintf("/api/v1/instances/%d/mark", slow.ID), `{"state": "failed", "run": 1}`, 400, `an instance id needs neither`},
		{"POST", "/api/v1/runs/99/cancel", `{}`, 404, `no run 99`},
		{"POST", "/api/v1/runs/x/cancel", `{}`, 400, `run "x": give a positive number`},
		{"POST", "/api/v1/runs/1/cancel", `{"downstream": true}`, 400, `downstream applies to trigger only`},
	} {
		code, body := e.Call(tc.method, tc.path, tc.body)
		msg := decodeJSON[map[string]string](t, body)["error"]
		if code != tc.code || msg == "" || !strings.Contains(msg, tc.want) {
			t.Errorf("%s %s %s: %d %s\nwant %d with %q", tc.method, tc.path, tc.body, code, body, tc.code, tc.want)
		}
		if after := e.State(); after != before {
			t.Fatalf("%s %s %s changed the store:\nbefore %s\nafter  %s", tc.method, tc.path, tc.body, before, after)
		}
	}
	// And what works: cancel the run (slow is killed), then it is over.
	code, body = e.Call("POST", fmt.Sprintf("/api/v1/runs/%d/cancel", runs[0].ID), `{"reason": "wrong day"}`)
	if code != 200 || !strings.Contains(body, "kill sent to 1 running instance(s)") {
		t.Errorf("cancel: %d %s", code, body)
	}
	e.WaitState("ny.slow", axtype.Killed)
	code, body = e.Call("POST", fmt.Sprintf("/api/v1/runs/%d/cancel", runs[0].ID), `{}`)
	if code != 409 || !strings.Contains(body, "is over already (failed)") {
		t.Errorf("cancel again: %d %s", code, body)
	}
	acts, _ := e.St.Actions(context.Background(), store.LogFilter{Action: "cancel", Limit: 10})
	if len(acts) != 1 || acts[0].Actor != "operator:test" || acts[0].Reason != "wrong day" {
		t.Errorf("cancel actions %+v", acts)
	}
}

// One rule for a time in the pipeline's zone (api.onWall, api.inRange):
// a backfill took a wall time the zone skips (planned an hour before the
// gap) or repeats (the first pass) silently, where a trigger refused both;
// and a trigger at 9999-12-31T23:59:59 in New York (year 10000 in UTC) was
// accepted and made every later read of its runs an empty 200. Each is a
// 400 naming the fix, and the store is unchanged.
func TestAPIWallTimeOneRule(t *testing.T) {
	t.Parallel()
	e := setupAPI(t, apitest.Opts{Pipeline: nyPipeline})
	before := e.State()
	for _, tc := range []struct{ path, body, want string }{
		{"/api/v1/backfills", `{"pipeline": "ny", "from": "2026-03-08T02:30:00", "to": "2026-03-08T02:30:00", "dry_run": true}`,
			`from: "2026-03-08T02:30:00" does not occur in America/New_York (a daylight-saving gap): give another time, or an offset`},
		{"/api/v1/backfills", `{"pipeline": "ny", "from": "2026-03-01", "to": "2026-03-08T02:30:00"}`,
			`to: "2026-03-08T02:30:00" does not occur in America/New_York`},
		{"/api/v1/backfills", `{"pipeline": "ny", "from": "2026-11-01T01:30:00", "to": "2026-11-02", "dry_run": true}`,
			`from: "2026-11-01T01:30:00" occurs twice in America/New_York (daylight saving ends): add the offset, 2026-11-01T01:30:00-04:00 or 2026-11-01T01:30:00-05:00`},
		{"/api/v1/backfills", `{"pipeline": "ny", "from": "2026-01-01", "to": "9999-12-31"}`,
			`to: "9999-12-31" is outside the logical times ax keeps: give one from 1970-01-01T00:00:00Z up to 9999-01-01T00:00:00Z`},
		{"/api/v1/pipelines/ny/trigger", `{"at": "9999-12-31T23:59:59"}`,
			`at: "9999-12-31T23:59:59" is outside the logical times ax keeps: give one from 1970-01-01T00:00:00Z up to 9999-01-01T00:00:00Z`},
		{"/api/v1/pipelines/ny/trigger", `{"at": "0001-01-01T00:00:00Z"}`, `is outside the logical times ax keeps`},
		{"/api/v1/pipelines/ny/tasks/sync/mark", `{"state": "success", "at": "9999-06-01"}`, `is outside the logical times ax keeps`},
	} {
		code, body := e.Call("POST", tc.path, tc.body)
		msg := decodeJSON[map[string]string](t, body)["error"]
		if code != 400 || !strings.Contains(msg, tc.want) {
			t.Errorf("POST %s %s: %d %s\nwant 400 with %q", tc.path, tc.body, code, body, tc.want)
		}
		if after := e.State(); after != before {
			t.Fatalf("POST %s %s changed the store:\nbefore %s\nafter  %s", tc.path, tc.body, before, after)
		}
	}
	// With an offset, the gap's neighbour is planned as given.
	code, body := e.Call("POST", "/api/v1/backfills", `{"pipeline": "ny", "from": "2026-03-08T03:30:00-04:00", "to": "2027-01-01T00:00:00-05:00", "dry_run": true}`)
	if code != 200 || !strings.Contains(body, `"2027-01-01T00:00:00-05:00"`) {
		t.Errorf("backfill with offsets: %d %s", code, body)
	}
}

// The CLI refuses malformed verbs before it calls anything (exit 2).

// A trigger's typed params may be sent typed: a number or a boolean is
// taken as written and checked as the CLI's --param; a list is refused,
// naming the param, and nothing is created.
func TestAPITriggerTypedParams(t *testing.T) {
	t.Parallel()
	const src = "pipeline: tp\ntimezone: UTC\nparams:\n  n: {type: int, default: 1}\n  full: {type: bool, default: false}\ntasks:\n  - {name: a, function: noop}\n"
	e := setupAPI(t, apitest.Opts{Pipeline: src})
	code, body := e.Call("POST", "/api/v1/pipelines/tp/trigger", `{"params": {"n": 5, "full": true}}`)
	if code != 200 {
		t.Fatalf("typed params: %d %s", code, body)
	}
	e.WaitState("tp.a", axtype.Success)
	runs, _ := e.St.Runs(context.Background(), "tp", 10)
	if len(runs) != 1 || runs[0].Params != `{"full":"true","n":"5"}` {
		t.Errorf("runs %+v, want one with n=5 and full=true", runs)
	}
	for body, want := range map[string]string{
		`{"params": {"n": [1]}}`:  `params: the value of "n" is not a string, a number or a boolean`,
		`{"params": {"n": 1.5}}`:  `param "n" is an int: "1.5" is not a whole number`,
		`{"params": {"n": null}}`: `params: the value of "n" is not a string`,
	} {
		code, got := e.Call("POST", "/api/v1/pipelines/tp/trigger", body)
		if msg := decodeJSON[map[string]string](t, got)["error"]; code != 400 || !strings.Contains(msg, want) {
			t.Errorf("%s: %d %s, want 400 with %q", body, code, got, want)
		}
	}
	if runs, _ := e.St.Runs(context.Background(), "tp", 10); len(runs) != 1 {
		t.Errorf("refused triggers created runs: %d", len(runs))
	}
}
