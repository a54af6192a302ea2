package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/cli"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/runner/executor"
	"github.com/ax-sched/ax/store"
)

func TestServerRoutesToRegisteredExecutor(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	apiAddr := ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	src := "pipeline: routed\ntimezone: UTC\nschedule: \"@every 1s\"\ntasks:\n  - {name: pull, http: \"http://127.0.0.1:1/dispatch\"}\n"
	if err := os.WriteFile(filepath.Join(dir, "routed.yaml"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "ax.db")
	srv := startServerEnv(t, []string{"AX_EXECUTOR_TOKEN=shared-secret"}, db, dir, "--listen", apiAddr)
	calls := make(chan string, 100)
	serveSDK(t, executor.Config{Scheduler: "http://" + apiAddr, Heartbeat: 500 * time.Millisecond, Token: "shared-secret"},
		map[string]runner.Func{"pull": func(_ context.Context, a runner.Attempt) error { calls <- a.Ticket; return nil }})
	st := openStore(t, db)
	waitFor(t, func() bool {
		ins, _ := st.Instances(context.Background(), store.InstanceFilter{TaskID: "routed.pull", States: []axtype.State{axtype.Success}})
		return len(ins) >= 3
	})
	srv.stop(t)
	if len(calls) < 3 {
		t.Errorf("the registered executor ran %d attempts", len(calls))
	}
}

// routedSetup runs a real ax server with the API and an SDK executor
// registered with it, serving a task "hold" that blocks until released or
// cancelled.
func routedSetup(t *testing.T, schedule string) (db, apiAddr string, st *store.Store, srv *server, cancelled chan string, release chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	apiAddr = ln.Addr().String()
	ln.Close()
	dir := t.TempDir()
	src := fmt.Sprintf("pipeline: routed\ntimezone: UTC\nschedule: %q\ntasks:\n  - {name: hold, http: \"http://127.0.0.1:1/dispatch\", timeout: 1m}\n", schedule)
	if err := os.WriteFile(filepath.Join(dir, "routed.yaml"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	db = filepath.Join(t.TempDir(), "ax.db")
	srv = startServer(t, db, dir, "--listen", apiAddr)
	cancelled, release = make(chan string, 10), make(chan struct{})
	exsrv := httptest.NewUnstartedServer(nil)
	x, err := executor.New(executor.Config{Address: "http://" + exsrv.Listener.Addr().String(), Scheduler: "http://" + apiAddr,
		Heartbeat: 500 * time.Millisecond, Client: http.DefaultClient, TokenFile: tokenFileOf(db)},
		map[string]runner.Func{"hold": func(ctx context.Context, a runner.Attempt) error {
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				cancelled <- a.Ticket
				return ctx.Err()
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	exsrv.Config.Handler = x.Handler()
	exsrv.Start()
	t.Cleanup(exsrv.Close)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go x.Run(ctx)
	return db, apiAddr, openStore(t, db), srv, cancelled, release
}

// TestKillReachesTheExecutor: ax kill of an http task cancels the work on
// the SDK executor and the instance ends KILLED.
func TestKillReachesTheExecutor(t *testing.T) {
	t.Parallel()
	db, _, st, srv, cancelled, _ := routedSetup(t, "@every 1h")
	waitFor(t, func() bool { exs, _ := st.Executors(context.Background(), "routed.hold"); return len(exs) == 1 })
	if code, out, errOut := runAx(t, "trigger", "routed.hold", "--store", db); code != cli.ExitOK {
		t.Fatalf("trigger: %d %s %s", code, out, errOut)
	}
	waitFor(t, func() bool {
		ins, _ := st.Instances(context.Background(), store.InstanceFilter{TaskID: "routed.hold", States: []axtype.State{axtype.Running}})
		return len(ins) == 1
	})
	if code, out, errOut := runAx(t, "kill", "routed.hold", "--store", db); code != cli.ExitOK {
		t.Fatalf("kill: %d %s %s", code, out, errOut)
	}
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the executor's work was not cancelled")
	}
	waitFor(t, func() bool {
		ins, _ := st.Instances(context.Background(), store.InstanceFilter{TaskID: "routed.hold", States: []axtype.State{axtype.Killed}})
		return len(ins) == 1
	})
	srv.stop(t)
}

// TestResultAppliedOnce: a result delivered a second time (an executor's
// retry after a lost acknowledgement) is recorded and ignored.
func TestResultAppliedOnce(t *testing.T) {
	t.Parallel()
	db, apiAddr, st, srv, _, release := routedSetup(t, "@every 1h")
	close(release)
	waitFor(t, func() bool { exs, _ := st.Executors(context.Background(), "routed.hold"); return len(exs) == 1 })
	if code, _, errOut := runAx(t, "trigger", "routed.hold", "--store", db); code != cli.ExitOK {
		t.Fatalf("trigger: %s", errOut)
	}
	var done axtype.Instance
	waitFor(t, func() bool {
		ins, _ := st.Instances(context.Background(), store.InstanceFilter{TaskID: "routed.hold", States: []axtype.State{axtype.Success}})
		if len(ins) == 1 {
			done = ins[0]
		}
		return len(ins) == 1
	})
	again := fmt.Sprintf(`{"ticket":%q,"status":"failed","error":"late duplicate"}`, done.Ticket)
	tok, err := runner.ReadTokenFile(tokenFileOf(db))
	if err != nil {
		t.Fatal(err)
	}
	if code, body := postResultWith(t, apiAddr, tok, again); code != 200 {
		t.Fatalf("second delivery: %d %s", code, body)
	}
	waitFor(t, func() bool {
		acts, _ := st.Actions(context.Background(), store.LogFilter{Action: "stale_result"})
		return len(acts) == 1 && acts[0].Ticket == done.Ticket
	})
	if in, _ := st.Instance(context.Background(), done.ID); in.State != axtype.Success || in.Version != done.Version {
		t.Errorf("the duplicate changed the instance: %+v", in)
	}
	if code, _ := postResultWith(t, apiAddr, tok, `{"ticket":"x","status":"maybe"}`); code != 400 {
		t.Errorf("malformed result: %d", code)
	}
	srv.stop(t)
}
