package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/cli"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/runner/executor"
	"github.com/ax-sched/ax/store"
)

// flowPipeline writes the pipeline of TestOutputsEndToEnd: count (a
// command) gives rows, ten times the number of times it ran; report (the
// stock function build_report) gives report; pull (an SDK executor) gives
// pulled; sink reads the three in its command and appends them to seen.
func flowPipeline(t *testing.T, dir, seen string) {
	t.Helper()
	src := fmt.Sprintf(`pipeline: flow
timezone: UTC
schedule: none
defaults: {timeout: 30s}
tasks:
  - name: count
    outputs: [rows]
    command: ["sh", "-c", "n=$(cat runs 2>/dev/null || echo 0); n=$((n+1)); echo $n > runs; echo rows=$((n*10)) > \"$AX_OUTPUT\""]
  - {name: report, depends_on: [count], function: build_report}
  - {name: pull, depends_on: [count], http: "http://127.0.0.1:1/dispatch"}
  - name: sink
    depends_on: [report, pull]
    command: ["sh", "-c", "echo \"$LINE\" >> %s"]
    env: {LINE: "rows={{ .Upstream.count.rows }} report={{ .Upstream.report.report }} pulled={{ .Upstream.pull.pulled }}"}
`, seen)
	if err := os.WriteFile(filepath.Join(dir, "flow.yaml"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Outputs flow end to end on the real binary: from a command, a function
// and an SDK executor to a downstream's template; ax logs shows them; a
// rerun of the producer changes what the downstream sees when it runs again.
func TestOutputsEndToEnd(t *testing.T) {
	t.Parallel()
	dir, seen := t.TempDir(), filepath.Join(t.TempDir(), "seen.txt")
	flowPipeline(t, dir, seen)
	apiAddr := freeAddr(t)
	db := filepath.Join(t.TempDir(), "ax.db")
	srv := startServer(t, db, dir, "--listen", apiAddr)
	defer srv.stop(t)
	serveSDK(t, executor.Config{Scheduler: "http://" + apiAddr, Heartbeat: 500 * time.Millisecond, TokenFile: tokenFileOf(db)},
		map[string]runner.Func{"pull": func(_ context.Context, a runner.Attempt) error {
			return a.Output("pulled", strconv.Itoa(len(a.Task)))
		}})
	st := openStore(t, db)
	waitFor(t, func() bool { exs, _ := st.Executors(context.Background(), "flow.pull"); return len(exs) == 1 })
	waitPrimary(t, apiAddr)
	server := "http://" + apiAddr
	ax := func(args ...string) string {
		t.Helper()
		code, out, errOut := runAx(t, append(args, "--server", server)...)
		if code != cli.ExitOK {
			t.Fatalf("ax %v: exit %d\n%s%s", args, code, out, errOut)
		}
		return out
	}
	ax("trigger", "flow.count", "--downstream")
	sink := waitSuccesses(t, st, "flow.sink", 1)
	day := sink.LogicalTime.UTC().Format("20060102")
	first := fmt.Sprintf("rows=10 report=reports/orders_%s.html pulled=4\n", day)
	if data, _ := os.ReadFile(seen); string(data) != first {
		t.Fatalf("sink saw %q, want %q", data, first)
	}
	if out := ax("logs", "flow.count"); !strings.Contains(out, "== outputs: rows=10\n") {
		t.Errorf("ax logs flow.count: want its outputs in\n%s", out)
	}
	if out := ax("logs", "flow.pull"); !strings.Contains(out, "== outputs: pulled=4\n") {
		t.Errorf("ax logs flow.pull: want its outputs in\n%s", out)
	}
	// A rerun of the producer, then of the reader: the reader sees the new rows.
	count := waitSuccesses(t, st, "flow.count", 1)
	ax("rerun", strconv.FormatInt(count.ID, 10), "--instance")
	waitFor(t, func() bool {
		in, err := st.Instance(context.Background(), count.ID)
		return err == nil && in.Attempt == 2 && in.State == axtype.Success
	})
	ax("rerun", strconv.FormatInt(sink.ID, 10), "--instance")
	waitFor(t, func() bool { data, _ := os.ReadFile(seen); return strings.Count(string(data), "\n") == 2 })
	if data, _ := os.ReadFile(seen); string(data) != first+fmt.Sprintf("rows=20 report=reports/orders_%s.html pulled=4\n", day) {
		t.Errorf("after the reruns sink saw %q, want the rerun's rows=20", data)
	}
}

// waitSuccesses waits for n instances of task to succeed and returns the first.
func waitSuccesses(t *testing.T, st *store.Store, task string, n int) axtype.Instance {
	t.Helper()
	var got []axtype.Instance
	waitFor(t, func() bool {
		got, _ = st.Instances(context.Background(), store.InstanceFilter{TaskID: task, States: []axtype.State{axtype.Success}})
		return len(got) >= n
	})
	return got[0]
}

// serveSDK runs an SDK executor of funcs with cfg on a test server of its
// own (its Address and, unset, Client filled in) until the test ends, and
// returns its address.
func serveSDK(t *testing.T, cfg executor.Config, funcs map[string]runner.Func) string {
	t.Helper()
	exsrv := httptest.NewUnstartedServer(nil)
	cfg.Address = "http://" + exsrv.Listener.Addr().String()
	if cfg.Client == nil {
		cfg.Client = http.DefaultClient
	}
	x, err := executor.New(cfg, funcs)
	if err != nil {
		t.Fatal(err)
	}
	exsrv.Config.Handler = x.Handler()
	exsrv.Start()
	ctx, cancel := context.WithCancel(context.Background())
	go x.Run(ctx)
	t.Cleanup(func() { cancel(); exsrv.Close() })
	return cfg.Address
}
