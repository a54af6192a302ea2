package engine

import (
	"time"

	"github.com/ax-sched/ax/defs"
)

// The misfire rule has this one home: the scheduler's start
// (initTriggers) and resume (scheduleWoken) both decide through misfireSplit.

// DefaultMisfireAfter is the default misfire threshold (Config.MisfireAfter).
// Misfires are judged only when a scheduler starts or a task is resumed, never
// against a loop that is merely busy, so the threshold only has to absorb a
// quick restart or hand-over: a backlog whose earliest fire is at most 5 s late
// runs late; anything longer is an outage and follows the task's policy (an
// outage of 30 s under fire_once runs once).
const DefaultMisfireAfter = 5 * time.Second

// misfireSplit decides what runs of a backlog of n fires of one schedule or
// task that passed while nothing ran them, in fire-time order, the earliest
// due at first. When the earliest is at most after late (the misfire
// threshold, Config.MisfireAfter) there is no misfire: every
// fire runs late, once. Otherwise the policy decides over the whole backlog:
// fire_once runs the latest, skip none, fire_all the latest limit. It
// returns how many of the earliest fires are skipped, and whether the
// backlog was a misfire.
func misfireSplit(p defs.Misfire, n int, first, now time.Time, after time.Duration, limit int) (skip int, missed bool) {
	if n == 0 || !first.Before(now.Add(-after)) {
		return 0, false
	}
	return n - misfireKeep(p, n, limit), true
}

// misfireKeep returns how many of n missed fires a policy runs.
func misfireKeep(p defs.Misfire, n, limit int) int {
	switch p {
	case defs.MisfireSkip:
		return 0
	case defs.MisfireFireAll:
		return min(n, max(limit, 0))
	default:
		return min(n, 1)
	}
}
