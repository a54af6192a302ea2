package axtype

import "time"

// RunKind says what started a run.
type RunKind string

// Run kinds.
const (
	RunSchedule RunKind = "schedule" // a pipeline schedule or task cron fired
	RunManual   RunKind = "manual"   // an operator's run-now
	RunBackfill RunKind = "backfill" // a backfill over past logical times
)

// Run is one execution of a set of tasks for one logical time.
type Run struct {
	ID          int64     `json:"id"`
	Pipeline    string    `json:"pipeline"`
	Trigger     string    `json:"trigger"` // `pipeline` or `pipeline.task`
	Kind        RunKind   `json:"kind"`
	LogicalTime time.Time `json:"logical_time"`
	BackfillID  int64     `json:"backfill_id,omitempty"`
	Actor       string    `json:"actor"`
	CreatedAt   time.Time `json:"created_at"`
	// Params are the trigger's --param values (JSON object), merged over
	// each task's params; empty when none were given.
	Params string `json:"params,omitempty"`
}

// Instance is one task of one run: the unit the state machine moves.
type Instance struct {
	ID       int64  `json:"id"`
	RunID    int64  `json:"run_id"`
	TaskID   string `json:"task"` // `pipeline.task`
	Pipeline string `json:"pipeline"`
	Group    string `json:"group"`
	State    State  `json:"state"`
	Version  int64  `json:"version"`
	Ticket   string `json:"ticket,omitempty"`
	// Attempt is the number of the instance's latest attempt: every
	// dispatch is one past the one before, so numbers never repeat (0:
	// never dispatched).
	Attempt int `json:"attempt"`
	// Counted is how many of its attempts count against its retries: an
	// attempt given back at a shutdown or refused by every executor is
	// not, and a rerun starts again from 0.
	Counted     int       `json:"counted"`
	Priority    int       `json:"priority"`
	LogicalTime time.Time `json:"logical_time"`
	NextFireAt  time.Time `json:"next_fire_at,omitzero"`
	Executor    string    `json:"executor,omitempty"`
	StartedAt   time.Time `json:"started_at,omitzero"`
	EndedAt     time.Time `json:"ended_at,omitzero"`
	Error       string    `json:"error,omitempty"`
	Reason      string    `json:"reason,omitempty"` // why it waits, when it does
	// ApprovedBy is who released a manual gate; empty while it awaits
	// approval (and for tasks that are not manual).
	ApprovedBy string    `json:"approved_by,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`
}
