package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/cli"
	"github.com/ax-sched/ax/store"
)

// backfillPipeline is a daily 3-layer pipeline whose command tasks record
// (task, logical time) in a file; it has no live effect when backfilled.
func backfillPipeline(t *testing.T, failOn string) (dir, record string) {
	t.Helper()
	dir = t.TempDir()
	record = filepath.Join(dir, "executions.txt")
	rec := func(task string) string {
		return fmt.Sprintf(`["sh", "-c", "echo %s {{ .LogicalTime }} >> %s"]`, task, record)
	}
	clean := rec("clean")
	if failOn != "" {
		clean = fmt.Sprintf(`["sh", "-c", "case {{ .LogicalTime }} in %s*) exit 3;; esac; echo clean {{ .LogicalTime }} >> %s"]`, failOn, record)
	}
	src := fmt.Sprintf(`pipeline: daily
timezone: UTC
schedule: "0 2 * * *"
defaults: {timeout: 10s}
tasks:
  - {name: sync, command: %s}
  - {name: clean, depends_on: [sync], command: %s}
  - {name: report, depends_on: [clean], command: %s}
`, rec("sync"), clean, rec("report"))
	if err := os.WriteFile(filepath.Join(dir, "daily.yaml"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, record
}

func executions(t *testing.T, record string) map[string]int {
	t.Helper()
	out := map[string]int{}
	f, err := os.Open(record)
	if os.IsNotExist(err) {
		return out
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		out[strings.TrimSpace(sc.Text())]++
	}
	return out
}

func TestBackfillStandalone(t *testing.T) {
	t.Parallel()
	dir, record := backfillPipeline(t, "2026-03-03")
	db := filepath.Join(t.TempDir(), "ax.db")
	code, out, errOut := runAx(t, "backfill", "daily", "--from", "2026-03-01", "--to", "2026-03-05", "--select", "clean+",
		"--pipelines", dir, "--store", db, "--standalone", "--max-active-runs", "2")
	if code != cli.ExitFailed || !strings.Contains(errOut, "1 of 5 run(s) failed; failed runs: 2026-03-03T02:00:00Z: clean") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	ran := executions(t, record)
	for d := 1; d <= 5; d++ {
		lt := fmt.Sprintf("2026-03-%02dT02:00:00Z", d)
		if ran["sync "+lt] != 0 {
			t.Errorf("sync@%s ran: it is outside the selection", lt)
		}
		want := 1
		if d == 3 {
			want = 0
		}
		if ran["clean "+lt] != want || ran["report "+lt] != want {
			t.Errorf("day %d: clean ran %d, report %d; want %d", d, ran["clean "+lt], ran["report "+lt], want)
		}
	}
	// Rerun of the failed day only, once the input is fixed.
	fixed, _ := backfillPipeline(t, "")
	if err := os.Rename(filepath.Join(fixed, "daily.yaml"), filepath.Join(dir, "daily.yaml")); err != nil {
		t.Fatal(err)
	}
	// The fixed file records into its own directory; count there.
	code, out, errOut = runAx(t, "backfill", "daily", "--from", "2026-03-01", "--to", "2026-03-05", "--select", "clean+",
		"--pipelines", dir, "--store", db, "--standalone", "--rerun", "failed")
	if code != cli.ExitOK || !strings.Contains(out, "done: 5 run(s)") {
		t.Fatalf("rerun failed: exit %d\n%s\n%s", code, out, errOut)
	}
	again := executions(t, filepath.Join(fixed, "executions.txt"))
	if len(again) != 2 || again["clean 2026-03-03T02:00:00Z"] != 1 || again["report 2026-03-03T02:00:00Z"] != 1 {
		t.Errorf("--rerun failed ran %v, want only day 3's clean and report", again)
	}
	code, out, _ = runAx(t, "backfill", "list", "--store", db)
	if code != cli.ExitOK || strings.Count(out, "daily") != 2 {
		t.Errorf("list: %s", out)
	}
	code, out, _ = runAx(t, "backfill", "status", "1", "--store", db)
	if code != cli.ExitOK || !strings.Contains(out, "backfill 1 done: 5/5 runs (100%), 1 failed") || !strings.Contains(out, "2026-03-03T02:00:00Z: clean") {
		t.Errorf("status: exit %d, %s", code, out)
	}
	for _, args := range [][]string{{"status", "99"}, {"resume", "99", "--pipelines", dir}} {
		code, _, errOut := runAx(t, append(append([]string{"backfill"}, args...), "--store", db)...)
		if code != cli.ExitFailed || !strings.Contains(errOut, "no backfill 99 (ax backfill list shows them)") {
			t.Errorf("%v: exit %d, %q", args, code, errOut)
		}
	}
	if code, _, errOut := runAx(t, "backfill", "status", "x1", "--store", db); code != cli.ExitUsage || !strings.Contains(errOut, `"x1" is not a backfill id`) {
		t.Errorf("bad id: exit %d, %q", code, errOut)
	}
}

func TestBackfillBadInputWritesNothing(t *testing.T) {
	t.Parallel()
	dir, _ := backfillPipeline(t, "")
	db := filepath.Join(t.TempDir(), "ax.db")
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"daily", "--from", "2026-03-05", "--to", "2026-03-01"}, cli.ExitFailed, "--from 2026-03-05T00:00:00Z is after --to 2026-03-01T23:59:59Z"},
		{[]string{"daily", "--from", "2026-03-01T03:00:00", "--to", "2026-03-01T04:00:00"}, cli.ExitFailed, "gives no fire time between"},
		{[]string{"daily", "--from", "2026-03-01", "--to", "2026-03-02", "--select", "claen"}, cli.ExitFailed, `no task "claen" (did you mean "clean"?)`},
		{[]string{"dialy", "--from", "2026-03-01", "--to", "2026-03-02"}, cli.ExitFailed, `no pipeline "dialy" (did you mean "daily"?)`},
		{[]string{"daily", "--from", "March 1st", "--to", "2026-03-02"}, cli.ExitUsage, `--from: "March 1st" is not a date`},
	} {
		code, _, errOut := runAx(t, append(append([]string{"backfill"}, tc.args...), "--pipelines", dir, "--store", db, "--standalone")...)
		if code != tc.code || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, %q; want %d and %q", tc.args, code, errOut, tc.code, tc.want)
		}
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Errorf("bad backfills created a store: %v", err)
	}
	code, out, _ := runAx(t, "backfill", "daily", "--from", "2026-03-01", "--to", "2026-03-03", "--pipelines", dir, "--dry-run", "--reverse")
	if code != cli.ExitOK || !strings.Contains(out, "plan: daily, 3 run(s) × 3 task(s)") ||
		strings.Index(out, "2026-03-03T02:00:00Z") > strings.Index(out, "2026-03-01T02:00:00Z") {
		t.Errorf("dry run --reverse: %s", out)
	}
}

// TestBackfillKilledAndResumed: a standalone backfill killed with SIGKILL
// half-way and resumed ends with every selected (task, logical time)
// executed exactly once.
func TestBackfillKilledAndResumed(t *testing.T) {
	t.Parallel()
	dir, record := backfillPipeline(t, "")
	db := filepath.Join(t.TempDir(), "ax.db")
	cmd := exec.Command(axBinary, "backfill", "daily", "--from", "2025-01-01", "--to", "2025-12-31", "--pipelines", dir, "--store", db, "--standalone")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(executions(t, record)) >= 60 })
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	st := openStore(t, db)
	bs, err := st.Backfills(context.Background(), 0)
	if err != nil || len(bs) != 1 || bs[0].State == "done" {
		t.Fatalf("backfill after the kill: %+v %v", bs, err)
	}
	code, out, errOut := runAx(t, "backfill", "resume", fmt.Sprint(bs[0].ID), "--pipelines", dir, "--store", db, "--standalone")
	ran := executions(t, record)
	// An attempt the kill interrupted has an unknown outcome: it failed
	// after its timeout with that reason and is not run again by itself.
	unknown := map[string]bool{}
	ins, _ := st.Instances(context.Background(), store.InstanceFilter{Pipeline: "daily", States: []axtype.State{axtype.Failed}, Limit: 1000})
	for _, in := range ins {
		if in.Attempt == 0 && strings.HasPrefix(in.Error, "upstream daily.") {
			continue // failed without running behind an interrupted upstream
		}
		if !strings.Contains(in.Error, "unknown outcome") {
			t.Errorf("instance %d failed for another reason: %s", in.ID, in.Error)
		}
		unknown[strings.TrimPrefix(in.TaskID, "daily.")+" "+in.LogicalTime.UTC().Format(time.RFC3339)] = true
	}
	for day := time.Date(2025, 1, 1, 2, 0, 0, 0, time.UTC); day.Year() == 2025; day = day.AddDate(0, 0, 1) {
		for _, task := range []string{"sync", "clean", "report"} {
			k := fmt.Sprintf("%s %s", task, day.Format(time.RFC3339))
			switch {
			case ran[k] > 1:
				t.Errorf("%s executed %d times", k, ran[k])
			case ran[k] == 0 && !unknown[k] && !blockedBy(unknown, day):
				t.Errorf("%s never executed and is not recorded as an unknown outcome", k)
			}
		}
	}
	// The resumed backfill succeeds, or reports exactly the interrupted runs as failed.
	if code != cli.ExitOK && !(code == cli.ExitFailed && len(unknown) > 0 && strings.Contains(errOut, "run(s) failed")) {
		t.Errorf("resume: exit %d\n%s\n%s", code, out, errOut)
	}
	t.Logf("%d executions; %d attempt(s) interrupted by the kill, recorded as unknown outcome", len(ran), len(unknown))
}

// blockedBy reports whether an upstream of day's tasks had an unknown outcome.
func blockedBy(unknown map[string]bool, day time.Time) bool {
	for k := range unknown {
		if strings.HasSuffix(k, day.Format(time.RFC3339)) {
			return true
		}
	}
	return false
}

func TestRunCommand(t *testing.T) {
	t.Parallel()
	dir, record := backfillPipeline(t, "2026-03-03")
	file := filepath.Join(dir, "daily.yaml")
	code, out, _ := runAx(t, "run", file, "--at", "2026-03-02T02:00:00")
	if code != cli.ExitOK || !strings.Contains(out, "start  daily.sync") || !strings.Contains(out, "success daily.report") || !strings.Contains(out, "ok: 3 task(s) succeeded") {
		t.Errorf("run: exit %d\n%s", code, out)
	}
	code, out, errOut := runAx(t, "run", file, "--at", "2026-03-03T02:00:00", "--select", "clean+")
	if code != cli.ExitFailed || !strings.Contains(out, "failed  daily.clean") || !strings.Contains(errOut, "clean") || strings.Contains(out, "start  daily.report") {
		t.Errorf("failing run: exit %d\n%s\n%s", code, out, errOut)
	}
	ran := executions(t, record)
	if ran["sync 2026-03-02T02:00:00Z"] != 1 || ran["report 2026-03-02T02:00:00Z"] != 1 || ran["sync 2026-03-03T02:00:00Z"] != 0 {
		t.Errorf("executions %v", ran)
	}
	if code, _, errOut := runAx(t, "run", "nosuch", "--pipelines", dir); code != cli.ExitFailed || !strings.Contains(errOut, `no pipeline "nosuch"`) {
		t.Errorf("unknown pipeline: %d %q", code, errOut)
	}
	// A file that does not exist is named as such: it was looked up as a
	// pipeline name in the default --pipelines, and the error was about
	// that directory ("defs: stat examples: no such file or directory").
	missing := filepath.Join(dir, "nosuch.yaml")
	if code, _, errOut := runAx(t, "run", missing); code != cli.ExitUsage || !strings.Contains(errOut, missing+": no such pipeline file") || strings.Contains(errOut, "examples") {
		t.Errorf("ax run of a missing file: %d %q", code, errOut)
	}
	if code, _, errOut := runAx(t, "validate", missing); code != cli.ExitUsage || !strings.Contains(errOut, missing+": no such file or directory: give pipeline files or directories that exist") || strings.Contains(errOut, "defs:") {
		t.Errorf("ax validate of a missing file: %d %q", code, errOut)
	}
}

// TestBackfillPickedUpByServer: without --standalone the backfill is stored
// and a running server runs it.
func TestBackfillPickedUpByServer(t *testing.T) {
	t.Parallel()
	dir, record := backfillPipeline(t, "")
	db := filepath.Join(t.TempDir(), "ax.db")
	srv := startServer(t, db, dir)
	st := openStore(t, db)
	waitFor(t, func() bool { ts, _ := st.Tasks(context.Background(), store.TaskFilter{}); return len(ts) == 3 })
	code, out, errOut := runAx(t, "backfill", "daily", "--from", "2026-02-01", "--to", "2026-02-03", "--pipelines", dir, "--store", db)
	if code != cli.ExitOK || !strings.Contains(out, "done: 3 run(s)") || !strings.Contains(out, "instances 9/9") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if ran := executions(t, record); len(ran) != 9 {
		t.Errorf("%d executions, want 9", len(ran))
	}
	srv.stop(t)
}

// TestRunInterrupted: Ctrl-C on ax run kills the running task (no process
// is left) and exits non-zero.
func TestRunInterrupted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	src := "pipeline: slow\ntimezone: UTC\nschedule: \"@daily\"\ntasks:\n  - name: wait\n    command: [\"sh\", \"-c\", \"sleep 300 & echo $! > " + pidFile + "; wait\"]\n"
	file := filepath.Join(dir, "slow.yaml")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(axBinary, "run", file)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	waitFor(t, func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return false
		}
		_, err = fmt.Sscanf(strings.TrimSpace(string(b)), "%d", &pid)
		return err == nil
	})
	_ = cmd.Process.Signal(os.Interrupt)
	err := cmd.Wait()
	if err == nil {
		t.Errorf("ax run exited 0 after Ctrl-C:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "killed daily") && !strings.Contains(out.String(), "killed  slow.wait") && !strings.Contains(out.String(), "interrupted") {
		t.Errorf("output does not say the task was killed:\n%s", out.String())
	}
	waitFor(t, func() bool { return processGone(pid) })
}

// TestBackfillResumeGoesThroughTheEngine: `ax backfill resume --store`
// queues a request that the primary applies, fenced and action-logged; it
// writes nothing behind the engine's back. Before, it set the backfill row
// to pending itself, scheduler or not (this test failed: the row changed
// with no scheduler running).
func TestBackfillResumeGoesThroughTheEngine(t *testing.T) {
	t.Parallel()
	dir, _ := backfillPipeline(t, "2026-03-02")
	db := filepath.Join(t.TempDir(), "ax.db")
	code, out, errOut := runAx(t, "backfill", "daily", "--from", "2026-03-01", "--to", "2026-03-04", "--pipelines", dir, "--store", db,
		"--standalone", "--stop-on-failure")
	if code != cli.ExitFailed || !strings.Contains(errOut, "backfill 1 failed") {
		t.Fatalf("setup: exit %d\n%s\n%s", code, out, errOut)
	}
	st := openStore(t, db)
	ctx := context.Background()
	read := func() store.Backfill {
		t.Helper()
		bs, err := st.Backfills(ctx, 1)
		if err != nil || len(bs) != 1 {
			t.Fatalf("backfill 1: %v %v", bs, err)
		}
		return bs[0]
	}
	before := read()
	// No scheduler: the request is withdrawn and the backfill stays as it was.
	code, out, errOut = runAx(t, "backfill", "resume", "1", "--pipelines", dir, "--store", db, "--wait", "500ms")
	if code != cli.ExitFailed || !strings.Contains(errOut, "no scheduler applied it within 500ms") {
		t.Errorf("resume without a scheduler: exit %d\n%s\n%s", code, out, errOut)
	}
	if after := read(); after != before {
		t.Errorf("resume without a scheduler changed the backfill:\n%+v\n%+v", before, after)
	}
	// With a server: it applies the request, under its lease, in the action log.
	srv := startServer(t, db, dir)
	code, out, errOut = runAx(t, "backfill", "resume", "1", "--pipelines", dir, "--store", db, "--detach")
	if code != cli.ExitOK || !strings.Contains(out, "backfill 1 resumed (was failed at ") {
		t.Errorf("resume: exit %d\n%s\n%s", code, out, errOut)
	}
	acts, err := st.Actions(ctx, store.LogFilter{Action: "resume_backfill", Limit: 10})
	if err != nil || len(acts) != 1 || !strings.HasPrefix(acts[0].Actor, "operator") || !strings.Contains(acts[0].Detail, "backfill 1 resumed") {
		t.Errorf("action log: %+v %v", acts, err)
	}
	waitFor(t, func() bool { return read().State != "pending" })
	// A done or unknown backfill is refused by the engine, with nothing changed.
	code, _, errOut = runAx(t, "backfill", "resume", "7", "--pipelines", dir, "--store", db)
	if code != cli.ExitFailed || !strings.Contains(errOut, "no backfill 7") {
		t.Errorf("unknown backfill: exit %d %q", code, errOut)
	}
	srv.stop(t)
}

// TestBackfillDryRunWaitCross: with --wait-cross the dry run lists, per
// logical time, the run of another pipeline each run would wait for;
// without it, none (they count as done).
func TestBackfillDryRunWaitCross(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, src := range map[string]string{
		"billing.yaml": "pipeline: billing\ntimezone: UTC\nschedule: \"0 1 * * *\"\ntasks:\n  - {name: load, command: [\"true\"]}\n",
		"orders.yaml": "pipeline: orders\ntimezone: UTC\nschedule: \"0 2 * * *\"\ntasks:\n" +
			"  - {name: report, command: [\"true\"], depends_on: [billing.load, {task: billing.load2, match: exact, offset: -1d}]}\n",
		"billing2.yaml": "pipeline: billing2\ntimezone: UTC\ntasks:\n  - {name: x, command: [\"true\"]}\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// load2 is not a task of billing: the file set is refused, naming it.
	code, _, errOut := runAx(t, "backfill", "orders", "--from", "2026-03-01", "--to", "2026-03-02", "--pipelines", dir, "--dry-run", "--wait-cross")
	if code == cli.ExitOK || !strings.Contains(errOut, "load2") {
		t.Errorf("unknown upstream: exit %d %q", code, errOut)
	}
	src := "pipeline: orders\ntimezone: UTC\nschedule: \"0 2 * * *\"\ntasks:\n" +
		"  - {name: report, command: [\"true\"], depends_on: [billing.load, {task: billing2.x, match: exact, offset: -1d}]}\n"
	if err := os.WriteFile(filepath.Join(dir, "orders.yaml"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runAx(t, "backfill", "orders", "--from", "2026-03-01", "--to", "2026-03-02", "--pipelines", dir, "--dry-run", "--wait-cross")
	want := "waits for other pipelines (--wait-cross):\n" +
		"2026-03-01T02:00:00Z  report waits for billing.load: a run in (2026-02-28T02:00:00Z, 2026-03-01T02:00:00Z]\n" +
		"2026-03-01T02:00:00Z  report waits for billing2.x: the run of 2026-02-28T02:00:00Z\n" +
		"2026-03-02T02:00:00Z  report waits for billing.load: a run in (2026-03-01T02:00:00Z, 2026-03-02T02:00:00Z]\n" +
		"2026-03-02T02:00:00Z  report waits for billing2.x: the run of 2026-03-01T02:00:00Z\n"
	if code != cli.ExitOK || !strings.HasSuffix(out, want) {
		t.Errorf("dry run --wait-cross: exit %d %s%s\nwant it to end with\n%s", code, out, errOut, want)
	}
	if code, out, _ := runAx(t, "backfill", "orders", "--from", "2026-03-01", "--to", "2026-03-02", "--pipelines", dir, "--dry-run"); code != cli.ExitOK || strings.Contains(out, "waits for") {
		t.Errorf("dry run without --wait-cross: exit %d %s", code, out)
	}
}

// TestBadCrossDependencyRefused: a match on a same-pipeline dependency and
// an offset that is neither days nor a duration are refused with their
// file:line:col by ax validate, and ax run of the file writes no store.
func TestBadCrossDependencyRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "p.yaml")
	src := "pipeline: p\ntimezone: UTC\ntasks:\n  - {name: a, command: [\"true\"]}\n" +
		"  - name: b\n    command: [\"true\"]\n    depends_on: [{task: a, match: exact}, {task: q.x, offset: yesterday}]\n"
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runAx(t, "validate", file)
	for _, want := range []string{
		file + `:7:28: task "b": depends_on "a" is in the same pipeline: match and offset apply to a dependency on another pipeline`,
		file + `:7:63: task "b": depends_on offset "yesterday" is not a calendar step or a duration`,
	} {
		if code == cli.ExitOK || !strings.Contains(out+errOut, want) {
			t.Errorf("validate: exit %d %s%s\nwant %q", code, out, errOut, want)
		}
	}
	db := filepath.Join(dir, "ax.db")
	if code, _, _ := runAx(t, "run", file, "--store", db); code == cli.ExitOK {
		t.Errorf("ax run of the bad file: exit 0")
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Errorf("ax run of the bad file wrote a store: %v", err)
	}
}
