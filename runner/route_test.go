package runner_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/runner/executor"
)

// sdk starts an SDK executor on loopback whose task "clean" counts its calls
// and blocks while block is open.
func sdk(t *testing.T, block chan struct{}) (string, *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	x, err := executor.New(executor.Config{Client: http.DefaultClient}, map[string]runner.Func{
		"clean": func(ctx context.Context, _ runner.Attempt) error {
			calls.Add(1)
			if block != nil {
				<-block
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(x.Handler())
	t.Cleanup(srv.Close)
	return srv.URL, &calls
}

type registry struct {
	mu  sync.Mutex
	eps []runner.Endpoint
}

func (r *registry) list(context.Context, string) ([]runner.Endpoint, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]runner.Endpoint(nil), r.eps...), nil
}

func (r *registry) beat(addr string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.eps {
		if r.eps[i].Address == addr {
			r.eps[i].LastHeartbeat = at
		}
	}
}

func attempt(ticket string) runner.Attempt {
	return runner.Attempt{Pipeline: "p", Task: "clean", Ticket: ticket, LogicalTime: time.Now(), Deadline: time.Now().Add(time.Minute)}
}

func TestRoundRobinSilenceAndRejoin(t *testing.T) {
	t.Parallel()
	a, callsA := sdk(t, nil)
	b, callsB := sdk(t, nil)
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	var clock atomic.Pointer[time.Time]
	clock.Store(&now)
	reg := &registry{eps: []runner.Endpoint{{Address: a, LastHeartbeat: now}, {Address: b, LastHeartbeat: now}}}
	r := runner.NewRouted(runner.RoutedConfig{Client: http.DefaultClient, Registry: reg.list,
		URL: func(runner.Attempt) (string, error) { return "http://127.0.0.1:1/never", nil },
		Now: func() time.Time { return *clock.Load() }})
	for i := range 4 {
		res, err := r.Execute(context.Background(), attempt("rr-"+string(rune('a'+i))))
		if err != nil || res.Status != runner.StatusSuccess {
			t.Fatalf("dispatch %d: %+v %v", i, res, err)
		}
	}
	if callsA.Load() != 2 || callsB.Load() != 2 {
		t.Errorf("round robin: a %d, b %d; want 2 and 2", callsA.Load(), callsB.Load())
	}
	// b falls silent: 31 simulated seconds later only a gets work.
	later := now.Add(31 * time.Second)
	clock.Store(&later)
	reg.beat(a, later)
	for i := range 3 {
		if res, _ := r.Execute(context.Background(), attempt("s-"+string(rune('a'+i)))); res.Status != runner.StatusSuccess {
			t.Fatalf("%+v", res)
		}
	}
	if callsA.Load() != 5 || callsB.Load() != 2 {
		t.Errorf("after silence: a %d, b %d", callsA.Load(), callsB.Load())
	}
	// b's next heartbeat brings it back.
	reg.beat(b, later)
	for i := range 2 {
		r.Execute(context.Background(), attempt("j-"+string(rune('a'+i))))
	}
	if callsB.Load() != 3 {
		t.Errorf("b did not rejoin: %d calls", callsB.Load())
	}
}

func TestFailoverOnRefusalAndAllRefuse(t *testing.T) {
	t.Parallel()
	block := make(chan struct{})
	defer close(block)
	a, callsA := sdk(t, block)
	b, callsB := sdk(t, nil)
	now := time.Now()
	reg := &registry{eps: []runner.Endpoint{{Address: a, LastHeartbeat: now}}}
	r := runner.NewRouted(runner.RoutedConfig{Client: http.DefaultClient, Registry: reg.list,
		URL: func(runner.Attempt) (string, error) { return "http://127.0.0.1:1/never", nil }})
	// a is busy with clean (blocked): a second clean is refused there (re-entrancy).
	go r.Execute(context.Background(), attempt("busy"))
	for callsA.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	res, _ := r.Execute(context.Background(), attempt("second"))
	if !res.Refused || res.Status != runner.StatusFailed {
		t.Errorf("with a alone and busy: %+v, want Refused", res)
	}
	// With b registered too, the refusal fails over to b.
	reg.mu.Lock()
	reg.eps = append(reg.eps, runner.Endpoint{Address: b, LastHeartbeat: now})
	reg.mu.Unlock()
	for i := range 2 { // whichever comes first in the rotation, b runs it
		res, _ = r.Execute(context.Background(), attempt("third-"+string(rune('a'+i))))
		if res.Status != runner.StatusSuccess {
			t.Errorf("failover: %+v", res)
		}
	}
	if callsB.Load() != 2 {
		t.Errorf("b ran %d, want 2", callsB.Load())
	}
}

func TestPlainURLWithoutRegistry(t *testing.T) {
	t.Parallel()
	a, calls := sdk(t, nil)
	r := runner.NewRouted(runner.RoutedConfig{Client: http.DefaultClient,
		Registry: func(context.Context, string) ([]runner.Endpoint, error) { return nil, nil },
		URL:      func(runner.Attempt) (string, error) { return a + "/dispatch", nil }})
	if res, _ := r.Execute(context.Background(), attempt("direct")); res.Status != runner.StatusSuccess || calls.Load() != 1 {
		t.Errorf("direct call: %+v, %d calls", res, calls.Load())
	}
}

// TestSilentExecutorKeepsItsWork: an asynchronous attempt on an executor
// that stops heart-beating is not failed over (silent is not dead: it may
// still run it); it stays in flight there, for the engine to ask the
// executor's /status about. No new work goes to the silent executor: not
// by rotation, and not by the task's own URL when that is its address —
// the attempt is refused, not sent. Before, Failover failed the attempt at
// once, and a task whose executors were all silent was sent to its URL.
func TestSilentExecutorKeepsItsWork(t *testing.T) {
	t.Parallel()
	block := make(chan struct{})
	defer close(block)
	a, calls := sdk(t, block)
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	var clock atomic.Pointer[time.Time]
	clock.Store(&now)
	reg := &registry{eps: []runner.Endpoint{{Address: a, LastHeartbeat: now}}}
	r := runner.NewRouted(runner.RoutedConfig{Client: http.DefaultClient, Registry: reg.list,
		URL: func(runner.Attempt) (string, error) { return a + "/dispatch", nil },
		Now: func() time.Time { return *clock.Load() }}).WithCallback("http://127.0.0.1:1/results")
	done := make(chan runner.Result, 1)
	go func() { res, _ := r.Execute(context.Background(), attempt("in-flight")); done <- res }()
	for calls.Load() == 0 || r.LastHeard(a, time.Time{}).IsZero() { // running there, and its acceptance heard
		time.Sleep(time.Millisecond)
	}
	later := now.Add(time.Minute) // a silent for a minute
	clock.Store(&later)
	if n := r.Failover(a, "", "executor lost: no heartbeat for 60s"); n != 0 {
		t.Errorf("failover of a silent executor failed %d attempts, want 0", n)
	}
	if got := r.InFlight(a); len(got) != 1 || got[0] != "in-flight" {
		t.Errorf("in flight on a: %v, want [in-flight]", got)
	}
	select {
	case res := <-done:
		t.Errorf("the attempt on the silent executor ended: %+v", res)
	case <-time.After(100 * time.Millisecond):
	}
	res, err := r.Execute(context.Background(), attempt("next"))
	if err != nil || !res.Refused || !strings.Contains(res.Error, "no live executor of p.clean") || calls.Load() != 1 {
		t.Errorf("a dispatch while a is silent: %+v %v, %d call(s); want refused, not sent", res, err, calls.Load())
	}
	// a registered for another task only: the task's URL is still its address.
	reg.mu.Lock()
	reg.eps = nil
	reg.mu.Unlock()
	every := func(_ context.Context, task string) ([]runner.Endpoint, error) {
		if task == "" {
			return []runner.Endpoint{{Address: a, LastHeartbeat: now}}, nil
		}
		return nil, nil
	}
	r2 := runner.NewRouted(runner.RoutedConfig{Client: http.DefaultClient, Registry: every,
		URL: func(runner.Attempt) (string, error) { return a + "/dispatch", nil },
		Now: func() time.Time { return *clock.Load() }})
	res, err = r2.Execute(context.Background(), attempt("by-url"))
	if err != nil || !res.Refused || !strings.Contains(res.Error, "is executor "+a+", which is excluded") || calls.Load() != 1 {
		t.Errorf("a dispatch to the task's URL, a's address, while a is silent: %+v %v, %d call(s); want refused, not sent", res, err, calls.Load())
	}
}
