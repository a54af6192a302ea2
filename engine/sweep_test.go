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
// every offer; the attempt gives up at its deadline and counts, and its
// retry is offered again while the executor may still be live. Once the
// executor is excluded (silent past runner.Silence) the retry is sent
// nowhere: it waits in the queue for an executor to be heard from, rather
// than being refused, counted and failed. The sweep raises executor_lost
// once for the executor and no_executor once for the task.
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
		// Attempt 1 is refused from 0 s to its deadline at 20 s and counts;
		// attempt 2, offered at 25 s and 30 s, is refused; from 30 s on the
		// executor is excluded and attempt 2 waits in the queue.
		sleep(40 * time.Second)
		ins := e.instances(store.InstanceFilter{TaskID: "dead.pull"})
		if len(ins) != 1 || ins[0].State != axtype.Running && ins[0].State != axtype.Retrying || ins[0].Counted > 2 {
			t.Fatalf("at +40s: %+v, want attempt 2 waiting", ins)
		}
		sleep(30 * time.Second)
		xp, err := e.eng.Explain(context.Background(), "dead.pull")
		if err != nil {
			t.Fatal(err)
		}
		e.stop()
		ins = e.instances(store.InstanceFilter{TaskID: "dead.pull"})
		if len(ins) != 1 || ins[0].State != axtype.Retrying || ins[0].Counted != 1 {
			t.Fatalf("instance %+v, want attempt 2 waiting (RETRYING, not counted) for a live executor", ins)
		}
		var lastStart time.Time
		failures := 0
		for _, h := range e.history("dead.pull") {
			if h.To == axtype.Running {
				lastStart = h.At
			}
			if strings.Contains(h.Reason, "retry 1 of 1") {
				failures++
				if !strings.Contains(h.Reason, "no executor took it within its timeout of 20s") || !strings.Contains(h.Reason, "connection refused") {
					t.Errorf("attempt 1's failure %q, want it saying no executor took it", h.Reason)
				}
			}
		}
		if failures != 1 {
			t.Errorf("%d counted failure(s), want 1 (attempt 1, at its deadline)", failures)
		}
		if got := lastStart.Sub(start); got > 31*time.Second {
			t.Errorf("last dispatch at +%s, want none after the executor was excluded at +30s", got)
		}
		if !strings.Contains(xp.Verdict, "no live executor of dead.pull") {
			t.Errorf("explain: verdict %q, want it waiting for a live executor", xp.Verdict)
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
		if count[AlertExecutorLost] != 1 || count[AlertNoExecutor] != 1 || count[AlertTaskFailed] != 0 {
			t.Errorf("alerts %v, want executor_lost and no_executor once each, no task_failed", count)
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
// it accepted; its attempt still stays RUNNING under its ticket (it may
// still run it: silent is not dead).
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
			if strings.HasSuffix(r.URL.Path, "/dispatch") {
				dispatches++
			}
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
		mu.Lock()
		n = dispatches
		mu.Unlock()
		if len(ins) != 1 || ins[0].State != axtype.Running || ins[0].Attempt != 1 || n != 1 || lost() != 1 {
			t.Fatalf("40 s after x was last heard from: %+v, %d dispatch(es), %d executor_lost alert(s); want x lost and attempt 1 still RUNNING, not retried",
				ins, n, lost())
		}
	})
}
