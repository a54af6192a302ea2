package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// do applies req, made by by (at most one; none: the default operator).
func (e *env) do(req Request, by ...By) (string, error) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var who By
	if len(by) > 0 {
		who = by[0]
	}
	return e.eng.Do(ctx, req, who)
}

// states returns "logical:STATE" of a task's instances, oldest first.
func (e *env) states(task string, start time.Time) string {
	e.t.Helper()
	var out []string
	for _, in := range e.instances(store.InstanceFilter{TaskID: task, ByLogicalTime: true, LogicalTo: time.Now()}) {
		out = append(out, fmt.Sprintf("%s:%s", in.LogicalTime.Sub(start), in.State))
	}
	return strings.Join(out, " ")
}

func (e *env) actions(kind string) []store.Action {
	e.t.Helper()
	a, err := e.st.Actions(context.Background(), store.LogFilter{Action: kind, Limit: 1000})
	if err != nil {
		e.t.Fatal(err)
	}
	return a
}

func transitionsOf(e *env, id int64) string {
	var out []string
	h, _ := e.st.History(context.Background(), store.LogFilter{InstanceID: id})
	for _, r := range h {
		out = append(out, string(r.To))
	}
	return strings.Join(out, ">")
}

func TestTimeoutThenRetrySucceeds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		first := true
		hang := map[string]func(context.Context, runner.Attempt) error{
			"r.a": func(ctx context.Context, _ runner.Attempt) error {
				if first {
					first = false
					<-ctx.Done() // cooperative: stops at the deadline
					return ctx.Err()
				}
				return nil
			},
		}
		e := setup(t, Config{}, hang, "pipeline: r\ntimezone: UTC\nschedule: \"@every 1h\"\ntasks:\n  - {name: a, function: record, timeout: 5s, retry: {count: 2, interval: 10s}}\n")
		sleep(time.Hour + 20*time.Second)
		e.stop()
		in := e.instances(store.InstanceFilter{TaskID: "r.a"})
		if len(in) != 1 || in[0].State != axtype.Success || in[0].Attempt != 2 {
			t.Fatalf("instance %+v", in)
		}
		if got := transitionsOf(e, in[0].ID); got != "SCHEDULED>RUNNING>RETRYING>RUNNING>SUCCESS" {
			t.Errorf("history %s", got)
		}
		calls := e.rec.snapshot()
		if len(calls) != 2 || calls[1].at.Sub(start) != time.Hour+15*time.Second {
			t.Errorf("calls at %v; want the retry 10 s after the 5 s timeout", calls)
		}
		if a := e.actions("timeout"); len(a) != 1 || a[0].Actor != Actor || !strings.Contains(a[0].Reason, "retry 1 of 2") {
			t.Errorf("timeout action %+v", a)
		}
	})
}

func TestTimeoutRetriesExhaustedAndLateResultIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stubborn := map[string]func(context.Context, runner.Attempt) error{
			"r.a": func(context.Context, runner.Attempt) error { time.Sleep(30 * time.Second); return nil }, // ignores its context
		}
		e := setup(t, Config{}, stubborn, "pipeline: r\ntimezone: UTC\nschedule: \"@every 1h\"\ntasks:\n  - {name: a, function: record, timeout: 5s}\n")
		sleep(time.Hour + 40*time.Second)
		e.stop()
		in := e.instances(store.InstanceFilter{TaskID: "r.a"})
		if len(in) != 1 || in[0].State != axtype.Failed || !strings.Contains(in[0].Error, "deadline exceeded") && !strings.Contains(in[0].Error, "timeout") {
			t.Fatalf("instance %+v", in)
		}
		// The executor's answer, 30 s later (a timeout: it ran past its deadline),
		// comes for a ticket that is no longer current.
		if a := e.actions("stale_result"); len(a) != 1 || a[0].InstanceID != in[0].ID || a[0].Detail != "timeout" || a[0].Ticket != in[0].Ticket {
			t.Errorf("stale results %+v", a)
		}
		if got := transitionsOf(e, in[0].ID); got != "SCHEDULED>RUNNING>FAILED" {
			t.Errorf("history %s", got)
		}
	})
}

func TestBreakerCutsRateAndRecovers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		failing := true
		fns := map[string]func(context.Context, runner.Attempt) error{
			"b.flaky": func(context.Context, runner.Attempt) error {
				if failing {
					return errors.New("downstream 503")
				}
				return nil
			},
		}
		e := setup(t, Config{Breaker: breakerCfg(4)}, fns, "pipeline: b\ntimezone: UTC\nschedule: \"@yearly\"\ntasks:\n  - {name: flaky, function: record}\n")
		burst := func(n int) time.Duration {
			t.Helper()
			from := len(e.rec.snapshot())
			t0 := time.Now()
			for range n {
				if _, err := e.do(Trigger{Target: "b.flaky"}, By{Actor: "operator:test"}); err != nil {
					t.Fatal(err)
				}
			}
			for len(e.rec.snapshot()) < from+n {
				sleep(100 * time.Millisecond)
			}
			return time.Since(t0)
		}
		// Below the minimum sample the breaker stays closed: runs go at once.
		if d := burst(3); d > time.Second {
			t.Errorf("3 runs with the breaker closed took %s", d)
		}
		burst(1) // the 4th failure opens it
		sleep(time.Second)
		if a := e.actions("breaker_open"); len(a) != 1 || a[0].Reason != "alert" || !strings.Contains(a[0].Detail, "4 of 4 outcomes failed") {
			t.Fatalf("breaker_open actions %+v", a)
		}
		// Open: a tenth, rounded up, of the 4 dispatches it made in the
		// window before: one per 5 minutes, so 10 runs take 45 minutes.
		if d := burst(10); d < 44*time.Minute || d > 46*time.Minute {
			t.Errorf("10 runs with the breaker open took %s, want about 45 m (one per 5 m)", d)
		}
		failing = false
		burst(25) // successes bring the failure rate back to 50 %
		if a := e.actions("breaker_closed"); len(a) != 1 || a[0].Reason != "recovered" {
			t.Errorf("breaker_closed actions %+v", a)
		}
		if d := burst(10); d > time.Second {
			t.Errorf("10 runs after recovery took %s", d)
		}
		e.stop()
	})
}

func TestPauseGroupLeavesOthersRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		e := setup(t, Config{}, nil,
			"pipeline: p1\ngroup: etl\ntimezone: UTC\nschedule: \"@every 10s\"\ntasks:\n  - {name: a, function: record}\n",
			"pipeline: p2\ngroup: web\ntimezone: UTC\nschedule: \"@every 10s\"\ntasks:\n  - {name: a, function: record}\n")
		sleep(15 * time.Second)
		msg, err := e.do(Pause{Scope: store.ScopeGroup, Target: "etl"}, By{Actor: "operator:ann", Reason: "db maintenance"})
		if err != nil || !strings.Contains(msg, "paused group etl") {
			t.Fatalf("pause: %q, %v", msg, err)
		}
		sleep(20 * time.Second)
		if got := e.states("p1.a", start); got != "10s:SUCCESS 20s:PAUSED 30s:PAUSED" {
			t.Errorf("etl: %s", got)
		}
		if got := e.states("p2.a", start); got != "10s:SUCCESS 20s:SUCCESS 30s:SUCCESS" {
			t.Errorf("web: %s", got)
		}
		if a := e.actions("pause"); len(a) != 1 || a[0].Actor != "operator:ann" || a[0].Reason != "db maintenance" {
			t.Errorf("pause action %+v", a)
		}
		if _, err := e.do(Pause{Scope: store.ScopeGroup, Target: "etl"}); err == nil || !strings.Contains(err.Error(), "paused already (by operator:ann") {
			t.Errorf("pausing twice: %v", err)
		}
		e.stop()
	})
}

func TestPauseWhileRunningFinishesThenNoFire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		slow := map[string]func(context.Context, runner.Attempt) error{
			"s.a": func(context.Context, runner.Attempt) error { time.Sleep(5 * time.Second); return nil },
		}
		e := setup(t, Config{}, slow, "pipeline: s\ntimezone: UTC\nschedule: \"@every 10s\"\ntasks:\n  - {name: a, function: record}\n")
		sleep(12 * time.Second) // a@10 runs until +15s
		msg, err := e.do(Pause{Scope: store.ScopeTask, Target: "s.a"}, By{Actor: "operator:ann"})
		if err != nil || !strings.Contains(msg, "1 running instance(s) will finish") {
			t.Fatalf("pause: %q, %v", msg, err)
		}
		sleep(30 * time.Second)
		e.stop()
		if got := e.states("s.a", start); got != "10s:SUCCESS 20s:PAUSED 30s:PAUSED 40s:PAUSED" {
			t.Errorf("states %s", got)
		}
		if n := len(e.rec.snapshot()); n != 1 {
			t.Errorf("%d executions, want 1", n)
		}
	})
}

func TestResumeWithEachMisfirePolicy(t *testing.T) {
	for _, tc := range []struct{ policy, want string }{
		{"fire_once", "10s:FAILED 20s:FAILED 30:SUCCESS"},
		{"skip", "10s:FAILED 20s:FAILED 30:FAILED"},
		{"fire_all", "10s:SUCCESS 20s:SUCCESS 30:SUCCESS"},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				e := setup(t, Config{MisfireAfter: time.Second}, nil,
					fmt.Sprintf("pipeline: m\ntimezone: UTC\nschedule: \"@every 10s\"\nmisfire: %s\ntasks:\n  - {name: a, function: record}\n", tc.policy))
				if _, err := e.do(Pause{Scope: store.ScopePipeline, Target: "m"}); err != nil {
					t.Fatal(err)
				}
				sleep(35 * time.Second) // fires at 10, 20, 30 pass while paused
				msg, err := e.do(Resume{Scope: store.ScopePipeline, Target: "m"}, By{Actor: "operator:ann"})
				if err != nil {
					t.Fatal(err)
				}
				sleep(2 * time.Second)
				e.stop()
				got := strings.Replace(e.states("m.a", start), "30s:", "30:", 1)
				if !strings.HasPrefix(got, tc.want) {
					t.Errorf("after resume (%s): %s, want %s", msg, got, tc.want)
				}
				if a := e.actions("misfire"); len(a) != 1 || a[0].Reason != tc.policy {
					t.Errorf("misfire actions %+v", a)
				}
				for _, in := range e.instances(store.InstanceFilter{TaskID: "m.a", States: []axtype.State{axtype.Failed}}) {
					if !strings.Contains(in.Error, "skipped by misfire policy "+tc.policy) {
						t.Errorf("failed instance without the reason: %+v", in)
					}
				}
			})
		})
	}
}

func TestRunNowBesideRunningPeriodicInstance(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := map[string]func(context.Context, runner.Attempt) error{
			"n.a": func(context.Context, runner.Attempt) error { time.Sleep(10 * time.Second); return nil },
		}
		e := setup(t, Config{}, slow, "pipeline: n\ntimezone: UTC\nschedule: \"@every 1h\"\ntasks:\n  - {name: a, function: record}\n")
		sleep(time.Hour + 2*time.Second) // the periodic instance is RUNNING
		msg, err := e.do(Trigger{Target: "n.a"}, By{Actor: "operator:ann", Reason: "data fixed"})
		if err != nil || !strings.Contains(msg, "started for n.a") {
			t.Fatalf("trigger: %q, %v", msg, err)
		}
		sleep(time.Second)
		running := e.instances(store.InstanceFilter{TaskID: "n.a", States: []axtype.State{axtype.Running}})
		if len(running) != 2 || running[0].Ticket == running[1].Ticket {
			t.Fatalf("running instances %+v, want two with distinct tickets", running)
		}
		sleep(15 * time.Second)
		e.stop()
		done := e.instances(store.InstanceFilter{TaskID: "n.a", States: []axtype.State{axtype.Success}})
		if len(done) != 2 || done[0].RunID == done[1].RunID {
			t.Fatalf("succeeded %+v", done)
		}
		for _, in := range done {
			h, _ := e.st.History(context.Background(), store.LogFilter{InstanceID: in.ID})
			last := h[len(h)-1]
			if last.To != axtype.Success || last.Ticket != in.Ticket {
				t.Errorf("instance %d: result applied with ticket %s, its ticket is %s", in.ID, last.Ticket, in.Ticket)
			}
		}
		calls := e.rec.snapshot()
		if len(calls) != 2 || calls[0].ticket == calls[1].ticket {
			t.Errorf("calls %+v", calls)
		}
	})
}

func TestKillThenRerun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		block := true
		fns := map[string]func(context.Context, runner.Attempt) error{
			"k.a": func(ctx context.Context, _ runner.Attempt) error {
				if block {
					<-ctx.Done()
					return context.Cause(ctx)
				}
				return nil
			},
		}
		e := setup(t, Config{}, fns, "pipeline: k\ntimezone: UTC\nschedule: \"@every 1h\"\ntasks:\n  - {name: a, function: record, timeout: 10m}\n  - {name: b, depends_on: [a], function: record}\n")
		sleep(time.Hour + time.Second)
		if _, err := e.do(Kill{Target: "k.a"}, By{Actor: "operator:ann"}); err != nil {
			t.Fatal(err)
		}
		sleep(time.Second)
		a := e.instances(store.InstanceFilter{TaskID: "k.a"})
		if len(a) != 1 || a[0].State != axtype.Killed {
			t.Fatalf("after kill: %+v", a)
		}
		if _, err := e.do(Kill{Instance: a[0].ID}); err == nil || !strings.Contains(err.Error(), "is KILLED, not RUNNING: nothing to kill") {
			t.Errorf("killing a killed instance: %v", err)
		}
		block = false
		msg, err := e.do(Rerun{Target: "k.a"}, By{Actor: "operator:ann"})
		if err != nil {
			t.Fatal(err)
		}
		sleep(2 * time.Second)
		e.stop()
		if got := transitionsOf(e, a[0].ID); got != "SCHEDULED>RUNNING>KILLED>WAITING>SCHEDULED>RUNNING>SUCCESS" {
			t.Errorf("history %s (%s)", got, msg)
		}
		if b := e.instances(store.InstanceFilter{TaskID: "k.b"}); len(b) != 1 || b[0].State != axtype.Success {
			t.Errorf("downstream after the rerun: %+v", b)
		}
		// The refused second kill wrote nothing (R48), not even an action row.
		if k := e.actions("kill"); len(k) != 1 || k[0].Actor != "operator:ann" {
			t.Errorf("kill actions %+v", k)
		}
	})
}

func TestRerunFailedGoesStraightToRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fail := true
		fns := map[string]func(context.Context, runner.Attempt) error{
			"f.a": func(context.Context, runner.Attempt) error {
				if fail {
					return errors.New("boom")
				}
				return nil
			},
		}
		e := setup(t, Config{}, fns, "pipeline: f\ntimezone: UTC\nschedule: \"@every 1h\"\ntasks:\n  - {name: a, function: record}\n")
		sleep(time.Hour + time.Second)
		in := e.instances(store.InstanceFilter{TaskID: "f.a"})
		if len(in) != 1 || in[0].State != axtype.Failed {
			t.Fatalf("%+v", in)
		}
		fail = false
		if _, err := e.do(Rerun{Run: in[0].RunID}); err != nil {
			t.Fatal(err)
		}
		sleep(time.Second)
		if got := transitionsOf(e, in[0].ID); got != "SCHEDULED>RUNNING>FAILED>RUNNING>SUCCESS" {
			t.Errorf("history %s", got)
		}
		// Rerun of a succeeded instance: SUCCESS → SCHEDULED.
		if _, err := e.do(Rerun{Instance: in[0].ID}); err != nil {
			t.Fatal(err)
		}
		sleep(time.Second)
		e.stop()
		if got := transitionsOf(e, in[0].ID); got != "SCHEDULED>RUNNING>FAILED>RUNNING>SUCCESS>SCHEDULED>RUNNING>SUCCESS" {
			t.Errorf("history after the second rerun %s", got)
		}
	})
}

func TestOverlapPolicies(t *testing.T) {
	for _, tc := range []struct{ policy, want string }{
		{"skip", "10s:SUCCESS 20s:FAILED 30s:SUCCESS 40s:FAILED"},
		{"wait", "10s:SUCCESS 20s:SUCCESS 30s:RUNNING 40s:SCHEDULED"}, // each waits for the one before
	} {
		t.Run(tc.policy, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				slow := map[string]func(context.Context, runner.Attempt) error{
					"o.a": func(context.Context, runner.Attempt) error { time.Sleep(15 * time.Second); return nil },
				}
				e := setup(t, Config{}, slow, fmt.Sprintf("pipeline: o\ntimezone: UTC\nschedule: \"@every 10s\"\noverlap: %s\ntasks:\n  - {name: a, function: record}\n", tc.policy))
				sleep(48 * time.Second)
				got := e.states("o.a", start)
				e.stop()
				if !strings.HasPrefix(got, tc.want) {
					t.Errorf("states %s, want %s…", got, tc.want)
				}
				// Never two RUNNING at once: each RUNNING is followed by its end before the next RUNNING.
				h, _ := e.st.History(context.Background(), store.LogFilter{TaskID: "o.a", Limit: 1000})
				running := 0
				for _, r := range h {
					if r.To == axtype.Running {
						running++
					}
					if r.From == axtype.Running {
						running--
					}
					if running > 1 {
						t.Fatalf("two instances RUNNING at %s", r.At)
					}
				}
			})
		})
	}
}

func TestBadOperations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := setup(t, Config{}, nil, chain)
		sleep(11 * time.Second)
		before, _ := e.st.History(context.Background(), store.LogFilter{Limit: 1 << 20})
		a := e.instances(store.InstanceFilter{TaskID: "chain.a"})
		for _, tc := range []struct {
			op   Request
			want string
		}{
			{Pause{Scope: store.ScopeTask, Target: "chain.z"}, `no task "chain.z"`},
			{Pause{Scope: store.ScopeGroup, Target: "defualt"}, `no group "defualt" (did you mean "default"?)`},
			{Pause{Scope: store.ScopePipeline, Target: "chian"}, `no pipeline "chian" (did you mean "chain"?)`},
			{Resume{Scope: store.ScopeTask, Target: "chain.a"}, "task chain.a is not paused"},
			{Kill{Target: "chain.a"}, "task chain.a has no RUNNING instance: nothing to kill"},
			{Kill{Instance: a[0].ID}, "is SUCCESS, not RUNNING: nothing to kill"},
			{Kill{Instance: 999999}, "store: not found"},
			{Rerun{Target: "chain.a"}, "task chain.a has no FAILED or KILLED instance to rerun (its latest is"},
			{Trigger{Target: "chain.aa"}, `no task "chain.aa" (did you mean "chain.a"?)`},
			{nil, "engine: bad request: no request"},
		} {
			if _, err := e.do(tc.op); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%+v: err = %v, want %q", tc.op, err, tc.want)
			}
		}
		// An unknown verb can only come from the queue: refused there.
		ctx := context.Background()
		for _, q := range []store.Op{{Kind: "explode", Args: `{"kind":"explode","target":"chain.a"}`}, {Kind: OpKill, Args: `{"instance":"one"}`}} {
			id, err := e.st.EnqueueOp(ctx, q, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			sleep(time.Second)
			o, err := e.st.GetOp(ctx, id)
			if err != nil || o.State != store.OpFailed || !strings.Contains(o.Error, "unknown operation \"explode\": use pause") && !strings.Contains(o.Error, "malformed kill request") {
				t.Errorf("queued %s %s: %+v %v", q.Kind, q.Args, o, err)
			}
		}
		for _, a := range e.actions("") {
			if a.Actor != Actor {
				t.Errorf("a refused operation wrote an action row: %+v", a)
			}
		}
		after, _ := e.st.History(context.Background(), store.LogFilter{Limit: 1 << 20})
		if len(after) != len(before) {
			t.Errorf("refused operations changed state: %d history rows before, %d after", len(before), len(after))
		}
		e.stop()
	})
}

// TestPauseSurvivesRestart: a pause is stored; a new engine on the same
// store (a restart, or a standby taking over) keeps it.
func TestPauseSurvivesRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		e := setup(t, Config{}, nil, "pipeline: s\ntimezone: UTC\nschedule: \"@every 10s\"\ntasks:\n  - {name: a, function: record}\n")
		if _, err := e.do(Pause{Scope: store.ScopeTask, Target: "s.a"}); err != nil {
			t.Fatal(err)
		}
		e.stop()
		e.restart(Config{}, 25*time.Second)
		if got := e.states("s.a", start); got != "10s:PAUSED 20s:PAUSED" {
			t.Errorf("after restart: %s", got)
		}
		if n := len(e.rec.snapshot()); n != 0 {
			t.Errorf("%d executions of a paused task", n)
		}
	})
}

// refusing is an executor that refuses the first n attempts, then succeeds.
type refusing struct {
	mu    sync.Mutex
	n     int
	calls int
}

func (r *refusing) Execute(_ context.Context, a runner.Attempt) (runner.Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.calls <= r.n {
		return runner.Result{Ticket: a.Ticket, Status: runner.StatusFailed, Refused: true, Error: "worker pool full"}, nil
	}
	return runner.Result{Ticket: a.Ticket, Status: runner.StatusSuccess}, nil
}

// TestRefusalIsNotAFailure: an executor that refuses (a full pool) makes the
// instance wait and try again; no retry is used up, nothing fails.
func TestRefusalIsNotAFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := setup(t, Config{}, nil, "pipeline: h\ntimezone: UTC\nschedule: \"@every 1h\"\ntasks:\n  - {name: a, http: \"http://127.0.0.1:1/dispatch\"}\n")
		e.stop()
		ref := &refusing{n: 3}
		eng, err := New(Config{Holder: "t2"}, e.st, e.eng.sched.g, Executors{defs.ExecHTTP: ref})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- eng.Run(ctx) }()
		sleep(time.Hour + 30*time.Second)
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		in := e.instances(store.InstanceFilter{TaskID: "h.a"})
		if len(in) != 1 || in[0].State != axtype.Success || in[0].Attempt != 4 || in[0].Counted != 1 {
			t.Fatalf("instance %+v: want SUCCESS at attempt 4 (each dispatch is an attempt), 1 counted (refusals do not count)", in)
		}
		if got := transitionsOf(e, in[0].ID); got != "SCHEDULED>RUNNING>RETRYING>RUNNING>RETRYING>RUNNING>RETRYING>RUNNING>SUCCESS" {
			t.Errorf("history %s", got)
		}
		if a := e.actions("refused"); len(a) != 3 || a[0].Reason != "worker pool full" {
			t.Errorf("refused actions %+v", a)
		}
	})
}

// TestOperatorActionsNamedByPipeline: the action log's pipeline filter
// (GET /api/v1/actions?pipeline=P) left out every operator action: their
// rows had no pipeline. Pausing, resuming or triggering a pipeline, and a
// verb on one of its tasks, are now found by it; another pipeline's are not.
func TestOperatorActionsNamedByPipeline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := setup(t, Config{}, nil, "pipeline: l\ntimezone: UTC\nschedule: \"0 0 1 6 *\"\ntasks:\n  - {name: a, function: record}\n",
			"pipeline: m\ntimezone: UTC\nschedule: \"0 0 1 6 *\"\ntasks:\n  - {name: b, function: record}\n")
		for _, req := range []Request{
			Pause{Scope: store.ScopePipeline, Target: "l"},
			Resume{Scope: store.ScopePipeline, Target: "l"},
			Pause{Scope: store.ScopeTask, Target: "l.a"},
			Trigger{Target: "l", Hold: true}, // under l.a's pause: held
			Trigger{Target: "m.b"},
		} {
			if _, err := e.do(req); err != nil {
				t.Fatalf("%T %+v: %v", req, req, err)
			}
		}
		rows, err := e.st.Actions(context.Background(), store.LogFilter{Pipeline: "l", Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, a := range rows {
			if strings.HasPrefix(a.Actor, "operator") {
				got = append(got, a.Action+" "+a.TaskID)
			}
		}
		slices.Sort(got)
		want := []string{"pause ", "pause l.a", "resume ", "trigger "}
		if !slices.Equal(got, want) {
			t.Errorf("operator actions under pipeline l: %q, want %q", got, want)
		}
		e.stop()
	})
}
