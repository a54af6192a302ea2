package engine

import (
	"iter"
	"maps"
)

// inflight is the set of attempts in flight: every instance recorded
// RUNNING that this process tracks (handed out, claimed ahead and held, or
// inherited from a previous primary), by instance id, with the count of
// live attempts (of schedule runs) per task that the overlap rule reads.
// The dispatcher owns it: an attempt enters it at hand-out or takeover
// (dispatcher.track), and leaves it when its result is recorded, it is killed
// or given back (dispatcher.untrack), which also keep the pools in step.
//
// Its rule: the per-task count is the number of live attempts in the set,
// kept by add and remove alone. It must not judge results nor start
// anything: it only remembers what runs. The loop goroutine owns it.
type inflight struct {
	byID   map[int64]*attempt
	byTask map[string]int // live attempts per task, for the overlap rule
}

func newInflight() inflight {
	return inflight{byID: map[int64]*attempt{}, byTask: map[string]int{}}
}

// get returns the attempt of instance id in flight, or nil.
func (f *inflight) get(id int64) *attempt { return f.byID[id] }

// len returns how many attempts are in flight.
func (f *inflight) len() int { return len(f.byID) }

// live returns how many live attempts (of schedule runs) task has in flight.
func (f *inflight) live(task string) int { return f.byTask[task] }

// tasks returns how many tasks have a live attempt in flight.
func (f *inflight) tasks() int { return len(f.byTask) }

// all iterates over the attempts in flight, in no order; ids gives the
// order when it matters.
func (f *inflight) all() iter.Seq2[int64, *attempt] { return maps.All(f.byID) }

// ids returns the instance ids in flight, in order.
func (f *inflight) ids() []int64 { return sortedIDs(f.byID) }

// byTicket returns the instance whose attempt in flight has ticket.
func (f *inflight) byTicket(ticket string) (int64, bool) {
	for id, a := range f.byID {
		if a.ticket == ticket {
			return id, true
		}
	}
	return 0, false
}

// add puts a in flight as instance id; an attempt in flight for id already
// must be removed first.
func (f *inflight) add(id int64, a *attempt) {
	f.byID[id] = a
	if a.live {
		f.byTask[a.task.id]++
	}
}

// remove takes instance id out of flight and returns its attempt (nil when
// none was).
func (f *inflight) remove(id int64) *attempt {
	a := f.byID[id]
	if a == nil {
		return nil
	}
	delete(f.byID, id)
	if a.live {
		if f.byTask[a.task.id]--; f.byTask[a.task.id] <= 0 {
			delete(f.byTask, a.task.id)
		}
	}
	return a
}
