package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/engine/queue"
)

// MaxRunningBound is the largest concurrency cap accepted anywhere (flag,
// pipeline file, ax limits): above it a cap means nothing but a typo.
const MaxRunningBound = 1_000_000

// DefaultMaxRunning is the global cap on local attempts (functions and
// commands) running at once when none is set: a multiple of the CPUs, so a
// burst of 10,000 commands forks them a few dozen at a time instead of all
// together, and the scheduler keeps its share of the machine.
func DefaultMaxRunning() int { return 8 * runtime.NumCPU() }

// Pools are the concurrency caps: attempts running at once. MaxRunning
// counts local attempts only (functions and commands run on this host; an
// HTTP executor bounds its own work and refuses what it cannot take);
// group and task caps count every kind. Zero is unlimited.
type Pools struct {
	MaxRunning      int            `json:"max_running,omitempty"`
	GroupMaxRunning map[string]int `json:"group_max_running,omitempty"`
}

// pool counts what runs, against the caps. One home for the rule "may
// another attempt of this task start now?". Group and task caps are
// applied at dispatch: an attempt over one is not recorded and waits in
// the dispatch queue. The global cap on local attempts (--max-running) is
// applied at the start instead: dispatch records RUNNING, in one
// transaction, up to ahead() local attempts more than the cap, and those
// wait here, in the start queue, in priority order, for a slot; each
// starts the moment an attempt ends, without a round trip to the store, so
// that a burst of short commands drains at fork/exec speed rather than at
// one commit per cap's worth of starts. Its timeout starts when it starts.
// An attempt's goroutine gives its slot back the moment its executor
// returns, before its output and result are written. Safe for concurrent
// use.
type pool struct {
	mu       sync.Mutex
	caps     Pools
	local    int // local attempts holding a slot (running on this host)
	admitted int // local attempts recorded RUNNING and not ended: running or in the start queue
	byGroup  map[string]int
	byTask   map[string]int

	waiting queue.Queue[*slotWait] // the start queue: local attempts recorded, waiting for a slot
	waits   int                    // live entries in waiting (cancelled ones are skipped when popped)
	closed  bool                   // shut: nothing more is granted
	now     func() time.Time
	at      time.Time // the clock, read by lock before it took mu
	sec     int64     // the second the grant counts are of
	granted [2]int
	shown   map[string]bool // scopes with a series in ax_pool_running
}

// slotWait is one attempt in the start queue.
type slotWait struct {
	id      int64
	ready   chan struct{} // closed when granted or dropped
	granted bool
	dropped bool // the start queue was shut: the attempt never starts
	gone    bool // given up (its context ended): skipped in the queue, its slot passed on
}

func newPool(caps Pools, now func() time.Time) *pool {
	// The caps are the pool's own: a change at run time must not write
	// through into the caller's Config, which the next term starts from.
	caps.GroupMaxRunning = maps.Clone(caps.GroupMaxRunning)
	return &pool{caps: caps, byGroup: map[string]int{}, byTask: map[string]int{}, now: now}
}

// lock takes mu, reading the clock first (into at, which never goes back):
// an injected clock may block (a stopped process in the simulator), and
// then nothing may wait for mu behind it.
func (p *pool) lock() {
	now := p.now()
	p.mu.Lock()
	if now.After(p.at) {
		p.at = now
	}
}

func isLocal(t *defs.Task) bool { return t.Executor.Kind != defs.ExecHTTP }

// ahead is how many local attempts dispatch may record beyond the global
// cap, to wait in the start queue: the starts of the last two seconds, and
// at least the cap itself. Short commands (thousands of starts a second)
// are recorded a thousand at a time; long ones wait in the dispatch queue,
// unrecorded, as before. Called with mu held.
func (p *pool) ahead() int {
	p.roll()
	return max(p.caps.MaxRunning, p.granted[0]+p.granted[1])
}

// roll moves the grant counts to the current second. Called with mu held.
func (p *pool) roll() {
	sec := p.at.Unix()
	switch {
	case sec == p.sec:
	case sec == p.sec+1:
		p.granted = [2]int{p.granted[1], 0}
	default:
		p.granted = [2]int{}
	}
	p.sec = sec
}

// full says which cap holds another attempt of t back, or "" when none does.
func (p *pool) full(t *taskInfo) string {
	p.lock()
	defer p.mu.Unlock()
	d := t.def
	if d.MaxRunning > 0 && p.byTask[t.id] >= d.MaxRunning {
		return fmt.Sprintf("task %s has %d of %d running (max_running)", t.id, p.byTask[t.id], d.MaxRunning)
	}
	if c := p.caps.GroupMaxRunning[d.Group]; c > 0 && p.byGroup[d.Group] >= c {
		return fmt.Sprintf("group %s has %d of %d running", d.Group, p.byGroup[d.Group], c)
	}
	if c := p.caps.MaxRunning; c > 0 && isLocal(d) && p.admitted >= c+p.ahead() {
		return fmt.Sprintf("the server has %d of %d local attempts running (--max-running) and %d waiting to start", p.local, c, p.waits)
	}
	return ""
}

// add counts an attempt of t as recorded RUNNING.
func (p *pool) add(t *taskInfo) {
	p.lock()
	defer p.mu.Unlock()
	p.byTask[t.id]++
	p.byGroup[t.def.Group]++
	if isLocal(t.def) {
		p.admitted++
	}
}

// remove counts an attempt of t as ended.
func (p *pool) remove(t *taskInfo) {
	p.lock()
	defer p.mu.Unlock()
	if p.byTask[t.id]--; p.byTask[t.id] <= 0 {
		delete(p.byTask, t.id)
	}
	if p.byGroup[t.def.Group]--; p.byGroup[t.def.Group] <= 0 {
		delete(p.byGroup, t.def.Group)
	}
	if isLocal(t.def) && p.admitted > 0 {
		p.admitted--
	}
}

// errStartQueueShut is why an attempt in the start queue never started:
// the scheduler is stopping and gives it back.
var errStartQueueShut = errors.New("engine: stopped before a slot was free: not started")

// enqueue puts a local attempt in the start queue, in priority order
// (priority, then fire time, then the order of the calls): the loop calls
// it as it hands attempts out, so that the order is the dispatch order, not
// that of goroutines racing for a slot. It is granted at once when a slot
// is free. The attempt's goroutine waits for it with wait.
func (p *pool) enqueue(priority int, at, id int64) *slotWait {
	p.lock()
	defer p.mu.Unlock()
	w := &slotWait{id: id, ready: make(chan struct{})}
	if p.closed {
		w.dropped = true
		close(w.ready)
		return w
	}
	p.waiting.Push(priority, at, w)
	p.waits++
	p.wake()
	return w
}

// wait waits until w is granted a slot. It fails when ctx ends first (the
// attempt killed, the lease lost; the slot, if granted meanwhile, goes to
// the next) or the start queue is shut (errStartQueueShut); then the
// attempt never started.
func (p *pool) wait(ctx context.Context, w *slotWait) error {
	select {
	case <-w.ready:
	case <-ctx.Done():
	}
	p.lock()
	defer p.mu.Unlock()
	switch {
	case w.dropped:
		return errStartQueueShut
	case w.granted && ctx.Err() == nil:
		return nil
	}
	p.abandon(w)
	return context.Cause(ctx)
}

// cancel gives up w for an attempt that will not start.
func (p *pool) cancel(w *slotWait) {
	p.lock()
	defer p.mu.Unlock()
	p.abandon(w)
}

// abandon gives up w: its slot, if granted, goes to the next. Called with mu held.
func (p *pool) abandon(w *slotWait) {
	switch {
	case w.dropped || w.gone:
	case w.granted:
		w.gone = true
		p.local--
		p.wake()
	default:
		w.gone = true
		p.waits--
	}
}

// grant counts a slot taken. Called with mu held.
func (p *pool) grant() {
	p.local++
	p.roll()
	p.granted[1]++
}

// release gives a slot back and hands it to the first attempt waiting.
func (p *pool) release() {
	p.lock()
	defer p.mu.Unlock()
	if p.local > 0 {
		p.local--
	}
	p.wake()
}

// wake grants slots to waiting attempts while the cap allows. Called with mu held.
func (p *pool) wake() {
	for p.waits > 0 && !p.closed && (p.caps.MaxRunning <= 0 || p.local < p.caps.MaxRunning) {
		it, _ := p.waiting.Pop()
		w := it.Value
		if w.gone {
			continue
		}
		p.waits--
		w.granted = true
		p.grant()
		close(w.ready)
	}
}

// shut empties the start queue for good: the attempts waiting in it never
// start (their goroutines return without a result) and their ids are
// returned, for the loop to give them back.
func (p *pool) shut() []int64 {
	p.lock()
	defer p.mu.Unlock()
	p.closed = true
	var ids []int64
	for p.waiting.Len() > 0 {
		it, _ := p.waiting.Pop()
		if w := it.Value; !w.gone {
			w.dropped = true
			ids = append(ids, w.id)
			close(w.ready)
		}
	}
	p.waits = 0
	return ids
}

// state describes the global cap and the start queue, for ax explain.
func (p *pool) state() string {
	p.lock()
	defer p.mu.Unlock()
	return fmt.Sprintf("the server has %d of %d local attempts running (--max-running) and %d waiting to start", p.local, p.caps.MaxRunning, p.waits)
}

// unhold drops instance id from the attempts claimed ahead and held for
// their fire time; it stays in the running set until it ends.
func (d *dispatcher) unhold(id int64) { delete(d.held, id) }

// track records a as running instance id: in the running set, the overlap
// count of its task and the pools. Every attempt that starts or is taken
// over goes through here, and every one that ends through untrack.
func (d *dispatcher) track(id int64, a *attempt) {
	if old := d.running.get(id); old != nil {
		d.untrack(id)
	}
	d.running.add(id, a)
	a.freed = new(atomic.Bool)
	d.pool.add(a.task)
}

// free gives a's pool slot back, once, from whichever comes first: its
// executor returning or the loop forgetting it.
func (d *dispatcher) free(a *attempt) bool {
	if a.freed == nil || a.freed.Swap(true) { // not counted, or given back already
		return false
	}
	d.pool.remove(a.task)
	return true
}

// untrack forgets running instance id.
func (d *dispatcher) untrack(id int64) {
	if a := d.running.remove(id); a != nil {
		d.free(a)
	}
}

// set changes the caps: a nil global keeps it; a group at 0 lifts its cap.
func (p *pool) set(global *int, groups map[string]int) {
	p.lock()
	defer p.mu.Unlock()
	if global != nil {
		p.caps.MaxRunning = *global
		defer p.wake() // a higher cap starts what waits at once
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
	p.lock()
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
	p.lock()
	defer p.mu.Unlock()
	m.poolStarting.Set(float64(p.waits))
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
