package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"
)

// runCache is the loop's cache of the store's runs: the instances of the
// active runs (what the resolver decides readiness from), the kind of each
// run seen (schedule, manual or backfill: what pauses, overlap and
// cross-pipeline waits apply to) and the --param values of manual runs.
// The resolver owns it; the loop goroutine is the only one to touch it.
//
// Its rules: the store is the truth, the cache a copy that
// compare-and-set keeps honest (a stale entry makes a transition fail, and
// the run is dropped and read again on next use: dropRunOf, invalidate);
// a run leaves the cache once nothing of it is in flight (forgetDone). It
// must not write to the store, nor decide anything: it only remembers.
//
// Every operation the loop does on a dispatch, a result or a skip costs
// O(1) in the number of cached runs (O(size of the run) where it walks
// one): owner finds the run of an instance without a scan, and idle holds
// the runs whose last in-flight instance ended since forgetAllDone last ran,
// so that it looks at those alone.
type runCache struct {
	src    runSource
	runs   map[int64]*runState
	owner  map[int64]int64     // instance id → the id of its cached run
	idle   map[int64]*runState // cached runs that may have nothing in flight: forgetAllDone's to look at
	kinds  map[int64]axtype.RunKind
	params map[int64]map[string]any // the --param values of manual runs that have some
	waits  map[int64]bool           // backfill runs: whether they wait for other pipelines (waitsCross)
}

// runSource is what the run cache reads from the store.
type runSource interface {
	Instances(ctx context.Context, f store.InstanceFilter) ([]axtype.Instance, error)
	Run(ctx context.Context, id int64) (axtype.Run, error)
	Backfills(ctx context.Context, id int64) ([]store.Backfill, error)
}

func newRunCache(src runSource) runCache {
	return runCache{src: src, runs: map[int64]*runState{}, owner: map[int64]int64{}, idle: map[int64]*runState{}, kinds: map[int64]axtype.RunKind{}, params: map[int64]map[string]any{}, waits: map[int64]bool{}}
}

// runState caches the instances of an active run: enough to decide which
// downstream instances an upstream's success releases. Compare-and-set keeps
// it honest: a stale entry makes a transition fail, and the run is reloaded.
type runState struct {
	id      int64
	logical time.Time
	// since is when its waits began: its logical time, or its creation when
	// that came later (a backfill, a trigger --at a past time). Wait limits
	// count from it.
	since   time.Time
	created time.Time           // when the run was created (an operator's run fires then)
	inst    map[string]*instRef // by task id
	// live counts its instances in flight (inFlightState); idle is the
	// cache's set that set adds the run to when live drops to zero (nil
	// while the run is not cached).
	live int
	idle map[int64]*runState
}

// inFlightState reports whether an instance in state still holds its run
// in the cache: scheduled, running or retrying.
func inFlightState(s axtype.State) bool {
	return s == axtype.Scheduled || s == axtype.Running || s == axtype.Retrying
}

type instRef struct {
	id       int64
	version  int64
	state    axtype.State
	err      string // its error: a skip, a failure, or why it failed without running
	approved bool   // a manual gate an operator released
	attempt  int
}

func newRunState(id int64, logical time.Time, insts []axtype.Instance) *runState {
	rs := &runState{id: id, logical: logical, since: logical, inst: make(map[string]*instRef, len(insts))}
	if len(insts) > 0 {
		rs.created = insts[0].CreatedAt
		rs.since = later(rs.since, rs.created)
	}
	for _, in := range insts {
		rs.inst[in.TaskID] = &instRef{id: in.ID, version: in.Version, state: in.State, err: in.Error, approved: in.ApprovedBy != "", attempt: in.Attempt}
	}
	return rs
}

// get returns the cached state of a run, loading it from the store if needed.
func (c *runCache) get(ctx context.Context, id int64) (*runState, error) {
	if rs := c.runs[id]; rs != nil {
		return rs, nil
	}
	insts, err := c.src.Instances(ctx, store.InstanceFilter{RunID: id, Limit: 1 << 20})
	if err != nil {
		return nil, err
	}
	if len(insts) == 0 {
		return nil, fmt.Errorf("engine: run %d has no instances", id)
	}
	rs := newRunState(id, insts[0].LogicalTime, insts)
	c.put(rs)
	return rs, nil
}

// put caches rs, in place of any earlier state of its run.
func (c *runCache) put(rs *runState) {
	c.drop(rs.id)
	c.runs[rs.id] = rs
	rs.live, rs.idle = 0, c.idle
	for _, ref := range rs.inst {
		c.owner[ref.id] = rs.id
		if inFlightState(ref.state) {
			rs.live++
		}
	}
	if rs.live == 0 {
		c.idle[rs.id] = rs
	}
}

// cached returns the cached state of a run, or nil: never read from the store.
func (c *runCache) cached(id int64) *runState { return c.runs[id] }

// created caches a run just created, of kind, with its --param values
// (a JSON object, for a manual run).
func (c *runCache) created(rs *runState, kind axtype.RunKind, params string) {
	c.put(rs)
	c.kinds[rs.id] = kind
	if kind == axtype.RunManual {
		c.rememberParams(rs.id, params)
	}
}

// setState records that the instance of task in run is now in state at
// version, when the run is cached.
func (c *runCache) setState(run int64, task string, state axtype.State, version int64) {
	if rs := c.runs[run]; rs != nil {
		rs.set(task, state, version)
	}
}

// dispatched records that the instance of task was dispatched as attempt
// att, now RUNNING at version: a release of it later in the run (a rerun
// brings it back to WAITING) numbers its next attempt past att.
func (c *runCache) dispatched(run int64, task string, version int64, att int) {
	if rs := c.runs[run]; rs != nil {
		if ref := rs.set(task, axtype.Running, version); ref != nil {
			ref.attempt = att
		}
	}
}

// set records that the instance of task is now in state at version, and
// returns it (nil when the run has no instance of task).
func (rs *runState) set(task string, state axtype.State, version int64) *instRef {
	ref := rs.inst[task]
	if ref == nil {
		return nil
	}
	was := inFlightState(ref.state)
	ref.state, ref.version = state, version
	switch now := inFlightState(state); {
	case was && !now:
		rs.live--
		if rs.live == 0 && rs.idle != nil {
			rs.idle[rs.id] = rs
		}
	case !was && now:
		rs.live++
	}
	return ref
}

// over reports whether every instance of the run ended, and how the run
// ended: SUCCESS when every one succeeded, else FAILED.
func (rs *runState) over() (bool, axtype.State) {
	state := axtype.Success
	for _, ref := range rs.inst {
		if !ends(ref.state) {
			return false, ""
		}
		if ref.state != axtype.Success {
			state = axtype.Failed
		}
	}
	return true, state
}

// drop forgets the instances of run: they are read again on next use.
func (c *runCache) drop(run int64) {
	rs := c.runs[run]
	if rs == nil {
		return
	}
	delete(c.runs, run)
	delete(c.idle, run)
	rs.idle = nil
	for _, ref := range rs.inst {
		if c.owner[ref.id] == run {
			delete(c.owner, ref.id)
		}
	}
}

// forget forgets all of run, its kind too (a run that no longer exists).
func (c *runCache) forget(run int64) {
	c.drop(run)
	delete(c.kinds, run)
}

// invalidate forgets the instances of every run: after a failed write the
// cache may be ahead of the store, and a new term reads the store again.
func (c *runCache) invalidate() {
	for _, rs := range c.runs {
		rs.idle = nil
	}
	clear(c.runs)
	clear(c.owner)
	clear(c.idle)
}

// dropRunOf forgets the run that holds instance: its cached state is stale.
func (c *runCache) dropRunOf(instance int64) {
	if run, ok := c.owner[instance]; ok {
		c.drop(run)
	}
}

// forgetDone drops a run from the cache once nothing of it is in flight
// (scheduled, running or retrying); it is reloaded if an operator moves it.
func (c *runCache) forgetDone(rs *runState) {
	if rs.live == 0 && c.runs[rs.id] == rs {
		c.drop(rs.id)
	}
}

// forgetAllDone drops every cached run with nothing in flight: the runs
// whose last instance in flight ended since it last ran (idle), so that
// its cost follows what changed, not what is cached.
func (c *runCache) forgetAllDone() {
	for _, rs := range c.idle {
		c.forgetDone(rs)
	}
	clear(c.idle)
}

// kindOf returns the kind of a run (cached; schedule when unknown).
func (c *runCache) kindOf(ctx context.Context, runID int64) axtype.RunKind {
	if k, ok := c.kinds[runID]; ok {
		return k
	}
	r, err := c.src.Run(ctx, runID)
	if err != nil {
		return axtype.RunSchedule
	}
	if len(c.kinds) > 100_000 {
		clear(c.kinds)
	}
	c.kinds[r.ID] = r.Kind
	return r.Kind
}

// fireOf returns when run rs fires (runFire: an operator's run when it
// was created, any other at its logical time).
func (c *runCache) fireOf(ctx context.Context, rs *runState) time.Time {
	return runFire(c.kindOf(ctx, rs.id), rs.logical, rs.created)
}

// waitsCross reports whether a run waits for its tasks' upstreams in other
// pipelines: every run does but a backfill's not told to (--wait-cross,
// BackfillSpec.WaitCross), whose selection counts them as done.
func (c *runCache) waitsCross(ctx context.Context, runID int64) bool {
	if c.kindOf(ctx, runID) != axtype.RunBackfill {
		return true
	}
	if w, ok := c.waits[runID]; ok {
		return w
	}
	r, err := c.src.Run(ctx, runID)
	if err != nil {
		return false
	}
	bs, err := c.src.Backfills(ctx, r.BackfillID)
	if err != nil || len(bs) != 1 {
		return false
	}
	var spec BackfillSpec
	_ = json.Unmarshal([]byte(bs[0].Spec), &spec) // written by CreateBackfill
	if len(c.waits) > 100_000 {
		clear(c.waits)
	}
	c.waits[runID] = spec.WaitCross
	return spec.WaitCross
}

// rememberParams caches a run's --param values (a JSON object).
func (c *runCache) rememberParams(run int64, raw string) {
	var m map[string]any
	if raw != "" {
		_ = json.Unmarshal([]byte(raw), &m) // written by encodeParams: a JSON object of strings
	}
	if len(c.params) > 10_000 {
		clear(c.params)
	}
	c.params[run] = m
}

// paramsOf returns the params an attempt of a task in run gets: the task's,
// with the run's --param values over them. Only operator and backfill
// runs carry them; schedule runs cost no lookup.
func (c *runCache) paramsOf(run int64, task map[string]any) map[string]any {
	if k := c.kindOf(context.Background(), run); k != axtype.RunManual && k != axtype.RunBackfill {
		return task
	}
	extra, ok := c.params[run]
	if !ok {
		r, err := c.src.Run(context.Background(), run)
		if err != nil {
			return task
		}
		c.rememberParams(run, r.Params)
		extra = c.params[run]
	}
	if len(extra) == 0 {
		return task
	}
	out := make(map[string]any, len(task)+len(extra))
	for k, v := range task {
		out[k] = v
	}
	for k, v := range extra {
		out[k] = v
	}
	return out
}
