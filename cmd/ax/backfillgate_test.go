package main

import (
	"context"
	"strings"
	"testing"

	"github.com/ax-sched/ax/api/apitest"
	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/cli"
	"github.com/ax-sched/ax/store"
)

// gateBackfillPipeline fires once a year (never during a test); its approve is a
// manual gate behind sync.
const gateBackfillPipeline = `pipeline: gated
group: etl
timezone: UTC
schedule: "0 0 1 1 *"
tasks:
  - {name: sync, function: noop}
  - {name: approve, depends_on: [sync], manual: true, function: noop}
`

// TestBackfillDryRunPlansFromServer: ax backfill --dry-run plans from the
// server's pipelines (there are no local files), marks the gates, and
// stores nothing; local files are read only when named with --pipelines.
func TestBackfillDryRunPlansFromServer(t *testing.T) {
	t.Parallel()
	e := setupAPI(t, apitest.Opts{Pipeline: gateBackfillPipeline})
	code, out, errOut := runAx(t, "backfill", "gated", "--from", "2020-01-01", "--to", "2022-12-31", "--dry-run", "--server", e.Srv.URL)
	if code != cli.ExitOK {
		t.Fatalf("dry run: exit %d\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"from the pipelines of " + e.Srv.URL, "plan: gated, 3 run(s) × 2 task(s)",
		"2021-01-01T00:00:00Z  sync → approve (gate)", "gates: approve; every run waits at them for approval", "ax backfill approve ID"} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in:\n%s", want, out)
		}
	}
	code, out, _ = runAx(t, "backfill", "gated", "--from", "2020-01-01", "--to", "2020-12-31", "--dry-run", "--approve-manual", "--server", e.Srv.URL)
	if code != cli.ExitOK || !strings.Contains(out, "gates: approve, approved up front in every run (--approve-manual)") {
		t.Errorf("dry run --approve-manual: exit %d\n%s", code, out)
	}
	// Bad input: a typo answered by the server's names; a store without
	// files to plan from.
	code, _, errOut = runAx(t, "backfill", "gatd", "--from", "2020-01-01", "--to", "2020-12-31", "--dry-run", "--server", e.Srv.URL)
	if code != cli.ExitFailed || !strings.Contains(errOut, `no pipeline "gatd" (did you mean "gated"?)`) {
		t.Errorf("dry run of a typo: exit %d, %s", code, errOut)
	}
	code, _, errOut = runAx(t, "backfill", "gated", "--from", "2020-01-01", "--to", "2020-12-31", "--dry-run", "--store", e.Path)
	if code != cli.ExitUsage || !strings.Contains(errOut, "name them with --pipelines") {
		t.Errorf("dry run --store without --pipelines: exit %d, %s", code, errOut)
	}
	if bs, err := e.St.Backfills(context.Background(), 0); err != nil || len(bs) != 0 {
		t.Errorf("a dry run stored backfills: %+v %v", bs, err)
	}
}

// TestBackfillApprove: ax backfill approve ID approves the gates of every
// run of a backfill in one action, those of runs not started yet
// included, and records it; an unknown or finished backfill, one with no
// gate, or a gate under a pause is refused with nothing changed.
func TestBackfillApprove(t *testing.T) {
	t.Parallel()
	e := setupAPI(t, apitest.Opts{Pipeline: gateBackfillPipeline})
	ctx := context.Background()
	ax := func(want int, args ...string) (string, string) {
		t.Helper()
		code, out, errOut := runAx(t, append(args, "--server", e.Srv.URL)...)
		if code != want {
			t.Fatalf("ax %s: exit %d, want %d\n%s%s", strings.Join(args, " "), code, want, out, errOut)
		}
		return out, errOut
	}
	ax(cli.ExitOK, "backfill", "gated", "--from", "2020-01-01", "--to", "2024-12-31", "--max-active-runs", "2", "--detach")
	gates := func(state axtype.State) []axtype.Instance {
		ins, err := e.St.Instances(ctx, store.InstanceFilter{TaskID: "gated.approve", States: []axtype.State{state}, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		return ins
	}
	waitFor(t, func() bool {
		return len(gates(axtype.Waiting)) == 2 && e.WaitState("gated.sync", axtype.Success).ID != 0
	})
	waitFor(t, func() bool {
		ins, _ := e.St.Instances(ctx, store.InstanceFilter{TaskID: "gated.sync", States: []axtype.State{axtype.Success}, Limit: 100})
		return len(ins) == 2
	})

	// Refusals change nothing: not the instances, the backfill's spec nor
	// the action log.
	spec := func() string {
		bs, err := e.St.Backfills(ctx, 1)
		if err != nil || len(bs) != 1 {
			t.Fatalf("backfill 1: %+v %v", bs, err)
		}
		return bs[0].Spec
	}
	before, beforeSpec := e.State(), spec()
	_, errOut := ax(cli.ExitFailed, "backfill", "approve", "99")
	if !strings.Contains(errOut, "no backfill 99") || !strings.Contains(errOut, "HTTP 404") {
		t.Errorf("unknown backfill: %s", errOut)
	}
	ax(cli.ExitUsage, "backfill", "approve", "one")
	ax(cli.ExitUsage, "backfill", "approve", "0")
	if e.State() != before || spec() != beforeSpec {
		t.Errorf("a refused approval changed the store:\n%s\n%s", before, e.State())
	}
	ax(cli.ExitOK, "pause", "gated")
	paused := e.State()
	_, errOut = ax(cli.ExitFailed, "backfill", "approve", "1", "--reason", "sign-off")
	if !strings.Contains(errOut, "gated.approve is under a pause") || !strings.Contains(errOut, "HTTP 409") {
		t.Errorf("approve under a pause: %s", errOut)
	}
	if e.State() != paused || spec() != beforeSpec {
		t.Errorf("a refused approval changed the store:\n%s\n%s", paused, e.State())
	}
	ax(cli.ExitOK, "resume", "gated")
	if code, body := e.Call("POST", "/api/v1/backfills/99/approve", `{}`); code != 404 {
		t.Errorf("POST approve of backfill 99: %d %s", code, body)
	}

	out, _ := ax(cli.ExitOK, "backfill", "approve", "1", "--reason", "sign-off")
	if !strings.Contains(out, "approved the gates (gated.approve) of backfill 1: 2 instance(s) waiting at them now; its 3 run(s) yet to start are created approved") {
		t.Errorf("approve: %s", out)
	}
	waitFor(t, func() bool { return len(gates(axtype.Success)) == 5 })
	waitFor(t, func() bool {
		bs, _ := e.St.Backfills(ctx, 1)
		return len(bs) == 1 && bs[0].State == "done"
	})
	acts, err := e.St.Actions(ctx, store.LogFilter{Action: "approve_backfill", Limit: 10})
	if err != nil || len(acts) != 1 || acts[0].Reason != "sign-off" || !strings.Contains(acts[0].Detail, `"backfill":1`) {
		t.Errorf("action log: %+v %v", acts, err)
	}

	// A finished backfill, and one that selects no gate.
	done := e.State()
	_, errOut = ax(cli.ExitFailed, "backfill", "approve", "1")
	if !strings.Contains(errOut, "backfill 1 is done") {
		t.Errorf("approve of a finished backfill: %s", errOut)
	}
	if e.State() != done {
		t.Error("a refused approval changed the store")
	}
	// One that selects no gate, held by a pause so that it is not over.
	ax(cli.ExitOK, "pause", "gated")
	ax(cli.ExitOK, "backfill", "gated", "--from", "2025-01-01", "--to", "2025-12-31", "--select", "sync", "--hold", "--detach")
	held := e.State()
	_, errOut = ax(cli.ExitFailed, "backfill", "approve", "2")
	if !strings.Contains(errOut, "backfill 2 selects no manual task of gated") {
		t.Errorf("approve of a backfill with no gate: %s", errOut)
	}
	if e.State() != held {
		t.Error("a refused approval changed the store")
	}
}

// TestBackfillApproveHold: under a pause of the gate, --hold approves the
// gates anyway; they wait PAUSED until the resume, then run.
func TestBackfillApproveHold(t *testing.T) {
	t.Parallel()
	e := setupAPI(t, apitest.Opts{Pipeline: gateBackfillPipeline})
	ctx := context.Background()
	ax := func(want int, args ...string) string {
		t.Helper()
		code, out, errOut := runAx(t, append(args, "--server", e.Srv.URL)...)
		if code != want {
			t.Fatalf("ax %s: exit %d, want %d\n%s%s", strings.Join(args, " "), code, want, out, errOut)
		}
		return out
	}
	count := func(task string, state axtype.State) int {
		ins, err := e.St.Instances(ctx, store.InstanceFilter{TaskID: task, States: []axtype.State{state}, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		return len(ins)
	}
	ax(cli.ExitOK, "backfill", "gated", "--from", "2020-01-01", "--to", "2021-12-31", "--max-active-runs", "2", "--detach")
	waitFor(t, func() bool {
		return count("gated.sync", axtype.Success) == 2 && count("gated.approve", axtype.Waiting) == 2
	})
	ax(cli.ExitOK, "pause", "gated.approve")
	out := ax(cli.ExitOK, "backfill", "approve", "1", "--hold")
	if !strings.Contains(out, "2 instance(s) waiting at them now") || !strings.Contains(out, "held PAUSED until the resume: gated.approve (task gated.approve)") {
		t.Errorf("approve --hold: %s", out)
	}
	waitFor(t, func() bool { return count("gated.approve", axtype.Paused) == 2 })
	ax(cli.ExitOK, "resume", "gated.approve")
	waitFor(t, func() bool { return count("gated.approve", axtype.Success) == 2 })
}
