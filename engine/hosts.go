package engine

import (
	"context"
	"time"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/store"
)

// The engine answers what its components ask of each other (their host
// interfaces, declared beside each component) by handing the question to
// the component that owns the answer; no component holds another.

// termEpoch is the leadership's epoch of the term.
func (e *Engine) termEpoch() int64 { return e.leadership.termEpoch() }

// renewAhead asks the leadership to renew the lease before a long write.
func (e *Engine) renewAhead(ctx context.Context) { e.leadership.renewAhead(ctx) }

// leader is the leadership's judgement that the lease is safely held.
func (e *Engine) leader(now time.Time) bool { return e.leadership.leader(now) }

// inFlight reports whether the dispatcher runs instance id.
func (e *Engine) inFlight(id int64) bool { return e.dispatcher.inFlight(id) }

// waiting asks the dispatcher whether it holds instance id at version.
func (e *Engine) waiting(id, version int64) bool { return e.dispatcher.waiting(id, version) }

// expect hands the dispatcher an instance the planner put in its wheel (or
// that is due now).
func (e *Engine) expect(id int64, p *pend, dueNow bool) { e.dispatcher.expect(id, p, dueNow) }

// soon asks the dispatcher for a turn soon.
func (e *Engine) soon() { e.dispatcher.soon() }

// enqueue hands an instance to the planner's wheel.
func (e *Engine) enqueue(ctx context.Context, in axtype.Instance) { e.planner.enqueue(ctx, in) }

// released hands the completer the releases a hand-out recorded.
func (e *Engine) released(ctx context.Context, rel []release, res []store.BatchResult) {
	e.completer.released(ctx, rel, res)
}

// report hands the completer an attempt's outcome.
func (e *Engine) report(o outcome) { e.completer.report(o) }

// newRunWith asks the planner for a new run.
func (e *Engine) newRunWith(ctx context.Context, spec newRunSpec, now time.Time) (*runState, error) {
	return e.planner.newRunWith(ctx, spec, now)
}

// runFinished asks the resolver whether a run has ended.
func (e *Engine) runFinished(ctx context.Context, runID int64) (bool, []string, error) {
	return e.resolver.runFinished(ctx, runID)
}
