// Package apitest runs a primary engine on a fresh SQLite store behind an
// HTTP handler, for the tests of package api and of the CLI that calls it.
// It does not import api: the caller builds the handler from the Env, so
// that api's own tests (inside the package) can use it too.
package apitest

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/examples/functions"
	"github.com/ax-sched/ax/httpguard"
	"github.com/ax-sched/ax/reload"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// ShopPipeline never fires on its own during a test (1 January at
// midnight): runs come only from the requests the tests make.
const ShopPipeline = `pipeline: shop
group: etl
timezone: UTC
schedule: "0 0 1 1 *"
tasks:
  - {name: sync, function: noop}
  - {name: clean, depends_on: [sync], function: noop}
  - {name: slow, command: ["sleep", "30"], timeout: 1m}
`

// GridPipeline is ShopPipeline in Asia/Shanghai (a zone 8 hours from
// UTC), its clean a command that fails unless given the param ok=yes.
const GridPipeline = `pipeline: shop
group: etl
timezone: Asia/Shanghai
schedule: "0 0 1 1 *"
tasks:
  - {name: sync, function: noop}
  - {name: clean, depends_on: [sync], params: {ok: "no"}, command: ["sh", "-c", "test '{{ .Params.ok }}' = yes"]}
`

// Env is a primary engine on SQLite behind a handler, served by an
// httptest server.
type Env struct {
	T     testing.TB
	St    *store.Store
	Path  string // the store's file
	Graph *dag.Graph
	Eng   *engine.Engine // nil with Opts.Standby
	Reg   *prometheus.Registry
	Srv   *httptest.Server
	Token string
}

// Opts say what to set up.
type Opts struct {
	Token     string
	ExecToken string
	OpenReads bool
	Standby   bool          // no engine: a process that serves reads only
	Pipeline  string        // instead of ShopPipeline
	Others    []string      // more pipelines beside it
	Retain    time.Duration // the engine's and the API's retention (0: keeps everything)
	// Reload is what GET /api/v1/reload reports (nil: no reloads).
	Reload *reload.Watcher
	// PruneBudget bounds POST /api/v1/prune's pass (zero: the server's).
	PruneBudget time.Duration
	// Executors builds the engine's executors (nil: the example functions
	// and commands).
	Executors func(g *dag.Graph, st *store.Store, alert func(engine.Alert)) (engine.Executors, error)
}

// Setup starts the store, the engine (unless o.Standby) and the server of
// the handler that serve builds from them; all end with the test.
func Setup(t testing.TB, o Opts, serve func(*Env) http.Handler) *Env {
	t.Helper()
	src := cmp.Or(o.Pipeline, ShopPipeline)
	srcs := append([]string{src}, o.Others...)
	g := Compile(t, srcs...)
	path := filepath.Join(t.TempDir(), "ax.db")
	e := &Env{T: t, St: OpenStore(t, path), Path: path, Graph: g, Token: o.Token, Reg: prometheus.NewRegistry()}
	if !o.Standby {
		e.Eng = StartEngine(t, engine.Config{Holder: "api-test", Registerer: e.Reg, Grace: time.Millisecond, Retain: o.Retain}, e.St, g, o.Executors)
	}
	e.Srv = httptest.NewServer(httpguard.Guard(httpguard.Config{Listen: "127.0.0.1:0"}, serve(e)))
	t.Cleanup(e.Srv.Close)
	return e
}

// Compile parses pipeline sources (the first is shop.yaml, the others
// otherN.yaml) and compiles them, failing the test on any error.
func Compile(t testing.TB, srcs ...string) *dag.Graph {
	t.Helper()
	var pls []*defs.Pipeline
	for i, src := range srcs {
		name := "shop.yaml"
		if i > 0 {
			name = fmt.Sprintf("other%d.yaml", i-1)
		}
		p, errs := defs.Parse(name, []byte(src), defs.Options{Now: time.Now()})
		if errs.Err() != nil {
			t.Fatal(errs)
		}
		pls = append(pls, p)
	}
	g, errs := dag.Compile(pls, dag.Options{Now: time.Now(), DispatchRate: -1})
	if errs.Err() != nil {
		t.Fatal(errs)
	}
	return g
}

// StartEngine runs an engine of cfg on st until the test ends, and waits
// until it leads. execs builds its executors (nil: Executors).
func StartEngine(t testing.TB, cfg engine.Config, st *store.Store, g *dag.Graph, execs func(*dag.Graph, *store.Store, func(engine.Alert)) (engine.Executors, error)) *engine.Engine {
	t.Helper()
	if execs == nil {
		execs = Executors
	}
	var eng *engine.Engine
	ex, err := execs(g, st, func(a engine.Alert) {
		if eng != nil {
			eng.Alert(context.Background(), a)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if eng, err = engine.New(cfg, st, g, ex); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("engine: %v", err)
		}
	})
	WaitFor(t, func() bool { return eng.Stats().Leader })
	return eng
}

// Executors are the example functions and commands, each task looked up
// in g: what the tests' pipelines run.
func Executors(g *dag.Graph, _ *store.Store, _ func(engine.Alert)) (engine.Executors, error) {
	funcs := runner.NewFunctions(func(a runner.Attempt) string {
		if t := g.Task(a.Pipeline + "." + a.Task); t != nil {
			return t.Executor.Function
		}
		return ""
	})
	if err := functions.Register(funcs); err != nil {
		return nil, err
	}
	commands := runner.NewCommands(func(a runner.Attempt) (runner.CommandSpec, error) {
		t := g.Task(a.Pipeline + "." + a.Task)
		if t == nil {
			return runner.CommandSpec{}, fmt.Errorf("unknown task %s.%s", a.Pipeline, a.Task)
		}
		return runner.CommandSpec{Argv: t.Executor.Command, Templates: t.Executor.Templates}, nil
	})
	return engine.Executors{defs.ExecFunction: funcs, defs.ExecCommand: commands}, nil
}

// OpenStore opens the store at target until the test ends.
func OpenStore(t testing.TB, target string) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), target, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// WaitFor polls a condition on another goroutine's or process's work,
// bounded to 30 s.
func WaitFor(t testing.TB, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not met within 30 s")
}

// DecodeJSON decodes body into a T, failing the test when it is not JSON.
func DecodeJSON[T any](t testing.TB, body string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(body), &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, body)
	}
	return v
}

// Call sends a request with the token (when set) and returns status and body.
func (e *Env) Call(method, path, body string) (int, string) {
	e.T.Helper()
	return e.CallAs(method, path, body, e.Token)
}

// CallAs is Call with another token ("" for none).
func (e *Env) CallAs(method, path, body, token string) (int, string) {
	e.T.Helper()
	req, err := http.NewRequest(method, e.Srv.URL+path, strings.NewReader(body))
	if err != nil {
		e.T.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("X-Ax-Actor", "operator:test")
	if method != http.MethodGet {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := e.Srv.Client().Do(req)
	if err != nil {
		e.T.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// State is what a bad request must leave as it was: instances (with
// versions), runs, pauses, settings and backfills.
func (e *Env) State() string {
	e.T.Helper()
	ctx := context.Background()
	var b strings.Builder
	ins, err := e.St.Instances(ctx, store.InstanceFilter{Limit: 1 << 20, Ascending: true})
	if err != nil {
		e.T.Fatal(err)
	}
	for _, in := range ins {
		fmt.Fprintf(&b, "i%d:%s:%d ", in.ID, in.State, in.Version)
	}
	ps, _ := e.St.Pauses(ctx)
	for _, p := range ps {
		fmt.Fprintf(&b, "p:%s/%s ", p.Scope, p.Name)
	}
	set, _ := e.St.Settings(ctx)
	// The scheduler's own settings (a schedule's plan…) are written as it
	// runs, like its own action rows: an operator's are compared.
	maps.DeleteFunc(set, func(name, _ string) bool { return engine.SchedulerSetting(name) })
	fmt.Fprintf(&b, "settings:%v ", set)
	bs, _ := e.St.Backfills(ctx, 0)
	for _, bf := range bs {
		fmt.Fprintf(&b, "b%d:%s ", bf.ID, bf.State)
	}
	// A refused request writes nothing, not even an action-log row.
	acts, _ := e.St.Actions(ctx, store.LogFilter{Limit: 1 << 20})
	for _, a := range acts {
		if a.Actor != engine.Actor { // the scheduler's own rows (dispatches, results) come and go with time
			fmt.Fprintf(&b, "a%d:%s ", a.ID, a.Action)
		}
	}
	return b.String()
}

// WaitState polls the latest instance of task until it is in state.
func (e *Env) WaitState(task string, state axtype.State) axtype.Instance {
	e.T.Helper()
	var in axtype.Instance
	WaitFor(e.T, func() bool {
		ins, err := e.St.Instances(context.Background(), store.InstanceFilter{TaskID: task, Limit: 1})
		if err == nil && len(ins) == 1 {
			in = ins[0]
		}
		return in.State == state
	})
	return in
}

// WriteFile writes src to path, failing the test when it cannot.
func WriteFile(t testing.TB, path, src string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
}
