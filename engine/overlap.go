package engine

import (
	"time"

	"github.com/ax-sched/ax/defs"
)

// The overlap rule has this one home: dispatchBatch asks
// overlapDecide about every instance of a schedule run before claiming it.

// overlapVerdict is what the overlap rule does with an instance due now or
// about to be claimed ahead of its fire time.
type overlapVerdict int

const (
	overlapGo    overlapVerdict = iota // dispatch it (claimed ahead when not due yet)
	overlapLater                       // not due yet while another attempt of the task is live: judge it at its fire time
	overlapWait                        // queue behind the attempt that runs
	overlapSkip                        // fail it as skipped: the previous attempt still runs
)

// lateFire is how late an instance may be and still count as arriving on
// time; a later one (held back by the rate limit, say) queues behind a
// running attempt instead of being skipped. A catch-up the misfire rule
// chose to run (due at or before backlog) queues however little late it is.
const lateFire = 2 * time.Second

// overlapDecide applies a task's overlap policy to its instance due at due,
// at time now. running counts the task's attempts of schedule runs that
// really run (started); held those claimed ahead that have not started yet;
// claimed those dispatched in the current batch; backlog is when the misfire
// rule last judged the task's missed fires. The policy is judged at the
// fire time against attempts really running then: an instance not due yet
// is claimed ahead only when nothing else of the task is live, since nobody
// can know whether the attempt running now still runs at its fire time.
// A retry (an instance RETRYING: its attempt failed, or was refused or
// given back) is no fire: its fire was judged when it first went out, so it
// queues behind a running attempt and is never skipped; nor is an
// operator's rerun of an instance that ran (the caller says both).
func overlapDecide(p defs.Overlap, due, now, backlog time.Time, running, held, claimed int, retry bool) overlapVerdict {
	switch {
	case p == defs.OverlapAllow:
		return overlapGo
	case due.After(now):
		if running+held+claimed > 0 {
			return overlapLater
		}
		return overlapGo
	case running > 0:
		if p == defs.OverlapWait || retry || now.Sub(due) > lateFire || !due.After(backlog) {
			return overlapWait
		}
		return overlapSkip
	case held+claimed > 0:
		// Another instance of the task goes out first (a catch-up): not an
		// overlap with a running one; this one waits its turn.
		return overlapWait
	default:
		return overlapGo
	}
}

// liveAttempts are a task's live attempts (of schedule runs) as the overlap
// rule sees them: how many are claimed ahead and not started, and when each
// of the others started.
type liveAttempts struct {
	held    int
	started []time.Time
}

// at splits the live attempts for a fire due at due: running are those
// that ran at the fire time (started at or before it); held those that had
// not started then, claimed ahead or dispatched after it (a catch-up held
// back by a cap, say). A fire that fell due while its predecessor only
// waited to start is no overlap: it queues behind, it is not skipped.
func (l liveAttempts) at(due time.Time) (running, held int) {
	for _, s := range l.started {
		if s.After(due) {
			held++
		} else {
			running++
		}
	}
	return running, held + l.held
}

// liveByTask gathers the live attempts per task, for one dispatch batch.
func (d *dispatcher) liveByTask() map[string]liveAttempts {
	m := make(map[string]liveAttempts, d.running.tasks())
	for id, a := range d.running.all() {
		if !a.live {
			continue
		}
		l := m[a.task.id]
		switch start, ok := a.startedAt(); {
		case d.held[id] != nil || !ok:
			l.held++
		default:
			l.started = append(l.started, start)
		}
		m[a.task.id] = l
	}
	return m
}

// startedAt returns when a really started: a local attempt recorded
// RUNNING may still wait in the start queue for a slot (ok false), and
// starts when its goroutine takes one (begun).
func (a *attempt) startedAt() (time.Time, bool) {
	if a.begun != nil {
		if at := a.begun.Load(); at != 0 {
			return time.Unix(0, at), true
		}
	}
	if a.queued {
		return time.Time{}, false
	}
	return a.started, true
}
