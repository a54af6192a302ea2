package store

import "github.com/ax-sched/ax/axtype"

// The public vocabulary the store keeps, defined in axtype.

type PauseScope = axtype.PauseScope

const (
	ScopeTask     = axtype.ScopeTask
	ScopeGroup    = axtype.ScopeGroup
	ScopePipeline = axtype.ScopePipeline
)

type (
	HistoryRow = axtype.HistoryRow
	Action     = axtype.Action
	Backfill   = axtype.Backfill
	Progress   = axtype.Progress
)
