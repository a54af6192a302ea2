package engine

import (
	"fmt"
	"maps"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/ax-sched/ax/defs"
)

// MaxRunningBound is the largest concurrency cap accepted anywhere (flag,
// pipeline file, ax limits): above it a cap means nothing but a typo.
const MaxRunningBound = 1_000_000

// DefaultMaxRunning is the global cap on local attempts (functions and
// commands) running at once when none is set: a multiple of the CPUs, so a
// burst of 10,000 commands forks them a few dozen at a time instead of all
// together, and the scheduler keeps its share of the machine.
func DefaultMaxRunning() int { return 8 * runtime.NumCPU() }

// Pools are the concurrency caps (R45): attempts running at once. MaxRunning
// counts local attempts only (functions and commands run on this host; an
// HTTP executor bounds its own work and refuses what it cannot take);
// group and task caps count every kind. Zero is unlimited.
type Pools struct {
	MaxRunning      int            `json:"max_running,omitempty"`
	GroupMaxRunning map[string]int `json:"group_max_running,omitempty"`
}

// pool counts what runs, against the caps. One home for the rule "may
// another attempt of this task start now?". The loop admits and counts
// attempts; an attempt's goroutine gives its slot back the moment its
// executor returns, before its output and result are written, so that the
// caps bound the work running, not the store's latency. Safe for
// concurrent use.
type pool struct {
	mu      sync.Mutex
	caps    Pools
	local   int // function and command attempts running
	byGroup map[string]int
	byTask  map[string]int
	shown   map[string]bool // scopes with a series in ax_pool_running
}

func newPool(caps Pools) *pool {
	return &pool{caps: caps, byGroup: map[string]int{}, byTask: map[string]int{}}
}

func isLocal(t *defs.Task) bool { return t.Executor.Kind != defs.ExecHTTP }

// full says which cap holds another attempt of t back, or "" when none does.
func (p *pool) full(t *taskInfo) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	d := t.def
	if d.MaxRunning > 0 && p.byTask[t.id] >= d.MaxRunning {
		return fmt.Sprintf("task %s has %d of %d running (max_running)", t.id, p.byTask[t.id], d.MaxRunning)
	}
	if c := p.caps.GroupMaxRunning[d.Group]; c > 0 && p.byGroup[d.Group] >= c {
		return fmt.Sprintf("group %s has %d of %d running", d.Group, p.byGroup[d.Group], c)
	}
	if c := p.caps.MaxRunning; c > 0 && isLocal(d) && p.local >= c {
		return fmt.Sprintf("the server has %d of %d local attempts running (--max-running)", p.local, c)
	}
	return ""
}

// add counts an attempt of t as running.
func (p *pool) add(t *taskInfo) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.byTask[t.id]++
	p.byGroup[t.def.Group]++
	if isLocal(t.def) {
		p.local++
	}
}

// remove counts an attempt of t as ended.
func (p *pool) remove(t *taskInfo) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byTask[t.id]--; p.byTask[t.id] <= 0 {
		delete(p.byTask, t.id)
	}
	if p.byGroup[t.def.Group]--; p.byGroup[t.def.Group] <= 0 {
		delete(p.byGroup, t.def.Group)
	}
	if isLocal(t.def) && p.local > 0 {
		p.local--
	}
}

// track records a as running instance id: in the running set, the overlap
// count of its task and the pools. Every attempt that starts or is taken
// over goes through here, and every one that ends through untrack.
func (e *Engine) track(id int64, a *attempt) {
	if old := e.running[id]; old != nil {
		e.untrack(id)
	}
	e.running[id] = a
	if a.live {
		e.runningByTask[a.task.id]++
	}
	a.freed = new(atomic.Bool)
	e.pool.add(a.task)
}

// free gives a's pool slot back, once, from whichever comes first: its
// executor returning or the loop forgetting it.
func (e *Engine) free(a *attempt) bool {
	if a.freed == nil || a.freed.Swap(true) { // not counted, or given back already
		return false
	}
	e.pool.remove(a.task)
	return true
}

// untrack forgets running instance id.
func (e *Engine) untrack(id int64) {
	a := e.running[id]
	if a == nil {
		return
	}
	delete(e.running, id)
	if a.live {
		if e.runningByTask[a.task.id]--; e.runningByTask[a.task.id] <= 0 {
			delete(e.runningByTask, a.task.id)
		}
	}
	e.free(a)
}

// set changes the caps: a nil global keeps it; a group at 0 lifts its cap.
func (p *pool) set(global *int, groups map[string]int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if global != nil {
		p.caps.MaxRunning = *global
	}
	for g, n := range groups {
		if p.caps.GroupMaxRunning == nil {
			p.caps.GroupMaxRunning = map[string]int{}
		}
		if n <= 0 {
			delete(p.caps.GroupMaxRunning, g)
			continue
		}
		p.caps.GroupMaxRunning[g] = n
	}
}

// limits returns a copy of the caps in force.
func (p *pool) limits() Pools {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := Pools{MaxRunning: p.caps.MaxRunning}
	if len(p.caps.GroupMaxRunning) > 0 {
		out.GroupMaxRunning = maps.Clone(p.caps.GroupMaxRunning)
	}
	return out
}

// publish sets the pool gauges: for each scope (local, and each group with
// a cap) the attempts running and, when capped, the cap, so that occupancy
// is their ratio. A scope whose cap was lifted loses its series rather
// than keeping its last value.
func (p *pool) publish(m *metrics) {
	p.mu.Lock()
	defer p.mu.Unlock()
	type load struct{ running, limit int }
	scopes := map[string]load{"local": {p.local, p.caps.MaxRunning}}
	for g, c := range p.caps.GroupMaxRunning {
		scopes["group:"+g] = load{p.byGroup[g], c}
	}
	for s := range p.shown {
		if _, ok := scopes[s]; !ok {
			m.poolRunning.DeleteLabelValues(s)
			m.poolMax.DeleteLabelValues(s)
			delete(p.shown, s)
		}
	}
	if p.shown == nil {
		p.shown = map[string]bool{}
	}
	for s, l := range scopes {
		m.poolRunning.WithLabelValues(s).Set(float64(l.running))
		if l.limit > 0 {
			m.poolMax.WithLabelValues(s).Set(float64(l.limit))
		} else {
			m.poolMax.DeleteLabelValues(s)
		}
		p.shown[s] = true
	}
}
