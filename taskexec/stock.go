// Package taskexec builds the executors the stock ax binary runs tasks with:
// the example functions, commands, and HTTP tasks routed among the
// executors registered in the store. ax server, ax run and ax backfill
// --standalone all run their engines with them.
package taskexec

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/ax-sched/ax/dag"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/engine"
	"github.com/ax-sched/ax/examples/functions"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// AlertVia raises executors' alerts (an executor gone silent) through the
// engine *e points to, once it exists.
func AlertVia(e **engine.Engine) func(engine.Alert) {
	return func(a engine.Alert) {
		if *e != nil {
			(*e).Alert(context.Background(), a)
		}
	}
}

// Executors builds the executors of the stock binary: the example functions,
// commands, and HTTP tasks routed among the executors registered in st for
// them (or called at their own URL when none is), each looking its task up
// in the pipelines in force.
// Secrets resolve the tasks' `{secret: …}` references (runner.NewSecrets).
func Executors(g *dag.Graph, st *store.Store, alert func(engine.Alert), secrets runner.Secrets) (engine.Executors, error) {
	return ExecutorsOf(func() *dag.Graph { return g }, st, alert, DefaultCommandNice, secrets)
}

// DefaultCommandNice is how much commands' nice value is raised above the
// scheduler's by default (ax server --command-nice): not at all. Raised,
// commands yield the CPU to the scheduler under contention, but also to
// every other process of the host, and a command's timeout is wall time:
// on a busy machine a niced command timed out where it had not.
const DefaultCommandNice = 0

// ExecutorsOf is executors for pipelines that a reload may replace: graph
// returns the ones in force. Commands start nice above the scheduler (see
// runner.Commands.Nice). Each executor gives its attempts their task's env
// (runner.EnvExecutor, Routed.WithEnv), its secrets resolved by secrets.
func ExecutorsOf(graph func() *dag.Graph, st *store.Store, alert func(engine.Alert), nice int, secrets runner.Secrets) (engine.Executors, error) {
	funcs, err := newFunctions(func(a runner.Attempt) string {
		if t := graph().Task(a.Pipeline + "." + a.Task); t != nil {
			return t.Executor.Function
		}
		return ""
	})
	if err != nil {
		return nil, err
	}
	commands := runner.NewCommands(func(a runner.Attempt) (runner.CommandSpec, error) {
		t := graph().Task(a.Pipeline + "." + a.Task)
		if t == nil {
			return runner.CommandSpec{}, fmt.Errorf("unknown task %s.%s", a.Pipeline, a.Task)
		}
		spec := runner.CommandSpec{Argv: t.Executor.Command, Templates: t.Executor.Templates, Schedule: scheduleOf(graph(), t),
			Dir: t.WorkingDir, DirTemplate: t.WorkingDirTemplate}
		if pl := graph().Pipeline(t.Pipeline); pl != nil && pl.File != "" {
			// Absolute, so that the server's directory never matters.
			if base, err := filepath.Abs(filepath.Dir(pl.File)); err == nil {
				spec.BaseDir = base
			}
		}
		return spec, nil
	})
	commands.Nice = nice
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second}}
	web := runner.NewRouted(runner.RoutedConfig{Client: client,
		URL: func(a runner.Attempt) (string, error) {
			t := graph().Task(a.Pipeline + "." + a.Task)
			if t == nil || t.Executor.URL == "" {
				return "", fmt.Errorf("task %s.%s has no http executor", a.Pipeline, a.Task)
			}
			return t.Executor.URL, nil
		},
		Registry: registryCache(time.Second, func(ctx context.Context, task string) ([]runner.Endpoint, error) {
			exs, err := st.Executors(ctx, task)
			if err != nil {
				return nil, err
			}
			eps := make([]runner.Endpoint, len(exs))
			for i, x := range exs {
				eps[i] = runner.Endpoint{Address: x.Address, LastHeartbeat: x.LastHeartbeat}
			}
			return eps, nil
		}),
	})
	// Executors that share AX_EXECUTOR_TOKEN with the scheduler refuse dispatches without it.
	web = web.WithToken(os.Getenv("AX_EXECUTOR_TOKEN"))
	env := func(a runner.Attempt) (runner.EnvSpec, error) {
		t := graph().Task(a.Pipeline + "." + a.Task)
		if t == nil {
			return runner.EnvSpec{}, fmt.Errorf("unknown task %s.%s", a.Pipeline, a.Task)
		}
		return runner.EnvSpec{Vars: t.Env, Schedule: scheduleOf(graph(), t)}, nil
	}
	// The HTTP executor resolves env itself: the engine asks it for
	// capabilities (Deliver, Status, …) that a wrapper would hide.
	return engine.Executors{defs.ExecFunction: runner.NewEnvExecutor(funcs, env, secrets), defs.ExecCommand: runner.NewEnvExecutor(commands, env, secrets),
		defs.ExecHTTP: web.WithEnv(env, secrets)}, nil
}

// scheduleOf is the schedule that fires t (for its templates' .Prev and
// .Next), or nil.
func scheduleOf(g *dag.Graph, t *defs.Task) *defs.Schedule {
	if tr := g.TriggerOf(t.ID()); tr != nil {
		return tr.Schedule
	}
	return nil
}

// Unresolved returns why each secret the tasks of g refer to cannot be
// resolved now, with the task: what the server warns of at start and reload.
func Unresolved(ctx context.Context, g *dag.Graph, secrets runner.Secrets) []UnresolvedSecret {
	var out []UnresolvedSecret
	for _, t := range g.Order() {
		for _, err := range secrets.Unresolved(ctx, t.Secrets()) {
			out = append(out, UnresolvedSecret{Task: t.ID(), Err: err})
		}
	}
	return out
}

// UnresolvedSecret is a task's secret that cannot be resolved, and why.
type UnresolvedSecret struct {
	Task string
	Err  error
}

// newFunctions is the function executor of the binary, with every
// function it registers: the examples, and those added by AddFunctions.
func newFunctions(name func(runner.Attempt) string) (*runner.Functions, error) {
	funcs := runner.NewFunctions(name)
	extra.Lock()
	regs := append([]func(*runner.Functions) error{functions.Register}, extra.regs...)
	extra.Unlock()
	for _, register := range regs {
		if err := register(funcs); err != nil {
			return nil, fmt.Errorf("registering the functions of this binary: %w", err)
		}
	}
	return funcs, nil
}

// extra are the registrations added by AddFunctions.
var extra struct {
	sync.Mutex
	regs []func(*runner.Functions) error
}

// AddFunctions adds a team's Go functions to the binary: register is called
// with the functions executor every time one is built (ax server, ax run,
// ax backfill), and with a scratch one for validation, so `ax validate`
// knows every name it registers. Call it from an init function of a file
// in the binary's main package (see docs/functions.md); a name registered
// twice, here or among the examples, fails the binary's start with the name.
func AddFunctions(register func(*runner.Functions) error) {
	extra.Lock()
	defer extra.Unlock()
	extra.regs = append(extra.regs, register)
}

// FunctionNames returns the names of the functions the stock binary
// registers, sorted: what a pipeline's `function:` may name, for
// validation (defs.Options.Functions).
func FunctionNames() ([]string, error) {
	funcs, err := newFunctions(func(runner.Attempt) string { return "" })
	if err != nil {
		return nil, err
	}
	return funcs.Names(), nil
}

// registryCache keeps each task's executors for ttl, so that routing does
// not read the registry from the store on every dispatch.
func registryCache(ttl time.Duration, load func(context.Context, string) ([]runner.Endpoint, error)) func(context.Context, string) ([]runner.Endpoint, error) {
	type entry struct {
		at  time.Time
		eps []runner.Endpoint
	}
	var (
		mu    sync.Mutex
		cache = map[string]entry{}
	)
	return func(ctx context.Context, task string) ([]runner.Endpoint, error) {
		mu.Lock()
		e, ok := cache[task]
		mu.Unlock()
		if ok && time.Since(e.at) < ttl {
			return e.eps, nil
		}
		eps, err := load(ctx, task)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		cache[task] = entry{at: time.Now(), eps: eps}
		mu.Unlock()
		return eps, nil
	}
}
