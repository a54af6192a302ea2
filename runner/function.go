package runner

import (
	"context"
	"fmt"
	"runtime/debug"
	"sort"
	"sync"
	"time"
)

// Func is a task implemented in Go. It must stop when ctx is done, and use
// a.Ticket as the idempotency key of whatever it changes. What it logs
// through Logger(ctx) is kept as the attempt's output (a secret of a.Env
// shows there as ***). a.Env is the task's `env:`, its secrets resolved.
// It gives its downstream outputs with a.Output(key, value).
type Func func(ctx context.Context, a Attempt) error

// Functions runs registered Go functions by name. It is safe for concurrent use.
type Functions struct {
	mu    sync.RWMutex
	funcs map[string]Func
	name  func(Attempt) string
}

var _ Executor = (*Functions)(nil)

// NewFunctions returns an executor for functions; name maps an attempt to
// the function name it calls (the task's `function:` field).
func NewFunctions(name func(Attempt) string) *Functions {
	return &Functions{funcs: map[string]Func{}, name: name}
}

// Register adds fn under name; registering a name twice is an error.
func (f *Functions) Register(name string, fn Func) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, dup := f.funcs[name]; dup {
		return fmt.Errorf("runner: function %q is registered already", name)
	}
	f.funcs[name] = fn
	return nil
}

// Names returns the registered names, sorted.
func (f *Functions) Names() []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]string, 0, len(f.funcs))
	for n := range f.funcs {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Has reports whether name is registered.
func (f *Functions) Has(name string) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	_, ok := f.funcs[name]
	return ok
}

// Execute runs the attempt's function under ctx with the attempt's deadline.
// A panic in the function fails the attempt with its stack; it never takes
// the scheduler down.
func (f *Functions) Execute(ctx context.Context, a Attempt) (Result, error) {
	name := f.name(a)
	f.mu.RLock()
	fn := f.funcs[name]
	f.mu.RUnlock()
	if fn == nil {
		return Result{}, fmt.Errorf("runner: no function %q is registered (registered: %v)", name, f.Names())
	}
	if !a.Deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, a.Deadline)
		defer cancel()
	}
	start := time.Now()
	a, take := a.WithOutputs()
	err := func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("panic: %v\n%s", p, debug.Stack())
			}
		}()
		return fn(ctx, a)
	}()
	r := finish(ctx, a, start, err)
	r.Executor = Local()
	outs, err := take()
	return withOutputs(r, outs, err), nil
}
