package axtype

// State is the state of a task instance: exactly one of eight.
type State string

// The eight states.
const (
	Waiting   State = "WAITING"   // registered, waiting for its trigger or its upstreams
	Scheduled State = "SCHEDULED" // fire time computed, waiting to be dispatched
	Running   State = "RUNNING"   // handed to an executor
	Retrying  State = "RETRYING"  // failed, waiting for its retry time
	Success   State = "SUCCESS"   // succeeded
	Failed    State = "FAILED"    // retries exhausted
	Paused    State = "PAUSED"    // paused by an operator, takes no part in scheduling
	Killed    State = "KILLED"    // stopped by force while running
)

// States lists the eight states in the order of the state table (docs/states.md).
var States = []State{Waiting, Scheduled, Running, Retrying, Success, Failed, Paused, Killed}

// transitions is the transition table (docs/states.md), the one place it is written.
// Edges beyond the article's table, each documented in the README's state
// machine section:
//   - SCHEDULED → PAUSED and RETRYING → PAUSED: an instance
//     waiting in the wheel can be paused.
//   - WAITING → FAILED: an upstream failed, was killed or skipped, the
//     wait limit passed, or an operator cancelled the run or marked it failed;
//     the instance never ran (attempt 0).
//   - FAILED → WAITING: a rerun of the upstream brings back the
//     downstream that failed without running.
//   - WAITING, FAILED, KILLED → SUCCESS and KILLED → FAILED: an
//     operator marks the outcome (ax mark).
//   - PAUSED → FAILED: an operator cancels the run.
//   - SUCCESS → WAITING: a rerun of an instance an operator marked
//     SUCCESS without it running (attempt 0): like any instance that never
//     ran, it waits for its upstreams again instead of starting before them.
var transitions = map[State][]State{
	Waiting:   {Scheduled, Paused, Failed, Success}, // + FAILED, SUCCESS (additions)
	Scheduled: {Running, Failed, Paused},            // + PAUSED (addition)
	Running:   {Success, Failed, Retrying, Killed},
	Retrying:  {Running, Failed, Paused},   // + PAUSED (addition)
	Success:   {Scheduled, Waiting},        // + WAITING (addition)
	Failed:    {Running, Waiting, Success}, // + WAITING, SUCCESS (additions)
	Paused:    {Waiting, Running, Failed},  // + FAILED (addition)
	Killed:    {Waiting, Success, Failed},  // + SUCCESS, FAILED (additions)
}

// Valid reports whether s is one of the eight states.
func (s State) Valid() bool {
	_, ok := transitions[s]
	return ok
}

// CanTransition reports whether the table allows from → to.
func CanTransition(from, to State) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// Next returns the states from may move to, as a copy the caller may keep.
func Next(from State) []State { return append([]State(nil), transitions[from]...) }

// Terminal reports whether s ends an instance's attempt chain (until an
// operator reruns it): SUCCESS, FAILED or KILLED.
func (s State) Terminal() bool { return s == Success || s == Failed || s == Killed }
