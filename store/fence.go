package store

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/ax-sched/ax/axtype"
)

// Fence is the primary scheduler's one handle for writes: every
// statement it runs is conditioned, in its own transaction, on its epoch
// still being the lease's current epoch, so that a process that lost the
// lease (stalled, partitioned) writes nothing at all. Methods with the same
// name on Store write unfenced and are for operator tools and tests; the
// engine writes only through a Fence. A Fence is safe for concurrent use.
type Fence struct {
	s     *Store
	epoch int64
}

// Fence returns the write handle of the holder of epoch. Epoch 0 has no
// lease: every write through it fails with ErrNotLeader.
func (s *Store) Fence(epoch int64) *Fence { return &Fence{s: s, epoch: epoch} }

// Epoch returns the epoch the fence carries.
func (f *Fence) Epoch() int64 { return f.epoch }

// tx runs fn in a write transaction fenced by the fence's epoch (inTxFenced).
func (f *Fence) tx(ctx context.Context, what string, fn func(tx *sql.Tx) error) error {
	if f.epoch <= 0 {
		return fmt.Errorf("store: %s: %w (no epoch held)", what, ErrNotLeader)
	}
	return f.s.inTxFenced(ctx, what, f.epoch, fn)
}

// inTxFenced runs fn in a write transaction that first checks that epoch is
// the current one (epoch 0: no check). The check is a locking read of the
// fence row (FenceName) on MySQL, taken before any other row is locked and
// held to the commit: a takeover waits for the transaction, and a holder
// stalled inside it (SIGSTOP, a frozen VM) is found by the takeover as the
// fence row's blocker and its connection ended (breakStalledHolder).
// Renewals of the lease write the lease row only, so they never wait for
// it, however long it is (10,000 definitions synced, a run of 10,000
// instances created, a prune batch). When the check came last, to keep
// such writes from delaying renewals, a holder stalled inside one held
// their rows but not the lease row, and the new primary's writes waited
// on them up to innodb_lock_wait_timeout.
func (s *Store) inTxFenced(ctx context.Context, what string, epoch int64, fn func(tx *sql.Tx) error) error {
	return s.inTx(ctx, what, func(tx *sql.Tx) error {
		if err := s.checkEpoch(ctx, tx, epoch); err != nil {
			return fmt.Errorf("store: %s: %w", what, err)
		}
		return fn(tx)
	})
}

// Transition is Store.Transition at the fence's epoch.
func (f *Fence) Transition(ctx context.Context, p TransitionParams) (int64, error) {
	if f.epoch <= 0 {
		return 0, fmt.Errorf("store: transition: %w (no epoch held)", ErrNotLeader)
	}
	p.Epoch = f.epoch
	return f.s.Transition(ctx, p)
}

// TransitionBatch is Store.TransitionBatch at the fence's epoch.
func (f *Fence) TransitionBatch(ctx context.Context, ps []TransitionParams) ([]BatchResult, error) {
	out, _, err := f.TransitionBatchThen(ctx, ps, nil)
	return out, err
}

// TransitionBatchThen is Store.TransitionBatchThen at the fence's epoch.
func (f *Fence) TransitionBatchThen(ctx context.Context, ps []TransitionParams, then func([]BatchResult) ([]TransitionParams, error)) (first, second []BatchResult, err error) {
	return f.TransitionBatchLogs(ctx, ps, LogWrite{}, then)
}

// TransitionBatchLogs is TransitionBatchThen that also writes logs (the last
// output and the records of attempts that ended) in the same transaction, at
// the fence's epoch: results and the output of their attempts commit
// together, in one transaction instead of two. With no transitions it is
// WriteLogs.
func (f *Fence) TransitionBatchLogs(ctx context.Context, ps []TransitionParams, logs LogWrite, then func([]BatchResult) ([]TransitionParams, error)) (first, second []BatchResult, err error) {
	if f.epoch <= 0 {
		return nil, nil, fmt.Errorf("store: transition batch: %w (no epoch held)", ErrNotLeader)
	}
	if len(ps) == 0 {
		return []BatchResult{}, nil, f.WriteLogs(ctx, logs)
	}
	for i := range ps {
		ps[i].Epoch = f.epoch
	}
	var fenced func([]BatchResult) ([]TransitionParams, error)
	if then != nil {
		fenced = func(r []BatchResult) ([]TransitionParams, error) {
			more, err := then(r)
			for i := range more {
				more[i].Epoch = f.epoch
			}
			return more, err
		}
	}
	return f.s.transitionBatch(ctx, ps, logs, fenced)
}

// CreateRun is Store.CreateRun at the fence's epoch.
func (f *Fence) CreateRun(ctx context.Context, p CreateRunParams) (axtype.Run, []axtype.Instance, error) {
	if f.epoch <= 0 {
		return axtype.Run{}, nil, fmt.Errorf("store: create run: %w (no epoch held)", ErrNotLeader)
	}
	p.Epoch = f.epoch
	return f.s.CreateRun(ctx, p)
}

// CreateRuns is Store.CreateRuns at the fence's epoch.
func (f *Fence) CreateRuns(ctx context.Context, ps []CreateRunParams) ([]axtype.Run, [][]axtype.Instance, error) {
	if f.epoch <= 0 {
		return nil, nil, fmt.Errorf("store: create runs: %w (no epoch held)", ErrNotLeader)
	}
	ps = slices.Clone(ps)
	for i := range ps {
		ps[i].Epoch = f.epoch
	}
	return f.s.CreateRuns(ctx, ps)
}

// SyncDefinitions is Store.SyncDefinitions at the fence's epoch.
func (f *Fence) SyncDefinitions(ctx context.Context, p SyncParams) (SyncResult, error) {
	if f.epoch <= 0 {
		return SyncResult{}, fmt.Errorf("store: sync definitions: %w (no epoch held)", ErrNotLeader)
	}
	p.Epoch = f.epoch
	return f.s.SyncDefinitions(ctx, p)
}

// ClaimOp is Store.ClaimOp at the fence's epoch.
func (f *Fence) ClaimOp(ctx context.Context, id int64) error {
	if f.epoch <= 0 {
		return fmt.Errorf("store: claim op: %w (no epoch held)", ErrNotLeader)
	}
	return f.s.ClaimOp(ctx, id, f.epoch)
}

// FinishOp is Store.FinishOp at the fence's epoch.
func (f *Fence) FinishOp(ctx context.Context, id int64, result string, opErr error, now time.Time) error {
	if f.epoch <= 0 {
		return fmt.Errorf("store: finish op: %w (no epoch held)", ErrNotLeader)
	}
	return f.s.FinishOp(ctx, id, result, opErr, f.epoch, now)
}

// SetPause records a pause; pausing what is paused already fails with ErrDuplicate.
func (f *Fence) SetPause(ctx context.Context, p Pause) error {
	return f.tx(ctx, "pause", func(tx *sql.Tx) error { return f.s.setPause(ctx, tx, p) })
}

// ClearPause removes a pause; ErrNotFound when it was not paused.
func (f *Fence) ClearPause(ctx context.Context, scope PauseScope, name string) error {
	return f.tx(ctx, "resume", func(tx *sql.Tx) error { return f.s.clearPause(ctx, tx, scope, name) })
}

// SetSetting stores a run-time setting (a rate limit, the primary's URL).
func (f *Fence) SetSetting(ctx context.Context, name, value string, now time.Time) error {
	return f.tx(ctx, "set setting", func(tx *sql.Tx) error { return f.s.setSetting(ctx, tx, name, value, now) })
}

// SetSettings writes several settings (name → value) in one transaction.
func (f *Fence) SetSettings(ctx context.Context, settings map[string]string, now time.Time) error {
	return f.tx(ctx, "set settings", func(tx *sql.Tx) error {
		for _, name := range slices.Sorted(maps.Keys(settings)) {
			if err := f.s.setSetting(ctx, tx, name, settings[name], now); err != nil {
				return err
			}
		}
		return nil
	})
}

// UpdateBackfill writes a backfill's state and progress; ErrNotFound for an unknown id.
func (f *Fence) UpdateBackfill(ctx context.Context, b Backfill, now time.Time) error {
	return f.tx(ctx, "update backfill", func(tx *sql.Tx) error { return f.s.updateBackfill(ctx, tx, b, now) })
}

// AppendAction writes one entry to the action log.
func (f *Fence) AppendAction(ctx context.Context, a Action) error {
	return f.tx(ctx, "append action", func(tx *sql.Tx) error { return f.s.appendAction(ctx, tx, a) })
}

// MarkResultsApplied closes inbox entries, by ticket, with what became of
// each ("applied", "stale"); an entry closed already is left as it is.
func (f *Fence) MarkResultsApplied(ctx context.Context, outcomes map[string]string, now time.Time) error {
	if len(outcomes) == 0 {
		return nil
	}
	return f.tx(ctx, "mark results applied", func(tx *sql.Tx) error { return f.s.markApplied(ctx, tx, outcomes, f.epoch, now) })
}

// Approve is Store.Approve at the fence's epoch.
func (f *Fence) Approve(ctx context.Context, p ApproveParams) (int64, error) {
	if f.epoch <= 0 {
		return 0, fmt.Errorf("store: approve: %w (no epoch held)", ErrNotLeader)
	}
	p.Epoch = f.epoch
	return f.s.Approve(ctx, p)
}

// DropUnfinishedRun is Store.DropUnfinishedRun at the fence's epoch.
func (f *Fence) DropUnfinishedRun(ctx context.Context, id int64, chunk int) error {
	if f.epoch <= 0 {
		return fmt.Errorf("store: drop unfinished run: %w (no epoch held)", ErrNotLeader)
	}
	return f.s.DropUnfinishedRun(ctx, id, f.epoch, chunk)
}
