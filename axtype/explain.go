package axtype

import "time"

// Explanation answers "why is this task not running, or why did it run
// late?" from live state, following the article's troubleshooting
// table: paused, waiting on an upstream, outside the wheel window, held by
// the token bucket, breaker open, no live executor, retries exhausted.
type Explanation struct {
	Task     string    `json:"task"`
	Now      time.Time `json:"now"`
	Live     bool      `json:"live"` // the primary's loop answered; false: from the store alone (a standby)
	Latest   *Instance `json:"latest_instance,omitempty"`
	Verdict  string    `json:"verdict"` // the first blocking finding, or that nothing holds it
	Findings []Finding `json:"findings"`
	// NextFires are the next ten fire times of the task's schedule (plus its delay).
	NextFires []time.Time `json:"next_fires"`
	// LastFires are the last ten dispatches, newest first.
	LastFires []Fire `json:"last_fires"`
}

// Finding is one check of an explanation.
type Finding struct {
	Check  string `json:"check"`  // paused, state, upstream, cross, delay, window, queue, pool, bucket, breaker, executor, retries
	Blocks bool   `json:"blocks"` // it keeps the task from running now
	Detail string `json:"detail"`
}

// Fire is one dispatch: when it was due and when it went out.
type Fire struct {
	Instance   int64         `json:"instance_id"`
	Ticket     string        `json:"ticket"`
	Due        time.Time     `json:"due,omitzero"`
	Dispatched time.Time     `json:"dispatched"`
	Late       time.Duration `json:"late_ns"`
	Executor   string        `json:"executor,omitempty"` // what ran that attempt, when recorded
}
