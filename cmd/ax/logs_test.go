package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ax-sched/ax/api"
	"github.com/ax-sched/ax/api/apitest"
	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/cli"
	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/runner/executor"
	"github.com/ax-sched/ax/store"
	"github.com/ax-sched/ax/store/storetest"
)

// logsPipeline: `talk` prints on both streams, waits for the test to write
// to its FIFO, prints again and fails; `binary` prints bytes that are not
// text; `flaky` fails once, then succeeds.
func logsPipeline(fifo, mark string) string {
	return fmt.Sprintf(`pipeline: shop
group: etl
timezone: UTC
schedule: "0 0 1 1 *"
tasks:
  - {name: sync, function: noop}
  - name: talk
    timeout: 1m
    command: ["sh", "-c", "echo starting; echo 'warming up' >&2; read x < %[1]s; echo finished; exit 2"]
  - name: binary
    command: ["sh", "-c", "printf 'ok\\377\\033[31mred\\000\\n'"]
  - name: flaky
    retry: {count: 1, interval: 1s}
    command: ["sh", "-c", "if [ -e %[2]s ]; then echo second; else touch %[2]s; echo first; echo bad >&2; exit 3; fi"]
`, fifo, mark)
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func setupLogs(t *testing.T) (*apitest.Env, string) {
	t.Helper()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "go")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	return setupAPI(t, apitest.Opts{Pipeline: logsPipeline(fifo, filepath.Join(dir, "mark"))}), fifo
}

// `ax logs -f` shows the lines of a running command within two seconds of
// their printing (the scheduler stores output every second) and ends when
// the attempt ends, with its exit status.
func TestLogsFollowShowsLinesLiveAndEnds(t *testing.T) {
	t.Parallel()
	e, fifo := setupLogs(t)
	if code, body := e.Call("POST", "/api/v1/pipelines/shop/tasks/talk/trigger", ""); code != http.StatusOK {
		t.Fatalf("trigger: %d %s", code, body)
	}
	in := e.WaitState("shop.talk", axtype.Running)
	printed := time.Now() // at the latest: the command prints first thing
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(context.Background(), []string{"logs", "shop.talk", "-f", "--server", e.Srv.URL}, &out, &errOut)
	}()
	waitFor(t, func() bool { return strings.Contains(out.String(), "warming up") })
	if lag := time.Since(printed); lag > 2*time.Second {
		t.Errorf("the running task's lines showed %s after it printed them, want within 2 s", lag)
	}
	select {
	case code := <-done:
		t.Fatalf("ax logs -f ended (exit %d) while the task runs:\n%s%s", code, out.String(), errOut.String())
	default:
	}
	if got := out.String(); !strings.Contains(got, fmt.Sprintf("== shop.talk instance %d (run %d), attempt 1 of 1, executor local:", in.ID, in.RunID)) ||
		!strings.Contains(got, "running") || !strings.Contains(got, "stdout| starting") || !strings.Contains(got, "stderr| warming up") {
		t.Errorf("header and first lines:\n%s", got)
	}
	// Let the command finish: the follow ends with it.
	if err := os.WriteFile(fifo, []byte("go\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != cli.ExitFailed { // the attempt failed (exit status 2)
			t.Errorf("ax logs -f: exit %d, want %d\n%s", code, cli.ExitFailed, errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("ax logs -f did not end with the attempt")
	}
	got := out.String()
	if !strings.Contains(got, "stdout| finished") || !strings.Contains(got, "failed (exit status 2)") {
		t.Errorf("after the end:\n%s", got)
	}
	if strings.Index(got, "warming up") > strings.Index(got, "finished") {
		t.Errorf("lines out of order:\n%s", got)
	}
}

// Both attempts of a command that failed and then succeeded are kept, in
// order, each with its exit status; binary output is shown escaped; the
// bad requests are clear 404s and 400s.
func TestLogsOfEachAttemptAndBadRequests(t *testing.T) {
	t.Parallel()
	e, _ := setupLogs(t)
	for _, task := range []string{"flaky", "binary", "sync"} {
		if code, body := e.Call("POST", "/api/v1/pipelines/shop/tasks/"+task+"/trigger", ""); code != http.StatusOK {
			t.Fatalf("trigger %s: %d %s", task, code, body)
		}
	}
	flaky := e.WaitState("shop.flaky", axtype.Success)
	bin := e.WaitState("shop.binary", axtype.Success)
	e.WaitState("shop.sync", axtype.Success)
	ax := func(want int, args ...string) string {
		t.Helper()
		code, out, errOut := runAx(t, append(args, "--server", e.Srv.URL)...)
		if code != want {
			t.Fatalf("ax %s: exit %d, want %d\n%s%s", strings.Join(args, " "), code, want, out, errOut)
		}
		return out + errOut
	}
	latest := ax(cli.ExitOK, "logs", "shop.flaky")
	first := ax(cli.ExitFailed, "logs", "shop.flaky", "--attempt", "1")
	for _, c := range []struct{ name, got, want string }{
		{"latest", latest, "attempt 2 of 2"}, {"latest", latest, "stdout| second"}, {"latest", latest, "success (exit status 0)"},
		{"first", first, "attempt 1 of 2"}, {"first", first, "stdout| first"}, {"first", first, "stderr| bad"}, {"first", first, "failed (exit status 3)"},
	} {
		if !strings.Contains(c.got, c.want) {
			t.Errorf("%s attempt: want %q in\n%s", c.name, c.want, c.got)
		}
	}
	if strings.Contains(latest, "first") || strings.Contains(first, "second") {
		t.Errorf("attempts mixed:\n%s\n%s", first, latest)
	}
	// Which executor ran each attempt: in the history and in explain.
	if out := ax(cli.ExitOK, "history", "shop.flaky"); !strings.Contains(out, "exit status 3: bad failed on local:") || !strings.Contains(out, "success on local:") {
		t.Errorf("history without the executor:\n%s", out)
	}
	if out := ax(cli.ExitOK, "explain", "shop.flaky"); strings.Count(out, fmt.Sprintf("(instance %d on local:", flaky.ID)) != 2 {
		t.Errorf("explain's last dispatches without the executor:\n%s", out)
	}
	// The JSON form: escaped binary, valid JSON.
	var page api.LogPage
	code, body := e.Call("GET", fmt.Sprintf("/api/v1/instances/%d/logs", bin.ID), "")
	if code != http.StatusOK {
		t.Fatalf("logs of binary: %d %s", code, body)
	}
	page = apitest.DecodeJSON[api.LogPage](t, body)
	if len(page.Lines) != 1 || page.Lines[0].Text != `ok\xff\x1b[31mred\x00` || page.Lines[0].Stream != "stdout" {
		t.Errorf("binary output shown as %+v", page.Lines)
	}
	if page.Status != "success" || page.ExitCode == nil || *page.ExitCode != 0 || !strings.HasPrefix(page.Executor, "local:") {
		t.Errorf("binary header %+v", page.LogHeader)
	}

	before := e.State()
	for _, c := range []struct {
		path string
		code int
		want string
	}{
		{fmt.Sprintf("/api/v1/instances/%d/logs?attempt=3", flaky.ID), 404, fmt.Sprintf("instance %d of shop.flaky has no attempt 3: it has had 2", flaky.ID)},
		{fmt.Sprintf("/api/v1/instances/%d/logs?task=shop.binary", flaky.ID), 404, fmt.Sprintf("instance %d is of task shop.flaky, not shop.binary", flaky.ID)},
		{"/api/v1/instances/999999/logs", 404, "instance 999999: no such instance (runs that ended before the retention horizon are pruned"},
		{fmt.Sprintf("/api/v1/instances/%d/logs?attempt=0", flaky.ID), 400, `attempt="0": give a whole number from 1`},
		{"/api/v1/instances/x/logs", 400, `instance "x": give an instance id`},
		{fmt.Sprintf("/api/v1/instances/%d/logs?task=shop.nope", flaky.ID), 400, `task="shop.nope": no such task`},
		{fmt.Sprintf("/api/v1/instances/%d/logs?atempt=1", flaky.ID), 400, `unknown query parameter "atempt"`},
	} {
		code, body := e.Call("GET", c.path, "")
		if code != c.code || !strings.Contains(apitest.DecodeJSON[map[string]string](t, body)["error"], c.want) {
			t.Errorf("GET %s: %d %s, want %d %q", c.path, code, body, c.code, c.want)
		}
	}
	// A function task with no output: an empty log with its header.
	out := ax(cli.ExitOK, "logs", "shop.sync")
	if !strings.Contains(out, "attempt 1 of 1") || !strings.Contains(out, "success") {
		t.Errorf("logs of a silent task:\n%s", out)
	}
	// The CLI: another task's instance, no instance at all.
	out = ax(cli.ExitFailed, "logs", "shop.binary", "--instance", fmt.Sprint(flaky.ID))
	if !strings.Contains(out, fmt.Sprintf("instance %d is of task shop.flaky, not shop.binary (HTTP 404)", flaky.ID)) {
		t.Errorf("another task's instance: %s", out)
	}
	out = ax(cli.ExitFailed, "logs", "shop.talk")
	if !strings.Contains(out, "shop.talk has no instance that ran yet") {
		t.Errorf("never ran: %s", out)
	}
	ax(cli.ExitUsage, "logs", "shop.talk", "--run", "1", "--instance", "2")
	if after := e.State(); after != before {
		t.Errorf("reading logs changed state:\n%s\n%s", before, after)
	}
}

// An HTTP executor built on the SDK returns what its function logged with
// the result; the scheduler stores it as the attempt's log, with the
// executor's address as the one that ran it.
func TestLogsOfAnSDKExecutor(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	apiAddr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	src := "pipeline: routed\ntimezone: UTC\nschedule: \"@every 1h\"\ntasks:\n  - {name: pull, http: \"http://127.0.0.1:1/dispatch\"}\n"
	if err := os.WriteFile(filepath.Join(dir, "routed.yaml"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "ax.db")
	srv := startServer(t, db, dir, "--listen", apiAddr)
	exsrv := httptest.NewUnstartedServer(nil)
	address := "http://" + exsrv.Listener.Addr().String()
	x, err := executor.New(executor.Config{Address: address, Scheduler: "http://" + apiAddr, Heartbeat: 500 * time.Millisecond, TokenFile: tokenFileOf(db), Client: http.DefaultClient},
		map[string]runner.Func{"pull": func(ctx context.Context, a runner.Attempt) error {
			runner.Logger(ctx).Info("loaded rows", "rows", 42)
			runner.Logger(ctx).Warn("slow source", "source", "orders\xff")
			return nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	exsrv.Config.Handler = x.Handler()
	exsrv.Start()
	defer exsrv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go x.Run(ctx)
	st := openStore(t, db)
	waitFor(t, func() bool { exs, _ := st.Executors(context.Background(), "routed.pull"); return len(exs) == 1 })
	waitPrimary(t, apiAddr)
	server := "http://" + apiAddr
	if code, out, errOut := runAx(t, "trigger", "routed.pull", "--server", server); code != cli.ExitOK {
		t.Fatalf("trigger: %d %s %s", code, out, errOut)
	}
	waitFor(t, func() bool {
		ins, _ := st.Instances(context.Background(), store.InstanceFilter{TaskID: "routed.pull", States: []axtype.State{axtype.Success}})
		return len(ins) == 1
	})
	code, out, errOut := runAx(t, "logs", "routed.pull", "--server", server)
	srv.stop(t)
	if code != cli.ExitOK {
		t.Fatalf("ax logs: %d %s %s", code, out, errOut)
	}
	for _, want := range []string{"executor " + address, `log   | time=`, `msg="loaded rows" rows=42`, `level=WARN msg="slow source" source="orders\\xff"`, "success"} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in:\n%s", want, out)
		}
	}
}

// Two servers on MariaDB: an attempt the primary ran has its output in the
// shared store, and the standby serves it (any server of an HA pair).
func TestStandbyServesLogsOfThePrimary(t *testing.T) {
	t.Parallel()
	target := "mysql://" + storetest.MySQLDSN(t)
	dir := t.TempDir()
	src := "pipeline: ha\ntimezone: UTC\nschedule: \"0 0 1 1 *\"\ntasks:\n  - {name: talk, command: [\"sh\", \"-c\", \"echo from the primary; echo careful >&2\"]}\n"
	if err := os.WriteFile(filepath.Join(dir, "ha.yaml"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	pa, pb := freeAddr(t), freeAddr(t)
	a := startServer(t, target, dir, "--holder", "a", "--listen", pa)
	st := openStore(t, target)
	waitFor(t, func() bool { l, err := st.GetLease(context.Background(), ""); return err == nil && l.Holder == "a" })
	b := startServer(t, target, dir, "--holder", "b", "--listen", pb)
	waitFor(t, func() bool { out, _ := os.ReadFile(b.log.Name()); return strings.Contains(string(out), "msg=standby") })
	waitPrimary(t, pa)
	if code, out, errOut := runAx(t, "trigger", "ha.talk", "--server", "http://"+pa); code != cli.ExitOK {
		t.Fatalf("trigger: %d %s %s", code, out, errOut)
	}
	waitFor(t, func() bool {
		ins, _ := st.Instances(context.Background(), store.InstanceFilter{TaskID: "ha.talk", States: []axtype.State{axtype.Success}})
		return len(ins) == 1
	})
	for _, args := range [][]string{{"logs", "ha.talk"}, {"logs", "ha.talk", "-f"}} {
		code, out, errOut := runAx(t, append(args, "--server", "http://"+pb)...)
		if code != cli.ExitOK {
			t.Fatalf("ax %v on the standby: %d %s %s", args, code, out, errOut)
		}
		for _, want := range []string{"attempt 1 of 1, executor local:", "stdout| from the primary", "stderr| careful", "success (exit status 0)"} {
			if !strings.Contains(out, want) {
				t.Errorf("ax %v on the standby: want %q in\n%s", args, want, out)
			}
		}
	}
	b.stop(t)
	a.stop(t)
}

// A scheduler killed (SIGKILL) while its command runs keeps the output the
// command printed before: it was stored within the second, and the next
// server serves it.
func TestCrashKeepsTheOutputWritten(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := "pipeline: crash\ntimezone: UTC\nschedule: \"0 0 1 1 *\"\ntasks:\n  - {name: talk, timeout: 1h, command: [\"sh\", \"-c\", \"echo before the crash; echo on stderr too >&2; sleep 60\"]}\n"
	if err := os.WriteFile(filepath.Join(dir, "crash.yaml"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "ax.db")
	pa := freeAddr(t)
	a := startServer(t, db, dir, "--holder", "a", "--listen", pa)
	st := openStore(t, db)
	waitPrimary(t, pa)
	if code, out, errOut := runAx(t, "trigger", "crash.talk", "--server", "http://"+pa); code != cli.ExitOK {
		t.Fatalf("trigger: %d %s %s", code, out, errOut)
	}
	var in axtype.Instance
	waitFor(t, func() bool {
		ins, _ := st.Instances(context.Background(), store.InstanceFilter{TaskID: "crash.talk", States: []axtype.State{axtype.Running}})
		if len(ins) != 1 {
			return false
		}
		in = ins[0]
		chunks, _ := st.LogChunks(context.Background(), in.ID, 1, 0, 0)
		var all []byte
		for _, c := range chunks {
			all = append(all, runner.Plain(c.Data)...)
		}
		return strings.Contains(string(all), "on stderr too")
	})
	a.crash(t)
	pb := freeAddr(t)
	b := startServer(t, db, dir, "--holder", "b", "--listen", pb, "--lease-ttl", "3s")
	waitFor(t, func() bool {
		resp, err := http.Get("http://" + pb + "/readyz")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	code, out, errOut := runAx(t, "logs", "crash.talk", "--server", "http://"+pb)
	b.stop(t)
	if code != cli.ExitOK {
		t.Fatalf("ax logs after the crash: %d %s %s", code, out, errOut)
	}
	for _, want := range []string{fmt.Sprintf("instance %d", in.ID), "stdout| before the crash", "stderr| on stderr too"} {
		if !strings.Contains(out, want) {
			t.Errorf("want %q in\n%s", want, out)
		}
	}
}

// --run 0, --instance 0 and --attempt 0 name nothing: they are refused as
// usage errors before any request, like --attempt -1, instead of silently
// meaning "the latest" (0 is no run, instance or attempt number).
func TestLogsRefusesZeroSelectors(t *testing.T) {
	t.Parallel()
	// Nothing listens here: a command that got past its flags would fail to
	// connect (exit 1), not exit 2.
	server := "http://127.0.0.1:1"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--attempt", "0"}, "--attempt 0: give an attempt number from 1"},
		{[]string{"--attempt", "-1"}, "--attempt -1: give an attempt number from 1"},
		{[]string{"--run", "0"}, "--run 0: give a run number from 1"},
		{[]string{"--run", "-2"}, "--run -2: give a run number from 1"},
		{[]string{"--instance", "0"}, "--instance 0: give an instance id from 1"},
		{[]string{"--instance", "-3"}, "--instance -3: give an instance id from 1"},
	} {
		args := append([]string{"logs", "shop.flaky", "--server", server}, c.args...)
		code, out, errOut := runAx(t, args...)
		if code != cli.ExitUsage || !strings.Contains(errOut, c.want) {
			t.Errorf("ax %s: exit %d, want %d with %q\n%s%s", strings.Join(args, " "), code, cli.ExitUsage, c.want, out, errOut)
		}
	}
}

// `ax logs TASK` shows the latest instance that ran, however many newer
// instances have not run (yet): scheduled ahead, paused, or failed without
// running behind a failed upstream. It used to look at the 50 newest only
// and say "has no instance that ran yet".
func TestLogsFindsTheLatestThatRanBehindManyThatDidNot(t *testing.T) {
	t.Parallel()
	e, _ := setupLogs(t)
	if code, body := e.Call("POST", "/api/v1/pipelines/shop/tasks/binary/trigger", ""); code != http.StatusOK {
		t.Fatalf("trigger: %d %s", code, body)
	}
	ran := e.WaitState("shop.binary", axtype.Success)
	ctx := context.Background()
	later := time.Now().Add(24 * time.Hour) // outside the wheel's window: they stay SCHEDULED
	for i := range 60 {
		at := later.Add(time.Duration(i) * time.Minute)
		if _, _, err := e.St.CreateRun(ctx, store.CreateRunParams{Pipeline: "shop", Trigger: "shop.binary", Kind: axtype.RunManual, LogicalTime: at, Now: time.Now(),
			Instances: []store.NewInstance{{TaskID: "shop.binary", Group: "etl", State: axtype.Scheduled, NextFireAt: at}}}); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errOut := runAx(t, "logs", "shop.binary", "--server", e.Srv.URL)
	if code != cli.ExitOK || !strings.Contains(out, fmt.Sprintf("== shop.binary instance %d (run %d), attempt 1 of 1", ran.ID, ran.RunID)) || !strings.Contains(out, `stdout| ok\xff\x1b[31mred\x00`) {
		t.Errorf("ax logs shop.binary: exit %d\n%s%s", code, out, errOut)
	}
	before := e.State()
	if code, body := e.Call("GET", "/api/v1/instances?task=shop.binary&ran=maybe", ""); code != http.StatusBadRequest || !strings.Contains(body, `ran=\"maybe\": give true or false`) {
		t.Errorf("ran=maybe: %d %s", code, body)
	}
	if after := e.State(); after != before {
		t.Errorf("a refused read changed state:\n%s\n%s", before, after)
	}
}

// A task added by a live reload: its logs are served with task=PIPELINE.TASK
// (what ax logs sends) like those of the tasks the server started with. The
// logs endpoint checked task= against the graph of the server's start and
// answered 400 "no such task" for it, while every other endpoint knew it.
func TestLogsOfATaskAddedByReload(t *testing.T) {
	t.Parallel()
	e, fifo := setupLogs(t)
	shop, errs := defs.Parse("shop.yaml", []byte(logsPipeline(fifo, filepath.Join(filepath.Dir(fifo), "mark"))), defs.Options{Now: time.Now()})
	if errs.Err() != nil {
		t.Fatal(errs)
	}
	extra, errs := defs.Parse("extra.yaml", []byte("pipeline: extra\ntimezone: UTC\ntasks:\n  - {name: hi, command: [\"echo\", \"hello from extra\"]}\n"), defs.Options{Now: time.Now()})
	if errs.Err() != nil {
		t.Fatal(errs)
	}
	g, errs := dag.Compile([]*defs.Pipeline{shop, extra}, dag.Options{Now: time.Now(), DispatchRate: -1})
	if errs.Err() != nil {
		t.Fatal(errs)
	}
	if _, err := e.Eng.Reload(g); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return e.Eng.Graph().Task("extra.hi") != nil })
	if code, body := e.Call("POST", "/api/v1/pipelines/extra/tasks/hi/trigger", ""); code != http.StatusOK {
		t.Fatalf("trigger extra.hi: %d %s", code, body)
	}
	// The test's executors were built for the first graph, so the command
	// fails as an unknown task here (ax server's know reloaded tasks); what
	// matters is an attempt of the new task, with its log.
	in := e.WaitState("extra.hi", axtype.Failed)
	code, body := e.Call("GET", fmt.Sprintf("/api/v1/instances/%d/logs?task=extra.hi", in.ID), "")
	if code != http.StatusOK || !strings.Contains(body, `"task": "extra.hi"`) || !strings.Contains(body, `"attempt": 1`) {
		t.Errorf("logs of extra.hi: %d %s", code, body)
	}
	code, out, errOut := runAx(t, "logs", "extra.hi", "--server", e.Srv.URL)
	if code != cli.ExitFailed || !strings.Contains(out, fmt.Sprintf("== extra.hi instance %d (run %d), attempt 1 of 1", in.ID, in.RunID)) {
		t.Errorf("ax logs extra.hi: exit %d\n%s%s", code, out, errOut)
	}
}

// `ax logs -f` of an attempt that has ended already prints its end once:
// the header says how it ended, and the stream's end event repeated it.
func TestLogsFollowOfAnEndedAttemptSaysItsEndOnce(t *testing.T) {
	t.Parallel()
	e, _ := setupLogs(t)
	if code, body := e.Call("POST", "/api/v1/pipelines/shop/tasks/binary/trigger", ""); code != http.StatusOK {
		t.Fatalf("trigger: %d %s", code, body)
	}
	e.WaitState("shop.binary", axtype.Success)
	code, out, errOut := runAx(t, "logs", "shop.binary", "-f", "--server", e.Srv.URL)
	if code != cli.ExitOK || strings.Count(out, "success (exit status 0)") != 1 || !strings.Contains(out, `stdout| ok\xff`) {
		t.Errorf("ax logs -f of an ended attempt: exit %d\n%s%s", code, out, errOut)
	}
}

// The logs of a task whose runs were pruned: ax logs says they were pruned,
// not that the task never ran; --run of a pruned run says the run is gone.
func TestLogsOfPrunedRunsSaySo(t *testing.T) {
	t.Parallel()
	e := setupAPI(t, apitest.Opts{Retain: 30 * 24 * time.Hour})
	old := endedRun(t, e.St, time.Now().Add(-40*24*time.Hour))
	if _, err := e.Eng.PrunePass(context.Background(), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.St.Run(context.Background(), old); err == nil {
		t.Fatalf("run %d was not pruned", old)
	}
	before := e.State()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"logs", "shop.sync"}, "shop.sync has no instance that ran left: runs that ended before the retention horizon are pruned, their logs with them"},
		{[]string{"logs", "shop.sync", "--run", fmt.Sprint(old)}, fmt.Sprintf("run %d: no such run (runs that ended before the retention horizon are pruned, their logs with them)", old)},
	} {
		code, out, errOut := runAx(t, append(c.args, "--server", e.Srv.URL)...)
		if code != cli.ExitFailed || !strings.Contains(errOut, c.want) {
			t.Errorf("ax %s: exit %d, want %d with %q\n%s%s", strings.Join(c.args, " "), code, cli.ExitFailed, c.want, out, errOut)
		}
	}
	if after := e.State(); after != before {
		t.Errorf("reading logs changed state:\n%s\n%s", before, after)
	}
}

// A task removed by a live reload keeps its instances, history and logs
// until retention prunes them, and they stay readable under its name: the
// API's task= filters of instances, history, actions and logs knew only the
// running set and answered 400 "no such task", and ax logs and ax history
// stopped at the removed pipeline's zone (404), even with --instance. A
// name that no definition ever had is still refused, changing nothing.
func TestLogsAndHistoryOfATaskRemovedByReload(t *testing.T) {
	t.Parallel()
	e, _ := setupLogs(t)
	if code, body := e.Call("POST", "/api/v1/pipelines/shop/tasks/binary/trigger", ""); code != http.StatusOK {
		t.Fatalf("trigger: %d %s", code, body)
	}
	ran := e.WaitState("shop.binary", axtype.Success)
	other, errs := defs.Parse("other.yaml", []byte("pipeline: other\ntimezone: UTC\ntasks:\n  - {name: x, function: noop}\n"), defs.Options{Now: time.Now()})
	if errs.Err() != nil {
		t.Fatal(errs)
	}
	g, errs := dag.Compile([]*defs.Pipeline{other}, dag.Options{Now: time.Now(), DispatchRate: -1})
	if errs.Err() != nil {
		t.Fatal(errs)
	}
	if _, err := e.Eng.Reload(g); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return e.Eng.Graph().Task("shop.binary") == nil })
	for _, path := range []string{
		fmt.Sprintf("/api/v1/instances/%d/logs?task=shop.binary", ran.ID),
		"/api/v1/instances?task=shop.binary",
		"/api/v1/instances?pipeline=shop",
		"/api/v1/history?task=shop.binary",
		"/api/v1/actions?task=shop.binary",
	} {
		if code, body := e.Call("GET", path, ""); code != http.StatusOK || !strings.Contains(body, fmt.Sprint(ran.ID)) {
			t.Errorf("GET %s after shop was removed: %d %s", path, code, body)
		}
	}
	header := fmt.Sprintf("== shop.binary instance %d (run %d), attempt 1 of 1", ran.ID, ran.RunID)
	for _, args := range [][]string{{"logs", "shop.binary"}, {"logs", "shop.binary", "--instance", fmt.Sprint(ran.ID)}} {
		code, out, errOut := runAx(t, append(args, "--server", e.Srv.URL)...)
		if code != cli.ExitOK || !strings.Contains(out, header) || !strings.Contains(out, `stdout| ok\xff\x1b[31mred\x00`) {
			t.Errorf("ax %s after shop was removed: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
	}
	if code, out, errOut := runAx(t, "history", "shop.binary", "--server", e.Srv.URL); code != cli.ExitOK || !strings.Contains(out, "RUNNING → SUCCESS") {
		t.Errorf("ax history shop.binary after shop was removed: exit %d\n%s%s", code, out, errOut)
	}
	// ax explain says what became of it (the engine explains removed
	// tasks; the API answered 404 "no pipeline" before reaching it).
	if code, out, errOut := runAx(t, "explain", "shop.binary", "--server", e.Srv.URL); code != cli.ExitOK || !strings.Contains(out, "task shop.binary was removed from the pipeline files") {
		t.Errorf("ax explain shop.binary after shop was removed: exit %d\n%s%s", code, out, errOut)
	}
	before := e.State()
	for _, path := range []string{
		fmt.Sprintf("/api/v1/instances/%d/logs?task=shop.nosuch", ran.ID),
		"/api/v1/instances?task=shop.nosuch",
		"/api/v1/instances?pipeline=nosuch",
		"/api/v1/history?task=nosuch.x",
	} {
		if code, body := e.Call("GET", path, ""); code != http.StatusBadRequest || !strings.Contains(body, "no such") {
			t.Errorf("GET %s: %d %s, want 400 naming what is missing", path, code, body)
		}
	}
	if code, _, errOut := runAx(t, "logs", "nosuch.x", "--server", e.Srv.URL); code != cli.ExitFailed || !strings.Contains(errOut, `task=\"nosuch.x\": no such task`) && !strings.Contains(errOut, `task="nosuch.x": no such task`) {
		t.Errorf("ax logs nosuch.x: exit %d %s", code, errOut)
	}
	if code, body := e.Call("GET", "/api/v1/pipelines/shop/tasks/nosuch/explain", ""); code != http.StatusNotFound || !strings.Contains(body, "no pipeline") {
		t.Errorf("explain of a task no definition ever had: %d %s, want 404", code, body)
	}
	if after := e.State(); after != before {
		t.Errorf("a refused read changed state:\n%s\n%s", before, after)
	}
}
