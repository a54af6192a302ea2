package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/cli"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/runner/executor"
	"github.com/ax-sched/ax/store"
)

// sdkOn runs an SDK executor serving fn as task name on addr, registered
// with the scheduler at api (authenticated by the token of tokenFile), until the returned stop is called; answered,
// when not nil, hears of each dispatch answered.
func sdkOn(t *testing.T, addr, api, tokenFile, name string, fn runner.Func, answered chan struct{}) (stop func()) {
	t.Helper()
	x, err := executor.New(executor.Config{Address: "http://" + addr, Scheduler: "http://" + api, Heartbeat: 500 * time.Millisecond,
		TokenFile: tokenFile, Client: &http.Client{Timeout: 5 * time.Second}}, map[string]runner.Func{name: fn})
	if err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if ln, err = net.Listen("tcp", addr); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	h := x.Handler()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r)
		if r.URL.Path == "/dispatch" {
			select {
			case answered <- struct{}{}:
			default:
			}
		}
	})}
	go srv.Serve(ln)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { x.Run(ctx); close(done) }()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cancel()
			shut, stopShut := context.WithTimeout(context.Background(), 5*time.Second)
			defer stopShut()
			_ = srv.Shutdown(shut) // answers already written go out; then nothing is served
			<-done
		}
	}
	t.Cleanup(stop)
	return stop
}

// TestExecutorRestartBetweenDispatchAndResult: the executor running an
// attempt restarts (its process, and the work, are gone) and registers again
// with a new boot id. The scheduler's sweep notices and fails the attempt at
// once, saying why, and the retry runs on the restarted executor: the
// instance succeeds at attempt 2, long before the attempt's 10-minute
// timeout that it used to wait for.
func TestExecutorRestartBetweenDispatchAndResult(t *testing.T) {
	t.Parallel()
	api, exAddr := freeAddr(t), freeAddr(t)
	dir := t.TempDir()
	src := "pipeline: rs\ntimezone: UTC\nschedule: \"@every 1h\"\ntasks:\n  - {name: job, http: \"http://127.0.0.1:1/dispatch\", timeout: 10m, retry: {count: 2, interval: 1s}}\n"
	if err := os.WriteFile(filepath.Join(dir, "rs.yaml"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "ax.db")
	srv := startServer(t, db, dir, "--listen", api)
	st := openStore(t, db)
	started, answered := make(chan string, 10), make(chan struct{}, 10)
	stop := sdkOn(t, exAddr, api, tokenFileOf(db), "job", func(ctx context.Context, a runner.Attempt) error {
		started <- a.Ticket
		<-ctx.Done() // runs until the process goes away
		return ctx.Err()
	}, answered)
	waitFor(t, func() bool { exs, _ := st.Executors(context.Background(), "rs.job"); return len(exs) == 1 })
	waitPrimary(t, api)
	if code, out, errOut := runAx(t, "trigger", "rs.job", "--server", "http://"+api); code != cli.ExitOK {
		t.Fatalf("trigger: %d %s %s", code, out, errOut)
	}
	var first string
	select {
	case first = <-started:
		<-answered // accepted (202)
	case <-time.After(20 * time.Second):
		t.Fatal("the attempt never started on the executor")
	}
	stop()                                                                                                               // the executor process ends with the attempt in flight …
	sdkOn(t, exAddr, api, tokenFileOf(db), "job", func(ctx context.Context, a runner.Attempt) error { return nil }, nil) // … and starts again
	var in axtype.Instance
	waitFor(t, func() bool {
		ins, _ := st.Instances(context.Background(), store.InstanceFilter{TaskID: "rs.job"})
		if len(ins) == 1 {
			in = ins[0]
		}
		return in.State == axtype.Success
	})
	if in.Counted != 2 || in.Attempt < 2 || in.Ticket == first {
		t.Errorf("instance %+v: want success at its retry (2 attempts counted) with a new ticket", in)
	}
	hist, _ := st.History(context.Background(), store.LogFilter{InstanceID: in.ID})
	var why []string
	for _, h := range hist {
		why = append(why, fmt.Sprintf("%s>%s %s", h.From, h.To, h.Reason))
	}
	if !strings.Contains(strings.Join(why, "\n"), "restarted (registered again as") {
		t.Errorf("history does not say the executor restarted:\n%s", strings.Join(why, "\n"))
	}
	srv.stop(t)
}
