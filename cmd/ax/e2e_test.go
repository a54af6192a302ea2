package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ax-sched/ax/api/apitest"
	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/cli"
	"github.com/ax-sched/ax/store"
	"github.com/ax-sched/ax/store/storetest"
)

// axBinary is the ax binary built once for the end-to-end tests.
var axBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ax-e2e")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	axBinary = filepath.Join(dir, "ax")
	// AX_TEST_TAGS builds it with test-only tags (axprof: profiles itself).
	if out, err := exec.Command("go", "build", "-tags", os.Getenv("AX_TEST_TAGS"), "-o", axBinary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build ax: %v\n%s", err, out)
		os.Exit(2)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// e2ePipeline fires every second: a function, then a command that records
// its execution in a file, then another function.
func e2ePipeline(t *testing.T) (dir, record string) {
	t.Helper()
	dir = t.TempDir()
	record = filepath.Join(dir, "executions.txt")
	src := fmt.Sprintf(`pipeline: e2e
timezone: UTC
schedule: "@every 1s"
overlap: wait              # every logical time runs, one at a time per task
defaults: {timeout: 5s}
tasks:
  - {name: extract, function: noop}
  - name: record
    depends_on: [extract]
    command: ["sh", "-c", "echo {{ .Task }} {{ .LogicalTime }} {{ .Ticket }} >> %s"]
  - {name: finish, depends_on: [record], function: noop}
`, record)
	if err := os.WriteFile(filepath.Join(dir, "e2e.yaml"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, record
}

type server struct {
	cmd *exec.Cmd
	log *os.File
}

func startServer(t *testing.T, target, pipelines string, extra ...string) *server {
	t.Helper()
	return startServerEnv(t, nil, target, pipelines, extra...)
}

// tokenFileOf is the executor credential's file of a server on the SQLite
// store db: beside it, where the server makes it on its first start.
func tokenFileOf(db string) string { return filepath.Join(filepath.Dir(db), "executor.token") }

// testExecutorToken is the executor credential of the test servers on MySQL,
// which have no store directory to keep one in (AX_EXECUTOR_TOKEN).
const testExecutorToken = "ax-test-executor-token"

// startServerEnv is startServer with extra environment variables (KEY=VALUE).
func startServerEnv(t *testing.T, env []string, target, pipelines string, extra ...string) *server {
	t.Helper()
	return startServerBin(t, axBinary, env, target, pipelines, extra...)
}

// startServerBin is startServerEnv with another ax binary (one built with test tags).
func startServerBin(t *testing.T, bin string, env []string, target, pipelines string, extra ...string) *server {
	t.Helper()
	log, err := os.CreateTemp(t.TempDir(), "server-*.log")
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"server", "--store", target, "--pipelines", pipelines, "--lease-ttl", "3s", "--log-level", "debug", "--listen", ""}, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	if strings.HasPrefix(target, "mysql://") && !slices.ContainsFunc(env, func(e string) bool { return strings.HasPrefix(e, "AX_EXECUTOR_TOKEN=") }) {
		cmd.Env = append(cmd.Env, "AX_EXECUTOR_TOKEN="+testExecutorToken)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &server{cmd: cmd, log: log}
	t.Cleanup(func() {
		if s.cmd.ProcessState == nil {
			_ = s.cmd.Process.Kill()
			_ = s.cmd.Wait()
		}
		if t.Failed() {
			out, _ := os.ReadFile(log.Name())
			var keep []string
			for _, l := range strings.Split(string(out), "\n") {
				if !strings.Contains(l, "msg=run_created") && !strings.Contains(l, "msg=not_dispatched") && !strings.Contains(l, "msg=window_loaded") {
					keep = append(keep, l)
				}
			}
			text := strings.Join(keep, "\n")
			t.Logf("server log (routine lines left out; last 4000 bytes):\n%s", text[max(0, len(text)-4000):])
		}
	})
	return s
}

// stop sends SIGTERM and expects a clean exit.
func (s *server) stop(t *testing.T) {
	t.Helper()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	if err := s.cmd.Wait(); err != nil {
		t.Errorf("server exit: %v", err)
	}
}

// crash kills the server with SIGKILL.
func (s *server) crash(t *testing.T) {
	t.Helper()
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
}

// waitRuns waits (bounded: the server is another process) until n runs of
// e2e have succeeded entirely.
func waitRuns(t *testing.T, st *store.Store, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		ok, err := st.Instances(context.Background(), store.InstanceFilter{TaskID: "e2e.finish", States: []axtype.State{axtype.Success}, Limit: n})
		if err == nil && len(ok) >= n {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("fewer than %d runs succeeded within 60 s", n)
}

// checkOnce reads the record file and the store: no (task, logical time)
// ran twice; every run up to the last finished one either succeeded in
// dependency order, or has a task that failed with an unknown outcome (its
// executor died with a crashed server) — nothing silently lost.
func checkOnce(t *testing.T, st *store.Store, record string) {
	t.Helper()
	checkRuns(t, st, record, nil)
}

// checkRuns is checkOnce where logical time lt may have run 1+retried[lt]
// times: work interrupted by its executor's death and retried by policy
// , which the caller has told apart from true duplicates (see
// repeats).
func checkRuns(t *testing.T, st *store.Store, record string, retried map[string]int) {
	t.Helper()
	f, err := os.Open(record)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	executed := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 {
			t.Fatalf("bad record line %q", sc.Text())
		}
		executed[fields[1]]++
	}
	for lt, n := range executed {
		if n > 1+retried[lt] {
			t.Errorf("record@%s executed %d times", lt, n)
		}
	}
	ctx := context.Background()
	finished, err := st.Instances(ctx, store.InstanceFilter{TaskID: "e2e.finish", States: []axtype.State{axtype.Success}, ByLogicalTime: true, Limit: 1})
	if err != nil || len(finished) == 0 {
		t.Fatalf("no finished run: %v", err)
	}
	last := finished[0].LogicalTime
	all, err := st.Instances(ctx, store.InstanceFilter{Pipeline: "e2e", LogicalTo: last, Limit: 1 << 20, ByLogicalTime: true, Ascending: true})
	if err != nil {
		t.Fatal(err)
	}
	byRun := map[int64]map[string]axtype.Instance{}
	for _, in := range all {
		if byRun[in.RunID] == nil {
			byRun[in.RunID] = map[string]axtype.Instance{}
		}
		byRun[in.RunID][in.TaskID] = in
	}
	complete, unknown := 0, 0
	for id, r := range byRun {
		x, rec, fin := r["e2e.extract"], r["e2e.record"], r["e2e.finish"]
		lt := rec.LogicalTime.UTC().Format(time.RFC3339)
		switch {
		case x.State == axtype.Success && rec.State == axtype.Success && fin.State == axtype.Success:
			complete++
			if executed[lt] != 1+retried[lt] {
				t.Errorf("run %d@%s succeeded but its command ran %d times", id, lt, executed[lt])
			}
			if rec.StartedAt.Before(x.EndedAt) || fin.StartedAt.Before(rec.EndedAt) {
				t.Errorf("run %d@%s out of dependency order", id, lt)
			}
		case strings.Contains(x.Error+rec.Error+fin.Error, "unknown outcome"),
			strings.Contains(x.Error+rec.Error+fin.Error, "skipped by"): // a recorded decision of the misfire or overlap policy
			unknown++
		default:
			t.Errorf("run %d@%s lost: extract %s, record %s, finish %s", id, lt, x.State, rec.State, fin.State)
		}
		for _, in := range r {
			h, err := st.History(ctx, store.LogFilter{InstanceID: in.ID, Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			for _, row := range h {
				k := string(row.From) + ">" + string(row.To)
				if row.From == axtype.Retrying || row.To == axtype.Retrying {
					continue // each retry (or refusal) passes through RETRYING again
				}
				if seen[k] {
					t.Errorf("instance %d: transition %s recorded twice", in.ID, k)
				}
				seen[k] = true
			}
		}
	}
	if complete == 0 {
		t.Error("no complete run")
	}
	t.Logf("%d runs complete, %d with an unknown outcome or skipped by policy, %d command executions", complete, unknown, len(executed))
}

// e2eTargets returns the stores to run end to end: SQLite, and MySQL when a
// DSN is given (always under CI).
func e2eTargets(t *testing.T) map[string]func(t *testing.T) string {
	return map[string]func(t *testing.T) string{
		"sqlite": func(t *testing.T) string { return filepath.Join(t.TempDir(), "ax.db") },
		"mysql":  func(t *testing.T) string { return "mysql://" + storetest.MySQLDSN(t) },
	}
}

func openStore(t testing.TB, target string) *store.Store {
	t.Helper()
	return apitest.OpenStore(t, target)
}

func TestServerEndToEnd(t *testing.T) {
	t.Parallel()
	for name, target := range e2eTargets(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tgt := target(t)
			dir, record := e2ePipeline(t)
			srv := startServer(t, tgt, dir)
			st := openStore(t, tgt)
			waitRuns(t, st, 5)
			srv.stop(t)
			checkOnce(t, st, record)
		})
	}
}

func TestServerCrashAndRestart(t *testing.T) {
	t.Parallel()
	for name, target := range e2eTargets(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tgt := target(t)
			dir, record := e2ePipeline(t)
			st := openStore(t, tgt)
			first := startServer(t, tgt, dir)
			waitRuns(t, st, 3)
			first.crash(t)
			before, _ := st.Instances(context.Background(), store.InstanceFilter{TaskID: "e2e.finish", States: []axtype.State{axtype.Success}, Limit: 1 << 20})
			second := startServer(t, tgt, dir) // waits for the dead holder's lease to expire
			waitRuns(t, st, len(before)+4)
			settleRuns(t, st)
			second.stop(t)
			checkOnce(t, st, record)
		})
	}
}

func TestServerRefusesInvalidPipelines(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte("pipeline: bad\ntasks:\n  - {name: a, function: noop}\n  - {name: b, depends_on: [c], function: noop}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "ax.db")
	code, _, errOut := runAx(t, "server", "--store", db, "--pipelines", dir)
	if code != cli.ExitFailed || !strings.Contains(errOut, `bad.yaml:4:28: task "b": depends_on "c": no such task`) || !strings.Contains(errOut, "not starting: 1 error(s)") {
		t.Errorf("exit %d, stderr:\n%s", code, errOut)
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Errorf("a store was created for invalid pipelines: %v", err)
	}
	code, _, errOut = runAx(t, "server", "--store", db, "--pipelines", dir, "--lease-ttl", "1s")
	if code != cli.ExitFailed || !strings.Contains(errOut, "not starting") {
		t.Errorf("invalid pipelines checked before flags? exit %d: %s", code, errOut)
	}
}
