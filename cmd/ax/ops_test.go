package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/api/apitest"
	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/cli"
	"github.com/ax-sched/ax/store"
)

// TestOperatorCommandsAgainstRunningServer drives a real ax server through
// the CLI: pause and resume a pipeline, run a task now with its downstream,
// refuse bad requests, and show the history.
func TestOperatorCommandsAgainstRunningServer(t *testing.T) {
	t.Parallel()
	db := t.TempDir() + "/ax.db"
	dir, _ := e2ePipeline(t)
	srv := startServer(t, db, dir)
	st := openStore(t, db)
	waitRuns(t, st, 2)
	ctx := context.Background()

	code, out, errOut := runAx(t, "pause", "e2e", "--store", db, "--reason", "maintenance")
	if code != cli.ExitOK || !strings.HasPrefix(out, "paused pipeline e2e:") {
		t.Fatalf("pause: exit %d, %q %q", code, out, errOut)
	}
	// The instances created ahead for the window are PAUSED at once; none starts.
	if n := count(t, st, axtype.Paused); n < 250 {
		t.Errorf("%d instances PAUSED, want the window's ~300", n)
	}
	ranBefore := count(t, st, axtype.Running) + count(t, st, axtype.Success)
	time.Sleep(1500 * time.Millisecond) // real seconds pass in the server: nothing may run
	if ran := count(t, st, axtype.Running) + count(t, st, axtype.Success); ran != ranBefore {
		t.Errorf("%d instances ran while the pipeline was paused", ran-ranBefore)
	}
	if code, _, errOut := runAx(t, "pause", "e2e", "--store", db); code != cli.ExitFailed || !strings.Contains(errOut, "pipeline e2e is paused already") {
		t.Errorf("pause twice: exit %d, %q", code, errOut)
	}
	code, out, errOut = runAx(t, "resume", "e2e", "--store", db)
	if code != cli.ExitOK || !strings.HasPrefix(out, "resumed pipeline e2e:") {
		t.Fatalf("resume: exit %d, %q %q", code, out, errOut)
	}
	done := count(t, st, axtype.Success)
	waitFor(t, func() bool { return count(t, st, axtype.Success) > done+3 })

	code, out, errOut = runAx(t, "trigger", "e2e.extract", "--downstream", "--store", db)
	if code != cli.ExitOK || !strings.Contains(out, "started for e2e.extract (3 task(s))") {
		t.Fatalf("trigger: exit %d, %q %q", code, out, errOut)
	}
	waitFor(t, func() bool {
		runs, _ := st.Runs(ctx, "e2e", 1000)
		for _, r := range runs {
			if r.Kind == axtype.RunManual {
				ins, _ := st.Instances(ctx, store.InstanceFilter{RunID: r.ID, States: []axtype.State{axtype.Success}})
				return len(ins) == 3
			}
		}
		return false
	})

	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"pause", "e2e.recrod"}, cli.ExitFailed, `no task "e2e.recrod" (did you mean "e2e.record"?)`},
		{[]string{"pause", "--group", "nogroup"}, cli.ExitFailed, `no group "nogroup"`},
		{[]string{"rerun", "e2e.record"}, cli.ExitFailed, "has no FAILED or KILLED instance to rerun (its latest is"},
		{[]string{"kill", "999999"}, cli.ExitFailed, "kill instance 999999: instance 999999: store: not found"},
		{[]string{"rerun", "12"}, cli.ExitUsage, "say --failed (a run's failed instances) or --instance"},
		{[]string{"pause"}, cli.ExitUsage, "give PIPELINE.TASK, PIPELINE, or --group NAME"},
	} {
		code, _, errOut := runAx(t, append(tc.args, "--store", db)...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("ax %v: exit %d, %q; want %d and %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}
	code, out, _ = runAx(t, "history", "e2e.extract", "--store", db, "-n", "2000")
	for _, want := range []string{"TIME", "(created) → SCHEDULED", "SCHEDULED → RUNNING", "action dispatch", "action result", "RUNNING → SUCCESS", "→ PAUSED"} {
		if code != cli.ExitOK || !strings.Contains(out, want) {
			t.Errorf("history lacks %q (exit %d)", want, code)
		}
	}
	srv.stop(t)
	// With no scheduler, a request is withdrawn after the wait.
	code, _, errOut = runAx(t, "trigger", "e2e.extract", "--store", db, "--wait", "300ms")
	if code != cli.ExitFailed || !strings.Contains(errOut, "no scheduler applied it within 300ms") {
		t.Errorf("no server: exit %d, %q", code, errOut)
	}
	if pending, _ := st.PendingOps(ctx, 10); len(pending) != 0 {
		t.Errorf("a withdrawn request is still pending: %+v", pending)
	}
}

func count(t *testing.T, st *store.Store, s axtype.State) int {
	t.Helper()
	ins, err := st.Instances(context.Background(), store.InstanceFilter{Pipeline: "e2e", States: []axtype.State{s}, Limit: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return len(ins)
}

// waitFor polls a condition on another process's work, bounded to 30 s.
func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	apitest.WaitFor(t, cond)
}

// TestKillCommandTaskLeavesNoProcess kills a running command task through
// the CLI and a real server: the instance ends KILLED and the command's
// whole process tree is gone.
func TestKillCommandTaskLeavesNoProcess(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pidFile := dir + "/child.pid"
	src := "pipeline: k\ntimezone: UTC\nschedule: \"@every 1h\"\ntasks:\n  - name: long\n    timeout: 10m\n    command: [\"sh\", \"-c\", \"sleep 300 & echo $! > " + pidFile + "; wait\"]\n"
	if err := os.WriteFile(dir+"/k.yaml", []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	db := t.TempDir() + "/ax.db"
	srv := startServer(t, db, dir)
	st := openStore(t, db)
	waitFor(t, func() bool { ins, _ := st.Tasks(context.Background(), store.TaskFilter{}); return len(ins) == 1 })
	if code, out, errOut := runAx(t, "trigger", "k.long", "--store", db); code != cli.ExitOK {
		t.Fatalf("trigger: %d %q %q", code, out, errOut)
	}
	var pid int
	waitFor(t, func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	code, out, errOut := runAx(t, "kill", "k.long", "--store", db, "--reason", "stuck")
	if code != cli.ExitOK || !strings.Contains(out, "kill sent to 1 instance(s)") {
		t.Fatalf("kill: %d %q %q", code, out, errOut)
	}
	waitFor(t, func() bool {
		ins, _ := st.Instances(context.Background(), store.InstanceFilter{TaskID: "k.long", States: []axtype.State{axtype.Killed}})
		return len(ins) == 1
	})
	waitFor(t, func() bool { return processGone(pid) })
	srv.stop(t)
}

// processGone reports whether pid no longer runs (absent, or a zombie).
func processGone(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	f := strings.Fields(string(stat))
	return len(f) > 2 && f[2] == "Z"
}
