package main

import (
	"strings"
	"testing"

	"github.com/ax-sched/ax/api/apitest"
	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/cli"
)

// TestCLITriggerUnderPause: with its group paused, ax trigger of a task
// exits 1 with the pause and creates nothing (it ran three tasks of the
// paused group); --hold creates the run held PAUSED, and it runs after the
// resume.
func TestCLITriggerUnderPause(t *testing.T) {
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
	ax(cli.ExitOK, "pause", "--group", "etl", "--reason", "db maintenance")
	before := e.State()
	_, errOut := ax(cli.ExitFailed, "trigger", "shop.sync", "--downstream")
	for _, w := range []string{"trigger refused: shop.sync is under a pause (group etl paused by operator", "db maintenance", "nothing was created", "ax resume --group etl", "--hold", "(HTTP 409)"} {
		if !strings.Contains(errOut, w) {
			t.Errorf("want %q in:\n%s", w, errOut)
		}
	}
	if after := e.State(); after != before {
		t.Fatalf("a refused trigger changed the store:\nbefore %s\nafter  %s", before, after)
	}
	out, _ := ax(cli.ExitOK, "trigger", "shop.sync", "--downstream", "--hold")
	if !strings.Contains(out, "held PAUSED until the resume: shop.sync (group etl), shop.clean (group etl)") {
		t.Errorf("held trigger:\n%s", out)
	}
	e.WaitState("shop.sync", axtype.Paused)
	ax(cli.ExitOK, "resume", "--group", "etl")
	e.WaitState("shop.clean", axtype.Success)
}
