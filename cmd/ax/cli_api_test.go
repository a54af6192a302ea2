package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/ax-sched/ax/api/apitest"
	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/cli"
)

// TestCLIThroughAPI drives the operator commands against a server's admin
// API, as an operator would: tables by default, JSON with --json.
func TestCLIThroughAPI(t *testing.T) {
	t.Parallel()
	e := setupAPI(t, apitest.Opts{})
	ax := func(want int, args ...string) (string, string) {
		t.Helper()
		code, out, errOut := runAx(t, append(args, "--server", e.Srv.URL)...)
		if code != want {
			t.Fatalf("ax %s: exit %d, want %d\n%s%s", strings.Join(args, " "), code, want, out, errOut)
		}
		return out, errOut
	}
	has := func(got string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("want %q in:\n%s", w, got)
			}
		}
	}
	out, _ := ax(cli.ExitOK, "trigger", "shop.sync", "--downstream", "--reason", "cli test")
	has(out, "started for shop.sync (2 task(s))")
	e.WaitState("shop.clean", axtype.Success)

	out, _ = ax(cli.ExitOK, "status")
	has(out, "scheduler: api-test (epoch 1, lease held until", "answered as primary", "pipeline shop (3 tasks)", "manual", "SUCCESS 2")
	out, _ = ax(cli.ExitOK, "status", "shop", "--json")
	var st map[string]any
	if err := json.Unmarshal([]byte(out), &st); err != nil || st["status"] == nil || st["runs"] == nil {
		t.Errorf("status --json: %v\n%s", err, out)
	}

	out, _ = ax(cli.ExitOK, "pause", "shop.sync", "--reason", "upgrade")
	has(out, "paused task shop.sync")
	out, _ = ax(cli.ExitOK, "explain", "shop.sync")
	has(out, "shop.sync: task shop.sync paused by operator", ": upgrade", "checks:", "✗ paused", "last dispatches (due → dispatched, late):", "next fires:")
	out, _ = ax(cli.ExitOK, "explain", "shop.clean", "--json")
	if x := apitest.DecodeJSON[map[string]any](t, out); x["verdict"] == nil || x["findings"] == nil {
		t.Errorf("explain --json: %s", out)
	}
	out, _ = ax(cli.ExitOK, "resume", "shop.sync")
	has(out, "resumed task shop.sync")
	out, _ = ax(cli.ExitOK, "pause", "--group", "etl")
	has(out, "paused group etl")
	_, errOut := ax(cli.ExitFailed, "resume", "shop")
	has(errOut, "resume refused: pipeline shop is not paused (HTTP 409)")
	out, _ = ax(cli.ExitOK, "resume", "--group", "etl")
	has(out, "resumed group etl")

	out, _ = ax(cli.ExitOK, "history", "shop.sync", "-n", "20")
	has(out, "TIME", "SCHEDULED → RUNNING", "action dispatch", "action pause", "operator")
	if strings.Index(out, "SCHEDULED → RUNNING") > strings.Index(out, "RUNNING → SUCCESS") {
		t.Errorf("history out of order:\n%s", out)
	}

	out, _ = ax(cli.ExitOK, "limits", "--global", "25", "--group", "etl=4")
	has(out, "limits now global 25/s, group etl 4/s")
	out, _ = ax(cli.ExitOK, "limits")
	has(out, "global: 25 per second", "group etl: 4 per second", "(from the primary)")
	_, errOut = ax(cli.ExitUsage, "limits", "--group", "etl")
	has(errOut, `--group "etl": write NAME=RATE`)
	// Concurrency caps from the command line: changed at run time, shown
	// by ax limits, bad values refused with nothing changed.
	out, _ = ax(cli.ExitOK, "limits", "--max-running", "7", "--group-max-running", "etl=3")
	has(out, "limits now")
	out, _ = ax(cli.ExitOK, "limits")
	has(out, "at most 7 local attempts at once", "group etl: 4 per second, at most 3 at once")
	_, errOut = ax(cli.ExitFailed, "limits", "--max-running", "-1")
	has(errOut, "max_running -1: give a number of attempts from 0 (unlimited) to 1000000")
	out, _ = ax(cli.ExitOK, "limits")
	has(out, "at most 7 local attempts at once")

	out, _ = ax(cli.ExitOK, "executors")
	has(out, "(no executor has registered)")

	out, _ = ax(cli.ExitOK, "backfill", "shop", "--from", "2024-01-01", "--to", "2025-12-31", "--select", "sync+")
	has(out, "backfill 1: shop, 2 run(s) × 2 task(s)", "backfill 1 done: 2 run(s)")
	out, _ = ax(cli.ExitOK, "backfill", "status", "1")
	has(out, "backfill 1 done: 2/2 runs (100%)", "instances 4/4")
	out, _ = ax(cli.ExitOK, "backfill", "list")
	has(out, "ID", "shop", "done", "2/2")
	_, errOut = ax(cli.ExitFailed, "backfill", "cancel", "1")
	has(errOut, "backfill 1 is done already", "(HTTP 409)")
	// resume talks to the API too (it opened ./ax.db and had no --server).
	_, errOut = ax(cli.ExitFailed, "backfill", "resume", "1")
	has(errOut, "(HTTP 409)")
	_, errOut = ax(cli.ExitFailed, "backfill", "resume", "99")
	has(errOut, "no backfill 99", "(HTTP 404)")

	// Bad input: a clear message, exit 1, nothing changed.
	before := e.State()
	_, errOut = ax(cli.ExitFailed, "pause", "shop.synk")
	has(errOut, `no task "synk" (did you mean "sync"?)`, "(HTTP 404)")
	_, errOut = ax(cli.ExitFailed, "trigger", "shopp.sync")
	has(errOut, `no pipeline "shopp" (did you mean "shop"?)`)
	_, errOut = ax(cli.ExitUsage, "explain", "sync")
	has(errOut, `"sync": write PIPELINE.TASK`)
	_, errOut = ax(cli.ExitFailed, "kill", "99999")
	has(errOut, "no instance 99999")
	if e.State() != before {
		t.Error("refused commands changed the store")
	}
}

// TestCLIWithoutServerOrToken: a CLI that cannot reach a server says how to
// start one; one without the token it needs says to set it.
func TestCLIWithoutServerOrToken(t *testing.T) {
	t.Setenv("AX_SERVER", "")
	t.Setenv("AX_ADMIN_TOKEN", "")
	code, _, errOut := runAx(t, "status", "--server", "http://127.0.0.1:1")
	if code != cli.ExitFailed || !strings.Contains(errOut, "cannot reach ax server at http://127.0.0.1:1") || !strings.Contains(errOut, "make run") {
		t.Errorf("unreachable server: exit %d, %s", code, errOut)
	}
	code, _, errOut = runAx(t, "status", "--server", "ftp://x")
	if code != cli.ExitUsage || !strings.Contains(errOut, `--server "ftp://x"`) {
		t.Errorf("bad --server: exit %d, %s", code, errOut)
	}
	e := setupAPI(t, apitest.Opts{Token: "t0ken"})
	code, _, errOut = runAx(t, "pause", "shop.sync", "--server", e.Srv.URL)
	if code != cli.ExitFailed || !strings.Contains(errOut, "bearer token") || !strings.Contains(errOut, "(set AX_ADMIN_TOKEN)") {
		t.Errorf("no token: exit %d, %s", code, errOut)
	}
	t.Setenv("AX_ADMIN_TOKEN", "t0ken")
	t.Setenv("AX_SERVER", e.Srv.URL)
	code, out, errOut := runAx(t, "pause", "shop.sync")
	if code != cli.ExitOK || !strings.Contains(out, "paused task shop.sync") {
		t.Errorf("with AX_SERVER and AX_ADMIN_TOKEN: exit %d, %s%s", code, out, errOut)
	}
	ps, err := e.St.Pauses(context.Background())
	// The user of AX_ADMIN_TOKEN is admin, whatever X-Ax-Actor the CLI sends.
	if err != nil || len(ps) != 1 || ps[0].Actor != "admin" {
		t.Errorf("pauses: %+v %v; want one by admin", ps, err)
	}
}

// TestPauseReasonEscaped: a reason with terminal escape codes is escaped
// once, when the request is applied, so that ax history and ax explain
// print \x1b rather than drive the reader's terminal.
func TestPauseReasonEscaped(t *testing.T) {
	t.Parallel()
	e := setupAPI(t, apitest.Opts{})
	reason := "upgrade \x1b[2J\x1b]0;owned\x07 done"
	for _, args := range [][]string{
		{"pause", "shop.sync", "--reason", reason},
		{"explain", "shop.sync"},
		{"history", "shop.sync", "-n", "20"},
	} {
		code, out, errOut := runAx(t, append(args, "--server", e.Srv.URL)...)
		if code != cli.ExitOK {
			t.Fatalf("ax %s: exit %d\n%s%s", args[0], code, out, errOut)
		}
		if strings.ContainsAny(out+errOut, "\x1b\x07") {
			t.Errorf("ax %s printed raw escape codes: %q", args[0], out)
		}
		if args[0] != "pause" && !strings.Contains(out, `upgrade \x1b[2J\x1b]0;owned\x07 done`) {
			t.Errorf("ax %s: the reason is not shown escaped:\n%s", args[0], out)
		}
	}
}
