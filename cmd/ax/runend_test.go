package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"
)

// gatedPipeline writes a pipeline whose middle step is a manual gate.
func gatedPipeline(t *testing.T) (file, record string) {
	t.Helper()
	dir := t.TempDir()
	record = filepath.Join(dir, "executions.txt")
	rec := func(task string) string {
		return fmt.Sprintf(`["sh", "-c", "echo %s >> %s"]`, task, record)
	}
	src := fmt.Sprintf(`pipeline: gated
timezone: UTC
schedule: "0 2 * * *"
tasks:
  - {name: build, command: %s}
  - {name: approve, depends_on: [build], manual: true, command: %s}
  - {name: publish, depends_on: [approve], command: %s}
  - {name: notes, depends_on: [build], command: %s}
`, rec("build"), rec("approve"), rec("publish"), rec("notes"))
	file = filepath.Join(dir, "gated.yaml")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return file, record
}

// Defect 4: `ax run` counted manual steps nobody released as succeeded.
func TestRunStopsHonestlyAtGates(t *testing.T) {
	t.Parallel()
	file, record := gatedPipeline(t)
	code, out, errOut := runAx(t, "run", file, "--at", "2026-03-02T02:00:00")
	if code != exitGated || strings.Contains(out, "ok:") || !strings.Contains(errOut, "awaiting approval: gated.approve") ||
		!strings.Contains(errOut, "2 of 4 task(s) succeeded") || !strings.Contains(errOut, "--approve-manual") {
		t.Errorf("run at a gate: exit %d\n%s\n%s", code, out, errOut)
	}
	if ran := executions(t, record); ran["build"] != 1 || ran["notes"] != 1 || ran["approve"] != 0 || ran["publish"] != 0 {
		t.Errorf("executions %v", ran)
	}
	code, out, errOut = runAx(t, "run", file, "--at", "2026-03-03T02:00:00", "--approve-manual")
	if code != exitOK || !strings.Contains(out, "ok: 4 task(s) succeeded") {
		t.Errorf("run --approve-manual: exit %d\n%s\n%s", code, out, errOut)
	}
	if ran := executions(t, record); ran["approve"] != 1 || ran["publish"] != 1 {
		t.Errorf("executions %v", ran)
	}
}

const nyPipeline = `pipeline: ny
timezone: America/New_York
schedule: "0 0 1 1 *"
tasks:
  - {name: sync, function: noop}
  - {name: clean, depends_on: [sync], function: noop}
  - {name: slow, command: ["sleep", "30"], timeout: 1m}
`

// Trigger, mark and cancel over the API: bad input is a 4xx with the
// reason, and nothing changes.
func TestAPISettleVerbsBadInput(t *testing.T) {
	t.Parallel()
	e := setupAPI(t, apiOpts{pipeline: nyPipeline})
	// A run to aim at: sync and clean of a pipeline trigger, at a known time.
	code, body := e.call("POST", "/api/v1/pipelines/ny/trigger", `{"at": "2026-03-01T02:00:00", "params": {"region": "us"}, "reason": "test"}`)
	if code != 200 || !strings.Contains(body, "for pipeline ny (3 task(s)) at logical time 2026-03-01T02:00:00-05:00") {
		t.Fatalf("pipeline trigger: %d %s", code, body)
	}
	sync := e.waitState("ny.sync", axtype.Success)
	e.waitState("ny.clean", axtype.Success)
	runs, _ := e.st.Runs(context.Background(), "ny", 10)
	if len(runs) != 1 || runs[0].Params != `{"region":"us"}` || runs[0].Kind != axtype.RunManual {
		t.Errorf("run %+v", runs)
	}
	slow := e.waitState("ny.slow", axtype.Running)
	before := e.state()
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
		code, body := e.call(tc.method, tc.path, tc.body)
		msg := decodeJSON[map[string]string](t, body)["error"]
		if code != tc.code || msg == "" || !strings.Contains(msg, tc.want) {
			t.Errorf("%s %s %s: %d %s\nwant %d with %q", tc.method, tc.path, tc.body, code, body, tc.code, tc.want)
		}
		if after := e.state(); after != before {
			t.Fatalf("%s %s %s changed the store:\nbefore %s\nafter  %s", tc.method, tc.path, tc.body, before, after)
		}
	}
	// And what works: cancel the run (slow is killed), then it is over.
	code, body = e.call("POST", fmt.Sprintf("/api/v1/runs/%d/cancel", runs[0].ID), `{"reason": "wrong day"}`)
	if code != 200 || !strings.Contains(body, "kill sent to 1 running instance(s)") {
		t.Errorf("cancel: %d %s", code, body)
	}
	e.waitState("ny.slow", axtype.Killed)
	code, body = e.call("POST", fmt.Sprintf("/api/v1/runs/%d/cancel", runs[0].ID), `{}`)
	if code != 409 || !strings.Contains(body, "is over already (failed)") {
		t.Errorf("cancel again: %d %s", code, body)
	}
	acts, _ := e.st.Actions(context.Background(), store.LogFilter{Action: "cancel", Limit: 10})
	if len(acts) != 1 || acts[0].Actor != "operator:test" || acts[0].Reason != "wrong day" {
		t.Errorf("cancel actions %+v", acts)
	}
}

// The CLI refuses malformed verbs before it calls anything (exit 2).
func TestSettleVerbsUsage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"trigger", "shop.sync", "--param", "region"}, `--param "region": give KEY=VALUE`},
		{[]string{"trigger", "shop.sync", "--param", "=x"}, `--param "=x": give KEY=VALUE`},
		{[]string{"trigger", "shop.sync", "--param", "a.b=x"}, `param name "a.b"`},
		{[]string{"trigger", "shop", "--downstream"}, `--downstream applies to a task`},
		{[]string{"mark", "shop.sync", "success"}, `say which instance of shop.sync: --run RUN or --at TIME`},
		{[]string{"mark", "shop.sync", "done", "--run", "3"}, `state "done": give success or failed`},
		{[]string{"mark", "12", "success", "--run", "3"}, `12 is an instance id`},
		{[]string{"mark", "shop", "success", "--run", "3"}, `PIPELINE.TASK`},
		{[]string{"cancel", "x"}, `"x" is not a run id`},
		{[]string{"trigger", "shop.sync", "--at", "2026-03-01T02:00:00", "--store", "/nonexistent/ax.db"}, `with --store give RFC 3339 with an offset`},
	} {
		code, _, errOut := runAx(t, tc.args...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("ax %s: exit %d %q, want 2 with %q", strings.Join(tc.args, " "), code, errOut, tc.want)
		}
	}
}

const gatedShop = `pipeline: shop
timezone: UTC
schedule: "0 0 1 1 *"
tasks:
  - {name: sync, function: noop}
  - {name: approve, depends_on: [sync], manual: true, function: noop}
  - {name: publish, depends_on: [approve], function: noop}
  - {name: report, depends_on: [sync, other.settle], function: noop}
`

// ax status (and the runs API) say why a run is not over: the gate that
// awaits approval, what waits behind it, and a cross-pipeline wait with its
// deadline.
func TestStatusSaysWhyARunIsNotOver(t *testing.T) {
	t.Parallel()
	e := setupAPI(t, apiOpts{pipeline: gatedShop, others: []string{"pipeline: other\ntimezone: UTC\ntasks:\n  - {name: settle, function: noop}\n"}})
	code, body := e.call("POST", "/api/v1/pipelines/shop/trigger", `{"at": "2026-03-01T02:00:00"}`)
	if code != 200 {
		t.Fatalf("trigger: %d %s", code, body)
	}
	e.waitState("shop.sync", axtype.Success)
	var runs []runView
	waitFor(t, func() bool {
		code, body = e.call("GET", "/api/v1/pipelines/shop/runs", "")
		runs = decodeJSON[[]runView](t, body)
		return code == 200 && len(runs) == 1 && runs[0].State == "awaiting approval"
	})
	r := runs[0]
	if r.Over || fmt.Sprint(r.Awaiting) != "[shop.approve]" || r.Waiting["shop.approve"] != "awaiting approval; waiting for upstream shop.sync" ||
		!strings.HasPrefix(r.Waiting["shop.publish"], "waiting for upstream shop.approve") ||
		!strings.Contains(r.Waiting["shop.report"], "other.settle") || !strings.Contains(r.Waiting["shop.report"], "(fails at ") {
		t.Errorf("run view %+v", r)
	}
	code, out, errOut := runAx(t, "status", "shop", "--server", e.srv.URL)
	for _, want := range []string{
		"      shop.approve: awaiting approval",
		"      shop.publish: waiting for upstream shop.approve",
		"      shop.report: waiting for upstream ",
		"      approve with: ax trigger shop.approve --at 2026-03-01T02:00:00Z",
	} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("ax status: exit %d, no %q in\n%s%s", code, want, out, errOut)
		}
	}
}
