package engine

import "github.com/ax-sched/ax/axtype"

// The public vocabulary the engine speaks, defined in axtype so that the
// client commands can name it without the engine.

type (
	Explanation  = axtype.Explanation
	Finding      = axtype.Finding
	Fire         = axtype.Fire
	BackfillSpec = axtype.BackfillSpec
	CrossWait    = axtype.CrossWait
)

// Backfill rerun policies and record states.
const (
	RerunNone   = axtype.RerunNone
	RerunFailed = axtype.RerunFailed
	RerunAll    = axtype.RerunAll

	BackfillPending   = axtype.BackfillPending
	BackfillRunning   = axtype.BackfillRunning
	BackfillDone      = axtype.BackfillDone
	BackfillFailed    = axtype.BackfillFailed
	BackfillCancelled = axtype.BackfillCancelled
)
