package engine

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ax-sched/ax/axtype"
	"github.com/ax-sched/ax/defs"
	"github.com/ax-sched/ax/runner"
	"github.com/ax-sched/ax/store"
)

// pend is an instance waiting in the wheel or the queue.
type pend struct {
	at        int64 // fire time, Unix ms: keeps the queue order when put back
	version   int64
	state     axtype.State // SCHEDULED or RETRYING
	task      *taskInfo
	runID     int64
	logical   time.Time
	attempt   int            // the number of its last attempt (0: none yet)
	counted   int            // its attempts counted against its retries
	manual    bool           // a run-now or rerun: overlap does not hold it back (a pause does)
	kind      axtype.RunKind // overlap is judged among schedule runs only
	throttled bool           // held back by the token bucket at least once
	capped    string         // the concurrency cap that held it back at the last dispatch, if any
	unrouted  string         // why no executor could take it at the last dispatch, if so (unrouted)
	cut       bool           // held back by its task's open breaker (logged once)
}

// nextAttempt is the one numbering of attempts: every dispatch of an
// instance (its first, a retry, a dispatch after a give-back or a refusal,
// an operator's rerun) is a new attempt, numbered one past the instance's
// last so that no number repeats within an instance and each attempt's
// output and record are its own, and counted once more against its
// retries. What is not counted (a give-back, a refusal: uncounted) or
// starts the count again (a rerun: rerunCounted) changes the count, never
// the number. A ticket sent again that never reached an executor
// (resolved, orphan.go) and an attempt a new primary inherits keep their
// attempt: no new one was dispatched.
func nextAttempt(last, counted int) (number, nowCounted int) {
	return last + 1, counted + 1
}

// rerunCounted is the count of attempts an operator's rerun starts from:
// a rerun has every retry of its task again.
const rerunCounted = 0

// uncounted is the instance's count of attempts once a is given back or
// refused: a does not count against its retries (its number stays used).
func (a *attempt) uncounted() int { return max(a.counted-1, 0) }

// attempt is a dispatched instance awaiting its result.
type attempt struct {
	ticket   string
	version  int64
	task     *taskInfo
	runID    int64
	logical  time.Time
	attempt  int // its number (nextAttempt): its output and record are keyed by it
	counted  int // the instance's attempts counted against its retries, this one included
	deadline time.Time
	orphan   bool                    // left RUNNING by a previous process: nothing here runs it
	cancel   context.CancelCauseFunc // stops the attempt on its executor (kill)
	live     bool                    // of a schedule run: counts for the overlap policy
	kind     axtype.RunKind          // of its run: what its start counts as in the latency metrics
	due      time.Time               // its fire time
	started  time.Time               // when it started (claimed ahead: its fire time); the overlap rule compares fire times with it
	held     bool                    // claimed ahead: not handed to its executor yet
	// claimEpoch, for an attempt claimed ahead, is the epoch that claimed
	// it: its hand-out is recorded under it (recordHandOut).
	claimEpoch int64
	// queued: a local attempt not known to the loop to have started (it
	// waits for a slot in the start queue, see execute); its deadline counts
	// from begun, the UnixNano its goroutine started it at (see begin).
	queued bool
	begun  *atomic.Int64
	slot   *slotWait    // its place in the start queue (local attempts), set by the loop as it hands it out
	freed  *atomic.Bool // its pool slot was given back (see dispatcher.free); set by track
	// interrupted: still running when the shutdown grace ended and cancelled
	// with errInterrupted; unless it succeeded it is given back, not failed.
	interrupted bool
	// proc, for an orphan command attempt, is where its process group was
	// recorded to run (see checkGroups); nil when none was recorded.
	proc *runner.Process
	// queueWait is its task's series of ax_task_queue_wait_seconds, found
	// on the loop (queueWaitOf) for its goroutine to observe.
	queueWait prometheus.Observer
	instance  int64 // its instance's id, for its events
}

// event is an Event of a, of kind, at at.
func (a *attempt) event(kind string, at time.Time) Event {
	started := a.started
	if a.begun != nil && a.begun.Load() > 0 {
		started = time.Unix(0, a.begun.Load())
	}
	return Event{Kind: kind, Pipeline: a.task.def.Pipeline, Task: a.task.id, Run: a.runID, Logical: a.logical, Ticket: a.ticket,
		Instance: a.instance, Attempt: a.attempt, Due: a.due, Started: started, At: at}
}

// outcome is a result from an executor, for an instance.
type outcome struct {
	instance int64
	res      runner.Result
	resolve  string // when set: what executors answered about an inherited ticket (orphan.go), not a result
	// notStarted, for an attempt given back at shutdown before it started
	// (giveBack), is why: the reason of its RUNNING → RETRYING.
	notStarted string
	// silentDone, when set, is the silent executor whose /status gave this
	// result (askSilent): recorded as such.
	silentDone string
	// givenBackErr, when set, is the instance's error for an attempt given
	// back that was never started (the default: "interrupted by shutdown").
	givenBackErr string
	// The attempt's last output and its record, written in the transaction
	// that records the result (nil for results that did not come from an
	// attempt of this process).
	logs *store.LogWrite
}

// deadlineAfter is the one rule of an attempt's deadline: its task's
// timeout, counted from when the attempt started (from: its real start,
// or, for an attempt inherited or sent again, the latest time it may have
// started).
func deadlineAfter(from time.Time, t *defs.Task) time.Time { return from.Add(t.Timeout) }

// startedFrom is when a started as its deadline counts it: its deadline
// less its task's timeout.
func (a *attempt) startedFrom() time.Time { return a.deadline.Add(-a.task.def.Timeout) }

// begin takes in, on the loop, the start of a local attempt: from then on
// its deadline counts from when it really started, not from its dispatch.
// It reports false while the attempt still waits in the start queue.
func (a *attempt) begin() bool {
	if !a.queued {
		return true
	}
	at := a.begun.Load()
	if at <= 0 {
		return false // waiting for a slot, or withdrawn
	}
	a.queued, a.deadline = false, deadlineAfter(time.Unix(0, at), a.task.def)
	return true
}

// errWithdrawn is why an attempt in the start queue did not start: the
// loop withdrew it (its task was removed) and recorded its end itself.
var errWithdrawn = errors.New("engine: withdrawn from the start queue")

// withdraw takes back an attempt waiting in the start queue before its
// goroutine starts it, and reports whether it did: after it, the attempt
// never starts (slot gives errWithdrawn).
func (a *attempt) withdraw() bool {
	return a.queued && a.begun.CompareAndSwap(0, -1)
}
