package engine

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// setupRouted is setup with HTTP tasks routed among the executors
// registered in the store (as ax server runs them); before runs on the
// store before the engine starts.
func setupRouted(t *testing.T, cfg Config, src string, before func(st *store.Store)) *env {
	t.Helper()
	return setupRoutedClient(t, cfg, &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}, src, before)
}

// setupRoutedClient is setupRouted with the HTTP client given.
func setupRoutedClient(t *testing.T, cfg Config, client *http.Client, src string, before func(st *store.Store)) *env {
	t.Helper()
	return setupRoutedCallback(t, cfg, client, "", src, before)
}

// setupRoutedCallback is setupRoutedClient in the asynchronous form when
// callback is set (results come back by callback, as ax server runs it).
func setupRoutedCallback(t *testing.T, cfg Config, client *http.Client, callback, src string, before func(st *store.Store)) *env {
	t.Helper()
	p, errs := defs.Parse("p.yaml", []byte(src), defs.Options{Now: time.Now()})
	if errs.Err() != nil {
		t.Fatalf("parse: %v", errs)
	}
	g, errs := dag.Compile([]*defs.Pipeline{p}, dag.Options{Now: time.Now(), DispatchRate: -1})
	if errs.Err() != nil {
		t.Fatalf("compile: %v", errs)
	}
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "ax.db"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if before != nil {
		before(st)
	}
	web := runner.NewRouted(runner.RoutedConfig{Client: client, Now: time.Now,
		URL: func(a runner.Attempt) (string, error) { return g.Task(a.Pipeline + "." + a.Task).Executor.URL, nil },
		Registry: func(ctx context.Context, task string) ([]runner.Endpoint, error) {
			exs, err := st.Executors(ctx, task)
			eps := make([]runner.Endpoint, len(exs))
			for i, x := range exs {
				eps[i] = runner.Endpoint{Address: x.Address, LastHeartbeat: x.LastHeartbeat}
			}
			return eps, err
		}})
	if callback != "" {
		web = web.WithCallback(callback)
	}
	cfg.Holder = "test"
	eng, err := New(cfg, st, g, Executors{defs.ExecHTTP: web})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &env{t: t, st: st, eng: eng, rec: &recorder{}, cancel: cancel, done: make(chan error, 1)}
	go func() { e.done <- eng.Run(ctx) }()
	synctest.Wait()
	return e
}

// TestExecutorNeverUpFailsAfterTimeoutAndRetries: an HTTP task whose only
// executor registered and then never answered is refused (unreachable) at
// every offer; each attempt gives up at its deadline and counts, the retry
// policy runs its course and the instance ends FAILED saying why. The sweep
// raises executor_lost once for the executor and no_executor once for the
// task. Before, it was "refused, offered again in 5 s" forever, with no alert.
func TestExecutorNeverUpFailsAfterTimeoutAndRetries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu     sync.Mutex
			alerts []Alert
		)
		sink := func(a Alert) { mu.Lock(); alerts = append(alerts, a); mu.Unlock() }
		start := time.Now()
		e := setupRouted(t, Config{OnAlert: sink, Grace: time.Millisecond}, `pipeline: dead
timezone: UTC
schedule: "0 0 1 6 *"
tasks:
  - {name: pull, http: "http://127.0.0.1:1/dispatch", timeout: 20s, retry: {count: 1, interval: 5s}}
`, func(st *store.Store) {
			if err := st.RegisterExecutor(context.Background(), store.RegisterParams{Address: "http://127.0.0.1:1", Protocol: "http",
				Tasks: []string{"dead.pull"}, Boot: "b1", Now: start}); err != nil {
				t.Fatal(err)
			}
		})
		if _, err := e.do(Trigger{Target: "dead.pull"}); err != nil {
			t.Fatal(err)
		}
		// Attempt 1 is refused from 0 s to its deadline at 20 s, retried at
		// 25 s; attempt 2 is refused until 45 s and fails for good.
		sleep(40 * time.Second)
		ins := e.instances(store.InstanceFilter{TaskID: "dead.pull"})
		if len(ins) != 1 || ins[0].State != axtype.Running && ins[0].State != axtype.Retrying || ins[0].Counted > 2 {
			t.Fatalf("at +40s: %+v, want attempt 2 still being offered", ins)
		}
		sleep(15 * time.Second)
		e.stop()
		ins = e.instances(store.InstanceFilter{TaskID: "dead.pull"})
		// Each refused offer is an attempt of its own; two count.
		if len(ins) != 1 || ins[0].State != axtype.Failed || ins[0].Counted != 2 || ins[0].Attempt <= 2 ||
			!strings.Contains(ins[0].Error, "no executor took it within its timeout of 20s") || !strings.Contains(ins[0].Error, "connection refused") {
			t.Fatalf("instance %+v, want FAILED after 2 attempts, saying no executor took it", ins)
		}
		var failedAt time.Time
		for _, h := range e.history("dead.pull") {
			if h.To == axtype.Failed {
				failedAt = h.At
			}
		}
		if got := failedAt.Sub(start); got < 45*time.Second || got > 46*time.Second {
			t.Errorf("failed at +%s, want +45s (two 20 s attempts, 5 s apart)", got)
		}
		mu.Lock()
		defer mu.Unlock()
		count := map[string]int{}
		for _, a := range alerts {
			count[a.Kind]++
			switch a.Kind {
			case AlertExecutorLost:
				if !strings.Contains(a.Message, "http://127.0.0.1:1 sent no heartbeat for 3") {
					t.Errorf("executor_lost: %+v", a)
				}
			case AlertNoExecutor:
				if a.Task != "dead.pull" || !strings.Contains(a.Message, "no live executor") {
					t.Errorf("no_executor: %+v", a)
				}
			}
		}
		if count[AlertExecutorLost] != 1 || count[AlertNoExecutor] != 1 || count[AlertTaskFailed] != 1 {
			t.Errorf("alerts %v, want executor_lost, no_executor and task_failed once each", count)
		}
		acts, _ := e.st.Actions(context.Background(), store.LogFilter{Action: AlertNoExecutor})
		if len(acts) != 1 {
			t.Errorf("no_executor in the action log %d times, want 1", len(acts))
		}
	})
}

// TestAcceptedDispatchCountsAsHeardFrom: an executor whose heartbeats did
// not land (the scheduler's store failed them, say) but which accepted a
// dispatch 8 s ago is not lost: the sweep failed that attempt over as "no
// heartbeat for 33s" while the executor ran it, and the retry ran beside
// it, both succeeding (seed 1090 of the simulator: a true double run).
// The executor is lost once silent for runner.Silence after the dispatch
// it accepted, and then its attempt fails over as before.
func TestAcceptedDispatchCountsAsHeardFrom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var (
			mu         sync.Mutex
			alerts     []Alert
			dispatches int
		)
		sink := func(a Alert) { mu.Lock(); alerts = append(alerts, a); mu.Unlock() }
		lost := func() (n int) {
			mu.Lock()
			defer mu.Unlock()
			for _, a := range alerts {
				if a.Kind == AlertExecutorLost {
					n++
				}
			}
			return n
		}
		accept := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			dispatches++
			mu.Unlock()
			return &http.Response{StatusCode: http.StatusAccepted, Header: http.Header{"Content-Type": {"application/json"}},
				Body: io.NopCloser(strings.NewReader(`{"accepted":true,"boot":"b1"}`)), Request: r}, nil
		})
		start := time.Now()
		e := setupRoutedCallback(t, Config{OnAlert: sink, Grace: time.Millisecond}, &http.Client{Transport: accept}, "http://ax/api/v1/results", `pipeline: hb
timezone: UTC
schedule: "0 0 1 6 *"
tasks:
  - {name: pull, http: "http://x/dispatch", timeout: 60s, retry: {count: 1, interval: 1s}}
`, func(st *store.Store) {
			if err := st.RegisterExecutor(context.Background(), store.RegisterParams{Address: "http://x", Protocol: "http",
				Tasks: []string{"hb.pull"}, Boot: "b1", Now: start}); err != nil {
				t.Fatal(err)
			}
		})
		sleep(25 * time.Second) // the last heartbeat that landed is 25 s old: x still gets work
		if _, err := e.do(Trigger{Target: "hb.pull"}); err != nil {
			t.Fatal(err)
		}
		sleep(20 * time.Second) // heartbeat 45 s old, dispatch accepted 20 s ago
		ins := e.instances(store.InstanceFilter{TaskID: "hb.pull"})
		mu.Lock()
		n := dispatches
		mu.Unlock()
		if len(ins) != 1 || ins[0].State != axtype.Running || ins[0].Attempt != 1 || n != 1 || lost() != 0 {
			e.stop()
			t.Fatalf("20 s after x accepted the dispatch: %+v, %d dispatch(es), %d executor_lost alert(s); want attempt 1 RUNNING on x, not failed over",
				ins, n, lost())
		}
		sleep(20 * time.Second) // 40 s since x was last heard from: lost
		ins = e.instances(store.InstanceFilter{TaskID: "hb.pull"})
		e.stop()
		if len(ins) != 1 || ins[0].State != axtype.Running || ins[0].Attempt != 2 || lost() != 1 {
			t.Fatalf("40 s after x was last heard from: %+v, %d executor_lost alert(s); want attempt 1 failed over and attempt 2 dispatched", ins, lost())
		}
		var reason string
		for _, h := range e.history("hb.pull") {
			if h.From == axtype.Running && h.To == axtype.Retrying && reason == "" {
				reason = h.Reason // the failover (the shutdown gives attempt 2 back after it)
			}
		}
		if !strings.Contains(reason, "executor http://x lost: no heartbeat for 3") {
			t.Errorf("failover reason %q, want x lost after 30-35 s without a heartbeat or an accepted dispatch", reason)
		}
	})
}
