package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/api/apitest"
	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/cli"
	"github.com/ax-sched/ax/store"
)

// A rerun of a FAILED instance is a new attempt: `ax logs` shows it by
// default (the task's latest attempt, though a newer instance of another
// run ran before it), as attempt 2 with its own output and status, `-f`
// follows it, and attempt 1 keeps the failed attempt's output; no output
// was lost on the way.
func TestLogsAfterRerunShowTheNewAttempt(t *testing.T) {
	t.Parallel()
	mark := filepath.Join(t.TempDir(), "mark")
	e := setupAPI(t, apitest.Opts{Pipeline: fmt.Sprintf(`pipeline: shop
timezone: UTC
schedule: "0 0 1 1 *"
tasks:
  - name: again
    command: ["sh", "-c", "if [ -e %[1]s ]; then echo second; else touch %[1]s; echo first; echo bad >&2; exit 3; fi"]
`, mark)})
	trigger := func(want axtype.State) axtype.Instance {
		t.Helper()
		if code, body := e.Call("POST", "/api/v1/pipelines/shop/tasks/again/trigger", ""); code != http.StatusOK {
			t.Fatalf("trigger: %d %s", code, body)
		}
		return e.WaitState("shop.again", want)
	}
	failed := trigger(axtype.Failed)
	newer := trigger(axtype.Success) // another run's instance, newer, that ran after the failure
	if newer.ID <= failed.ID {
		t.Fatalf("instances %d then %d, want a newer one", failed.ID, newer.ID)
	}
	if code, body := e.Call("POST", fmt.Sprintf("/api/v1/instances/%d/rerun", failed.ID), ""); code != http.StatusOK {
		t.Fatalf("rerun: %d %s", code, body)
	}
	ax := func(want int, args ...string) string {
		t.Helper()
		code, out, errOut := runAx(t, append(args, "--server", e.Srv.URL)...)
		if code != want {
			t.Fatalf("ax %s: exit %d, want %d (1: the attempt failed)\n%s%s", strings.Join(args, " "), code, want, out, errOut)
		}
		return out + errOut
	}
	// Just after the rerun: -f follows the rerun instance, to its end.
	follow := ax(cli.ExitOK, "logs", "shop.again", "-f")
	waitFor(t, func() bool {
		in, err := e.St.Instance(context.Background(), failed.ID)
		return err == nil && in.State == axtype.Success
	})
	latest := ax(cli.ExitOK, "logs", "shop.again")
	first := ax(cli.ExitFailed, "logs", "shop.again", "--instance", fmt.Sprint(failed.ID), "--attempt", "1")
	header := fmt.Sprintf("== shop.again instance %d (run %d), attempt 2 of 2,", failed.ID, failed.RunID)
	for _, c := range []struct{ name, got, want string }{
		{"-f", follow, header}, {"-f", follow, "stdout| second"}, {"-f", follow, "success (exit status 0)"},
		{"latest", latest, header}, {"latest", latest, "stdout| second"}, {"latest", latest, "success (exit status 0)"},
		{"attempt 1", first, fmt.Sprintf("instance %d (run %d), attempt 1 of 2,", failed.ID, failed.RunID)},
		{"attempt 1", first, "stdout| first"}, {"attempt 1", first, "stderr| bad"}, {"attempt 1", first, "failed (exit status 3)"},
	} {
		if !strings.Contains(c.got, c.want) {
			t.Errorf("ax logs (%s): want %q in\n%s", c.name, c.want, c.got)
		}
	}
	for _, got := range []string{follow, latest} {
		if strings.Contains(got, "first") || strings.Contains(got, "truncated") {
			t.Errorf("the rerun's log holds another attempt's output or a truncation notice:\n%s", got)
		}
	}
	if strings.Contains(first, "second") {
		t.Errorf("attempt 1's log holds the rerun's output:\n%s", first)
	}
	if code, body := e.Call("GET", "/metrics", ""); code != http.StatusOK || !strings.Contains(body, "\nax_task_output_errors_total 0\n") {
		t.Errorf("metrics: %d, want ax_task_output_errors_total 0:\n%s", code, grepLines(body, "ax_task_output"))
	}
}

// A command still running when its server stops (SIGTERM) is given back,
// and the next server runs it as attempt 2: `ax logs` shows attempt 2 with
// its own output and status, attempt 1 keeps the interrupted output, and
// neither holds the other's lines or a truncation notice.
func TestLogsAfterGiveBackShowTheNewAttempt(t *testing.T) {
	if testing.Short() {
		t.Skip("real servers")
	}
	dir := t.TempDir()
	mark := filepath.Join(dir, "mark")
	fire := time.Now().Add(3 * time.Second).Truncate(time.Second).UTC()
	src := fmt.Sprintf("pipeline: gb\ntimezone: UTC\nschedule: \"%d %d %d %d %d *\"\ntasks:\n  - {name: slow, command: [\"sh\", \"-c\", \"if [ -e %s ]; then echo second; exit 0; fi; touch %s; echo first; exec sleep 60\"], timeout: 5m}\n",
		fire.Second(), fire.Minute(), fire.Hour(), fire.Day(), int(fire.Month()), mark, mark)
	if err := os.WriteFile(filepath.Join(dir, "gb.yaml"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	target := "sqlite:" + filepath.Join(t.TempDir(), "ax.db")
	st := openStore(t, target)
	ctx := context.Background()
	srv := startServer(t, target, dir, "--shutdown-grace", "1s")
	var in axtype.Instance
	waitForWithin(t, 30*time.Second, func() bool { // running, its first line stored
		ins, err := st.Instances(ctx, store.InstanceFilter{TaskID: "gb.slow", States: []axtype.State{axtype.Running}, Limit: 1})
		if err != nil || len(ins) != 1 {
			return false
		}
		in = ins[0]
		chunks, err := st.LogChunks(ctx, in.ID, in.Attempt, 0, 0)
		return err == nil && len(chunks) > 0
	})
	srv.stop(t)
	addr := freeAddr(t)
	srv = startServer(t, target, dir, "--listen", addr)
	defer srv.stop(t)
	waitForWithin(t, 30*time.Second, func() bool {
		got, err := st.Instance(ctx, in.ID)
		return err == nil && got.State == axtype.Success
	})
	ax := func(want int, args ...string) string {
		t.Helper()
		code, out, errOut := runAx(t, append(args, "--server", "http://"+addr)...)
		if code != want {
			t.Fatalf("ax %s: exit %d, want %d (1: the attempt failed)\n%s%s", strings.Join(args, " "), code, want, out, errOut)
		}
		return out + errOut
	}
	latest, first := ax(cli.ExitOK, "logs", "gb.slow"), ax(cli.ExitFailed, "logs", "gb.slow", "--attempt", "1")
	for _, c := range []struct{ name, got, want string }{
		{"latest", latest, fmt.Sprintf("instance %d (run %d), attempt 2 of 2,", in.ID, in.RunID)},
		{"latest", latest, "stdout| second"}, {"latest", latest, "success (exit status 0)"},
		{"attempt 1", first, fmt.Sprintf("instance %d (run %d), attempt 1 of 2,", in.ID, in.RunID)}, {"attempt 1", first, "stdout| first"},
	} {
		if !strings.Contains(c.got, c.want) {
			t.Errorf("ax logs (%s): want %q in\n%s", c.name, c.want, c.got)
		}
	}
	if strings.Contains(latest, "first") || strings.Contains(latest, "truncated") || strings.Contains(first, "second") {
		t.Errorf("attempts mixed:\n%s\n%s", first, latest)
	}
}
