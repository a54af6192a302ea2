package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ax-sched/ax/api"
	"github.com/ax-sched/ax/api/apitest"
	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/cli"
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
	if code != cli.ExitGated || strings.Contains(out, "ok:") || !strings.Contains(errOut, "awaiting approval: gated.approve") ||
		!strings.Contains(errOut, "2 of 4 task(s) succeeded") || !strings.Contains(errOut, "--approve-manual") {
		t.Errorf("run at a gate: exit %d\n%s\n%s", code, out, errOut)
	}
	if ran := executions(t, record); ran["build"] != 1 || ran["notes"] != 1 || ran["approve"] != 0 || ran["publish"] != 0 {
		t.Errorf("executions %v", ran)
	}
	code, out, errOut = runAx(t, "run", file, "--at", "2026-03-03T02:00:00", "--approve-manual")
	if code != cli.ExitOK || !strings.Contains(out, "ok: 4 task(s) succeeded") {
		t.Errorf("run --approve-manual: exit %d\n%s\n%s", code, out, errOut)
	}
	if ran := executions(t, record); ran["approve"] != 1 || ran["publish"] != 1 {
		t.Errorf("executions %v", ran)
	}
}

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
		if code != cli.ExitUsage || !strings.Contains(errOut, tc.want) {
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
// awaits approval, what waits behind it, and a cross-pipeline wait with the
// window it waits in (the yearly schedule's interval that holds the run's
// logical time) and its deadline.
func TestStatusSaysWhyARunIsNotOver(t *testing.T) {
	t.Parallel()
	e := setupAPI(t, apitest.Opts{Pipeline: gatedShop, Others: []string{"pipeline: other\ntimezone: UTC\ntasks:\n  - {name: settle, function: noop}\n"}})
	code, body := e.Call("POST", "/api/v1/pipelines/shop/trigger", `{"at": "2026-03-01T02:00:00"}`)
	if code != 200 {
		t.Fatalf("trigger: %d %s", code, body)
	}
	e.WaitState("shop.sync", axtype.Success)
	var runs []api.RunView
	waitFor(t, func() bool {
		code, body = e.Call("GET", "/api/v1/pipelines/shop/runs", "")
		runs = apitest.DecodeJSON[[]api.RunView](t, body)
		return code == 200 && len(runs) == 1 && runs[0].State == "awaiting approval"
	})
	r := runs[0]
	// What each waits on is judged now: sync succeeded, so no one waits for it.
	if r.Over || fmt.Sprint(r.Awaiting) != "[shop.approve]" || r.Waiting["shop.approve"] != "awaiting approval" ||
		!strings.HasPrefix(r.Waiting["shop.publish"], "waiting for upstream shop.approve") ||
		!strings.HasPrefix(r.Waiting["shop.report"], "waiting for upstream other.settle (no run yet: waits for a run in (2026-01-01T00:00:00Z, 2027-01-01T00:00:00Z]) (fails at ") {
		t.Errorf("run view %+v", r)
	}
	code, out, errOut := runAx(t, "status", "shop", "--server", e.Srv.URL)
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

// failingShop fails its report unless triggered with ok=yes.
const failingShop = `pipeline: shop
timezone: UTC
schedule: "0 0 1 1 *"
tasks:
  - {name: sync, function: noop}
  - {name: report, depends_on: [sync], params: {ok: "no"}, retry: {count: 0}, command: ["sh", "-c", "test '{{ .Params.ok }}' = yes || { echo disk full; exit 3; }"]}
  - {name: publish, depends_on: [report], function: noop}
`

// ax status names the failure that ended a failed run (report and its
// error, not publish behind it), lists runs by when they happened (a run
// just triggered for an older date first, with -n 1 too) and, when the
// runs shown succeeded, still shows the recent failure.
func TestStatusNamesFailuresByWhenRunsHappened(t *testing.T) {
	t.Parallel()
	e := setupAPI(t, apitest.Opts{Pipeline: failingShop})
	trigger := func(at, ok string) int64 {
		t.Helper()
		code, body := e.Call("POST", "/api/v1/pipelines/shop/trigger", fmt.Sprintf(`{"at": %q, "params": {"ok": %q}}`, at, ok))
		if code != 200 {
			t.Fatalf("trigger: %d %s", code, body)
		}
		var run api.RunView
		waitFor(t, func() bool {
			_, body = e.Call("GET", "/api/v1/pipelines/shop/runs?recent=true&limit=1", "")
			runs := apitest.DecodeJSON[[]api.RunView](t, body)
			if len(runs) == 1 && runs[0].Over && runs[0].LogicalTime.Format("2006-01-02T15:04:05") == at {
				run = runs[0]
				return true
			}
			return false
		})
		return run.ID
	}
	failed := trigger("2026-03-01T02:00:00", "no")
	code, out, errOut := runAx(t, "status", "shop", "--server", e.Srv.URL, "-n", "1")
	want := fmt.Sprintf("  run %-6d manual   2026-03-01T02:00:00Z", failed)
	if code != 0 || !strings.Contains(out, want) || !strings.Contains(out, "      shop.report FAILED: ") || !strings.Contains(out, "disk full") ||
		strings.Contains(out, "shop.publish FAILED") {
		t.Errorf("ax status after a failed run: exit %d, want %q and shop.report FAILED with its error (not publish) in\n%s%s", code, want, out, errOut)
	}
	older := trigger("2026-01-01T02:00:00", "yes") // triggered last, for an older date
	code, out, errOut = runAx(t, "status", "shop", "--server", e.Srv.URL, "-n", "1")
	want = fmt.Sprintf("  run %-6d manual   2026-01-01T02:00:00Z", older)
	if code != 0 || !strings.Contains(out, want) || strings.Contains(out, fmt.Sprintf("  run %-6d", failed)) {
		t.Errorf("ax status -n 1: exit %d, want run %d alone in\n%s%s", code, older, out, errOut)
	}
	if want := fmt.Sprintf("  recent failure: run %d 2026-03-01T02:00:00Z", failed); !strings.Contains(out, want) || !strings.Contains(out, "shop.report FAILED: ") {
		t.Errorf("ax status -n 1: no %q with shop.report's error in\n%s", want, out)
	}

	// ax status PIPELINE.TASK (the command ax logs suggests for a task
	// with no log) shows the pipeline and the task's latest instances.
	code, out, errOut = runAx(t, "status", "shop.report", "--server", e.Srv.URL)
	if code != 0 || !strings.Contains(out, "pipeline shop (3 tasks)") || !strings.Contains(out, "\ntask shop.report\n") ||
		!strings.Contains(out, fmt.Sprintf("run %-6d 2026-03-01T02:00:00Z  FAILED (attempt 1): exit status 3: disk full", failed)) {
		t.Errorf("ax status shop.report: exit %d\n%s%s", code, out, errOut)
	}
	// The same from the store: the failure that ended the run, and the task.
	code, out, errOut = runAx(t, "status", "shop.report", "--store", e.Path)
	if code != 0 || !strings.Contains(out, "      shop.report FAILED: exit status 3: disk full") ||
		!strings.Contains(out, fmt.Sprintf("run %-6d 2026-03-01T02:00:00Z  FAILED (attempt 1)", failed)) {
		t.Errorf("ax status shop.report --store: exit %d\n%s%s", code, out, errOut)
	}
	code, _, errOut = runAx(t, "status", "shop.reprot", "--server", e.Srv.URL)
	if code == 0 || !strings.Contains(errOut, `"shop.report"`) {
		t.Errorf("ax status shop.reprot: exit %d, want a refusal suggesting shop.report\n%s", code, errOut)
	}
}
