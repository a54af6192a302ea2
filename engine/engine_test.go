package engine

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/engine/breaker"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// recorder is a function executor that records every execution.
type recorder struct {
	mu    sync.Mutex
	calls []call
	fn    map[string]func(ctx context.Context, a runner.Attempt) error
}

type call struct {
	task    string // pipeline.task
	logical time.Time
	ticket  string
	at      time.Time
}

func (r *recorder) record(ctx context.Context, a runner.Attempt) error {
	r.mu.Lock()
	r.calls = append(r.calls, call{a.Pipeline + "." + a.Task, a.LogicalTime.UTC(), a.Ticket, time.Now()})
	fn := r.fn[a.Pipeline+"."+a.Task]
	r.mu.Unlock()
	if fn != nil {
		return fn(ctx, a)
	}
	return nil
}

func (r *recorder) snapshot() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// env is one engine on a fresh SQLite store, inside a synctest bubble.
type env struct {
	t      *testing.T
	st     *store.Store
	path   string // the store's SQLite file
	eng    *Engine
	rec    *recorder
	cancel context.CancelFunc
	done   chan error
}

// setup compiles the pipelines, opens a store and starts an engine whose
// function executor records every call. Call it inside synctest.Test.
func setup(t *testing.T, cfg Config, fns map[string]func(context.Context, runner.Attempt) error, srcs ...string) *env {
	t.Helper()
	return setupOn(t, cfg, fns, nil, srcs...)
}

// setupOn is setup with before called on the store before the engine starts
// (a fault to inject into the first term's start, for example).
func setupOn(t *testing.T, cfg Config, fns map[string]func(context.Context, runner.Attempt) error, before func(*store.Store), srcs ...string) *env {
	t.Helper()
	var pls []*defs.Pipeline
	for i, src := range srcs {
		p, errs := defs.Parse(fmt.Sprintf("p%d.yaml", i), []byte(src), defs.Options{Now: time.Now()})
		if errs.Err() != nil {
			t.Fatalf("parse: %v", errs)
		}
		pls = append(pls, p)
	}
	g, errs := dag.Compile(pls, dag.Options{Now: time.Now(), DispatchRate: -1})
	if errs.Err() != nil {
		t.Fatalf("compile: %v", errs)
	}
	path := filepath.Join(t.TempDir(), "ax.db")
	st, err := store.Open(context.Background(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if before != nil {
		before(st)
	}
	rec := &recorder{fn: fns}
	funcs := runner.NewFunctions(func(a runner.Attempt) string { return "record" })
	if err := funcs.Register("record", rec.record); err != nil {
		t.Fatal(err)
	}
	if cfg.Logger == nil && os.Getenv("AX_TEST_LOG") != "" {
		cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	cfg.Holder = "test"
	web := runner.NewHTTP(http.DefaultClient, func(a runner.Attempt) (string, error) { return g.Task(a.Pipeline + "." + a.Task).Executor.URL, nil })
	eng, err := New(cfg, st, g, Executors{defs.ExecFunction: funcs, defs.ExecCommand: runner.NewCommands(commandSpec(g)), defs.ExecHTTP: web})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &env{t: t, st: st, path: path, eng: eng, rec: rec, cancel: cancel, done: make(chan error, 1)}
	go func() { e.done <- eng.Run(ctx) }()
	synctest.Wait()
	return e
}

// commandSpec looks up a command task's argv in the graph.
func commandSpec(g *dag.Graph) func(runner.Attempt) (runner.CommandSpec, error) {
	return func(a runner.Attempt) (runner.CommandSpec, error) {
		t := g.Task(a.Pipeline + "." + a.Task)
		if t == nil {
			return runner.CommandSpec{}, fmt.Errorf("unknown task %s.%s", a.Pipeline, a.Task)
		}
		return runner.CommandSpec{Argv: t.Executor.Command, Templates: t.Executor.Templates}, nil
	}
}

// stop ends the engine; the store stays open for checks.
func (e *env) stop() {
	e.t.Helper()
	e.cancel()
	if err := <-e.done; err != nil {
		e.t.Errorf("engine: %v", err)
	}
}

// restart runs a second engine (holder test-2) on e's store and graph for d
// of simulated time, as after a restart of the process, then stops it.
func (e *env) restart(cfg Config, d time.Duration) *Engine {
	e.t.Helper()
	again, stop := e.takeOver(cfg)
	sleep(d)
	stop()
	return again
}

// takeOver starts a second engine (holder test-2) on e's store and graph,
// as after a restart of the process; the function it returns stops it.
func (e *env) takeOver(cfg Config) (*Engine, func()) {
	e.t.Helper()
	return e.takeOverOn(cfg, e.st)
}

// takeOverOn is takeOver on st: another handle of e's store file, as a
// second process has.
func (e *env) takeOverOn(cfg Config, st *store.Store) (*Engine, func()) {
	e.t.Helper()
	cfg.Holder = "test-2"
	again, err := New(cfg, st, e.eng.sched.g, e.eng.execs)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- again.Run(ctx) }()
	return again, func() {
		e.t.Helper()
		cancel()
		if err := <-done; err != nil {
			e.t.Fatal(err)
		}
	}
}

// sleep lets simulated time pass and the bubble settle.
func sleep(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

func (e *env) instances(f store.InstanceFilter) []axtype.Instance {
	e.t.Helper()
	f.Limit = 1 << 20
	f.Ascending = true
	in, err := e.st.Instances(context.Background(), f)
	if err != nil {
		e.t.Fatal(err)
	}
	return in
}

func (e *env) history(task string) []store.HistoryRow {
	e.t.Helper()
	h, err := e.st.History(context.Background(), store.LogFilter{TaskID: task, Limit: 1 << 20})
	if err != nil {
		e.t.Fatal(err)
	}
	return h
}

const chain = `pipeline: chain
timezone: UTC
schedule: "@every 10s"
defaults: {function: record}
tasks:
  - {name: a}
  - {name: b, depends_on: [a]}
  - {name: c, depends_on: [b]}
`

func TestChainRunsInOrderOncePerLogicalTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		e := setup(t, Config{}, nil, chain)
		sleep(35 * time.Second)
		e.stop()
		calls := e.rec.snapshot()
		seen := map[string]bool{}
		var got []string
		for _, c := range calls {
			k := fmt.Sprintf("%s@%s", c.task, c.logical.Sub(start))
			if seen[k] {
				t.Errorf("%s ran twice", k)
			}
			seen[k] = true
			got = append(got, k)
		}
		want := "[chain.a@10s chain.b@10s chain.c@10s chain.a@20s chain.b@20s chain.c@20s chain.a@30s chain.b@30s chain.c@30s]"
		if fmt.Sprint(got) != want {
			t.Errorf("executions:\n got %v\nwant %s", got, want)
		}
		// a fired on time; b and c right after their upstream.
		if calls[0].at.Sub(start) != 10*time.Second {
			t.Errorf("first fire at +%s, want +10s", calls[0].at.Sub(start))
		}
		for _, in := range e.instances(store.InstanceFilter{Pipeline: "chain", LogicalTo: start.Add(30 * time.Second)}) {
			if in.State != axtype.Success {
				t.Errorf("%s@%s is %s", in.TaskID, in.LogicalTime.Sub(start), in.State)
			}
		}
		// History holds each transition once: created, SCHEDULED, RUNNING, SUCCESS.
		for _, task := range []string{"chain.a", "chain.b", "chain.c"} {
			perInstance := map[int64][]string{}
			for _, h := range e.history(task) {
				perInstance[h.InstanceID] = append(perInstance[h.InstanceID], string(h.From)+">"+string(h.To))
			}
			for id, hs := range perInstance {
				in, _ := e.st.Instance(context.Background(), id)
				if in.State != axtype.Success {
					continue
				}
				want := ">SCHEDULED SCHEDULED>RUNNING RUNNING>SUCCESS"
				if task != "chain.a" {
					want = ">WAITING WAITING>SCHEDULED SCHEDULED>RUNNING RUNNING>SUCCESS"
				}
				if strings.Join(hs, " ") != want {
					t.Errorf("%s instance %d history %v, want %s", task, id, hs, want)
				}
			}
		}
	})
}

// breakerCfg is a breaker that opens after min outcomes above 50 % failures.
func breakerCfg(min int) breaker.Config { return breaker.Config{MinSamples: min} }

// TestNewReadsNoStore: New only wires the components; nothing reads or
// writes the store before Run. BenchmarkHeapPerInstance (make bench row 6)
// builds engines without one, and a component asking the store for its
// dialect at New broke it.
func TestNewReadsNoStore(t *testing.T) {
	t.Parallel()
	g := compileOne(t, layered)
	funcs := runner.NewFunctions(func(runner.Attempt) string { return "record" })
	_ = funcs.Register("record", func(context.Context, runner.Attempt) error { return nil })
	e, err := New(Config{}, nil, g, Executors{defs.ExecFunction: funcs})
	if err != nil || e == nil {
		t.Fatalf("New without a store: %v", err)
	}
}
